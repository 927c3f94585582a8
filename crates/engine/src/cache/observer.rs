//! The dynamic policy's observer: a thread of its own, at a low CPU priority, takes in the queries
//! answered, weighs their use of the lists with decay ([`Usage`]) and makes a plan every epoch for
//! the GPU to apply ([`Observer::ready`]). Whoever answers queries only sends them over a channel, so
//! the GPU's thread and the CPU workers never wait on the policy's bookkeeping (a lock and a
//! microsecond or more a query, before), and plans are made on cores the query work leaves idle.
//! When the thread falls more than four epochs behind (at least 65,536 queries, at most 2^20), new
//! observations are dropped and counted: the policy then learns from a sample of the stream, and
//! memory stays bounded. The GPU never waits for a plan being made ([`Observer::ready`]); a caller
//! that wants the plan of what it has run so far waits with [`Observer::settle`] (`bench` after its
//! warm-up).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};

use warpsearch_gpu::{CachePlan, Capacity};
use warpsearch_index::Index;
use warpsearch_query::Mode;

use super::policy::{self, Policy};
use super::usage::Usage;

/// A query answered: its terms, its mode, and the k-th score of its answer when it found k documents.
pub struct Seen {
    /// Its terms, in any order, repeats allowed.
    pub terms: Vec<u32>,
    /// How it ran.
    pub mode: Mode,
    /// The k-th score of its answer, when it found k documents.
    pub kth: Option<f32>,
}

/// How the observer makes plans.
#[derive(Debug, Clone, Copy)]
pub struct Planning {
    /// Queries between plans.
    pub epoch: usize,
    /// The weight kept of older queries at each plan.
    pub decay: f64,
    /// The maximum admission ratio λ.
    pub ratio: f64,
    /// VFB's block size, in index blocks.
    pub group: u32,
    /// [`policy::worth_changing`]'s gain.
    pub min_gain: f64,
    /// Whether the index stops early on a global-score order: a query's visits then end at the first
    /// document whose global score cannot beat its k-th score.
    pub early: bool,
}

/// What the observer's thread and the GPU's share, under one lock held only briefly.
struct Shared {
    /// The last plan made and not yet taken, and whether it is worth its copies.
    made: Option<(CachePlan, bool)>,
    /// Whether a plan is being made.
    planning: bool,
    /// Whether the thread has ended (it panicked, or the observer was dropped).
    gone: bool,
    /// The plan the cache holds.
    current: Arc<CachePlan>,
    /// The space plans fill.
    cap: Capacity,
}

struct State {
    shared: Mutex<Shared>,
    changed: Condvar,
    /// Queries sent and not yet taken in.
    backlog: AtomicU64,
    /// Set when the observer is dropped: the thread ends without taking in what is left.
    stop: AtomicBool,
}

impl State {
    fn lock(&self) -> MutexGuard<'_, Shared> {
        self.shared.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The dynamic policy's observations and plans (module docs).
pub struct Observer {
    tx: Sender<Vec<Seen>>,
    state: Arc<State>,
    /// The most queries left waiting for the thread before new ones are dropped.
    limit: u64,
    dropped: AtomicU64,
}

impl Observer {
    /// Starts the thread, from `usage` (the training log's, or nothing) and a cache holding
    /// `current`, its plans filling `cap`.
    pub fn start(
        index: Arc<Index>,
        usage: Usage,
        planning: Planning,
        current: CachePlan,
        cap: Capacity,
    ) -> Observer {
        let limit = (4 * planning.epoch as u64).clamp(1 << 16, 1 << 20);
        let (observer, rx) = Observer::new(current, cap, limit);
        let state = observer.state.clone();
        let spawned = std::thread::Builder::new()
            .name("warpsearch-cache-policy".into())
            .spawn(move || observe(index, usage, planning, rx, state));
        if let Err(e) = spawned {
            // No thread: the cache keeps its first plan, and every observation is dropped.
            tracing::warn!(
                error = %e,
                "the dynamic cache policy's thread could not start; the cache keeps its first plan"
            );
            observer.state.lock().gone = true;
        }
        observer
    }

