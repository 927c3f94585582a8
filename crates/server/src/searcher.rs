//! One shared engine answering requests for async handlers without blocking the runtime: a request's
//! queries are submitted together, with their deadline, to the engine's front door (the hybrid batches
//! concurrent requests for the GPU; the CPU backend's threads take them first come, first served), and
//! the engine thread that finishes a request's last query wakes its handler, once per request. A
//! handler dropped before its answers came (its client hung up) abandons the request ([`Pending`]).

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::{oneshot, OwnedSemaphorePermit};
use warpsearch_engine::{Engine, GpuMemory, HybridStats};
use warpsearch_query::{Request, Scorer};

use super::gather::{Account, Answered, Gather};

/// A request's queries under way; dropped before [`Pending::finish`] returns, it abandons them.
pub struct Pending {
    queries: usize,
    gather: Arc<Gather>,
    rx: Option<oneshot::Receiver<Vec<Answered>>>,
}

/// A request's hold on its places among the queries allowed in flight: given back when every holder
/// (this, the engine) has let go.
pub struct Held(#[allow(dead_code)] Arc<Gather>);

/// The engine, and the deadline its requests are given.
pub struct Searcher {
    engine: Engine,
    describe: String,
    deadline: Duration,
    account: Arc<Account>,
}

impl Searcher {
    /// Serves `engine`'s queries, each due `deadline` after it arrives.
    pub fn new(engine: Engine, deadline: Duration) -> Searcher {
        Searcher {
            describe: engine.describe(),
            engine,
            deadline,
            account: Arc::default(),
        }
    }

    /// The queries of every request as the engine has them (running, cancelled).
    pub fn account(&self) -> &Account {
        &self.account
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

    /// Starts answering `requests` (at once: it never blocks on the search); `places`: the request's
    /// places among the queries allowed in flight, held until the request is done with.
    pub fn start(&self, requests: Vec<Request>, places: OwnedSemaphorePermit) -> Pending {
        let started = Instant::now();
        let queries = requests.len();
        let (tx, rx) = oneshot::channel();
        let gather = Arc::new(Gather::new(
            started,
            queries,
            tx,
            self.account.clone(),
            Some(places),
        ));
        self.engine
            .submit(0, requests, Some(self.deadline), gather.clone());
        Pending {
            queries,
            gather,
            rx: Some(rx),
        }
    }

    /// Whether the index's postings file is the one opened (a file truncated or rewritten in place
    /// is an error here, before any query reads it).
    pub fn check_unchanged(&self) -> Result<(), String> {
        self.engine
            .scorer()
            .index()
            .check_unchanged()
            .map_err(|e| e.to_string())
    }
}

impl Pending {
    /// Waits for the answers, in the order of the requests; with them, the request's hold on its
    /// places (let go once the response is written).
    pub async fn finish(mut self) -> (Vec<Answered>, Held) {
        // Awaited in place: a handler dropped meanwhile leaves `rx` here, and abandons the request.
        let got = self.rx.as_mut().expect("finished once").await;
        self.rx = None;
        let answers = got.unwrap_or_else(|_| {
            let lost = || Answered {
                result: Err("the engine lost the query".to_string()),
                latency: Duration::ZERO,
                served_by: None,
                missed_deadline: false,
            };
            (0..self.queries).map(|_| lost()).collect()
        });
        (answers, Held(self.gather.clone()))
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        if self.rx.is_some() {
            self.gather.abandon();
        }
    }
}
