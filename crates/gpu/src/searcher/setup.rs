//! [`GpuSearcher::new`]: the index on the device (whole, or a list cache and staging regions), the
//! per-search arrays (length norms, prior, global scores), the grids sized by occupancy, and the
//! pipeline slots.

use std::sync::Arc;

use warpsearch_query::{Prior, Ranking, Scorer};

use super::calls::Calls;
use super::slot::Slot;
use super::trace::Epoch;
use super::{validate, GpuSearcher};
use crate::cache::{CachePlan, Capacity};
use crate::device::Gpu;
use crate::device::{and_shared_bytes, or_shared_bytes, or_window_bytes, MAX_SMALL_OR};
use crate::error::GpuError;
use crate::options::{CacheBudget, GpuOptions, DEFAULT_CACHE_SLOTS};
use crate::registered::Registered;
use crate::residency::{mib, DeviceIndex};
use crate::stats::GpuStats;

impl GpuSearcher {
    /// Uploads the scorer's index and prepares the pipeline; an error says why the GPU cannot serve
    /// these options (`max_k` above 1,000, a CPU-only algorithm, the memory budget, a driver failure).
    pub fn new(gpu: Arc<Gpu>, scorer: Arc<Scorer>, gopts: GpuOptions) -> Result<Self, GpuError> {
        let index = scorer.index().clone();
        let options = *scorer.options();
        let gopts = validate::options(&gpu, &scorer, gopts)?;
        let (batch_size, codec) = (gopts.batch_size, index.codec());
        let init = gpu.ctx.new_stream()?;
        let (free, _) = gpu.memory_info()?;
        let budget = gopts.memory_budget.unwrap_or(free / 10 * 9);
        let nslots = match gopts.cache {
            Some(CacheBudget { slots: 0, .. }) => DEFAULT_CACHE_SLOTS,
            Some(c) => c.slots.max(2),
            None => gopts.slots.max(2),
        };
        let mut dev = match gopts.cache {
            None => DeviceIndex::upload(&gpu, &init, &index, budget)?,
            Some(c) => {
                if c.cache_bytes + c.stage_bytes > budget as u64 {
                    return Err(GpuError::Unsupported(format!(
                        "the GPU cache ({:.1} MiB) and staging buffers ({:.1} MiB) exceed the budget of \
                         {:.1} MiB: lower them or raise --gpu-memory",
                        mib(c.cache_bytes as usize),
                        mib(c.stage_bytes as usize),
                        mib(budget)
                    )));
                }
                let stage = Capacity::of_bytes(&index, c.stage_bytes / nslots as u64);
                let cache = c
                    .shape
                    .unwrap_or_else(|| Capacity::of_bytes(&index, c.cache_bytes));
                DeviceIndex::with_cache(
                    &gpu,
                    &init,
                    &index,
                    cache,
                    stage,
                    nslots,
                    &CachePlan::empty(&index),
                )?
            }
        };
        dev.trace = gopts.trace;
        let norms = init.memcpy_stod(nonempty(scorer.norms()))?;
        let prior = match options.ranking {
            Ranking::Bm25 => None,
            Ranking::Bm25Static { alpha } => {
                let p = Prior::new(&index, alpha)?;
                let v: Vec<f32> = (0..index.num_docs()).map(|d| p.of(d)).collect();
                Some(init.memcpy_stod(nonempty(&v))?)
            }
        };
        let early = scorer.early_termination();
        let gs = match (early, index.global_scores()) {
            (true, Some(g)) => Some(init.memcpy_stod(nonempty(g))?),
            _ => None,
        };
        init.synchronize()?;
        let occupancy = |kernel: &cudarc::driver::CudaFunction, smem: u32| -> Result<u32, GpuError> {
            let per_sm =
                kernel.occupancy_max_active_blocks_per_multiprocessor(gpu.threads(), smem as usize, None)?;
            Ok(per_sm.max(1) * gpu.multiprocessors())
        };
        let smem_or = or_shared_bytes(gopts.window, codec, gpu.threads());
        let smem_and = and_shared_bytes(codec, gpu.threads());
        let grid_and = occupancy(&gpu.search_and, smem_and)?;
        let grid_or = occupancy(&gpu.search_or, smem_or)?;
        let grid = grid_and.max(grid_or);
        // Slots beyond two are taken only where the device has room for them (each holds a batch's
        // buffers and every CTA's scratch), so that more slots never cost an index that fits.
        let mut slots = Vec::with_capacity(nslots);
        for _ in 0..nslots {
            let stage = dev.stage_capacity();
            match Slot::new(&gpu, batch_size, gopts.max_k, grid, stage, gopts.map_answers) {
                Ok(slot) => slots.push(slot),
                Err(_) if slots.len() >= 2 => break,
                Err(e) => return Err(e),
            }
        }
        let trace = match gopts.trace {
            true => Some(Epoch::new(&gpu, &slots[0].stream)?),
            false => None,
        };
        let staging = dev.stage_capacity().blocks > 0;
        let registered = Registered::for_staging(&gpu, &index, staging, gopts.host_gather);
        Ok(GpuSearcher {
            registered,
            gpu,
            scorer,
            gopts,
            dev,
            norms,
            prior,
            gs,
            early,
            slots,
            grid_and,
            grid_or,
            smem_or,
            smem_and,
            // The sort path's arrays take the window's part (the decoders' scratch is in use meanwhile).
            small_or: small_or_limit(gopts.small_or, or_window_bytes(gopts.window)),
            stats: GpuStats::default(),
            trace,
            feed: None,
            host_pool: None,
            calls: Calls::default(),
            answered_early: Vec::new(),
            early_call: false,
            next_slot: 0,
        })
    }
}

/// The sort path's posting limit: a power of two at most `wanted` and `MAX_SMALL_OR`, whose keys and
/// contributions (12 bytes each) fit `smem` bytes (the window's part of the OR launch's dynamic shared
/// memory).
fn small_or_limit(wanted: u32, smem: u32) -> u32 {
    let cap = wanted.min(MAX_SMALL_OR).min(smem / 12);
    if cap == 0 {
        0
    } else {
        1 << (31 - cap.leading_zeros())
    }
}

fn nonempty(v: &[f32]) -> &[f32] {
    if v.is_empty() {
        &[0.0]
    } else {
        v
    }
}
