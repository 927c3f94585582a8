//! The hybrid scheduler: the CPU and the GPU answer one query stream together (papers/001 section 9,
//! built for real rather than simulated, and papers/004 section 3.2's intra-query split).
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
mod workers;

use std::sync::mpsc::{channel, Sender};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use warpsearch_cpu::CpuSearcher;
use warpsearch_gpu::{GpuSearcher, GpuStats};
use warpsearch_index::{IndexError, Result};
use warpsearch_query::{Answer, DocRange, Mode, Request};

use crate::cost::{CostModel, Features};
pub use job::{Done, Job, Processor, ServedBy};
use queues::{Preference, Queues, Task};

/// How the hybrid scheduler runs.
#[derive(Debug, Clone, Copy)]
pub struct HybridOptions {
    /// CPU worker threads; 0: every core but one when a GPU takes part (its dispatcher's), else every
    /// core.
    pub cpu_workers: usize,
    /// Most queries in one GPU batch.
    pub max_batch: usize,
    /// The GPU batch's latency target: a batch grows until its predicted time reaches this.
    pub batch_target: Duration,
    /// A query waiting longer than this share of its deadline is urgent.
    pub urgency: f64,
    /// One processor is preferred when it is predicted this much cheaper (0.2: 20%).
    pub margin: f64,
    /// Queries predicted to take longer than this on one core are split by docID range (None: never).
    pub split_above: Option<Duration>,
    /// Most CPU parts of a split query.
    pub split_parts: usize,
    /// The GPU's share of a split query's documents (None: from the cost model, so that its part
    /// ends when the CPU parts do).
    pub split_gpu_share: Option<f64>,
}

impl Default for HybridOptions {
    fn default() -> HybridOptions {
        HybridOptions {
            cpu_workers: 0,
            max_batch: 8192,
            batch_target: Duration::from_millis(20),
            urgency: 0.5,
            margin: 0.2,
            split_above: Some(Duration::from_millis(5)),
            split_parts: 8,
            split_gpu_share: None,
        }
    }
}

/// What the scheduler did since it started (or since [`Hybrid::take_stats`]).
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
    /// Tasks a CPU worker took from the GPU queue.
    pub steals_by_cpu: u64,
    /// Tasks the GPU took from the CPU queue.
    pub steals_by_gpu: u64,
    /// Tasks run first because they were past the urgency point of their deadline.
    pub urgent: u64,
    /// Queries answered after their deadline.
    pub deadline_misses: u64,
    /// GPU batches and the tasks they carried.
    pub gpu_batches: u64,
    /// Tasks sent to the GPU.
    pub gpu_tasks: u64,
    /// Tasks the GPU failed that the CPU ran again.
    pub gpu_fallbacks: u64,
    /// Of those, how many [`Hybrid::take_fallbacks`] has reported.
    pub fallbacks_reported: u64,
    /// Mean relative error of the CPU cost prediction (per query).
    pub cpu_prediction_error: f64,
    /// Mean relative error of the GPU batch time prediction (per batch).
    pub gpu_prediction_error: f64,
}

/// The queues and the flag that stops the workers.
struct State {
    queues: Queues,
    idle_cpu: usize,
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
    stats: Mutex<HybridStats>,
    gpu_stats: Mutex<GpuStats>,
}

/// The running scheduler: CPU worker threads and, with a GPU, its dispatcher thread.
pub struct Hybrid {
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().expect("no scheduler thread panics under a lock")
}

