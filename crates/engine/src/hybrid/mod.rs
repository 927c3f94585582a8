//! The hybrid scheduler: the CPU and the GPU answer one query stream together (docs/references.md#ding-gpu-query-processing section 9,
//! built for real rather than simulated, and docs/references.md#griffin section 3.2's intra-query split).
//!
//! - Every query's cost on each processor is predicted from its features and learned online
//!   ([`crate::cost`]); it joins the GPU-preferred, CPU-preferred or "either" queue ([`queues`]).
//! - CPU workers (one thread each) and a GPU dispatcher (one thread that owns the GPU searcher) take
//!   from their own queue, then from "either", then steal from the other's; a query past the urgency
//!   point of its deadline runs at once on its preferred processor. The GPU's batch grows from the
//!   queue until its predicted time reaches the latency target.
//! - A query predicted to take long on one core is split by docID range: a GPU part and CPU parts on
//!   idle workers, each later part starting from the best k-th score found so far; the parts' top-k
//!   lists merge exactly ([`job`]).
//! - A task the GPU fails is run again on the CPU: every query gets exactly one answer.

pub mod job;
pub mod queues;
mod rates;
mod stats;
mod submit;
mod workers;

use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use warpsearch_cpu::CpuSearcher;
use warpsearch_gpu::{GpuMemory, GpuSearcher, GpuStats, MemoryProbe};
use warpsearch_index::Result;
use warpsearch_query::{Answer, Request};

use crate::cache::CacheCtl;
use crate::cost::CostModel;
use crate::notes::Notes;
use crate::reply::{Collect, Reply};
pub use job::{Job, Processor};
use queues::Queues;
use rates::Rates;
use stats::Counters;
pub use stats::HybridStats;

/// How the hybrid scheduler runs.
#[derive(Debug, Clone, Copy)]
pub struct HybridOptions {
    /// CPU worker threads; 0: every core but one when a GPU takes part (its dispatcher's) and but the
    /// GPU's `host_threads`; else every core.
    pub cpu_workers: usize,
    /// CPU worker threads when a GPU takes part, in place of `cpu_workers` (None: as it says). A server
    /// sets it to leave cores to its HTTP threads; without a GPU the workers still take every core.
    pub gpu_cpu_workers: Option<usize>,
    /// Threads of the GPU's own for its batches' host work (descriptors; with a list cache, cutting
    /// queries by what it holds and gathering staged blocks), beside the CPU workers. None: a quarter
    /// of the cores when a GPU takes part; `Some(0)`: none (its dispatcher prepares each batch alone,
    /// which leaves the GPU waiting on a collection of cheap queries;
    /// docs/decisions/018-hybrid-scheduler-defaults.md).
    pub host_threads: Option<usize>,
    /// Most queries in one GPU batch.
    pub max_batch: usize,
    /// The GPU batch's latency target: a batch grows until its predicted time reaches this.
    pub batch_target: Duration,
    /// A query waiting longer than this share of its deadline is urgent.
    pub urgency: f64,
    /// A query prefers a processor when, relative to a typical query, it is predicted this much
    /// cheaper there than on the other (0.2: 20%); otherwise it may go to either.
    pub margin: f64,
    /// Queries predicted to take longer than this on one core are split by docID range (None: never).
    pub split_above: Option<Duration>,
    /// Most CPU parts of a split query.
    pub split_parts: usize,
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
            urgency: 0.5,
            margin: 0.2,
            split_above: Some(Duration::from_millis(5)),
            split_parts: 16,
            split_gpu_share: Some(0.3),
        }
    }
}

/// Moves a running mean `x` towards `sample` by `weight`.
fn ewma(x: &mut f64, sample: f64, weight: f64) {
    if sample.is_finite() {
        *x += weight * (sample - *x);
    }
}

/// The queues and the flag that stops the workers.
struct State {
    queues: Queues,
    idle_cpu: usize,
    /// GPU batches handed to the post-processing thread and not yet answered.
    post_pending: usize,
    shutdown: bool,
}