    /// The observer and the end of its channel a thread takes in, at most `limit` queries waiting.
    fn new(current: CachePlan, cap: Capacity, limit: u64) -> (Observer, Receiver<Vec<Seen>>) {
        let state = Arc::new(State {
            shared: Mutex::new(Shared {
                made: None,
                planning: false,
                gone: false,
                current: Arc::new(current),
                cap,
            }),
            changed: Condvar::new(),
            backlog: AtomicU64::new(0),
            stop: AtomicBool::new(false),
        });
        let (tx, rx) = channel();
        let observer = Observer {
            tx,
            state,
            limit,
            dropped: AtomicU64::new(0),
        };
        (observer, rx)
    }

    /// Sends queries answered to the thread, or drops them when it is too far behind.
    pub fn send(&self, seen: Vec<Seen>) {
        let n = seen.len() as u64;
        if n == 0 {
            return;
        }
        let backlog = &self.state.backlog;
        // A message larger than the limit still goes when nothing waits.
        let before = backlog.fetch_add(n, Ordering::AcqRel);
        let sent = (before == 0 || before + n <= self.limit) && self.tx.send(seen).is_ok();
        if !sent {
            // Under the lock, and told: a `settle` may have seen this message's count meanwhile.
            let _g = self.state.lock();
            backlog.fetch_sub(n, Ordering::AcqRel);
            self.dropped.fetch_add(n, Ordering::Relaxed);
            self.state.changed.notify_all();
        }
    }

    /// The plan made since the last call and whether it is worth its copies (never waiting for one
    /// being made: [`Observer::settle`] does).
    pub fn ready(&self) -> Option<(CachePlan, bool)> {
        self.state.lock().made.take()
    }

    /// The cache now holds `plan`, and from now on plans fill `cap` (when given).
    pub fn holds(&self, plan: CachePlan, cap: Option<Capacity>) {
        let mut g = self.state.lock();
        g.current = Arc::new(plan);
        if let Some(cap) = cap {
            g.cap = cap;
        }
    }

    /// Waits until the thread has taken in every query sent and made any plan they call for.
    pub fn settle(&self) {
        let mut g = self.state.lock();
        while (g.planning || self.state.backlog.load(Ordering::Acquire) > 0) && !g.gone {
            g = self.state.changed.wait(g).unwrap_or_else(PoisonError::into_inner);
        }
    }

