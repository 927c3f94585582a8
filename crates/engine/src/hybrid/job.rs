//! A query in the scheduler: its request, features and arrival, and the gathering of its parts. A
//! query runs as one task, or split into tasks over disjoint docID ranges; every task finishes one
//! part, and the last part to finish merges them (exactly: [`merge_top_k`]) and sends the one answer.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use warpsearch_index::{IndexError, Result};
use warpsearch_query::{merge_top_k, Answer, Request, Scored};

use crate::cost::Features;

/// The processor that ran a task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Processor {
    /// A CPU worker.
    Cpu,
    /// The GPU.
    Gpu,
    /// The CPU, completing what the GPU answered in part.
    Both,
}

/// Who answered a query.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServedBy {
    /// The CPU alone (one task or several CPU parts).
    Cpu,
    /// The GPU alone.
    Gpu,
    /// Parts on both.
    Both,
}

/// A finished query.
#[derive(Debug)]
pub struct Done {
    /// The id it was submitted with.
    pub id: u64,
    /// Its top k, with the latency from submission to this answer.
    pub result: Result<Answer>,
    /// Who answered it.
    pub served_by: ServedBy,
    /// Whether it came later than its deadline.
    pub missed_deadline: bool,
}

/// Where a query's answer goes: a channel, or anything that takes answers from the workers' threads
/// (a server gathers each request's answers and wakes its handler once, not once per query).
pub trait Reply: Send + Sync {
    /// Takes one answer (called on the thread that finished the query's last part).
    fn send(&self, done: Done);
}

impl Reply for Sender<Done> {
    fn send(&self, done: Done) {
        // The receiver may be gone (a caller that stopped listening); the answer is then unwanted.
        let _ = Sender::send(self, done);
    }
}

/// Answers to many queries, put in place in any order by the threads that finish them, until every
/// one is in: what a [`Reply`] that wakes its waiter once (not once per answer) keeps. Each slot has a
/// lock of its own and a shared count says how many are empty, so that the threads answering one
/// batch's queries do not queue on one lock.
pub struct Slots<T> {
    items: Box<[Mutex<Option<T>>]>,
    left: AtomicUsize,
    taken: AtomicBool,
}

impl<T> Slots<T> {
    /// `n` empty slots.
    pub fn new(n: usize) -> Slots<T> {
        Slots {
            items: (0..n).map(|_| Mutex::new(None)).collect(),
            left: AtomicUsize::new(n),
            taken: AtomicBool::new(false),
        }
    }

    /// Puts the answer to query `i` (a second one replaces the first; one out of range, or after
    /// [`Slots::take`], is dropped); returns whether it filled the last empty slot.
    pub fn put(&self, i: usize, item: T) -> bool {
        let Some(slot) = self.items.get(i) else {
            return false;
        };
        if self.taken.load(Ordering::Acquire) {
            return false;
        }
        if lock_slot(slot).replace(item).is_some() {
            return false;
        }
        // AcqRel: the put that fills the last slot sees every other put's slot filled.
        self.left.fetch_sub(1, Ordering::AcqRel) == 1
    }

    /// How many slots are still empty.
    pub fn left(&self) -> usize {
        self.left.load(Ordering::Acquire)
    }

    /// The answers in order (`None` where none came); the slots are then gone.
    pub fn take(&self) -> Vec<Option<T>> {
        if self.taken.swap(true, Ordering::AcqRel) {
            return Vec::new();
        }
        self.items.iter().map(|s| lock_slot(s).take()).collect()
    }
}

fn lock_slot<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().expect("no thread panics while it puts an answer")
}

struct Gathered {
    remaining: usize,
    hits: Vec<Vec<Scored>>,
    floor: f32,
    error: Option<IndexError>,
    cpu: bool,
    gpu: bool,
}

/// A query under way.
pub struct Job {
    /// The id it was submitted with.
    pub id: u64,
    /// The request.
    pub request: Request,
    /// What its cost is predicted from.
    pub features: Features,
    /// When it was submitted.
    pub arrival: Instant,
    /// Time allowed from submission (None: no deadline).
    pub deadline: Option<Duration>,
    reply: Arc<dyn Reply>,
    gathered: Mutex<Gathered>,
}

impl Job {
    /// A query of `parts` tasks.
    pub fn new(
        id: u64,
        request: Request,
        features: Features,
        deadline: Option<Duration>,
        reply: Arc<dyn Reply>,
        parts: usize,
    ) -> Job {
        Job {
            id,
            request,
            features,
            arrival: Instant::now(),
            deadline,
            reply,
            gathered: Mutex::new(Gathered {
                remaining: parts.max(1),
                hits: Vec::with_capacity(parts),
                floor: f32::NEG_INFINITY,
                error: None,
                cpu: false,
                gpu: false,
            }),
        }
    }

    /// Sets the number of parts before any task runs.
    pub fn set_parts(&self, parts: usize) {
        self.gathered.lock().expect("no panics under the lock").remaining = parts.max(1);
    }

    /// The best starting threshold known for a part not yet started: the highest k-th score of a
    /// finished part that found k documents (−∞ before).
    pub fn floor(&self) -> f32 {
        self.gathered.lock().expect("no panics under the lock").floor
    }

    /// Records one part's result; the last part calls `count` with who answered, the latency and
    /// whether the deadline was missed, then sends the answer (counted first, so that a caller woken
    /// by the last answer reads counters that include it).
    pub fn finish_part(
        &self,
        result: Result<Vec<Scored>>,
        by: Processor,
        count: impl FnOnce(ServedBy, Duration, bool),
    ) {
        let mut g = self.gathered.lock().expect("no panics under the lock");
        match by {
            Processor::Cpu => g.cpu = true,
            Processor::Gpu => g.gpu = true,
            Processor::Both => (g.cpu, g.gpu) = (true, true),
        }
        match result {
            Ok(hits) => {
                if hits.len() >= self.request.k {
                    let kth = hits[self.request.k - 1].score;
                    g.floor = g.floor.max(kth);
                }
                g.hits.push(hits);
            }
            Err(e) => {
                g.error.get_or_insert(e);
            }
        }
        g.remaining -= 1;
        if g.remaining > 0 {
            return;
        }
        let latency = self.arrival.elapsed();
        let served_by = match (g.cpu, g.gpu) {
            (true, true) => ServedBy::Both,
            (false, true) => ServedBy::Gpu,
            _ => ServedBy::Cpu,
        };
        let missed = self.deadline.is_some_and(|d| latency > d);
        let result = match g.error.take() {
            Some(e) => Err(e),
            None => {
                let mut parts = std::mem::take(&mut g.hits);
                let hits = if parts.len() == 1 {
                    parts.pop().expect("one part")
                } else {
                    merge_top_k(&parts, self.request.k)
                };
                Ok(Answer { hits, latency })
            }
        };
        count(served_by, latency, missed);
        self.reply.send(Done {
            id: self.id,
            result,
            served_by,
            missed_deadline: missed,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::Slots;

    #[test]
    fn slots_fill_in_any_order_and_say_once_when_full() {
        let s = Slots::new(3);
        assert!(!s.put(2, "c"));
        assert!(!s.put(7, "out of range"));
        assert!(!s.put(0, "a"));
        assert!(!s.put(0, "a again"), "a second answer fills nothing");
        assert_eq!(s.left(), 1);
        assert!(s.put(1, "b"), "the last empty slot");
        assert_eq!(s.left(), 0);
        assert_eq!(s.take(), vec![Some("a again"), Some("b"), Some("c")]);
        assert!(!s.put(1, "late"), "after take, dropped");
        assert!(s.take().is_empty());
    }
}
