//! The CPU backend's threads. Submissions wait in one queue, first come, first served (a submission's
//! queries never overtake an earlier one's: letting them doubled a server's p99); every free thread
//! claims the next query of the oldest submission with one atomic step, so that a submission of 1,000
//! queries is answered by all threads at once. Against a pool task per query (rayon's injector, an
//! `Arc` per query) this leaves a query's overhead at one shared counter. A large submission (a closed
//! loop's) is claimed and answered a few queries at a time, so that the threads do not take turns on
//! its counters at every query; a thread with nothing to do watches the queue briefly before it
//! sleeps, so that a query arriving meanwhile waits for no wake-up. A submission whose reply is no longer
//! wanted has its unclaimed queries dropped when a thread reaches it.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use warpsearch_cpu::CpuSearcher;
use warpsearch_index::IndexError;
use warpsearch_query::Request;

use crate::reply::{lock, Done, Reply, ServedBy};

/// One submission's queries.
struct Job {
    /// The next query to claim (beyond the last: every query claimed); on a cache line of its own,
    /// since every thread writes it and reads the fields below.
    next: Padded<AtomicUsize>,
    first_id: u64,
    requests: Vec<Request>,
    /// Queries a thread claims at once.
    grain: usize,
    submitted: Instant,
    deadline: Option<Duration>,
    reply: Arc<dyn Reply>,
}

/// A value alone on its cache line (two lines: adjacent-line prefetch pairs them).
#[repr(align(128))]
struct Padded<T>(T);

impl Job {
    fn claimed(&self) -> bool {
        self.next.0.load(Ordering::Relaxed) >= self.requests.len()
    }
}

/// How long a thread with nothing to do watches the queue before it sleeps.
const WATCH: Duration = Duration::from_micros(50);

#[derive(Default)]
struct Queue {
    state: Mutex<State>,
    ready: Condvar,
    /// Submissions ever queued: a watching thread sees a new one without the lock.
    pushed: AtomicUsize,
}

#[derive(Default)]
struct State {
    /// Submissions with queries to claim, oldest first (a claimed one is dropped when reached).
    jobs: VecDeque<Arc<Job>>,
    /// Set when the [`CpuWorkers`] are dropped: the threads finish the queue and stop.
    closed: bool,
}

/// The threads and their queue.
pub(crate) struct CpuWorkers {
    queue: Arc<Queue>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl CpuWorkers {
    /// `threads` threads (at least one) answering on `cpu`.
    pub fn start(cpu: &CpuSearcher, threads: usize) -> std::io::Result<CpuWorkers> {
        let queue = Arc::new(Queue::default());
        let threads = (0..threads.max(1))
            .map(|t| {
                let (queue, cpu) = (queue.clone(), cpu.clone());
                std::thread::Builder::new()
                    .name(format!("warpsearch-cpu-{t}"))
                    .spawn(move || work(&queue, &cpu))
            })
            .collect::<std::io::Result<_>>()?;
        Ok(CpuWorkers { queue, threads })
    }

    /// How many threads answer queries.
    pub fn threads(&self) -> usize {
        self.threads.len()
    }

    /// Queues `requests` (not empty: [`crate::Engine::submit`] passes none); query i's answer goes
    /// to `reply` with id `first_id + i`.
    pub fn submit(
        &self,
        first_id: u64,
        requests: Vec<Request>,
        deadline: Option<Duration>,
        reply: Arc<dyn Reply>,
    ) {
        // As many threads as the submission has queries (a busy thread looks at the queue again when
        // its query is answered): a submission of 2 queries wakes 2 of 16 sleeping threads, not all.
        let wake = requests.len().min(self.threads.len());
        // A few queries a claim once every thread has many to take (at most 16: a claim's answers
        // wait for one another).
        let grain = (requests.len() / (64 * self.threads.len())).clamp(1, 16);
        let job = Arc::new(Job {
            next: Padded(AtomicUsize::new(0)),
            first_id,
            requests,
            grain,
            submitted: Instant::now(),
            deadline,
            reply,
        });
        lock(&self.queue.state).jobs.push_back(job);
        self.queue.pushed.fetch_add(1, Ordering::Release);
        for _ in 0..wake {
            self.queue.ready.notify_one();
        }
    }
}

/// Answers what is queued, then stops the threads.
impl Drop for CpuWorkers {
    fn drop(&mut self) {
        lock(&self.queue.state).closed = true;
        self.queue.ready.notify_all();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

impl Queue {
    /// The oldest submission with a query to claim; None once closed and empty.
    fn oldest(&self) -> Option<Arc<Job>> {
        let mut watched = false;
        let mut state = lock(&self.state);
        loop {
            while state.jobs.front().is_some_and(|j| j.claimed()) {
                state.jobs.pop_front();
            }
            if let Some(job) = state.jobs.front() {
                return Some(job.clone());
            }
            if state.closed {
                return None;
            }
            if !watched {
                // Watch for a submission without the lock for a while, then look again.
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
            watched = false;
        }
    }
}

/// A thread's loop: claims queries from its submission until it has none left, then takes the oldest
/// (which is the next one: a submission is only reached once every older one is claimed).
fn work(queue: &Queue, cpu: &CpuSearcher) {
    let mut current: Option<Arc<Job>> = None;
    loop {
        let job = match current.take() {
            Some(job) => job,
            None => match queue.oldest() {
                Some(job) => job,
                None => return,
            },
        };
        // A submission whose answers are no longer wanted: its queries not yet claimed are dropped
        // (claimed all at once, so that every thread moves on).
        if !job.reply.wanted() {
            job.next.0.fetch_max(job.requests.len(), Ordering::Relaxed);
            continue;
        }
        let first = job.next.0.fetch_add(job.grain, Ordering::Relaxed);
        let claimed = first..(first + job.grain).min(job.requests.len());
        if claimed.is_empty() {
            continue;
        }
        let answer = |i: usize| Done {
            id: job.first_id + i as u64,
            result: answer(cpu, &job.requests[i]),
            served_by: ServedBy::Cpu,
            missed_deadline: job.deadline.is_some_and(|d| job.submitted.elapsed() > d),
        };
        if claimed.len() == 1 {
            job.reply.send(answer(first));
        } else {
            job.reply.send_many(claimed.map(answer).collect());
        }
        current = Some(job);
    }
}

/// One query's answer; a panic answers it with an error and leaves the thread serving.
fn answer(cpu: &CpuSearcher, request: &Request) -> warpsearch_index::Result<warpsearch_query::Answer> {
    let run = std::panic::AssertUnwindSafe(|| cpu.answer(request));
    std::panic::catch_unwind(run).unwrap_or_else(|_| Err(IndexError::Invalid("the query panicked".into())))
}
