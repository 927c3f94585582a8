//! A sharded index's engine: one engine per shard ([`Submit`]), each over its shard's own scorer, so
//! that each shard runs on a processor of its own (the CPU's threads, or its GPUs). Every request goes to every shard as the shard's
//! query ([`warpsearch_query::shard::for_shard`]: the shard's term ordinals, weighed with the
//! collection's statistics), and the shards' answers are merged exactly: their documents are
//! disjoint and their scores the single index's, so the k best of their union, score descending and
//! ties to the smaller collection docID, is the single index's top k, bit for bit.
//!
//! An engine may keep some of the shards ([`crate::EngineConfig::shards`]): it answers for their
//! documents only, with collection docIDs and the collection's scores, so that the answers of engines
//! over disjoint sets of shards (one per host) merge into the whole index's exactly.
//!
//! `and-or` is AND over the whole collection, and OR where that finds fewer than k documents: each
//! shard answers AND, and only when the merged AND falls short does every shard answer OR.

use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use warpsearch_index::{Index, IndexError};
use warpsearch_query::shard::for_shard;
use warpsearch_query::{merge_top_k, Answer, Mode, Request, Scored};

use crate::reply::{lock, Done, Reply, ServedBy, Submit};

/// The shards' engines of one sharded index.
pub(crate) struct Shards<S> {
    head: Arc<Index>,
    /// The head's numbers of the shards `engines` answer for (every shard, or those the engine's
    /// configuration keeps), in the engines' order.
    members: Vec<usize>,
    engines: Vec<S>,
    /// Threads of each shard's engine.
    threads: usize,
}

/// One request in flight over every shard.
struct Job {
    /// The id its answer goes with.
    id: u64,
    request: Request,
    /// Whether the shards answer `and-or`'s OR step (AND first).
    or_step: AtomicBool,
    /// Shards yet to answer the current step.
    left: AtomicUsize,
    /// The shards' hits so far (collection docIDs), or the first failure.
    hits: Mutex<std::result::Result<Vec<Scored>, IndexError>>,
    missed: AtomicBool,
    /// Who answered the shards' parts so far ([`served_bits`]).
    served: AtomicU8,
    /// When the first shard took the request (its answer's time taken back from when it came).
    took: Mutex<Option<Instant>>,
    deadline: Option<Instant>,
    reply: Arc<dyn Reply>,
}

/// Where one shard's answers to a submission go.
struct ShardReply<S> {
    shards: Weak<Shards<S>>,
    first_doc: u32,
    jobs: Arc<[Arc<Job>]>,
}

impl<S: Submit + 'static> Shards<S> {
    pub(crate) fn new(head: Arc<Index>, members: Vec<usize>, engines: Vec<S>, threads: usize) -> Shards<S> {
        debug_assert_eq!(members.len(), engines.len());
        Shards {
            head,
            members,
            engines,
            threads,
        }
    }

    /// How many shards.
    pub(crate) fn len(&self) -> usize {
        self.engines.len()
    }

    /// Every shard's engine.
    pub(crate) fn engines(&self) -> impl Iterator<Item = &S> {
        self.engines.iter()
    }

    /// Threads of each shard's engine.
    pub(crate) fn threads(&self) -> usize {
        self.threads
    }

    /// Sends `requests` (analysed against the head; not empty: [`crate::Engine::submit`] passes none)
    /// to every shard; request i's merged answer goes to `reply` with id `first_id + i`.
    pub(crate) fn submit(
        self: &Arc<Self>,
        first_id: u64,
        requests: Vec<Request>,
        deadline: Option<Duration>,
        reply: Arc<dyn Reply>,
    ) {
        let now = Instant::now();
        let jobs: Arc<[Arc<Job>]> = requests
            .into_iter()
            .enumerate()
            .map(|(i, request)| {
                Arc::new(Job {
                    id: first_id + i as u64,
                    request,
                    or_step: AtomicBool::new(false),
                    left: AtomicUsize::new(self.engines.len()),
                    hits: Mutex::new(Ok(Vec::new())),
                    missed: AtomicBool::new(false),
                    served: AtomicU8::new(0),
                    took: Mutex::new(None),
                    deadline: deadline.map(|d| now + d),
                    reply: reply.clone(),
                })
            })
            .collect();
        self.send(jobs, deadline);
    }

    /// Sends every job of `jobs` (each at its current step) to every shard.
    fn send(self: &Arc<Self>, jobs: Arc<[Arc<Job>]>, deadline: Option<Duration>) {
        let mode_of = |j: &Job| match (j.request.mode, j.or_step.load(Ordering::Acquire)) {
            (Mode::AndOr, false) => Mode::And,
            (Mode::AndOr, true) => Mode::Or,
            (mode, _) => mode,
        };
        // and-or's steps go as plain AND and OR requests: a shard's engine answers AND with ranked
        // AND whatever its algorithm, as one index's and-or does.
        for (engine, &i) in self.engines.iter().zip(&self.members) {
            let shard = &self.head.shards()[i];
            let requests = jobs
                .iter()
                .map(|j| {
                    Request::new(
                        for_shard(&self.head, shard, &j.request.query),
                        mode_of(j),
                        j.request.k,
                    )
                })
                .collect();
            let reply = Arc::new(ShardReply {
                shards: Arc::downgrade(self),
                first_doc: shard.first_doc(),
                jobs: jobs.clone(),
            });
            engine.submit(0, requests, deadline, reply);
        }
    }
}

