//! A request's answers, put by the engine's threads as its queries finish (in any order, on any
//! thread, into the engine's [`Slots`]); the last one sends them all to the waiting handler.
//!
//! A gatherer also keeps the request's account: its queries count as running ([`Account`]) until the
//! engine answers or drops each, and it holds the request's places among those allowed in flight until
//! it is dropped, which is once the engine, the handler and the response body have all let go of it.
//! A request whose handler is gone (its client hung up) is no longer [`Reply::wanted`]: the engine
//! drops its queries not yet started, and those count as cancelled when the gatherer goes.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::{oneshot, OwnedSemaphorePermit};
use warpsearch_engine::{Done, Reply, ServedBy, Slots};
use warpsearch_query::Answer;

use super::lock;

/// The queries of every request, as the engine has them.
#[derive(Default)]
pub struct Account {
    /// Submitted to the engine, neither answered nor dropped yet.
    pub running: AtomicUsize,
    /// Dropped by the engine unanswered, their client gone.
    pub cancelled: AtomicU64,
}

/// A query's answer as the server sees it.
pub struct Answered {
    pub result: Result<Answer, String>,
    /// From the request's start to the answer.
    pub latency: Duration,
    pub served_by: Option<ServedBy>,
    pub missed_deadline: bool,
}

pub struct Gather {
    pub started: Instant,
    answers: Slots<Answered>,
    tx: Mutex<Option<oneshot::Sender<Vec<Answered>>>>,
    /// Set when the handler is gone without its answers.
    abandoned: AtomicBool,
    /// Queries the engine has neither answered nor dropped.
    left: AtomicUsize,
    account: Arc<Account>,
    /// The request's places among the queries allowed in flight, given back when this is dropped.
    _places: Option<OwnedSemaphorePermit>,
}

impl Gather {
    /// Waits for `queries` answers (none: sends at once), counted as running in `account` until each
    /// comes or is dropped; holds `places` until dropped.
    pub fn new(
        started: Instant,
        queries: usize,
        tx: oneshot::Sender<Vec<Answered>>,
        account: Arc<Account>,
        places: Option<OwnedSemaphorePermit>,
    ) -> Gather {
        account.running.fetch_add(queries, Ordering::Relaxed);
        let gather = Gather {
            started,
            answers: Slots::new(queries),
            tx: Mutex::new(Some(tx)),
            abandoned: AtomicBool::new(false),
            left: AtomicUsize::new(queries),
            account,
            _places: places,
        };
        if queries == 0 {
            gather.send();
        }
        gather
    }

    /// The handler is gone without its answers: the engine may drop the queries it has not started.
    pub fn abandon(&self) {
        self.abandoned.store(true, Ordering::Relaxed);
    }