    /// Queries dropped so far, the thread being behind, resetting the count.
    pub fn take_dropped(&self) -> u64 {
        self.dropped.swap(0, Ordering::Relaxed)
    }
}

impl Drop for Observer {
    fn drop(&mut self) {
        self.state.stop.store(true, Ordering::Release);
    }
}

/// Marks the thread gone when it ends, however it ends, so that no one waits for it.
struct Gone(Arc<State>);

impl Drop for Gone {
    fn drop(&mut self) {
        if std::thread::panicking() {
            tracing::warn!("the dynamic cache policy's thread failed; the cache keeps its plan");
        }
        let mut g = self.0.lock();
        g.gone = true;
        g.planning = false;
        self.0.changed.notify_all();
    }
}

/// The observer's thread: takes in what is sent until the observer is dropped.
fn observe(index: Arc<Index>, mut usage: Usage, p: Planning, rx: Receiver<Vec<Seen>>, state: Arc<State>) {
    let _gone = Gone(state.clone());
    lower_priority();
    let mut seen = 0usize;
    while let Ok(batch) = rx.recv() {
        if state.stop.load(Ordering::Acquire) {
            break;
        }
        let n = batch.len();
        for s in batch {
            let stop = stop_doc(&index, p.early, s.kth);
            usage.add_terms(&index, s.terms, s.mode, stop, 1.0);
        }
        seen += n;
        let start = {
            let mut g = state.lock();
            // Under the lock with `planning`, so that `settle` never sees the queries taken in
            // before the plan they start.
            state.backlog.fetch_sub(n as u64, Ordering::AcqRel);
            g.planning = seen >= p.epoch && g.made.is_none();
            state.changed.notify_all();
            g.planning.then(|| (g.current.clone(), g.cap))
        };
        let Some((current, cap)) = start else {
            continue;
        };
        seen = 0;
        let next = policy::plan(&index, &usage, Policy::Dynamic, cap, p.ratio, p.group);
        let worth = policy::worth_changing(&index, &usage, &current, &next, p.epoch, p.min_gain);
        usage.scale(p.decay);
        let mut g = state.lock();
        g.made = Some((next, worth));
        g.planning = false;
        state.changed.notify_all();
    }
}

/// Where a query's visits ended: on a global-score order with early termination, at the first
/// document that cannot beat its k-th score (global scores fall with the docID); else at its lists'
/// ends (`None`).
fn stop_doc(index: &Index, early: bool, kth: Option<f32>) -> Option<u32> {
    match (early, index.global_scores(), kth) {
        (true, Some(gs), Some(kth)) => Some(gs.partition_point(|&g| g > kth) as u32),
        _ => None,
    }
}

/// Lowers the calling thread's CPU priority to nice 10, if it is not that low already (Linux keeps
/// nice values per thread): under contention it gets about a tenth of a core's share, so plans are
/// made on cores the query work leaves idle without starving outright when none are.
/// Elsewhere nothing: `setpriority` would renice the whole process there.
fn lower_priority() {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    {
        use rustix::process::{getpriority_process, setpriority_process};
        if getpriority_process(None).is_ok_and(|nice| nice < 10) {
            // Where it cannot be lowered, plans are made at the priority of the query work.
            let _ = setpriority_process(None, 10);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seen(n: usize) -> Vec<Seen> {
        (0..n)
            .map(|i| Seen {
                terms: vec![i as u32],
                mode: Mode::Or,
                kth: None,
            })
            .collect()
    }

    /// With no thread taking them in, messages queue up to the limit (one larger than it when nothing
    /// waits), then are dropped and counted; memory stays bounded.
    #[test]
    fn observations_past_the_limit_are_dropped_and_counted() {
        let empty = CachePlan { blocks: Vec::new() };
        let (o, rx) = Observer::new(empty, Capacity::default(), 10);
        o.send(seen(12));
        assert_eq!(o.take_dropped(), 0, "the first message goes, whatever its size");
        o.send(seen(1));
        assert_eq!(o.take_dropped(), 1, "behind: dropped");
        drop(rx.recv().unwrap());
        o.state.backlog.fetch_sub(12, Ordering::AcqRel);
        o.send(seen(4));
        o.send(seen(6));
        o.send(seen(1));
        assert_eq!(o.take_dropped(), 1, "10 may wait, not 11");
        assert_eq!(rx.try_iter().map(|m| m.len()).collect::<Vec<_>>(), vec![4, 6]);
        assert_eq!(o.take_dropped(), 0, "the count resets");
    }

    /// A thread that fails while making a plan, with queries still waiting, leaves no one waiting for
    /// it: `settle` returns.
    #[test]
    fn a_failed_thread_is_waited_for_by_no_one() {
        let empty = CachePlan { blocks: Vec::new() };
        let (o, _rx) = Observer::new(empty, Capacity::default(), 100);
        o.send(seen(3));
        o.state.lock().planning = true;
        let state = o.state.clone();
        let failing = std::thread::spawn(move || {
            let _gone = Gone(state);
            std::thread::sleep(std::time::Duration::from_millis(50));
            panic!("a plan failed (on purpose)");
        });
        o.settle();
        assert!(o.ready().is_none());
        assert!(failing.join().is_err());
    }

    /// The observer's thread runs at nice 10 or lower priority, and only that thread.
    #[cfg(target_os = "linux")]
    #[test]
    fn the_policy_thread_alone_runs_at_a_lower_priority() {
        use rustix::process::getpriority_process;
        let ours = getpriority_process(None).unwrap();
        let theirs = std::thread::spawn(|| {
            lower_priority();
            getpriority_process(None).unwrap()
        })
        .join()
        .unwrap();
        assert!(theirs >= 10 && theirs >= ours, "nice {theirs}");
        assert_eq!(getpriority_process(None).unwrap(), ours, "this thread unchanged");
    }
}