impl<S: Submit + 'static> Reply for ShardReply<S> {
    fn send(&self, done: Done) {
        let Some(job) = self.jobs.get(done.id as usize) else {
            return;
        };
        if done.missed_deadline {
            job.missed.store(true, Ordering::Relaxed);
        }
        job.served
            .fetch_or(served_bits(done.served_by), Ordering::Relaxed);
        if let Ok(answer) = &done.result {
            let took = Instant::now().checked_sub(answer.latency);
            let mut first = lock(&job.took);
            *first = match (*first, took) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
        }
        {
            let mut hits = lock(&job.hits);
            match (&mut *hits, done.result) {
                (Ok(all), Ok(answer)) => all.extend(answer.hits.iter().map(|h| Scored {
                    doc: h.doc + self.first_doc,
                    score: h.score,
                })),
                (Ok(_), Err(e)) => *hits = Err(e),
                (Err(_), _) => {}
            }
        }
        // AcqRel: the last shard to answer sees every other shard's hits.
        if job.left.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.finish(job);
        }
    }

    fn wanted(&self) -> bool {
        // Every job of one submission shares its caller's reply.
        self.jobs.first().is_some_and(|j| j.reply.wanted())
    }
}

impl<S: Submit + 'static> ShardReply<S> {
    /// Every shard answered `job`'s step: its merged answer to the caller, or and-or's OR step.
    fn finish(&self, job: &Arc<Job>) {
        let k = job.request.k;
        let merged =
            std::mem::replace(&mut *lock(&job.hits), Ok(Vec::new())).map(|hits| merge_top_k([hits], k));
        let or_next = job.request.mode == Mode::AndOr
            && !job.or_step.load(Ordering::Acquire)
            && merged.as_ref().is_ok_and(|hits| hits.len() < k);
        if or_next {
            if let Some(shards) = self.shards.upgrade() {
                job.or_step.store(true, Ordering::Release);
                job.left.store(shards.len(), Ordering::Release);
                let deadline = job.deadline.map(|d| d.saturating_duration_since(Instant::now()));
                shards.send(Arc::from(vec![job.clone()]), deadline);
                return;
            }
        }
        // As every backend's: from when the request was taken (by its first shard) to its answer.
        let latency = lock(&job.took).map_or(Duration::ZERO, |t| t.elapsed());
        let result = merged.map(|hits| Answer { hits, latency });
        let missed = job.missed.load(Ordering::Relaxed) || job.deadline.is_some_and(|d| Instant::now() > d);
        job.reply.send(Done {
            id: job.id,
            result,
            served_by: match job.served.load(Ordering::Relaxed) {
                GPU => ServedBy::Gpu,
                CPU | 0 => ServedBy::Cpu,
                _ => ServedBy::Both,
            },
            missed_deadline: missed,
        });
    }
}

const CPU: u8 = 1;
const GPU: u8 = 2;

/// Who answered a shard's part, as bits that or together into who answered the merged answer: the
/// GPU where every shard's GPU did, the CPU where every shard's CPU did, else both.
fn served_bits(by: ServedBy) -> u8 {
    match by {
        ServedBy::Cpu => CPU,
        ServedBy::Gpu => GPU,
        ServedBy::Both => CPU | GPU,
    }
}
