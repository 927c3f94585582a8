//! Where answers go: every query submitted to an [`crate::Engine`] gets exactly one [`Done`], handed to
//! the submitter's [`Reply`] on the engine thread that finished it, as soon as it is ready.
//!
//! - [`Reply`]: the sink (a channel, a server's per-request gatherer, [`Collect`] for a closed loop).
//! - [`Slots`]: answers put in place in any order, for sinks that wake their waiter once.
//! - [`Collect`]: a batch's answers in order, its waiter woken by the last.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use rayon::prelude::*;
use warpsearch_index::{IndexError, Result};
use warpsearch_query::{Answer, Request};

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
    /// Its top k, with the engine's latency for it.
    pub result: Result<Answer>,
    /// Who answered it.
    pub served_by: ServedBy,
    /// Whether it came later than its deadline.
    pub missed_deadline: bool,
}

/// Where a query's answer goes: a channel, or anything that takes answers from the engine's threads
/// (a server gathers each request's answers and wakes its handler once, not once per query).
///
/// Every query submitted gets exactly one answer, unless its reply says it is no longer
/// [`Reply::wanted`]: the engine then drops the reply's queries it has not started (they get no
/// answer; those running still answer), and lets go of the reply once it holds none of its queries.
/// Answers are never changed by this: a query is answered exactly or not at all.
pub trait Reply: Send + Sync {
    /// Takes one answer (called on the thread that finished the query's last part).
    fn send(&self, done: Done);

    /// Whether the answers are still wanted (false once the submitter is gone: a server's client
    /// that hung up). Asked before a query starts, so it must be cheap (an atomic load).
    fn wanted(&self) -> bool {
        true
    }

    /// Takes several answers finished together (a GPU call's, a CPU thread's run of a large
    /// submission): one call where a sink can take them cheaper at once.
    fn send_many(&self, done: Vec<Done>) {
        for d in done {
            self.send(d);
        }
    }
}

/// What takes submissions as [`crate::Engine::submit`] does: an engine, as one shard of a sharded
/// index's (so that the shards' fan-out needs only this, not the engine that holds it).
pub(crate) trait Submit: Send + Sync {
    /// Queues `requests`; request i's answer (exactly one) goes to `reply` with id `first_id + i`.
    fn submit(
        &self,
        first_id: u64,
        requests: Vec<Request>,
        deadline: Option<Duration>,
        reply: Arc<dyn Reply>,
    );
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
    pub fn new(n: usize) -> Slots<T>
    where
        T: Send,
    {
        // A closed loop's million slots are made (and taken) on every core: on one, their
        // allocation and reading back cost a few percent of the loop.
        let items = if n >= PARALLEL {
            (0..n).into_par_iter().map(|_| Mutex::new(None)).collect()
        } else {
            (0..n).map(|_| Mutex::new(None)).collect()
        };
        Slots {
            items,
            left: AtomicUsize::new(n),
            taken: AtomicBool::new(false),
        }
    }

    /// Puts the answer to query `i` (a second one replaces the first; one out of range, or after
    /// [`Slots::take`], is dropped); returns whether it filled the last empty slot.
    pub fn put(&self, i: usize, item: T) -> bool {
        self.put_many(std::iter::once((i, item)))
    }

    /// [`Slots::put`] for several answers, counted with one update of the shared count (which every
    /// answering thread writes); returns whether they filled the last empty slot.
    pub fn put_many(&self, items: impl IntoIterator<Item = (usize, T)>) -> bool {
        if self.taken.load(Ordering::Acquire) {
            return false;
        }
        let mut filled = 0;
        for (i, item) in items {
            if let Some(slot) = self.items.get(i) {
                filled += usize::from(lock(slot).replace(item).is_none());
            }
        }
        // AcqRel: the put that fills the last slot sees every other put's slot filled.
        filled > 0 && self.left.fetch_sub(filled, Ordering::AcqRel) == filled
    }

    /// How many slots are still empty.
    pub fn left(&self) -> usize {
        self.left.load(Ordering::Acquire)
    }

