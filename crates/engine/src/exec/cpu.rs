//! The CPU executor's threads. Batches wait in one queue, first come, first served (a batch's queries
//! never overtake an earlier one's: letting them doubled a server's p99); every free thread claims the
//! next query of the oldest batch with one atomic step, so that a batch of 1,000 queries (or a split
//! query's parts) is answered by all threads at once. Against a pool task per query (rayon's injector,
//! an `Arc` per query) this leaves a query's overhead at one shared counter. A large batch (a closed
//! loop's) is claimed and answered a few queries at a time, so that the threads do not take turns on
//! its counters at every query; a thread with nothing to do first takes the oldest batch the GPU's
//! queue holds where the scheduler lets it ([`CpuExecutor::set_steal`]), then watches the queue
//! briefly before it sleeps, so that a query arriving meanwhile waits for no wake-up. A batch
//! whose reply is no longer wanted has its unclaimed queries dropped when a thread reaches it.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

use warpsearch_cpu::CpuSearcher;
use warpsearch_index::{IndexError, Result};
use warpsearch_query::{Answer, DocRange, Mode, Part, Request};

use super::{Batch, Items, Learn, Task};
use crate::cost::Features;
use crate::reply::{lock, Done, ServedBy};

/// One batch's queries.
struct Job {
    /// The next query to claim (beyond the last: every query claimed); on a cache line of its own,
    /// since every thread writes it and reads the fields below.
    next: Padded<AtomicUsize>,
    batch: Batch,
    /// Queries a thread claims at once.
    grain: usize,
}

/// A value alone on its cache line (two lines: adjacent-line prefetch pairs them).
#[repr(align(128))]
struct Padded<T>(T);

impl Job {
    fn claimed(&self) -> bool {
        self.next.0.load(Ordering::Relaxed) >= self.batch.len()
    }
}

/// How long a thread with nothing to do watches the queue before it sleeps.
const WATCH: Duration = Duration::from_micros(50);

/// Whole-query measurements a thread gathers before it hands them to [`Learn::cpu`].
const OBSERVE_EVERY: u32 = 16;

/// Where a thread finds more work when the queue is empty: the GPU's queue, where the scheduler lets
/// the CPU take from it.
pub(crate) type Steal = Box<dyn Fn() -> Option<Batch> + Send + Sync>;

struct Queue {
    state: Mutex<State>,
    ready: Condvar,
    /// Batches ever queued: a watching thread sees a new one without the lock.
    pushed: AtomicUsize,
    /// Threads answering queries.
    threads: usize,
    /// Threads with nothing to do (watching the queue or asleep).
    idle: AtomicUsize,
    /// Tasks queued and not yet claimed, and their predicted nanoseconds on one core.
    waiting: AtomicUsize,
    backlog: AtomicU64,
    steal: OnceLock<Steal>,
    learn: OnceLock<Arc<dyn Learn>>,
}

#[derive(Default)]
struct State {
    /// Batches with queries to claim, oldest first (a claimed one is dropped when reached).
    jobs: VecDeque<Arc<Job>>,
    /// Set when the [`CpuExecutor`] is dropped: the threads finish the queue and stop.
    closed: bool,
}

/// The threads and their queue.
pub(crate) struct CpuExecutor {
    queue: Arc<Queue>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

/// A handle that queues batches for the CPU executor (the GPU executor's, for what the GPU fails).
#[derive(Clone)]
pub(crate) struct CpuQueue(Arc<Queue>);

impl CpuQueue {
    /// Queues `batch` (not empty).
    pub fn submit(&self, batch: Batch) {
        self.0.push(batch);
    }

    /// Up to `max` queries of the newest batch of whole queries, not yet claimed by a thread, as a
    /// batch of their own with the same reply (for the GPU, where the CPU lags).
    pub fn take(&self, max: usize) -> Option<Batch> {
        self.0.take(max)
    }

