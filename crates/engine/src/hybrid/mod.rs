//! The hybrid setting of the scheduler: the CPU and the GPU answer one query stream together
//! (docs/references.md#ding-gpu-query-processing section 9, built for real rather than simulated, and
//! docs/references.md#griffin section 3.2's intra-query split).
//!
//! - Every query's cost on each processor is predicted from its features and learned online
//!   ([`crate::cost`]) from what the executors measure (`exec::Learn`).
//! - A query goes to the processor predicted to finish it first, counting what the GPU already has
//!   (`route.rs`); the CPU takes it only when it finishes it sooner by a margin, and, but for a large
//!   batch, only on a free thread. A CPU thread with nothing to do takes the oldest batch of the GPU's
//!   queue where more than one waits and it is predicted to answer it sooner by the margin; the GPU
//!   with nothing to do takes whole queries the CPU's queue holds beyond what its threads soon reach.
//! - A query predicted to take long on one core is split by docID range when CPU threads are idle and
//!   its parts are predicted to end sooner than the whole query would: a GPU part and CPU parts, each
//!   later part starting from the best k-th score found so far; the parts' top-k lists merge exactly
//!   (`exec/gather.rs`).
//! - A query given to the CPU that it has not answered when the GPU would have is sent to the GPU as
//!   well, and the first answer kept (`hedge.rs`).
//! - The GPU's calls grow until their predicted time reaches the latency target.

pub(crate) mod hedge;
mod rates;
pub(crate) mod route;
mod stats;

use std::sync::Mutex;
use std::time::Duration;

use warpsearch_query::Mode;

use crate::cost::{CostModel, Features};
use crate::exec::Learn;
use rates::Rates;
pub use stats::HybridStats;
use stats::{bump, Counters};

/// How the hybrid scheduler runs.
#[derive(Debug, Clone, Copy)]
pub struct HybridOptions {
    /// CPU worker threads; 0: every core but one when a GPU takes part (its dispatcher's) and but the
    /// GPU's `host_threads`; else every core.
    pub cpu_workers: usize,
    /// CPU worker threads when a GPU takes part, in place of `cpu_workers` (None: as it says). A server
    /// sets it to leave cores to its HTTP threads; without a GPU the workers still take every core.
    pub gpu_cpu_workers: Option<usize>,
    /// Threads of the GPU's own for its calls' host work (descriptors; with a list cache, cutting
    /// queries by what it holds and gathering staged blocks), beside the CPU workers. None: a quarter
    /// of the cores when a GPU takes part; `Some(0)`: none (its thread prepares each call alone, which
    /// leaves the GPU waiting on a collection of cheap queries;
    /// docs/decisions/018-hybrid-scheduler-defaults.md).
    pub host_threads: Option<usize>,
    /// Most queries in one GPU call.
    pub max_batch: usize,
    /// The GPU call's latency target: a call takes queries until its predicted time reaches this.
    pub batch_target: Duration,
    /// The CPU takes a query only when it is predicted to finish it this much sooner than the GPU
    /// (0.2: 20%): the GPU's predictions err less, and a query it takes does not hold a core.
    pub margin: f64,
    /// Queries predicted to take longer than this on one core are split by docID range (None: never).
    pub split_above: Option<Duration>,
    /// Most CPU parts of a split query.
    pub split_parts: usize,
    /// A query given to the CPU whole that it has not answered after this multiple of the GPU's
    /// predicted time for it is sent to the GPU as well, the first answer kept (None: never). Default
    /// 0.5: the lowest tail of 0, 0.5 and 1 measured on the 25M collection
    /// (docs/decisions/036-hedging.md).
    pub hedge_after: Option<f64>,
    /// The GPU's share of a split query's documents (None: from the measured GPU latency and the
    /// predicted CPU time, so that its part ends when the CPU parts do). Default 0.3: the best of the
    /// shares measured on the 25M collection (`bench/RESULTS.md`, the split sweep), where the
    /// latency-based share came out 0 and gave a worse tail.
    pub split_gpu_share: Option<f64>,
}

impl Default for HybridOptions {
    fn default() -> HybridOptions {
        HybridOptions {
            cpu_workers: 0,
            gpu_cpu_workers: None,
            host_threads: None,
            max_batch: 8192,
            batch_target: Duration::from_millis(20),
            margin: 0.2,
            split_above: Some(Duration::from_millis(5)),
            split_parts: 16,
            split_gpu_share: Some(0.3),
            hedge_after: Some(0.5),
        }
    }
}

