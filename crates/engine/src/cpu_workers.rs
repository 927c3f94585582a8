//! The CPU backend's threads. Submissions wait in one queue, first come, first served (a submission's
//! queries never overtake an earlier one's: letting them doubled a server's p99); every free thread
//! claims the next query of the oldest submission with one atomic step, so that a submission of 1,000
//! queries is answered by all threads at once. Against a pool task per query (rayon's injector, an
//! `Arc` per query) this leaves a query's overhead at one shared counter.

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
    first_id: u64,
    requests: Vec<Request>,
    /// The next query to claim (beyond the last: every query claimed).
    next: AtomicUsize,
    submitted: Instant,
    deadline: Option<Duration>,
    reply: Arc<dyn Reply>,
}

impl Job {
    fn claimed(&self) -> bool {
        self.next.load(Ordering::Relaxed) >= self.requests.len()
    }
}

#[derive(Default)]
struct Queue {
    state: Mutex<State>,
    ready: Condvar,
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

    /// Queues `requests`; query i's answer goes to `reply` with id `first_id + i`.
    pub fn submit(
        &self,
        first_id: u64,
        requests: Vec<Request>,
        deadline: Option<Duration>,
        reply: Arc<dyn Reply>,
    ) {
        if requests.is_empty() {
            return;
        }
        // As many threads as the submission has queries (a busy thread looks at the queue again when
        // its query is answered): a submission of 2 queries wakes 2 of 16 sleeping threads, not all.
        let wake = requests.len().min(self.threads.len());
        let job = Arc::new(Job {
            first_id,
            requests,
            next: AtomicUsize::new(0),
            submitted: Instant::now(),
            deadline,
            reply,
        });
        lock(&self.queue.state).jobs.push_back(job);
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
            state = self
                .ready
                .wait(state)
                .expect("no engine thread panics under a lock");
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
        let i = job.next.fetch_add(1, Ordering::Relaxed);
        let Some(request) = job.requests.get(i) else {
            continue;
        };
        // A panic in one query answers that query with an error and leaves the thread serving.
        let run = std::panic::AssertUnwindSafe(|| cpu.answer(request));
        let result = std::panic::catch_unwind(run)
            .unwrap_or_else(|_| Err(IndexError::Invalid("the query panicked".into())));
        job.reply.send(Done {
            id: job.first_id + i as u64,
            result,
            served_by: ServedBy::Cpu,
            missed_deadline: job.deadline.is_some_and(|d| job.submitted.elapsed() > d),
        });
        current = Some(job);
    }
}