    /// The answers in order (`None` where none came); the slots are then gone.
    pub fn take(&self) -> Vec<Option<T>>
    where
        T: Send,
    {
        if self.taken.swap(true, Ordering::AcqRel) {
            return Vec::new();
        }
        if self.items.len() >= PARALLEL {
            self.items.par_iter().map(|s| lock(s).take()).collect()
        } else {
            self.items.iter().map(|s| lock(s).take()).collect()
        }
    }
}

/// Slots from which on they are made and read back on every core.
const PARALLEL: usize = 1 << 16;

pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().expect("no engine thread panics under a lock")
}

/// A batch's answers (ids 0 to n − 1), or what `keep` makes of each, put in place by the threads that
/// finish them; the waiter is woken once, by the last. A channel woke it at every answer: a futex call
/// on the answering thread per query, which took 5–6% of a closed loop's samples.
pub struct Collect<T = Result<Answer>> {
    answers: Slots<T>,
    keep: Box<dyn Fn(Done) -> T + Send + Sync>,
    /// Set by the submitter when it wants no more answers ([`Collect::stopped_by`]).
    stop: Option<Arc<AtomicBool>>,
    /// Held to test whether every answer is in and to say so, so that no wake-up is lost.
    waiting: Mutex<()>,
    all_in: Condvar,
}

impl Collect {
    /// Waits for `n` answers.
    pub fn new(n: usize) -> Collect {
        Collect::with(n, |done| done.result)
    }

    /// The answers in order, once every one is in, or once no engine thread holds this any more (one
    /// that panicked took its queries with it): those missing are then an error.
    pub fn wait(self: &Arc<Self>) -> Vec<Result<Answer>> {
        let lost = |a: Option<Result<Answer>>| {
            a.unwrap_or_else(|| Err(IndexError::Invalid("the engine lost a query".into())))
        };
        let answers = self.wait_for();
        if answers.len() >= PARALLEL {
            answers.into_par_iter().map(lost).collect()
        } else {
            answers.into_iter().map(lost).collect()
        }
    }
}

/// `requests` handed (as an owned copy, made on every core when large) to `submit` with a [`Collect`],
/// and their answers in order once every one is in.
pub(crate) fn wait_for(
    requests: &[Request],
    submit: impl FnOnce(Vec<Request>, Arc<dyn Reply>),
) -> Vec<Result<Answer>> {
    let owned: Vec<Request> = if requests.len() > 4096 {
        requests.par_iter().cloned().collect()
    } else {
        requests.to_vec()
    };
    let collect = Arc::new(Collect::new(requests.len()));
    submit(owned, collect.clone());
    collect.wait()
}

impl<T: Send> Collect<T> {
    /// Waits for `n` answers and keeps `keep(answer)` of each (called on the answering thread).
    pub fn with(n: usize, keep: impl Fn(Done) -> T + Send + Sync + 'static) -> Collect<T> {
        Collect {
            answers: Slots::new(n),
            keep: Box::new(keep),
            stop: None,
            waiting: Mutex::new(()),
            all_in: Condvar::new(),
        }
    }

    /// This collector, no longer [`Reply::wanted`] once `stop` is set: the engine then drops the
    /// queries it has not started, and the wait ends once it lets go of the rest.
    pub fn stopped_by(mut self, stop: Arc<AtomicBool>) -> Collect<T> {
        self.stop = Some(stop);
        self
    }

    /// What was kept of each answer, in order, once every one is in or once no engine thread holds
    /// this any more (`None` for those missing).
    pub fn wait_for(self: &Arc<Self>) -> Vec<Option<T>> {
        self.wait_within(None).expect("no time limit")
    }

    /// [`Collect::wait_for`], or None once `timeout` has passed first (the answers stay to be waited
    /// for again).
    pub fn wait_within(self: &Arc<Self>, timeout: Option<Duration>) -> Option<Vec<Option<T>>> {
        const STEP: Duration = Duration::from_millis(100);
        let deadline = timeout.map(|t| std::time::Instant::now() + t);
        let mut waiting = lock(&self.waiting);
        // The step is only there to notice the holders gone: an answer wakes this at once.
        while self.answers.left() > 0 && Arc::strong_count(self) > 1 {
            let step = match deadline {
                None => STEP,
                Some(d) => match d.checked_duration_since(std::time::Instant::now()) {
                    Some(left) if !left.is_zero() => left.min(STEP),
                    _ => return None,
                },
            };
            waiting = self
                .all_in
                .wait_timeout(waiting, step)
                .expect("no engine thread panics under a lock")
                .0;
        }
        drop(waiting);
        Some(self.answers.take())
    }
}

