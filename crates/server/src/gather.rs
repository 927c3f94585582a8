//! A request's answers, put by the engine's threads as its queries finish (in any order, on any
//! thread, into the engine's [`Slots`]); the last one sends them all to the waiting handler.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use tokio::sync::oneshot;
use warpsearch_engine::{Done, Reply, ServedBy, Slots};
use warpsearch_query::Answer;

use super::searcher::lock;

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
}

impl Gather {
    /// Waits for `queries` answers (none: sends at once).
    pub fn new(started: Instant, queries: usize, tx: oneshot::Sender<Vec<Answered>>) -> Gather {
        let gather = Gather {
            started,
            answers: Slots::new(queries),
            tx: Mutex::new(Some(tx)),
        };
        if queries == 0 {
            gather.send();
        }
        gather
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
        let answered = Answered {
            result: done.result.map_err(|e| e.to_string()),
            latency: self.started.elapsed(),
            served_by: Some(done.served_by),
            missed_deadline: done.missed_deadline,
        };
        self.put(done.id as usize, answered);
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

    fn texts(answers: Vec<Answered>) -> Vec<String> {
        answers.into_iter().map(|a| a.result.unwrap_err()).collect()
    }

    #[test]
    fn sends_once_every_slot_is_filled_in_query_order() {
        let (tx, mut rx) = oneshot::channel();
        let gather = Gather::new(Instant::now(), 3, tx);
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
        let _gather = Gather::new(Instant::now(), 0, tx);
        assert!(rx.try_recv().expect("sent").is_empty());
    }

    #[test]
    fn answers_from_many_threads_all_arrive() {
        let (tx, mut rx) = oneshot::channel();
        let n = 1000;
        let gather = Gather::new(Instant::now(), n, tx);
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
