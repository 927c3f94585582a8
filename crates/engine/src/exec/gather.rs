//! A query cut into tasks over disjoint docID ranges: each part answers to the query's [`Gather`],
//! and the last part to finish merges them (exactly: [`merge_top_k`]) and sends the one answer. Parts
//! not yet started begin from the best k-th score the finished ones found.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use warpsearch_index::IndexError;
use warpsearch_query::{merge_top_k, Answer, Scored};

use crate::reply::{Done, Reply, ServedBy};

struct Gathered {
    remaining: usize,
    hits: Vec<Vec<Scored>>,
    floor: f32,
    error: Option<IndexError>,
    cpu: bool,
    gpu: bool,
}

/// The parts of one query under way.
pub(crate) struct Gather {
    id: u64,
    k: usize,
    arrival: Instant,
    deadline: Option<Duration>,
    reply: Arc<dyn Reply>,
    gathered: Mutex<Gathered>,
}

impl Gather {
    /// Query `id` (top `k`, submitted at `arrival`) in `parts` parts, answered to `reply`.
    pub fn new(
        id: u64,
        k: usize,
        parts: usize,
        arrival: Instant,
        deadline: Option<Duration>,
        reply: Arc<dyn Reply>,
    ) -> Gather {
        Gather {
            id,
            k,
            arrival,
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

    /// The best starting threshold known for a part not yet started: the highest k-th score of a
    /// finished part that found k documents (−∞ before).
    pub fn floor(&self) -> f32 {
        self.gathered.lock().expect("no panics under the lock").floor
    }
}

impl Reply for Gather {
    /// One part's answer; the last merges them all and sends the query's.
    fn send(&self, done: Done) {
        let mut g = self.gathered.lock().expect("no panics under the lock");
        match done.served_by {
            ServedBy::Cpu => g.cpu = true,
            ServedBy::Gpu => g.gpu = true,
            ServedBy::Both => (g.cpu, g.gpu) = (true, true),
        }
        match done.result {
            Ok(a) => {
                if self.k > 0 && a.hits.len() >= self.k {
                    let kth = a.hits[self.k - 1].score;
                    g.floor = g.floor.max(kth);
                }
                g.hits.push(a.hits);
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
        let result = match g.error.take() {
            Some(e) => Err(e),
            None => {
                let mut parts = std::mem::take(&mut g.hits);
                let hits = if parts.len() == 1 {
                    parts.pop().expect("one part")
                } else {
                    merge_top_k(&parts, self.k)
                };
                Ok(Answer { hits, latency })
            }
        };
        drop(g);
        self.reply.send(Done {
            id: self.id,
            result,
            served_by,
            missed_deadline: self.deadline.is_some_and(|d| latency > d),
        });
    }

    fn wanted(&self) -> bool {
        self.reply.wanted()
    }
}
