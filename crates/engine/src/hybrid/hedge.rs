//! Hedging: a query the router gave the CPU, predicted to answer it sooner, that the CPU has not
//! answered by the time the GPU would have (times `HybridOptions::hedge_after`) is sent to the GPU as
//! well, and the first answer is kept; so is one query a CPU thread took from the GPU's queue, after
//! the GPU's latency. The CPU's cost model errs (by a third per OR query on a large
//! collection), and a query it underestimates runs for tens of milliseconds on one core where the GPU
//! answers it in a few: a hedge bounds such a query's latency near the GPU's.
//!
//! Both answers are exact, so whichever comes first is the query's answer and the other is dropped
//! ([`First`]). A copy not yet started when the other answers is dropped unrun (its reply is no longer
//! wanted); a query already running on a core runs to its end.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::stats::{bump, Counters};
use super::{lock, Router};
use crate::exec::{Batch, Task};
use crate::reply::{Done, Reply, ServedBy};

/// A query's reply while two processors may answer it: the first answer goes on, the other is dropped.
pub(crate) struct First {
    reply: Arc<dyn Reply>,
    router: Arc<Router>,
    answered: AtomicBool,
    /// Whether the query was sent to the GPU as well.
    hedged: AtomicBool,
}

impl First {
    pub fn new(reply: Arc<dyn Reply>, router: Arc<Router>) -> First {
        First {
            reply,
            router,
            answered: AtomicBool::new(false),
            hedged: AtomicBool::new(false),
        }
    }

    fn counters(&self) -> &Counters {
        &self.router.counters
    }
}

impl Reply for First {
    fn send(&self, done: Done) {
        if self.answered.swap(true, Ordering::AcqRel) {
            return;
        }
        if self.hedged.load(Ordering::Acquire) && done.served_by == ServedBy::Gpu {
            bump(&self.counters().hedges_won, 1);
        }
        self.reply.send(done);
    }

    fn wanted(&self) -> bool {
        !self.answered.load(Ordering::Acquire) && self.reply.wanted()
    }
}

/// A hedge to send at `at` (ordered by time, then by arrival).
struct Pending {
    at: Instant,
    seq: u64,
    task: Task,
    submitted: Instant,
    deadline: Option<Duration>,
    reply: Arc<First>,
}

impl PartialEq for Pending {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}

impl Eq for Pending {}

impl PartialOrd for Pending {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Pending {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.at, self.seq).cmp(&(other.at, other.seq))
    }
}

#[derive(Default)]
struct State {
    pending: BinaryHeap<Reverse<Pending>>,
    seq: u64,
    /// Set when the [`Hedger`] is dropped: its thread stops, sending nothing more.
    closed: bool,
}

struct Shared {
    state: Mutex<State>,
    ready: Condvar,
}

/// Where a hedge goes (the GPU executor's queue).
pub(crate) type Sink = Box<dyn Fn(Batch) + Send + Sync>;

/// The thread that sends each hedge when its time comes, unless its query was answered.
pub(crate) struct Hedger {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
    /// Whose options say when to hedge, and whose counters count the hedges.
    router: Arc<Router>,
}

impl Hedger {
    /// Starts the thread; hedges go to `send`, and are counted in `router`'s counters.
    pub fn start(send: Sink, router: Arc<Router>) -> Hedger {
        let shared = Arc::new(Shared {
            state: Mutex::default(),
            ready: Condvar::new(),
        });
        let (s, counted) = (shared.clone(), router.clone());
        let thread = std::thread::Builder::new()
            .name("warpsearch-hedge".into())
            .spawn(move || run(&s, &send, &counted))
            .expect("a thread can be started");
        Hedger {
            shared,
            thread: Some(thread),
            router,
        }
    }