/// Moves a running mean `x` towards `sample` by `weight`.
fn ewma(x: &mut f64, sample: f64, weight: f64) {
    if sample.is_finite() {
        *x += weight * (sample - *x);
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().expect("no scheduler thread panics under a lock")
}

/// What the hybrid decides by: the options, the cost model and the processors' measured rates, and
/// its counters. It runs nothing: the executors do, and tell it what they measured.
pub(crate) struct Router {
    options: HybridOptions,
    has_gpu: bool,
    /// Whether the GPU caches part of the index (its calls then take whole queries only).
    cached: bool,
    model: Mutex<CostModel>,
    rates: Mutex<Rates>,
    counters: Counters,
}

impl Router {
    /// A router over `options` (their worker count already resolved).
    pub fn new(options: HybridOptions, has_gpu: bool, cached: bool) -> Router {
        Router {
            options,
            has_gpu,
            cached,
            model: Mutex::new(CostModel::default()),
            rates: Mutex::new(Rates::default()),
            counters: Counters::default(),
        }
    }

    pub fn options(&self) -> &HybridOptions {
        &self.options
    }

    /// Queries a GPU call takes at most: as many as its predicted time fits in the latency target
    /// (at least twice the GPU's latency floor), at most `max_batch`.
    pub fn call_size(&self) -> usize {
        let r = *lock(&self.rates);
        rates::call_size(
            &r,
            self.options.batch_target.as_secs_f64(),
            self.options.max_batch,
        )
    }

    /// Whether the CPU's queue holds more than its workers reach before a GPU call would be back
    /// (`backlog`: predicted seconds on one core): the GPU, idle, may then take from it.
    pub fn cpu_lags(&self, backlog: f64) -> bool {
        // Nothing queued: answered without the lock, which the GPU's polling loop would take at
        // every turn.
        if backlog <= 0.0 {
            return false;
        }
        let r = *lock(&self.rates);
        backlog / self.options.cpu_workers.max(1) as f64 > 2.0 * r.gpu_latency
    }

    /// The GPU took `queries` queries from the CPU's queue.
    pub fn taken_by_gpu(&self, queries: usize) {
        bump(&self.counters.steals_by_gpu, queries as u64);
    }

    /// Tasks per second the processors complete at full load, from their measured rates: the GPU's
    /// marginal rate (with a GPU) and every CPU worker's.
    pub fn capacity(&self) -> f64 {
        let r = *lock(&self.rates);
        let cpu = r.cpu_rate(self.options.cpu_workers);
        if self.has_gpu {
            r.gpu_rate + cpu
        } else {
            cpu
        }
    }

    /// The counters so far (with the prediction errors), resetting them.
    pub fn take_stats(&self) -> HybridStats {
        let mut model = lock(&self.model);
        let mut stats = self.counters.take();
        stats.cpu_prediction_error = model.cpu_error.mean();
        stats.gpu_prediction_error = model.gpu_error.mean();
        model.cpu_error = Default::default();
        model.gpu_error = Default::default();
        stats
    }
}

impl Learn for Router {
    fn cpu(&self, queries: &[(Mode, Features, f64)], tasks: u32, seconds: f64) {
        if !queries.is_empty() {
            let mut model = lock(&self.model);
            for (mode, f, seconds) in queries {
                model.observe_cpu(*mode, f, *seconds);
            }
        }
        if tasks > 0 {
            ewma(&mut lock(&self.rates).cpu_task, seconds / tasks as f64, 0.2);
        }
    }

    fn gpu(&self, tasks: usize, seconds: f64, mode: Option<Mode>, work: f64) {
        bump(&self.counters.gpu_batches, 1);
        bump(&self.counters.gpu_tasks, tasks as u64);
        lock(&self.rates).observe_gpu_batch(tasks, seconds);
        if let Some(mode) = mode {
            lock(&self.model).observe_gpu(mode, work, seconds);
        }
    }

    fn stolen(&self, queries: usize) {
        bump(&self.counters.steals_by_cpu, queries as u64);
    }

    fn failed(&self, queries: u64) {
        bump(&self.counters.gpu_fallbacks, queries);
    }
}
