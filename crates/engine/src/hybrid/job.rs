//! A query in the scheduler: its request, features and arrival, and the gathering of its parts. A
//! query runs as one task, or split into tasks over disjoint docID ranges; every task finishes one
//! part, and the last part to finish merges them (exactly: [`merge_top_k`]) and sends the one answer.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use warpsearch_index::{IndexError, Result};
use warpsearch_query::{merge_top_k, Answer, Request, Scored};

use crate::cost::Features;
use crate::reply::{Done, Reply, ServedBy};

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

    /// Whether its answer is still wanted ([`Reply::wanted`]): a task of a query no longer wanted is
    /// dropped instead of run.
    pub fn wanted(&self) -> bool {
        self.reply.wanted()
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