    /// Watches `task` (a whole query, submitted at `submitted`, now given to the CPU with the reply
    /// this returns): its copy goes to the GPU, through `send`, if the query has no answer
    /// `hedge_after` times `gpu_seconds` after `since`. The copy teaches the cost model nothing, and
    /// no CPU thread takes it back from the GPU's queue.
    pub fn watch(
        &self,
        task: &Task,
        gpu_seconds: f64,
        since: Instant,
        submitted: Instant,
        deadline: Option<Duration>,
        reply: Arc<dyn Reply>,
    ) -> Arc<First> {
        let first = Arc::new(First::new(reply, self.router.clone()));
        let copy = Task {
            learn: None,
            copy: true,
            ..task.clone()
        };
        let after = self.router.options.hedge_after.unwrap_or(0.0).max(0.0);
        let delay =
            Duration::from_secs_f64((gpu_seconds * after).min(3600.0)).saturating_sub(since.elapsed());
        self.after(delay, copy, submitted, deadline, first.clone());
        first
    }

    /// Sends `task` (a whole query, submitted at `submitted`) through `send` after `delay` from now,
    /// with `reply`, unless `reply` has its answer by then.
    pub fn after(
        &self,
        delay: Duration,
        task: Task,
        submitted: Instant,
        deadline: Option<Duration>,
        reply: Arc<First>,
    ) {
        let mut st = lock(&self.shared.state);
        st.seq += 1;
        let seq = st.seq;
        let at = Instant::now() + delay;
        // Only a hedge earlier than every one waiting changes when the thread must wake.
        let sooner = st.pending.peek().is_none_or(|Reverse(p)| at < p.at);
        st.pending.push(Reverse(Pending {
            at,
            seq,
            task,
            submitted,
            deadline,
            reply,
        }));
        drop(st);
        if sooner {
            self.shared.ready.notify_one();
        }
    }
}