impl Hybrid {
    /// Starts the workers over `cpu` and, if given, `gpu`.
    pub fn new(cpu: CpuSearcher, gpu: Option<GpuSearcher>, options: HybridOptions) -> Hybrid {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let options = HybridOptions {
            cpu_workers: match options.cpu_workers {
                0 if gpu.is_some() => cores.saturating_sub(1).max(1),
                0 => cores,
                n => n,
            },
            ..options
        };
        let shared = Arc::new(Shared {
            cpu,
            has_gpu: gpu.is_some(),
            options,
            state: Mutex::new(State {
                queues: Queues::default(),
                idle_cpu: 0,
                shutdown: false,
            }),
            cpu_ready: Condvar::new(),
            gpu_ready: Condvar::new(),
            model: Mutex::new(CostModel::default()),
            stats: Mutex::new(HybridStats::default()),
            gpu_stats: Mutex::new(GpuStats::default()),
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
        if let Some(gpu) = gpu {
            let s = shared.clone();
            threads.push(
                std::thread::Builder::new()
                    .name("warpsearch-gpu".into())
                    .spawn(move || workers::gpu_dispatcher(&s, gpu))
                    .expect("a thread can be started"),
            );
        }
        Hybrid { shared, threads }
    }

    /// Whether a GPU takes part.
    pub fn has_gpu(&self) -> bool {
        self.shared.has_gpu
    }

    /// The options.
    pub fn options(&self) -> &HybridOptions {
        &self.shared.options
    }

    /// Queues `request`; its answer (exactly one) goes to `reply` with `id`. `deadline`: time allowed
    /// from now (None: none, as in a closed-loop run).
    pub fn submit(&self, id: u64, request: Request, deadline: Option<Duration>, reply: Sender<Done>) {
        let s = &self.shared;
        let index = s.cpu.scorer().index().clone();
        let features = Features::of(&index, &request.query);
        let (cpu_cost, gpu_cost, intercept) = {
            let model = lock(&s.model);
            let mode = request.mode;
            let gpu = if s.has_gpu {
                model.gpu_marginal(mode, &features)
            } else {
                f64::INFINITY
            };
            (model.cpu(mode, &features), gpu, model.gpu_batch(mode, 0.0))
        };
        // A query that matches nothing is answered at once by whichever processor takes it.
        let trivial = request.query.matches_nothing(request.mode);
        let (cpu_cost, gpu_cost) = if trivial {
            (1e-6, 0.0)
        } else {
            (cpu_cost, gpu_cost)
        };
        let work = features.gpu_work(request.mode);
        let workers = s.options.cpu_workers.max(1) as f64;
        // A query's share of each processor's capacity: one of `workers` cores, or a slice of the GPU.
        let preference = if !s.has_gpu || trivial {
            Preference::Cpu
        } else if gpu_cost * (1.0 + s.options.margin) < cpu_cost / workers {
            Preference::Gpu
        } else if cpu_cost / workers * (1.0 + s.options.margin) < gpu_cost {
            Preference::Cpu
        } else {
            Preference::Either
        };
        let mut st = lock(&s.state);
        let split = s
            .options
            .split_above
            .filter(|_| request.mode != Mode::AndOr && !request.query.terms.is_empty())
            .filter(|limit| cpu_cost > limit.as_secs_f64());
        let cpu_parts = split.map_or(1, |_| st.idle_cpu.clamp(1, s.options.split_parts.max(1)));
        // The GPU's share of a split query: its part (latency a + s·g) should end when the CPU parts
        // ((1 − s)·c / P) do.
        let gpu_share = match split {
            Some(_) if s.has_gpu && s.options.split_gpu_share.is_some() => {
                s.options.split_gpu_share.unwrap_or(0.0).clamp(0.0, 1.0)
            }
            Some(_) if s.has_gpu => {
                let per_part = cpu_cost / cpu_parts as f64;
                ((per_part - intercept) / (gpu_cost + per_part)).clamp(0.0, 0.9)
            }
            _ => 0.0,
        };
        let gpu_part = gpu_share >= 0.05;
        // A GPU share of all documents leaves the CPU parts nothing: none are made.
        let cpu_parts = if gpu_share >= 1.0 { 0 } else { cpu_parts };
        let tasks = cpu_parts + usize::from(gpu_part);
        let job = Arc::new(Job::new(id, request, features, deadline, reply, tasks));
        if split.is_none() || (tasks == 1 && !gpu_part) {
            st.queues.push(Task {
                job,
                range: None,
                cpu_cost,
                gpu_cost,
                work,
                preference,
            });
            drop(st);
            s.cpu_ready.notify_one();
            s.gpu_ready.notify_one();
            return;
        }
        lock(&s.stats).splits += 1;
        let n = index.num_docs();
        let cut = ((gpu_share * n as f64) as u32).min(n);
        if gpu_part {
            st.queues.gpu.push_front(Task {
                job: job.clone(),
                range: Some(DocRange::half_open(0, cut)),
                cpu_cost: cpu_cost * gpu_share,
                gpu_cost: gpu_cost * gpu_share,
                work: work * gpu_share,
                preference: Preference::Gpu,
            });
        }
        let start = if gpu_part { cut } else { 0 };
        let span = (n - start) as u64;
        for p in 0..cpu_parts as u64 {
            let lo = start + (span * p / cpu_parts as u64) as u32;
            let hi = start + (span * (p + 1) / cpu_parts as u64) as u32;
            let share = (hi - lo) as f64 / n.max(1) as f64;
            st.queues.parts.push_front(Task {
                job: job.clone(),
                range: Some(DocRange::half_open(lo, hi)),
                cpu_cost: cpu_cost * share,
                gpu_cost: gpu_cost * share,
                work: work * share,
                preference: Preference::Cpu,
            });
        }
        drop(st);
        s.cpu_ready.notify_all();
        s.gpu_ready.notify_one();
    }

    /// Answers every request (closed loop: all submitted at once, no deadlines), in order.
    pub fn search_batch(&self, requests: &[Request]) -> Vec<Result<Answer>> {
        let (tx, rx) = channel();
        for (i, r) in requests.iter().enumerate() {
            self.submit(i as u64, r.clone(), None, tx.clone());
        }
        drop(tx);
        let mut out: Vec<Option<Result<Answer>>> = (0..requests.len()).map(|_| None).collect();
        for done in rx.iter().take(requests.len()) {
            out[done.id as usize] = Some(done.result);
        }
        out.into_iter()
            .map(|a| a.unwrap_or_else(|| Err(IndexError::Invalid("the scheduler lost a query".into()))))
            .collect()
    }

    /// The counters so far (with the prediction errors), resetting them.
    pub fn take_stats(&self) -> HybridStats {
        let model = lock(&self.shared.model);
        let mut stats = std::mem::take(&mut *lock(&self.shared.stats));
        stats.cpu_prediction_error = model.cpu_error.mean();
        stats.gpu_prediction_error = model.gpu_error.mean();
        stats
    }

    /// Tasks the GPU failed that the CPU ran again, since the last call.
    pub fn take_fallbacks(&self) -> u64 {
        let mut st = lock(&self.shared.stats);
        let n = st.gpu_fallbacks - st.fallbacks_reported;
        st.fallbacks_reported = st.gpu_fallbacks;
        n
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
