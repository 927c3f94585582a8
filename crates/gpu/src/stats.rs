//! What a GPU searcher counts of its work ([`GpuStats`]), and the kernel's timed phases.

/// Phases the kernel times when instrumented, in the order of their counters
/// ([`crate::abi::PH_SELECT`] to [`crate::abi::PH_TOPK`]).
pub const PHASES: [&str; 5] = ["block selection", "decode", "intersect", "score", "top-k"];
const _: () = assert!(PHASES.len() == crate::abi::PH_BLOCKS);

/// Counters of a searcher's work since it was made (or since [`crate::GpuSearcher::take_stats`]).
#[derive(Debug, Clone, Default)]
pub struct GpuStats {
    /// Kernel launches.
    pub batches: u64,
    /// Queries sent to the GPU.
    pub queries: u64,
    /// Bytes copied host to device (query descriptors).
    pub h2d_bytes: u64,
    /// Bytes copied device to host (results).
    pub d2h_bytes: u64,
    /// Device time of host-to-device copies, kernels and device-to-host copies, in ms (CUDA events).
    pub h2d_ms: f64,
    /// Kernel time, in ms.
    pub kernel_ms: f64,
    /// Device-to-host time, in ms.
    pub d2h_ms: f64,
    /// Host time preparing descriptors, in ms.
    pub prepare_ms: f64,
    /// Host time gathering staged blocks into pinned memory, in ms.
    pub stage_ms: f64,
    /// Host time waiting for batches to finish, in ms: near zero when the host, not the GPU, sets
    /// the pace.
    pub wait_ms: f64,
    /// Clock cycles per kernel phase, summed over CTAs ([`PHASES`]); zero unless instrumented.
    pub phase_cycles: [u64; 5],
    /// Blocks the kernel decoded, summed over CTAs; zero unless instrumented. Exhaustive evaluation
    /// decodes [`GpuStats::query_blocks`].
    pub decoded_blocks: u64,
    /// Queries the GPU failed (returned as errors, for the caller to answer elsewhere).
    pub failed_queries: u64,
    /// Blocks of the queries' docID ranges read from the list cache.
    pub cached_blocks: u64,
    /// Blocks of the queries' docID ranges copied with their batch (per query term).
    pub staged_blocks: u64,
    /// Bytes of postings and skip data copied with batches (each staged span once per batch).
    pub staged_bytes: u64,
    /// Bytes copied into the list cache by plan changes.
    pub cache_fill_bytes: u64,
}

impl GpuStats {
    /// Adds `other`'s counters to these.
    pub fn add(&mut self, other: &GpuStats) {
        self.batches += other.batches;
        self.queries += other.queries;
        self.h2d_bytes += other.h2d_bytes;
        self.d2h_bytes += other.d2h_bytes;
        self.h2d_ms += other.h2d_ms;
        self.kernel_ms += other.kernel_ms;
        self.d2h_ms += other.d2h_ms;
        self.prepare_ms += other.prepare_ms;
        self.stage_ms += other.stage_ms;
        self.wait_ms += other.wait_ms;
        for (t, x) in self.phase_cycles.iter_mut().zip(other.phase_cycles) {
            *t += x;
        }
        self.decoded_blocks += other.decoded_blocks;
        self.failed_queries += other.failed_queries;
        self.cached_blocks += other.cached_blocks;
        self.staged_blocks += other.staged_blocks;
        self.staged_bytes += other.staged_bytes;
        self.cache_fill_bytes += other.cache_fill_bytes;
    }

    /// Blocks of the queries' docID ranges, per query term: what exhaustive evaluation decodes.
    pub fn query_blocks(&self) -> u64 {
        self.cached_blocks + self.staged_blocks
    }

    /// Share of the blocks queries needed that the cache held (None before any).
    pub fn hit_rate(&self) -> Option<f64> {
        let all = self.query_blocks();
        (all > 0).then(|| self.cached_blocks as f64 / all as f64)
    }

    /// The kernel phases [`GpuStats::phase_shares`] names, in order.
    pub const PHASES: [&'static str; 5] = PHASES;

    /// Each kernel phase's share of the timed CTA cycles ([`PHASES`]), or `None` when not instrumented.
    pub fn phase_shares(&self) -> Option<Vec<(&'static str, f64)>> {
        let total: u64 = self.phase_cycles.iter().sum();
        (total > 0).then(|| {
            PHASES
                .iter()
                .zip(self.phase_cycles)
                .map(|(&name, c)| (name, c as f64 / total as f64))
                .collect()
        })
    }
}