    /// Predicted seconds on one core of the tasks queued and not yet claimed.
    pub fn backlog(&self) -> f64 {
        self.0.backlog()
    }
}

impl CpuExecutor {
    /// `threads` threads (at least one) answering on `cpu`.
    pub fn start(cpu: &CpuSearcher, threads: usize) -> std::io::Result<CpuExecutor> {
        let queue = Arc::new(Queue {
            state: Mutex::default(),
            ready: Condvar::new(),
            pushed: AtomicUsize::new(0),
            threads: threads.max(1),
            idle: AtomicUsize::new(0),
            waiting: AtomicUsize::new(0),
            backlog: AtomicU64::new(0),
            steal: OnceLock::new(),
            learn: OnceLock::new(),
        });
        let threads = (0..threads.max(1))
            .map(|t| {
                let (queue, cpu) = (queue.clone(), cpu.clone());
                std::thread::Builder::new()
                    .name(format!("warpsearch-cpu-{t}"))
                    .spawn(move || work(&queue, &cpu))
            })
            .collect::<std::io::Result<_>>()?;
        Ok(CpuExecutor { queue, threads })
    }

    /// How many threads answer queries.
    pub fn threads(&self) -> usize {
        self.threads.len()
    }

    /// A handle that queues batches here.
    pub fn handle(&self) -> CpuQueue {
        CpuQueue(self.queue.clone())
    }

    /// Queues `batch` (not empty); its answers go to its reply.
    pub fn submit(&self, batch: Batch) {
        self.queue.push(batch);
    }

    /// Threads that a task queued now would find free: those idle, less the tasks queued before it
    /// that they have not claimed yet (a woken thread claims a moment after the task is queued).
    pub fn free(&self) -> usize {
        let idle = self.queue.idle.load(Ordering::Relaxed);
        idle.saturating_sub(self.queue.waiting.load(Ordering::Relaxed))
    }

    /// Predicted seconds on one core of the tasks queued and not yet claimed.
    pub fn backlog(&self) -> f64 {
        self.queue.backlog()
    }

    /// Lets a thread with nothing to do take a batch from `steal` (set once, before any batch).
    pub fn set_steal(&self, steal: Steal) {
        let _ = self.queue.steal.set(steal);
    }