impl<T: Send> Collect<T> {
    /// Wakes the waiter: every answer is in.
    fn all_in(&self) {
        drop(lock(&self.waiting));
        self.all_in.notify_one();
    }
}

impl<T: Send> Reply for Collect<T> {
    fn send(&self, done: Done) {
        let id = done.id as usize;
        if self.answers.put(id, (self.keep)(done)) {
            self.all_in();
        }
    }

    fn send_many(&self, done: Vec<Done>) {
        let kept = done.into_iter().map(|d| (d.id as usize, (self.keep)(d)));
        if self.answers.put_many(kept) {
            self.all_in();
        }
    }

    fn wanted(&self) -> bool {
        self.stop.as_ref().is_none_or(|s| !s.load(Ordering::Relaxed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn slots_count_many_answers_at_once() {
        let s = Slots::new(4);
        assert!(!s.put_many([(0, 'a'), (2, 'c'), (9, 'x')]), "two of four");
        assert_eq!(s.left(), 2);
        assert!(!s.put_many([(0, 'A')]), "a second answer fills nothing");
        assert_eq!(s.left(), 2);
        assert!(s.put_many([(1, 'b'), (3, 'd')]), "the last two");
        assert_eq!(s.take(), vec![Some('A'), Some('b'), Some('c'), Some('d')]);
    }

    fn done(id: u64) -> Done {
        Done {
            id,
            result: Ok(Answer {
                hits: Vec::new(),
                latency: Duration::from_micros(id),
            }),
            served_by: ServedBy::Cpu,
            missed_deadline: false,
        }
    }

    #[test]
    fn collect_returns_every_answer_in_order_from_many_threads() {
        let n = 1000;
        let collect = Arc::new(Collect::new(n));
        std::thread::scope(|s| {
            for t in 0..8u64 {
                let c = collect.clone();
                s.spawn(move || {
                    for i in (t..n as u64).step_by(8) {
                        c.send(done(i));
                    }
                });
            }
        });
        let got: Vec<u64> = collect
            .wait()
            .into_iter()
            .map(|a| a.unwrap().latency.as_micros() as u64)
            .collect();
        assert_eq!(got, (0..n as u64).collect::<Vec<_>>());
    }

    #[test]
    fn collect_takes_answers_sent_together() {
        let collect = Arc::new(Collect::new(5));
        collect.send_many(vec![done(4), done(0), done(2)]);
        collect.send(done(1));
        collect.send_many(vec![done(3)]);
        let got: Vec<u128> = collect
            .wait()
            .into_iter()
            .map(|a| a.unwrap().latency.as_micros())
            .collect();
        assert_eq!(got, [0, 1, 2, 3, 4]);
    }

    #[test]
    fn collect_names_a_lost_query_when_its_holders_are_gone() {
        let collect = Arc::new(Collect::new(2));
        let holder = collect.clone();
        holder.send(done(1));
        drop(holder);
        let got = collect.wait();
        assert!(got[0].as_ref().is_err_and(|e| e.to_string().contains("lost")));
        assert!(got[1].is_ok());
    }

    #[test]
    fn a_stopped_collect_is_unwanted_and_a_bounded_wait_comes_back_without_its_answers() {
        let stop = Arc::new(AtomicBool::new(false));
        let collect = Arc::new(Collect::new(2).stopped_by(stop.clone()));
        let holder = collect.clone();
        assert!(holder.wanted());
        holder.send(done(0));
        assert!(
            collect.wait_within(Some(Duration::from_millis(1))).is_none(),
            "one answer missing"
        );
        stop.store(true, Ordering::Relaxed);
        assert!(!holder.wanted());
        drop(holder);
        let got = collect
            .wait_within(Some(Duration::from_secs(60)))
            .expect("the holder is gone");
        assert!(got[0].is_some() && got[1].is_none());
        assert!(
            Arc::new(Collect::new(1)).wanted(),
            "without a stop flag, always wanted"
        );
    }
}