    /// One query is no longer running (answered).
    fn one_done(&self) {
        let counted = self
            .left
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
            .is_ok();
        if counted {
            self.account.running.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// Query `i`'s answer; the last one sends them all. A second answer to a query replaces the
    /// first, and one out of range is dropped: neither counts.
    pub fn put(&self, i: usize, answered: Answered) {
        if self.answers.put(i, answered) {
            self.send();
        }
    }

    fn send(&self) {
        let Some(tx) = lock(&self.tx).take() else {
            return;
        };
        let answers = self.answers.take().into_iter();
        let answers = answers.map(|a| a.expect("every query answered"));
        // The handler may be gone (its client hung up); the answers are then unwanted.
        let _ = tx.send(answers.collect());
    }
}

impl Reply for Gather {
    fn send(&self, done: Done) {
        self.one_done();
        let answered = Answered {
            result: done.result.map_err(|e| e.to_string()),
            latency: self.started.elapsed(),
            served_by: Some(done.served_by),
            missed_deadline: done.missed_deadline,
        };
        self.put(done.id as usize, answered);
    }

    fn wanted(&self) -> bool {
        !self.abandoned.load(Ordering::Relaxed)
    }
}

/// The engine, the handler and the response are done with the request: the queries the engine
/// dropped stop running (cancelled), and its places are given back.
impl Drop for Gather {
    fn drop(&mut self) {
        let left = *self.left.get_mut();
        if left > 0 {
            self.account.running.fetch_sub(left, Ordering::Relaxed);
            self.account.cancelled.fetch_add(left as u64, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answered(ms: u64) -> Answered {
        Answered {
            result: Err(format!("query {ms}")),
            latency: Duration::from_millis(ms),
            served_by: None,
            missed_deadline: false,
        }
    }

    fn gather(n: usize, tx: oneshot::Sender<Vec<Answered>>) -> Gather {
        Gather::new(Instant::now(), n, tx, Arc::default(), None)
    }

    fn done(id: u64) -> Done {
        Done {
            id,
            result: Ok(Answer {
                hits: Vec::new(),
                latency: Duration::ZERO,
            }),
            served_by: ServedBy::Cpu,
            missed_deadline: false,
        }
    }

    /// Queries count as running until answered, or until the gatherer goes without them (dropped by
    /// the engine: cancelled); an abandoned request is no longer wanted; its places are given back
    /// when it goes.
    #[test]
    fn queries_run_until_answered_or_dropped_and_places_are_held_until_the_end() {
        let account = Arc::new(Account::default());
        let places = Arc::new(tokio::sync::Semaphore::new(5));
        let held = places.clone().try_acquire_many_owned(3).unwrap();
        let (tx, _rx) = oneshot::channel();
        let gather = Gather::new(Instant::now(), 3, tx, account.clone(), Some(held));
        assert_eq!(account.running.load(Ordering::Relaxed), 3);
        assert!(gather.wanted());
        Reply::send(&gather, done(0));
        assert_eq!(account.running.load(Ordering::Relaxed), 2);
        gather.abandon();
        assert!(!gather.wanted());
        Reply::send(&gather, done(1));
        assert_eq!(
            places.available_permits(),
            2,
            "places held while the gatherer lives"
        );
        drop(gather);
        assert_eq!(account.running.load(Ordering::Relaxed), 0);
        assert_eq!(account.cancelled.load(Ordering::Relaxed), 1);
        assert_eq!(places.available_permits(), 5);
    }

    fn texts(answers: Vec<Answered>) -> Vec<String> {
        answers.into_iter().map(|a| a.result.unwrap_err()).collect()
    }

    #[test]
    fn sends_once_every_slot_is_filled_in_query_order() {
        let (tx, mut rx) = oneshot::channel();
        let gather = gather(3, tx);
        gather.put(2, answered(2));
        gather.put(0, answered(0));
        gather.put(2, answered(20)); // replaces, does not count
        gather.put(7, answered(7)); // out of range: dropped
        assert!(rx.try_recv().is_err(), "sent before query 1 was answered");
        gather.put(1, answered(1));
        let got = texts(rx.try_recv().expect("sent after the last answer"));
        assert_eq!(got, ["query 0", "query 1", "query 20"]);
    }

    #[test]
    fn no_queries_sends_at_once() {
        let (tx, mut rx) = oneshot::channel();
        let _gather = gather(0, tx);
        assert!(rx.try_recv().expect("sent").is_empty());
    }

    #[test]
    fn answers_from_many_threads_all_arrive() {
        let (tx, mut rx) = oneshot::channel();
        let n = 1000;
        let gather = gather(n, tx);
        std::thread::scope(|s| {
            for t in 0..8 {
                let gather = &gather;
                s.spawn(move || {
                    for i in (t..n).step_by(8) {
                        gather.put(i, answered(i as u64));
                    }
                });
            }
        });
        let got = texts(rx.try_recv().expect("sent"));
        let want: Vec<String> = (0..n).map(|i| format!("query {i}")).collect();
        assert_eq!(got, want);
    }
}
