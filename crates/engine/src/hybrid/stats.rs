//! The scheduler's counters: atomics the workers bump without a lock, read as a [`HybridStats`].

use std::sync::atomic::{AtomicU64, Ordering};

/// What the scheduler did since it started (or since [`crate::Scheduler::take_stats`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HybridStats {
    /// Queries answered by the CPU alone.
    pub cpu_queries: u64,
    /// Queries answered by the GPU alone.
    pub gpu_queries: u64,
    /// Queries answered by parts on both.
    pub both_queries: u64,
    /// Queries split into docID-range parts.
    pub splits: u64,
    /// Queries the CPU took from the GPU's queue (they had waited for the GPU).
    pub steals_by_cpu: u64,
    /// Queries the GPU took from the CPU's queue (the CPU lagged).
    pub steals_by_gpu: u64,
    /// Queries the CPU had not answered when the GPU would have, sent to the GPU as well (hedged).
    pub hedges: u64,
    /// Hedged queries whose first answer was the GPU's.
    pub hedges_won: u64,
    /// Queries answered after their deadline.
    pub deadline_misses: u64,
    /// GPU calls.
    pub gpu_batches: u64,
    /// Tasks the GPU calls carried.
    pub gpu_tasks: u64,
    /// Tasks the GPU failed that the CPU ran again.
    pub gpu_fallbacks: u64,
    /// Mean relative error of the CPU cost prediction (per query).
    pub cpu_prediction_error: f64,
    /// Mean relative error of the GPU batch time prediction (per batch).
    pub gpu_prediction_error: f64,
}

macro_rules! counters {
    ($($field:ident),*) => {
        /// The live counters behind [`HybridStats`] (relaxed atomics: they count, they order nothing).
        #[derive(Default)]
        pub struct Counters {
            $(pub $field: AtomicU64,)*
        }

        impl Counters {
            /// The counts so far, resetting them.
            pub fn take(&self) -> HybridStats {
                HybridStats {
                    $($field: self.$field.swap(0, Ordering::Relaxed),)*
                    ..HybridStats::default()
                }
            }
        }
    };
}

counters!(
    cpu_queries,
    gpu_queries,
    both_queries,
    splits,
    steals_by_cpu,
    steals_by_gpu,
    hedges,
    hedges_won,
    deadline_misses,
    gpu_batches,
    gpu_tasks,
    gpu_fallbacks
);

/// Adds `n` to a counter.
pub fn bump(counter: &AtomicU64, n: u64) {
    counter.fetch_add(n, Ordering::Relaxed);
}
