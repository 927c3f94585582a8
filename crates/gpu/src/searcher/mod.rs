//! [`GpuSearcher`], the GPU's batch pipeline, split by job behind it:
//!
//! - `setup`: the searcher made: the index uploaded, the grids sized, the pipeline slots allocated;
//! - `validate`: what the options and each request must satisfy (else a typed error, before any
//!   GPU work);
//! - `requests`: the calls: requests validated, grouped by mode and k, handed over and taken back;
//! - `andor`: and-or's OR pass, behind its AND pass;
//! - `pipeline`: batches cut, prepared and staged on the host, copied and launched on a slot's stream
//!   (`slot`: one slot's stream and buffers), so that batch i+1 is prepared and copied while batch i
//!   computes;
//! - `collect`: a batch's results back into answers, its statistics and its trace (`trace`);
//! - `plan`: the list cache's plans applied between calls or behind the batches in flight;
//! - `calls`: the answers of the calls in flight.
//!
//! A batch or query the GPU fails is returned as a typed error for the caller (the engine) to
//! answer elsewhere; the searcher never prints.

mod andor;
mod calls;
mod collect;
mod pipeline;
mod plan;
mod requests;
mod setup;
mod slot;
mod trace;
mod validate;

pub use calls::CallId;

use std::sync::Arc;

use cudarc::driver::CudaSlice;
use warpsearch_query::{Answer, Scorer};

use crate::cache::{Capacity, PlanFeed};
use crate::device::Gpu;
use crate::options::GpuOptions;
use crate::registered::Registered;
use crate::residency::{mib, DeviceIndex, Residency};
use crate::stats::GpuStats;
use crate::view::CacheView;
use calls::Calls;
use slot::Slot;
use trace::Epoch;

/// Exact batched search on the GPU: the façade over the jobs of this module's files.
pub struct GpuSearcher {
    gpu: Arc<Gpu>,
    scorer: Arc<Scorer>,
    gopts: GpuOptions,
    dev: DeviceIndex,
    norms: CudaSlice<f32>,
    prior: Option<CudaSlice<f32>>,
    /// Global scores, uploaded only when queries stop early.
    gs: Option<CudaSlice<f32>>,
    early: bool,
    slots: Vec<Slot>,
    grid_and: u32,
    grid_or: u32,
    smem_or: u32,
    smem_and: u32,
    small_or: u32,
    stats: GpuStats,
    /// With [`GpuOptions::trace`]: a `tracing` event per batch, with its events' and the host's times
    /// after this epoch's event (recorded on the first slot's stream when the searcher was made) and
    /// instant.
    trace: Option<Epoch>,
    /// Plan changes to make while batches run ([`GpuSearcher::set_feed`]).
    feed: Option<Arc<dyn PlanFeed>>,
    /// Threads of its own for a batch's host work ([`GpuSearcher::set_host_pool`]).
    host_pool: Option<Arc<rayon::ThreadPool>>,
    /// The calls whose answers are not yet taken back.
    calls: Calls,
    /// Answers found by [`GpuSearcher::poll`] before their batch ended, not yet taken
    /// ([`GpuSearcher::take_early`]): (call, request, answer).
    answered_early: Vec<(CallId, usize, Answer)>,
    /// Whether the call being handed over may be answered early (its batches' answers written into
    /// host memory, where the slots have it): only one handed over by
    /// [`GpuSearcher::submit_polled_in`].
    early_call: bool,
    /// The slot the next kernel batch goes to (round robin, across calls).
    next_slot: usize,
    /// The index's words, page-locked for staging copies straight from them (a cached searcher,
    /// where the driver allows it); else `Err` with why, and staged words are gathered on the host.
    registered: Result<Registered, String>,
}

impl Drop for GpuSearcher {
    fn drop(&mut self) {
        // Copies may still read pinned or registered host memory: finish them before it is freed.
        for slot in &self.slots {
            let _ = slot.stream.synchronize();
        }
    }
}

impl GpuSearcher {
    /// The scorer (index and options).
    pub fn scorer(&self) -> &Arc<Scorer> {
        &self.scorer
    }

    /// The GPU.
    pub fn gpu(&self) -> &Gpu {
        &self.gpu
    }

    /// The GPU, shared.
    pub(crate) fn shared_gpu(&self) -> Arc<Gpu> {
        self.gpu.clone()
    }

    /// Device memory the index takes, in bytes.
    pub fn index_bytes(&self) -> usize {
        self.dev.bytes()
    }

    /// Where the lists are on the device.
    pub fn residency(&self) -> &Residency {
        self.dev.residency()
    }

    /// Whether part of the index is cached (else all of it is on the device).
    pub fn caches(&self) -> bool {
        self.gopts.cache.is_some()
    }

    /// The list cache's space (everything's when the whole index is uploaded).
    pub fn cache_capacity(&self) -> Capacity {
        self.dev.cache_capacity()
    }

    /// One batch's staging space.
    pub fn stage_capacity(&self) -> Capacity {
        self.dev.stage_capacity()
    }

    /// What the cache holds and a batch's staging space, for deciding on any thread where each
    /// query's GPU part ends ([`CacheView::cover`], [`CacheView::fits_staging`]).
    pub fn view(&self) -> CacheView<'_> {
        CacheView {
            index: self.scorer.index(),
            residency: self.dev.residency(),
            stage: self.dev.stage_capacity(),
            caches: self.caches(),
        }
    }

    /// The options it runs with (its defaults resolved: [`GpuOptions::window`] 0 is the window
    /// chosen for the GPU).
    pub fn options(&self) -> &GpuOptions {
        &self.gopts
    }

    /// Queries per kernel launch.
    pub fn batch_size(&self) -> usize {
        self.gopts.batch_size
    }

    /// Largest k a request may ask for.
    pub fn max_k(&self) -> usize {
        self.gopts.max_k
    }

    /// Persistent CTAs launched per AND and per OR batch.
    pub fn grid(&self) -> (u32, u32) {
        (self.grid_and, self.grid_or)
    }

    /// Whether `bm25-static` queries stop early on the global-score order.
    pub fn early_termination(&self) -> bool {
        self.early
    }

    /// The counters so far, resetting them.
    pub fn take_stats(&mut self) -> GpuStats {
        std::mem::take(&mut self.stats)
    }

    /// Runs a batch's host work (its descriptors and the gather of its staged blocks) on `pool`'s
    /// threads, in parallel, instead of rayon's global pool (or this thread, without
    /// [`GpuOptions::parallel_host`]): the hybrid gives the GPU cores of its own this way, where its
    /// CPU workers keep the others busy.
    pub fn set_host_pool(&mut self, pool: Arc<rayon::ThreadPool>) {
        self.host_pool = Some(pool);
    }

    /// A short description of the memory held, for logs.
    pub fn describe(&self) -> String {
        format!(
            "{}; index {:.1} MiB on the device; {} + {} CTAs (AND, OR); batch {}{}",
            self.gpu.describe(),
            mib(self.dev.bytes()),
            self.grid_and,
            self.grid_or,
            self.gopts.batch_size,
            match &self.registered {
                Ok(r) => format!(
                    "; {} slots, staged words copied from the index ({:.1} MiB page-locked)",
                    self.slots.len(),
                    mib(r.bytes())
                ),
                Err(why) if self.caches() => format!(
                    "; {} slots, staged words gathered on the host ({why})",
                    self.slots.len()
                ),
                Err(_) => String::new(),
            }
        )
    }
}
