//! One shared engine answering requests for async handlers without blocking the runtime. Under the
//! hybrid scheduler a request's queries are submitted together with their deadline (concurrent
//! requests are batched by the scheduler), and the worker that finishes a request's last query wakes its
//! handler, once per request; on the CPU engine each query runs on rayon's pool (`--threads`), and the
//! last of a request's queries to finish wakes its handler.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::oneshot;
use warpsearch_cpu::CpuSearcher;
use warpsearch_engine::{Done, Engine, Hybrid, HybridStats, Reply, ServedBy, Slots};
use warpsearch_query::{Answer, Request, Scorer};

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().expect("no thread panics under this lock")
}

/// A query's answer as the server sees it.
pub struct Answered {
    pub result: Result<Answer, String>,
    /// From [`Searcher::start`] to the answer.
    pub latency: Duration,
    pub served_by: Option<ServedBy>,
    pub missed_deadline: bool,
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
    describe: String,
    deadline: Duration,
}

/// A request's answers, gathered on the scheduler's threads as its queries finish (in any order); the
/// last one sends them all to the waiting handler.
struct Gather {
    started: Instant,
    state: Mutex<Gathering>,
}

struct Gathering {
    answers: Slots<Answered>,
    tx: Option<oneshot::Sender<Vec<Answered>>>,
}

impl Gather {
    fn new(started: Instant, queries: usize, tx: oneshot::Sender<Vec<Answered>>) -> Gather {
        Gather {
            started,
            state: Mutex::new(Gathering {
                answers: Slots::new(queries),
                tx: Some(tx),
            }),
        }
    }

    /// Query `i`'s answer; the last one sends them all.
    fn put(&self, i: usize, answered: Answered) {
        let mut g = lock(&self.state);
        if g.answers.put(i, answered) {
            if let Some(tx) = g.tx.take() {
                let answers = g.answers.take().into_iter();
                let answers = answers.map(|a| a.expect("every query answered"));
                // The handler may be gone (its client hung up); the answers are then unwanted.
                let _ = tx.send(answers.collect());
            }
        }
    }
}

impl Reply for Gather {
    fn send(&self, done: Done) {
        let answered = Answered {
            result: done.result.map_err(|e| e.to_string()),
            latency: self.started.elapsed(),
            served_by: Some(done.served_by),
            missed_deadline: done.missed_deadline,
        };
        self.put(done.id as usize, answered);
    }
}

impl Searcher {
    /// Serves `engine`'s queries; hybrid queries are due `deadline` after they arrive.
    pub fn new(engine: Engine, deadline: Duration) -> Searcher {
        Searcher {
            cpu: engine.cpu().clone(),
            describe: engine.describe(),
            hybrid: engine.shared_hybrid(),
            engine: Mutex::new(engine),
            deadline,
        }
    }

    /// The scorer (index and ranking).
    pub fn scorer(&self) -> &Arc<Scorer> {
        self.cpu.scorer()
    }

    /// The backend in a few words.
    pub fn describe(&self) -> &str {
        &self.describe
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
        // One pool task per query, queued first come, first served (a parallel iterator per
        // request would let one request's queries overtake another's, which doubled the p99).
        for (i, request) in requests.into_iter().enumerate() {
            let cpu = self.cpu.clone();
            let gather = gather.clone();
            rayon::spawn(move || {
                let run = std::panic::AssertUnwindSafe(|| cpu.answer(&request));
                let result = match std::panic::catch_unwind(run) {
                    Ok(answer) => answer.map_err(|e| e.to_string()),
                    Err(_) => Err("the query panicked".to_string()),
                };
                let answered = Answered {
                    result,
                    latency: gather.started.elapsed(),
                    served_by: None,
                    missed_deadline: false,
                };
                gather.put(i, answered);
            });
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
