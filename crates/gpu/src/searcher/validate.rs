//! What a searcher's options and each request must satisfy: a typed error says what does not fit,
//! before any of it reaches the GPU.

use std::time::Duration;

use warpsearch_query::{Algorithm, Answer, DocRange, Mode, Request, Scorer};

use super::GpuSearcher;
use crate::device::Gpu;
use crate::device::{MAX_K, MAX_WINDOW};
use crate::error::GpuError;
use crate::options::GpuOptions;

/// `gopts` checked against the GPU engine's limits and the scorer's options, with its defaults
/// resolved for `gpu` (the OR window) and its bounds applied (batch size, parts per query).
pub(super) fn options(gpu: &Gpu, scorer: &Scorer, gopts: GpuOptions) -> Result<GpuOptions, GpuError> {
    let index = scorer.index();
    let options = *scorer.options();
    if gopts.max_k == 0 || gopts.max_k > MAX_K {
        return Err(GpuError::Unsupported(format!(
            "k = {} is above the GPU engine's limit of {MAX_K}: use --backend cpu",
            gopts.max_k
        )));
    }
    if !matches!(options.algorithm, Algorithm::Auto | Algorithm::EarlyTermination) {
        return Err(GpuError::Unsupported(format!(
            "--algorithm {} runs on the CPU only: use --backend cpu, or --algorithm auto",
            options.algorithm.name()
        )));
    }
    if gopts.window != 0 && (!(256..=MAX_WINDOW).contains(&gopts.window) || !gopts.window.is_power_of_two()) {
        return Err(GpuError::Unsupported(format!(
            "GPU window {} must be a power of two from 256 to {MAX_WINDOW} (or 0: the largest that costs no resident CTAs)",
            gopts.window
        )));
    }
    if index.block_metas().len() > u32::MAX as usize {
        return Err(GpuError::Unsupported(
            "the index has more than 2^32 blocks".into(),
        ));
    }
    let batch_size = gopts.batch_size.max(1);
    let codec = index.codec();
    let gopts = GpuOptions {
        batch_size,
        // A query's parts go in one batch.
        max_parts: gopts.max_parts.clamp(1, batch_size as u32),
        wave_parts: gopts.wave_parts.max(gopts.max_parts).clamp(1, batch_size as u32),
        window: match gopts.window {
            0 => gpu.default_or_window(codec)?,
            w => w,
        },
        ..gopts
    };
    Ok(gopts)
}

impl GpuSearcher {
    /// What request `r` (restricted to `range`; `empty`: a range with no document of the index) gets
    /// without a batch: an error where this searcher cannot take it (a term the index lacks, k above
    /// its limit, more staging than a batch has), an empty answer where it matches nothing in its
    /// first pass (and-or's OR pass may still take it) or its range is empty; `None`: it goes to a
    /// batch of its first pass.
    pub(super) fn answer_without_gpu(
        &self,
        r: &Request,
        range: Option<DocRange>,
        empty: bool,
    ) -> Option<Result<Answer, GpuError>> {
        let first = if r.mode == Mode::Or { Mode::Or } else { Mode::And };
        Some(if let Err(e) = self.scorer.check(r) {
            Err(GpuError::Index(e))
        } else if r.k > self.gopts.max_k {
            Err(GpuError::Unsupported(format!(
                "k = {} is above this GPU searcher's limit of {}",
                r.k, self.gopts.max_k
            )))
        } else if self.caches() && !self.view().fits_staging(r, range) {
            Err(GpuError::Unsupported(
                "the blocks this query needs outside the GPU cache exceed a batch's staging space".into(),
            ))
        } else if r.query.matches_nothing(first) || empty {
            Ok(Answer {
                hits: Vec::new(),
                latency: Duration::ZERO,
            })
        } else {
            return None;
        })
    }
}
