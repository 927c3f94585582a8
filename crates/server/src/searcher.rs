//! One shared engine answering requests for async handlers without blocking the runtime: a request's
//! queries are submitted together, with their deadline, to the engine's front door (the hybrid batches
//! concurrent requests for the GPU; the CPU backend's threads take them first come, first served), and
//! the engine thread that finishes a request's last query wakes its handler, once per request.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::oneshot;
use warpsearch_engine::{Engine, GpuMemory, HybridStats};
use warpsearch_query::{Request, Scorer};

use super::gather::{Answered, Gather};

pub(super) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().expect("no thread panics under this lock")
}

/// A request's queries under way.
pub struct Pending {
    queries: usize,
    rx: oneshot::Receiver<Vec<Answered>>,
}

/// The engine, and the deadline its requests are given.
pub struct Searcher {
    engine: Engine,
    describe: String,
    deadline: Duration,
}

impl Searcher {
    /// Serves `engine`'s queries, each due `deadline` after it arrives.
    pub fn new(engine: Engine, deadline: Duration) -> Searcher {
        Searcher {
            describe: engine.describe(),
            engine,
            deadline,
        }
    }

    /// The scorer (index and ranking).
    pub fn scorer(&self) -> &Arc<Scorer> {
        self.engine.scorer()
    }

    /// The backend in a few words.
    pub fn describe(&self) -> &str {
        &self.describe
    }

    /// Whether a GPU answers queries.
    pub fn has_gpu(&self) -> bool {
        self.engine.has_gpu()
    }

    /// The GPU's memory now (None without a GPU).
    pub fn gpu_memory(&self) -> Option<GpuMemory> {
        self.engine.gpu_memory()
    }

    /// The hybrid scheduler's counters since the last call (None for the other backends).
    pub fn take_hybrid_stats(&self) -> Option<HybridStats> {
        self.engine.take_hybrid_stats()
    }

    /// Queries per second the engine answers at full load, where it measures it (the hybrid's rates).
    pub fn capacity(&self) -> Option<f64> {
        self.engine.capacity()
    }

    /// Starts answering `requests` (at once: it never blocks on the search).
    pub fn start(&self, requests: Vec<Request>) -> Pending {
        let started = Instant::now();
        let queries = requests.len();
        let (tx, rx) = oneshot::channel();
        let gather = Arc::new(Gather::new(started, queries, tx));
        self.engine.submit(0, requests, Some(self.deadline), gather);
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
