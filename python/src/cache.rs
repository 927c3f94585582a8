//! `Index.searcher`'s GPU list cache arguments (`gpu_cache` and the rest), for indexes larger than GPU
//! memory, as `warpsearch search --gpu-cache` takes them: the engine's [`CacheChoice`] checks them with
//! the CLI's rules, in words that name the Python arguments.

use pyo3::prelude::*;
use warpsearch_engine::{CacheBudget, CacheChoice, CacheOptions};
use warpsearch_index::Index;
use warpsearch_query::{Mode, Query, Request, MAX_K};

use crate::errors::value_error;

/// The cache's arguments, by name.
pub struct CacheArgs<'a> {
    /// qtf, qtfdf, vfb or dynamic; None: the whole index on the GPU.
    pub policy: Option<&'a str>,
    /// The training log's query texts.
    pub train: Option<Vec<String>>,
    /// The mode and k the training log's queries are weighed as (the CLI takes its run's).
    pub mode: &'a str,
    pub k: usize,
    /// λ.
    pub ratio: Option<f64>,
    /// S_b in bytes.
    pub buffer: Option<usize>,
    /// auto, cpu or transfer.
    pub complete: &'a str,
}

impl CacheArgs<'_> {
    /// The GPU's memory split and the cache's options (None without `gpu_cache`), `memory` being
    /// `gpu_memory`; a ValueError naming the argument where one is wrong.
    pub fn resolve(
        self,
        index: &Index,
        memory: Option<usize>,
    ) -> PyResult<Option<(CacheBudget, CacheOptions)>> {
        let Some(policy) = self.policy else {
            if self.train.is_some() {
                return Err(value_error(
                    "gpu_cache_train needs gpu_cache (qtf, qtfdf, vfb or dynamic)",
                ));
            }
            return Ok(None);
        };
        let mode: Mode = warpsearch_query::named("mode", self.mode)
            .map_err(|e| value_error(format!("gpu_cache_mode: {e}")))?;
        if !(1..=MAX_K).contains(&self.k) {
            return Err(value_error(format!(
                "gpu_cache_k = {} is out of range: use 1 to {MAX_K}",
                self.k
            )));
        }
        let train = self.train.map(|texts| {
            texts
                .iter()
                .map(|t| Request::new(Query::parse(index, t), mode, self.k))
                .collect()
        });
        let choice = CacheChoice {
            policy: policy.to_owned(),
            memory,
            buffer: self.buffer,
            train,
            completion: self.complete.to_owned(),
            tuning: CacheOptions {
                ratio: self.ratio,
                ..CacheOptions::default()
            },
            ..CacheChoice::default()
        };
        choice
            .resolve(|name| name.replace('-', "_"))
            .map(Some)
            .map_err(value_error)
    }
}
