//! `Index.searcher`'s GPU list cache arguments (`gpu_cache` and the rest), for indexes larger than GPU
//! memory, as `warpsearch search --gpu-cache` takes them: into the engine's typed configuration, checked
//! by its rules, in words that name the Python arguments.

use pyo3::prelude::*;
use warpsearch_engine::{CacheConfig, Completion, Policy, TrainLog};
use warpsearch_query::{Mode, MAX_K};

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
    /// The cache's configuration and its training log; a ValueError naming the argument where one is
    /// wrong (the rest is checked with the engine's rules when the searcher is made).
    pub fn config(self) -> PyResult<(CacheConfig, Option<TrainLog>)> {
        let policy = match self.policy {
            None => None,
            Some(p) => Some(p.parse::<Policy>().map_err(|_| {
                value_error(format!(
                    "gpu_cache '{p}' is not a policy: use qtf, qtfdf, vfb or dynamic"
                ))
            })?),
        };
        let complete = self.complete.parse::<Completion>().map_err(|_| {
            value_error(format!(
                "gpu_cache_complete '{}' is not a completion: use auto, cpu or transfer",
                self.complete
            ))
        })?;
        // The training log's weights are checked with the cache, whether or not a log is given.
        let weights = match policy {
            None => None,
            Some(_) => {
                let mode: Mode = warpsearch_query::named("gpu_cache_mode", self.mode).map_err(value_error)?;
                if !(1..=MAX_K).contains(&self.k) {
                    return Err(value_error(format!(
                        "gpu_cache_k = {} is out of range: use 1 to {MAX_K}",
                        self.k
                    )));
                }
                Some((mode, self.k))
            }
        };
        let train = self.train.map(|texts| {
            let (mode, k) = weights.unwrap_or((Mode::Or, 10));
            TrainLog { texts, mode, k }
        });
        let config = CacheConfig {
            policy,
            ratio: self.ratio,
            buffer: self.buffer,
            complete,
            ..CacheConfig::default()
        };
        Ok((config, train))
    }
}