/// What the workers share.
struct Shared {
    cpu: CpuSearcher,
    has_gpu: bool,
    options: HybridOptions,
    state: Mutex<State>,
    cpu_ready: Condvar,
    gpu_ready: Condvar,
    model: Mutex<CostModel>,
    rates: Mutex<Rates>,
    counters: Counters,
    /// Where the GPU's failures, rerun on the CPU, are noted.
    notes: Arc<Notes>,
    gpu_stats: Mutex<GpuStats>,
    /// The GPU's list cache policy, when it caches part of the index.
    cache: Option<Arc<CacheCtl>>,
    /// The GPU's threads for its batches' host work ([`HybridOptions::host_threads`]).
    host_pool: Option<Arc<rayon::ThreadPool>>,
}

/// The running scheduler: CPU worker threads and, with a GPU, its dispatcher thread.
pub struct Hybrid {
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
    /// The GPU's memory, read from the caller's thread (the GPU's searcher is on its dispatcher's).
    memory: Option<MemoryProbe>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().expect("no scheduler thread panics under a lock")
}

impl Hybrid {
    /// Starts the workers over `cpu` and, if given, `gpu`.
    pub fn new(cpu: CpuSearcher, gpu: Option<GpuSearcher>, options: HybridOptions) -> Hybrid {
        Hybrid::with_cache(cpu, gpu.map(|g| (g, None)), options, Arc::default())
    }

    /// Starts the workers over `cpu` and, if given, `gpu` with the policy of its list cache; the GPU's
    /// failures are noted in `notes`.
    pub(crate) fn with_cache(
        cpu: CpuSearcher,
        gpu: Option<(GpuSearcher, Option<Arc<CacheCtl>>)>,
        options: HybridOptions,
        notes: Arc<Notes>,
    ) -> Hybrid {
        let cache = gpu.as_ref().and_then(|g| g.1.clone());
        let mut gpu = gpu.map(|g| g.0);
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        // The GPU prepares its batches on threads of its own: on the cores the CPU workers keep busy,
        // its host work would wait behind theirs and hold the GPU back
        // (docs/decisions/018-hybrid-scheduler-defaults.md).
        let host_threads = match options.host_threads {
            _ if gpu.is_none() => 0,
            None => (cores / 4).max(1),
            Some(n) => n,
        };
        let host_pool = (host_threads > 0).then(|| {
            Arc::new(
                rayon::ThreadPoolBuilder::new()
                    .num_threads(host_threads)
                    .thread_name(|i| format!("warpsearch-gpu-host-{i}"))
                    .build()
                    .expect("threads can be started"),
            )
        });
        if let (Some(g), Some(pool)) = (gpu.as_mut(), &host_pool) {
            g.set_host_pool(pool.clone());
        }
        let options = HybridOptions {
            cpu_workers: match (options.gpu_cpu_workers, options.cpu_workers) {
                (Some(n), _) if gpu.is_some() => n.max(1),
                (_, 0) if gpu.is_some() => cores.saturating_sub(1 + host_threads).max(1),
                (_, 0) => cores,
                (_, n) => n,
            },
            host_threads: Some(host_threads),
            ..options
        };
        let shared = Arc::new(Shared {
            cpu,
            has_gpu: gpu.is_some(),
            options,
            state: Mutex::new(State {
                queues: Queues::default(),
                idle_cpu: 0,
                post_pending: 0,
                shutdown: false,
            }),
            cpu_ready: Condvar::new(),
            gpu_ready: Condvar::new(),
            model: Mutex::new(CostModel::default()),
            rates: Mutex::new(Rates::default()),
            counters: Counters::default(),
            notes,
            gpu_stats: Mutex::new(GpuStats::default()),
            cache,
            host_pool,
        });
        let mut threads: Vec<JoinHandle<()>> = (0..options.cpu_workers.max(1))
            .map(|i| {
                let s = shared.clone();
                std::thread::Builder::new()
                    .name(format!("warpsearch-cpu-{i}"))
                    .spawn(move || workers::cpu_worker(&s))
                    .expect("a thread can be started")
            })
            .collect();
        let memory = gpu.as_ref().map(GpuSearcher::memory_probe);
        if let Some(gpu) = gpu {
            let s = shared.clone();
            threads.push(
                std::thread::Builder::new()
                    .name("warpsearch-gpu".into())
                    .spawn(move || workers::gpu_dispatcher(&s, gpu))
                    .expect("a thread can be started"),
            );
        }
        Hybrid {
            shared,
            threads,
            memory,
        }
    }

