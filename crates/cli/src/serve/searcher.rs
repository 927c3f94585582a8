//! One shared engine answering queries for async handlers without blocking the runtime: under the hybrid
//! scheduler every query is submitted with its deadline (concurrent requests are batched by the
//! scheduler) and one thread hands each answer to its waiting request; on the CPU engine each query runs
//! on rayon's pool (`--threads`) and comes back through a oneshot channel.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{channel, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::oneshot;
use warpsearch_cpu::CpuSearcher;
use warpsearch_engine::{Done, Engine, Hybrid, HybridStats, ServedBy};
use warpsearch_query::{Answer, Request, Scorer};

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().expect("no thread panics under this lock")
}

/// Answers waited for, by query id.
type Waiting = Arc<Mutex<HashMap<u64, oneshot::Sender<Done>>>>;

/// A query's answer as the server sees it.
pub struct Answered {
    pub result: Result<Answer, String>,
    /// From [`Searcher::start`] to the answer.
    pub latency: Duration,
    pub served_by: Option<ServedBy>,
    pub missed_deadline: bool,
}

/// A query under way.
pub struct Pending {
    started: Instant,
    kind: PendingKind,
}

enum PendingKind {
    Hybrid(oneshot::Receiver<Done>),
    Cpu(oneshot::Receiver<Result<Answer, String>>),
}

/// The engine and, under the hybrid, the reply channel that every submission shares.
pub struct Searcher {
    /// Behind a lock only because an engine that could hold the GPU alone is not `Sync`; the lock is
    /// held to submit a query (the scheduler's own queue lock is taken then anyway) or read counters.
    engine: Mutex<Engine>,
    cpu: CpuSearcher,
    describe: String,
    hybrid: Option<(Sender<Done>, Waiting)>,
    next_id: AtomicU64,
    deadline: Duration,
}

impl Searcher {
    /// Serves `engine`'s queries; hybrid queries are due `deadline` after they arrive.
    pub fn new(engine: Engine, deadline: Duration) -> Searcher {
        let hybrid = engine.hybrid().map(|_| {
            let (tx, rx) = channel::<Done>();
            let waiting: Waiting = Arc::default();
            let w = waiting.clone();
            // Ends when the engine's scheduler and this searcher have dropped every sender.
            std::thread::Builder::new()
                .name("warpsearch-serve-replies".into())
                .spawn(move || {
                    for done in rx {
                        if let Some(waiter) = lock(&w).remove(&done.id) {
                            let _ = waiter.send(done);
                        }
                    }
                })
                .expect("a thread can be started");
            (tx, waiting)
        });
        Searcher {
            cpu: engine.cpu().clone(),
            describe: engine.describe(),
            engine: Mutex::new(engine),
            hybrid,
            next_id: AtomicU64::new(0),
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

    /// Starts answering `request` (at once: it never blocks on the search).
    pub fn start(&self, request: Request) -> Pending {
        let started = Instant::now();
        let kind = match &self.hybrid {
            Some((reply, waiting)) => {
                let id = self.next_id.fetch_add(1, Ordering::Relaxed);
                let (tx, rx) = oneshot::channel();
                lock(waiting).insert(id, tx);
                if let Some(hybrid) = lock(&self.engine).hybrid() {
                    hybrid.submit(id, request, Some(self.deadline), reply.clone());
                }
                PendingKind::Hybrid(rx)
            }
            None => {
                let cpu = self.cpu.clone();
                let (tx, rx) = oneshot::channel();
                rayon::spawn(move || {
                    let run = std::panic::AssertUnwindSafe(|| cpu.answer(&request));
                    let result = match std::panic::catch_unwind(run) {
                        Ok(answer) => answer.map_err(|e| e.to_string()),
                        Err(_) => Err("the query panicked".to_string()),
                    };
                    let _ = tx.send(result);
                });
                PendingKind::Cpu(rx)
            }
        };
        Pending { started, kind }
    }
}

impl Pending {
    /// Waits for the answer.
    pub async fn finish(self) -> Answered {
        let lost = || Err("the engine lost the query".to_string());
        let (result, served_by, missed_deadline) = match self.kind {
            PendingKind::Hybrid(rx) => match rx.await {
                Ok(done) => (
                    done.result.map_err(|e| e.to_string()),
                    Some(done.served_by),
                    done.missed_deadline,
                ),
                Err(_) => (lost(), None, false),
            },
            PendingKind::Cpu(rx) => (rx.await.unwrap_or_else(|_| lost()), None, false),
        };
        Answered {
            result,
            latency: self.started.elapsed(),
            served_by,
            missed_deadline,
        }
    }
}