    /// Hands what the threads measure to `learn` (set once, before any batch).
    pub fn set_learn(&self, learn: Arc<dyn Learn>) {
        let _ = self.queue.learn.set(learn);
    }
}

/// Answers what is queued, then stops the threads.
impl Drop for CpuExecutor {
    fn drop(&mut self) {
        lock(&self.queue.state).closed = true;
        self.queue.ready.notify_all();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// A task's predicted cost in the backlog's unit.
fn nanos(t: &Task) -> u64 {
    (t.cost.max(0.0) * 1e9) as u64
}

impl Queue {
    fn backlog(&self) -> f64 {
        self.backlog.load(Ordering::Relaxed) as f64 * 1e-9
    }

    fn push(&self, batch: Batch) {
        let n = batch.len();
        if n == 0 {
            return;
        }
        if let Items::Tasks(tasks) = &batch.items {
            self.waiting.fetch_add(tasks.len(), Ordering::Relaxed);
            self.backlog
                .fetch_add(tasks.iter().map(nanos).sum(), Ordering::Relaxed);
        }
        // As many threads as the batch has queries (a busy thread looks at the queue again when its
        // query is answered): a batch of 2 queries wakes 2 of 16 sleeping threads, not all.
        let wake = n.min(self.threads);
        // A few queries a claim once every thread has many to take (at most 16: a claim's answers
        // wait for one another).
        let grain = (n / (64 * self.threads)).clamp(1, 16);
        let job = Arc::new(Job {
            next: Padded(AtomicUsize::new(0)),
            batch,
            grain,
        });
        lock(&self.state).jobs.push_back(job);
        self.pushed.fetch_add(1, Ordering::Release);
        for _ in 0..wake {
            self.ready.notify_one();
        }
    }

    fn take(&self, max: usize) -> Option<Batch> {
        // Whole queries only: a split query's parts are the CPU's, and a GPU with a list cache
        // answers every query over all its documents.
        let whole = |j: &&Arc<Job>| match &j.batch.items {
            Items::Queries(_) => true,
            Items::Tasks(tasks) => tasks
                .iter()
                .all(|t| t.gather.is_none() && t.range == DocRange::ALL),
        };
        let job = lock(&self.state)
            .jobs
            .iter()
            .rev()
            .find(|j| !j.claimed() && whole(j))?
            .clone();
        let n = job.batch.len();
        // The threads work on the oldest batch: the newest one's first queries are the furthest
        // from them.
        let first = job.next.0.fetch_add(max.max(1), Ordering::Relaxed);
        let claimed = first..(first + max.max(1)).min(n);
        if claimed.is_empty() {
            return None;
        }
        self.unqueue(&job, claimed.clone());
        let b = &job.batch;
        let tasks = match &b.items {
            Items::Queries(requests) => claimed
                .map(|i| Task::whole(b.first_id + i as u64, requests[i].clone()))
                .collect(),
            Items::Tasks(tasks) => tasks[claimed].to_vec(),
        };
        Some(Batch::tasks(tasks, b.submitted, b.deadline, b.reply.clone()))
    }

    /// Queries `claimed` of `job` leave the queue (a thread or the GPU took them, or they are
    /// dropped): they no longer wait, and their cost leaves the backlog.
    fn unqueue(&self, job: &Job, claimed: std::ops::Range<usize>) {
        if let Items::Tasks(tasks) = &job.batch.items {
            let ns = tasks[claimed.clone()].iter().map(nanos).sum();
            self.waiting.fetch_sub(claimed.len(), Ordering::Relaxed);
            self.backlog.fetch_sub(ns, Ordering::Relaxed);
        }
    }

    /// The oldest batch with a query to claim; None once closed and empty.
    fn oldest(&self) -> Option<Arc<Job>> {
        let (mut watched, mut stole, mut idle) = (false, false, false);
        let mut state = lock(&self.state);
        let found = loop {
            while state.jobs.front().is_some_and(|j| j.claimed()) {
                state.jobs.pop_front();
            }
            if let Some(job) = state.jobs.front() {
                break Some(job.clone());
            }
            if state.closed {
                break None;
            }
            if !idle {
                idle = true;
                self.idle.fetch_add(1, Ordering::Relaxed);
            }
            if !stole {
                stole = true;
                if let Some(steal) = self.steal.get() {
                    drop(state);
                    if let Some(batch) = steal() {
                        self.push(batch);
                    }
                    state = lock(&self.state);
                    continue;
                }
            }
            if !watched {
                // Watch for a batch without the lock for a while, then look again.
                watched = true;
                let seen = self.pushed.load(Ordering::Acquire);
                drop(state);
                let since = Instant::now();
                while self.pushed.load(Ordering::Acquire) == seen && since.elapsed() < WATCH {
                    std::hint::spin_loop();
                }
                state = lock(&self.state);
                continue;
            }
            state = self
                .ready
                .wait(state)
                .expect("no engine thread panics under a lock");
            (watched, stole) = (false, false);
        };
        if idle {
            self.idle.fetch_sub(1, Ordering::Relaxed);
        }
        found
    }
}

/// A thread's measurements not yet handed over.
#[derive(Default)]
struct Seen {
    queries: Vec<(Mode, Features, f64)>,
    tasks: u32,
    seconds: f64,
}

impl Seen {
    fn hand_over(&mut self, queue: &Queue) {
        if self.tasks == 0 {
            return;
        }
        if let Some(learn) = queue.learn.get() {
            learn.cpu(&self.queries, self.tasks, self.seconds);
        }
        self.queries.clear();
        (self.tasks, self.seconds) = (0, 0.0);
    }
}

/// A thread's loop: claims queries from its batch until it has none left, then takes the oldest
/// (which is the next one: a batch is only reached once every older one is claimed).
fn work(queue: &Queue, cpu: &CpuSearcher) {
    let mut current: Option<Arc<Job>> = None;
    let mut seen = Seen::default();
    loop {
        let job = match current.take() {
            Some(job) => job,
            None => {
                // Going idle, perhaps: the measurements go first.
                seen.hand_over(queue);
                match queue.oldest() {
                    Some(job) => job,
                    None => return,
                }
            }
        };
        let batch = &job.batch;
        let n = batch.len();
        // A batch whose answers are no longer wanted: its queries not yet claimed are dropped
        // (claimed all at once, so that every thread moves on).
        if !batch.reply.wanted() {
            let from = job.next.0.fetch_max(n, Ordering::Relaxed);
            if from < n {
                queue.unqueue(&job, from..n);
            }
            continue;
        }
        let first = job.next.0.fetch_add(job.grain, Ordering::Relaxed);
        let claimed = first..(first + job.grain).min(n);
        if claimed.is_empty() {
            continue;
        }
        let missed = batch.missed();
        if let Items::Tasks(_) = &batch.items {
            queue.unqueue(&job, claimed.clone());
        }
        let mut one = |i: usize| match &batch.items {
            Items::Queries(requests) => Done {
                id: batch.first_id + i as u64,
                result: answer(cpu, &requests[i]),
                served_by: ServedBy::Cpu,
                missed_deadline: missed,
            },
            Items::Tasks(tasks) => run(cpu, &tasks[i], batch, &mut seen),
        };
        if claimed.len() == 1 {
            batch.reply.send(one(first));
        } else {
            batch.reply.send_many(claimed.map(&mut one).collect());
        }
        if seen.tasks >= OBSERVE_EVERY {
            seen.hand_over(queue);
        }
        current = Some(job);
    }
}

/// One task: its documents searched from the best k-th score its query's other parts have found.
fn run(cpu: &CpuSearcher, task: &Task, batch: &Batch, seen: &mut Seen) -> Done {
    let started = Instant::now();
    let part = Part {
        range: task.range,
        floor: task.gather.as_ref().map_or(f32::NEG_INFINITY, |g| g.floor()),
    };
    let request = &task.request;
    let result = caught(|| cpu.search_part(request, request.mode, part));
    let seconds = started.elapsed().as_secs_f64();
    if let Some(features) = task.learn {
        if !request.query.matches_nothing(request.mode) {
            seen.queries.push((request.mode, features, seconds));
        }
    }
    seen.tasks += 1;
    seen.seconds += seconds;
    Done {
        id: task.id,
        result: result.map(|hits| Answer {
            hits,
            latency: batch.submitted.elapsed(),
        }),
        served_by: ServedBy::Cpu,
        missed_deadline: batch.missed(),
    }
}

/// `f`'s result; a panic is an error, and leaves the thread serving.
fn caught<T>(f: impl FnOnce() -> Result<T>) -> Result<T> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f))
        .unwrap_or_else(|_| Err(IndexError::Invalid("the query panicked".into())))
}