    /// The GPU's list cache policy, when it caches part of the index.
    pub fn cache(&self) -> Option<&Arc<CacheCtl>> {
        self.shared.cache.as_ref()
    }

    /// Whether a GPU takes part.
    pub fn has_gpu(&self) -> bool {
        self.shared.has_gpu
    }

    /// The GPU's memory now: what the index takes and the device's use (None without a GPU, or where
    /// the driver does not answer).
    pub fn gpu_memory(&self) -> Option<GpuMemory> {
        self.memory.as_ref().and_then(|m| m.read().ok())
    }

    /// Tasks per second the scheduler completes at full load, from its measured rates: the GPU's
    /// marginal rate (with a GPU) and every CPU worker's.
    pub fn capacity(&self) -> f64 {
        let r = *lock(&self.shared.rates);
        let cpu = r.cpu_rate(self.shared.options.cpu_workers);
        if self.shared.has_gpu {
            r.gpu_rate + cpu
        } else {
            cpu
        }
    }

    /// The options.
    pub fn options(&self) -> &HybridOptions {
        &self.shared.options
    }

    /// Queues many requests at once (a closed loop's burst, or a server's request of many queries:
    /// pushed in chunks, never split); each answer goes to `reply` with its id.
    pub fn submit_many(
        &self,
        requests: Vec<(u64, Request)>,
        deadline: Option<Duration>,
        reply: Arc<dyn Reply>,
    ) {
        submit::submit(&self.shared, requests, deadline, &reply);
    }

    /// Answers every request (closed loop: all submitted at once, no deadlines), in order.
    pub fn search_batch(&self, requests: &[Request]) -> Vec<Result<Answer>> {
        let all = requests
            .iter()
            .cloned()
            .enumerate()
            .map(|(i, r)| (i as u64, r))
            .collect();
        let collect = Arc::new(Collect::new(requests.len()));
        self.submit_many(all, None, collect.clone());
        collect.wait()
    }

    /// The counters so far (with the prediction errors), resetting them.
    pub fn take_stats(&self) -> HybridStats {
        let mut model = lock(&self.shared.model);
        let mut stats = self.shared.counters.take();
        stats.cpu_prediction_error = model.cpu_error.mean();
        stats.gpu_prediction_error = model.gpu_error.mean();
        model.cpu_error = Default::default();
        model.gpu_error = Default::default();
        stats
    }

    /// What a user should hear of since the last call (the GPU's failures rerun on the CPU).
    pub fn take_notes(&self) -> Vec<String> {
        self.shared.notes.take()
    }

    /// The GPU's counters so far, resetting them.
    pub fn take_gpu_stats(&self) -> GpuStats {
        std::mem::take(&mut *lock(&self.shared.gpu_stats))
    }

    /// The CPU searcher.
    pub fn cpu(&self) -> &CpuSearcher {
        &self.shared.cpu
    }
}

impl Drop for Hybrid {
    /// Lets the workers finish what is queued, then stops them.
    fn drop(&mut self) {
        lock(&self.shared.state).shutdown = true;
        self.shared.cpu_ready.notify_all();
        self.shared.gpu_ready.notify_all();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}
