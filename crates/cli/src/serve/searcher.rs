//! One shared engine answering requests for async handlers without blocking the runtime. Under the
//! hybrid scheduler a request's queries are submitted together with their deadline (concurrent
//! requests are batched by the scheduler), and the worker that finishes a request's last query wakes its
//! handler, once per request; on the CPU engine the request is queued for the server's CPU threads
//! (`--threads`, [`super::workers`]), and the last of its queries to finish wakes its handler.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::oneshot;
use warpsearch_cpu::CpuSearcher;
use warpsearch_engine::{Engine, GpuMemory, Hybrid, HybridStats};
use warpsearch_query::{Request, Scorer};

use super::gather::{Answered, Gather};
use super::workers::Workers;

pub(super) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().expect("no thread panics under this lock")
}

/// A request's queries under way.
pub struct Pending {
    queries: usize,
    rx: oneshot::Receiver<Vec<Answered>>,
}

/// The engine and its CPU searcher.
pub struct Searcher {
    /// Behind a lock only because an engine that could hold the GPU alone is not `Sync`; the lock is
    /// held to read counters.
    engine: Mutex<Engine>,
    /// The engine's hybrid scheduler, submitted to without the engine's lock, so that handlers make
    /// their requests' tasks (features, cost estimates) at once rather than in turn. (On the passages
    /// at 16 cores this measured no change in throughput: the server's cap there is elsewhere.)
    hybrid: Option<Arc<Hybrid>>,
    cpu: CpuSearcher,
    /// The CPU engine's threads (none under the hybrid scheduler, which has its own).
    workers: Option<Workers>,
    describe: String,
    deadline: Duration,
}

impl Searcher {
    /// Serves `engine`'s queries (the CPU engine's on as many threads as rayon's pool has: `--threads`,
    /// else every core); hybrid queries are due `deadline` after they arrive.
    pub fn new(engine: Engine, deadline: Duration) -> std::io::Result<Searcher> {
        let hybrid = engine.shared_hybrid();
        let workers = match hybrid {
            Some(_) => None,
            None => Some(Workers::start(engine.cpu(), rayon::current_num_threads())?),
        };
        Ok(Searcher {
            cpu: engine.cpu().clone(),
            workers,
            describe: engine.describe(),
            hybrid,
            engine: Mutex::new(engine),
            deadline,
        })
    }

    /// The scorer (index and ranking).
    pub fn scorer(&self) -> &Arc<Scorer> {
        self.cpu.scorer()
    }

    /// The backend in a few words.
    pub fn describe(&self) -> &str {
        &self.describe
    }

    /// Whether a GPU answers queries.
    pub fn has_gpu(&self) -> bool {
        self.hybrid.as_ref().is_some_and(|h| h.has_gpu())
    }

    /// The GPU's memory now (None without a GPU).
    pub fn gpu_memory(&self) -> Option<GpuMemory> {
        self.hybrid.as_ref().and_then(|h| h.gpu_memory())
    }

    /// The hybrid scheduler's counters since the last call (None for the CPU engine).
    pub fn take_hybrid_stats(&self) -> Option<HybridStats> {
        lock(&self.engine).hybrid().map(Hybrid::take_stats)
    }

    /// Queries per second the hybrid scheduler completes at full load, by its measured rates (None
    /// for the CPU engine).
    pub fn capacity(&self) -> Option<f64> {
        lock(&self.engine).hybrid().map(Hybrid::capacity)
    }

    /// Starts answering `requests` (at once: it never blocks on the search).
    pub fn start(&self, requests: Vec<Request>) -> Pending {
        let started = Instant::now();
        let queries = requests.len();
        let (tx, rx) = oneshot::channel();
        let gather = Arc::new(Gather::new(started, queries, tx));
        if let Some(hybrid) = &self.hybrid {
            let requests = requests
                .into_iter()
                .enumerate()
                .map(|(i, r)| (i as u64, r))
                .collect();
            hybrid.submit_many(requests, Some(self.deadline), gather);
            return Pending { queries, rx };
        }
        if let Some(workers) = &self.workers {
            workers.submit(requests, gather);
        }
        Pending { queries, rx }
    }
}

impl Pending {
    /// Waits for the answers, in the order of the requests.
    pub async fn finish(self) -> Vec<Answered> {
        self.rx.await.unwrap_or_else(|_| {
            let lost = || Answered {
                result: Err("the engine lost the query".to_string()),
                latency: Duration::ZERO,
                served_by: None,
                missed_deadline: false,
            };
            (0..self.queries).map(|_| lost()).collect()
        })
    }
}