/// One query's answer; a panic answers it with an error and leaves the thread serving.
fn answer(cpu: &CpuSearcher, request: &Request) -> Result<Answer> {
    caught(|| cpu.answer(request))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::gather::Gather;
    use crate::reply::Collect;
    use warpsearch_query::Query;

    /// A queue with no threads: what is queued stays until taken.
    fn queue() -> Queue {
        Queue {
            state: Mutex::default(),
            ready: Condvar::new(),
            pushed: AtomicUsize::new(0),
            threads: 1,
            idle: AtomicUsize::new(0),
            waiting: AtomicUsize::new(0),
            backlog: AtomicU64::new(0),
            steal: OnceLock::new(),
            learn: OnceLock::new(),
        }
    }

    fn task(id: u64) -> Task {
        Task {
            cost: 0.001,
            ..Task::whole(id, Request::new(Query::from_ids(&[Some(1)]), Mode::Or, 10))
        }
    }

    #[test]
    fn the_gpu_takes_whole_queries_only_and_each_once() {
        let q = queue();
        let reply = Arc::new(Collect::new(8));
        q.push(Batch::tasks(
            (0..5).map(task).collect(),
            Instant::now(),
            None,
            reply.clone(),
        ));
        // A split query's parts, queued after: the newest batch, but not the GPU's to take.
        let gather = Arc::new(Gather::new(9, 10, 2, Instant::now(), None, reply.clone()));
        let parts = (0..2)
            .map(|p| Task {
                range: DocRange::half_open(p * 10, p * 10 + 10),
                gather: Some(gather.clone()),
                ..task(9)
            })
            .collect();
        q.push(Batch::tasks(parts, Instant::now(), None, gather));
        assert_eq!(q.waiting.load(Ordering::Relaxed), 7);
        let first = q.take(3).expect("whole queries to take");
        let Items::Tasks(taken) = &first.items else {
            panic!("tasks")
        };
        assert_eq!(taken.iter().map(|t| t.id).collect::<Vec<_>>(), [0, 1, 2]);
        let second = q.take(3).expect("the rest");
        assert_eq!(second.len(), 2);
        // Every whole query taken once; the parts stay, and with them their cost.
        assert!(q.take(3).is_none());
        assert_eq!(q.waiting.load(Ordering::Relaxed), 2);
        assert_eq!(q.backlog.load(Ordering::Relaxed), 2 * nanos(&task(0)));
    }
}