impl Drop for Hedger {
    fn drop(&mut self) {
        lock(&self.shared.state).closed = true;
        self.shared.ready.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The hedger's thread: sends what is due, sleeps until the next is.
fn run(s: &Shared, send: &Sink, router: &Router) {
    let mut st = lock(&s.state);
    loop {
        if st.closed {
            return;
        }
        let now = Instant::now();
        let mut due = Vec::new();
        while st.pending.peek().is_some_and(|Reverse(p)| p.at <= now) {
            let Reverse(p) = st.pending.pop().expect("peeked");
            // A query already answered needs no hedge.
            if p.reply.wanted() {
                due.push(p);
            }
        }
        if due.is_empty() {
            st = match st.pending.peek().map(|Reverse(p)| p.at) {
                Some(at) => {
                    s.ready
                        .wait_timeout(st, at.saturating_duration_since(now))
                        .expect("no engine thread panics under a lock")
                        .0
                }
                None => s.ready.wait(st).expect("no engine thread panics under a lock"),
            };
            continue;
        }
        drop(st);
        bump(&router.counters.hedges, due.len() as u64);
        for p in due {
            p.reply.hedged.store(true, Ordering::Release);
            let reply: Arc<dyn Reply> = p.reply;
            send(Batch::tasks(vec![p.task], p.submitted, p.deadline, reply));
        }
        st = lock(&s.state);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::Items;
    use crate::hybrid::HybridOptions;
    use std::sync::mpsc::{channel, Receiver};
    use warpsearch_query::{Answer, Mode, Query, Request};

    fn router() -> Arc<Router> {
        Arc::new(Router::new(HybridOptions::default(), true, false))
    }

    fn task(id: u64) -> Task {
        Task::whole(id, Request::new(Query::from_ids(&[Some(1)]), Mode::Or, 10))
    }

    fn done(id: u64, served_by: ServedBy) -> Done {
        Done {
            id,
            result: Ok(Answer {
                hits: Vec::new(),
                latency: Duration::ZERO,
            }),
            served_by,
            missed_deadline: false,
        }
    }

    /// A hedger whose hedges arrive on the receiver.
    fn hedger(router: &Arc<Router>) -> (Hedger, Receiver<Batch>) {
        let (tx, rx) = channel();
        let tx = Mutex::new(tx);
        let send: Sink = Box::new(move |b| lock(&tx).send(b).unwrap());
        (Hedger::start(send, router.clone()), rx)
    }

    #[test]
    fn the_first_answer_goes_on_and_the_second_is_dropped() {
        let router = router();
        let (tx, rx) = channel();
        let first = First::new(Arc::new(tx), router.clone());
        assert!(first.wanted());
        first.send(done(7, ServedBy::Cpu));
        assert!(!first.wanted());
        first.send(done(7, ServedBy::Gpu));
        let got: Vec<Done> = rx.try_iter().collect();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].served_by, ServedBy::Cpu);
    }

    #[test]
    fn a_query_unanswered_when_its_time_comes_is_sent_again_and_counted() {
        let router = router();
        let (hedger, hedges) = hedger(&router);
        let (tx, answers) = channel();
        let first = Arc::new(First::new(Arc::new(tx), router.clone()));
        hedger.after(Duration::ZERO, task(3), Instant::now(), None, first.clone());
        let batch = hedges
            .recv_timeout(Duration::from_secs(10))
            .expect("a hedge sent");
        let Items::Tasks(tasks) = &batch.items else {
            panic!("a task")
        };
        assert_eq!(tasks[0].id, 3);
        // The GPU's copy answers first: it goes on, counted as a hedge won; the CPU's is dropped.
        batch.reply.send(done(3, ServedBy::Gpu));
        first.send(done(3, ServedBy::Cpu));
        assert_eq!(answers.try_iter().count(), 1);
        drop(hedger);
        let stats = router.counters.take();
        assert_eq!((stats.hedges, stats.hedges_won), (1, 1));
    }

    #[test]
    fn a_query_the_cpu_takes_from_the_gpus_queue_is_hedged_alone() {
        let router = Arc::new(Router::new(
            HybridOptions {
                hedge_after: Some(0.0),
                ..HybridOptions::default()
            },
            true,
            false,
        ));
        let (hedger, hedges) = hedger(&router);
        let (tx, answers) = channel();
        let reply: Arc<dyn Reply> = Arc::new(tx);
        // Two queries taken together are left as they are: nothing is sent again.
        let two = Batch::tasks(vec![task(1), task(2)], Instant::now(), None, reply.clone());
        let two = crate::hybrid::route::hedge_stolen(&router, Some(&hedger), two);
        two.reply.send(done(1, ServedBy::Cpu));
        // One query: its copy goes to the GPU, and of the two answers the first goes on.
        let one = Batch::tasks(vec![task(3)], Instant::now(), None, reply);
        let one = crate::hybrid::route::hedge_stolen(&router, Some(&hedger), one);
        let copy = hedges
            .recv_timeout(Duration::from_secs(10))
            .expect("the copy sent");
        assert_eq!(copy.len(), 1);
        one.reply.send(done(3, ServedBy::Cpu));
        copy.reply.send(done(3, ServedBy::Gpu));
        drop(hedger);
        assert!(hedges.try_recv().is_err(), "only the single query is sent again");
        let ids: Vec<u64> = answers.try_iter().map(|d| d.id).collect();
        assert_eq!(ids, [1, 3]);
        let stats = router.counters.take();
        assert_eq!((stats.hedges, stats.hedges_won), (1, 0));
    }

    #[test]
    fn a_query_answered_in_time_is_not_sent_again() {
        let router = router();
        let (hedger, hedges) = hedger(&router);
        let (tx, answers) = channel();
        let answered = Arc::new(First::new(Arc::new(tx.clone()), router.clone()));
        let open = Arc::new(First::new(Arc::new(tx), router.clone()));
        // The first query's answer is in before its time comes; the second's is not.
        answered.send(done(2, ServedBy::Cpu));
        hedger.after(Duration::ZERO, task(2), Instant::now(), None, answered.clone());
        hedger.after(Duration::ZERO, task(1), Instant::now(), None, open.clone());
        let batch = hedges
            .recv_timeout(Duration::from_secs(10))
            .expect("the late query's hedge");
        assert_eq!(batch.len(), 1);
        let Items::Tasks(tasks) = &batch.items else {
            panic!("a task")
        };
        assert_eq!(tasks[0].id, 1, "only the unanswered query is sent again");
        drop(hedger);
        assert!(hedges.try_recv().is_err());
        assert_eq!(answers.try_iter().count(), 1);
        assert_eq!(router.counters.take().hedges, 1);
    }
}
