//! The GPU backend: one thread answers submissions in calls on the GPU searcher (with the policy of
//! its list cache). A call takes every submission waiting when a pipeline slot is free, up to a kernel
//! batch's worth of queries (a submission is never cut), while the calls before it compute; each
//! call's answers leave as soon as its batches are back, so that a query waits neither for a batch to
//! fill nor behind an unrelated long one. A submission whose reply is no longer wanted when a call
//! takes it is dropped. A caller that waits for a whole batch runs its call on its own thread instead,
//! with the searcher locked: a closed loop's million queries then cost no copy, no hand-over and no
//! per-answer delivery. Either way what the GPU fails is answered on the CPU in the same call
//! ([`on_cpu_where_failed`]), exactly once.

mod cached;

use std::collections::VecDeque;
use std::sync::mpsc::Sender;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use warpsearch_cpu::CpuSearcher;
use warpsearch_gpu::{CallId, GpuError, GpuMemory, GpuSearcher, GpuStats, MemoryProbe};
use warpsearch_index::Result;
use warpsearch_query::{Answer, Request};

use crate::cache::CacheCtl;
use crate::notes::{Failures, Notes};
use crate::reply::{lock, Done, Reply, ServedBy};

/// Queries waiting for the GPU, with where their answers go.
struct Submission {
    first_id: u64,
    requests: Vec<Request>,
    submitted: Instant,
    deadline: Option<Duration>,
    reply: Arc<dyn Reply>,
}

#[derive(Default)]
struct State {
    queue: VecDeque<Submission>,
    /// Set when the [`GpuAlone`] is dropped: the thread finishes the queue and stops.
    closed: bool,
}

struct Shared {
    cpu: CpuSearcher,
    cache: Option<Arc<CacheCtl>>,
    /// Held for a call: by the GPU's thread, or by a caller of [`GpuAlone::search_batch`].
    searcher: Mutex<GpuSearcher>,
    state: Mutex<State>,
    ready: Condvar,
    stats: Mutex<GpuStats>,
    notes: Arc<Notes>,
}

/// The GPU backend's thread and its queue.
pub(crate) struct GpuAlone {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
    memory: MemoryProbe,
    describe: String,
    device: usize,
}

impl GpuAlone {
    /// Starts the thread that runs `gpu` (with its list cache's policy `cache`); what it fails is
    /// answered on `cpu` and noted in `notes`.
    pub fn start(
        gpu: GpuSearcher,
        cache: Option<Arc<CacheCtl>>,
        cpu: CpuSearcher,
        notes: Arc<Notes>,
    ) -> GpuAlone {
        let device = gpu.gpu().ordinal();
        let describe = format!(
            "gpu {device} ({}){}",
            gpu.gpu().describe(),
            cache.as_ref().map_or(String::new(), |c| format!(
                ", list cache {} λ {}",
                c.policy().name(),
                c.ratio()
            ))
        );
        let memory = gpu.memory_probe();
        let shared = Arc::new(Shared {
            cpu,
            cache,
            searcher: Mutex::new(gpu),
            state: Mutex::default(),
            ready: Condvar::new(),
            stats: Mutex::default(),
            notes,
        });
        let s = shared.clone();
        let thread = std::thread::Builder::new()
            .name("warpsearch-gpu".into())
            .spawn(move || dispatch(&s))
            .expect("a thread can be started");
        GpuAlone {
            shared,
            thread: Some(thread),
            memory,
            describe,
            device,
        }
    }

    /// The CUDA device it runs on.
    pub fn device(&self) -> usize {
        self.device
    }

    /// The backend in a few words.
    pub fn describe(&self) -> &str {
        &self.describe
    }

    /// The list cache's policy, when the GPU caches part of the index.
    pub fn cache(&self) -> Option<&Arc<CacheCtl>> {
        self.shared.cache.as_ref()
    }

    /// The GPU's memory now (None where the driver does not answer).
    pub fn memory(&self) -> Option<GpuMemory> {
        self.memory.read().ok()
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
        lock(&self.shared.state).queue.push_back(Submission {
            first_id,
            requests,
            submitted: Instant::now(),
            deadline,
            reply,
        });
        self.shared.ready.notify_one();
    }

    /// Answers every request (submitted at once, without a deadline) on this thread, in order.
    pub fn search_batch(&self, requests: &[Request]) -> Vec<Result<Answer>> {
        let mut gpu = lock(&self.shared.searcher);
        let answers = guarded(&self.shared, &mut gpu, requests);
        lock(&self.shared.stats).add(&gpu.take_stats());
        answers.into_iter().map(|(a, _)| a).collect()
    }

    /// Runs `f` on the searcher between calls.
    pub fn with_searcher(&self, f: impl FnOnce(&mut GpuSearcher)) {
        f(&mut lock(&self.shared.searcher));
    }

    /// The GPU's counters since the last call.
    pub fn take_stats(&self) -> GpuStats {
        std::mem::take(&mut *lock(&self.shared.stats))
    }
}

impl Drop for GpuAlone {
    /// Answers what is queued, then stops the thread.
    fn drop(&mut self) {
        lock(&self.shared.state).closed = true;
        self.shared.ready.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Whether the GPU thread waits for submissions.
#[derive(Clone, Copy, PartialEq)]
enum Wait {
    /// Until some arrive or the backend is dropped (nothing is on the GPU).
    Forever,
    /// Not at all (calls are on the GPU: it goes back to collect them).
    No,
}

/// The submissions of the GPU thread's next call, up to `batch` queries (a submission is never cut);
/// None where nothing came within `wait`, or the backend is dropped and nothing is left.
fn next(s: &Shared, batch: usize, wait: Wait) -> Option<Vec<Submission>> {
    let mut st = lock(&s.state);
    loop {
        // Submissions whose answers are no longer wanted are dropped, unanswered.
        st.queue.retain(|sub| sub.reply.wanted());
        if !st.queue.is_empty() {
            let mut taken = Vec::new();
            let mut queries = 0;
            while let Some(sub) = st.queue.front() {
                if queries > 0 && queries + sub.requests.len() > batch {
                    break;
                }
                queries += sub.requests.len();
                taken.extend(st.queue.pop_front());
            }
            return Some(taken);
        }
        if st.closed || wait == Wait::No {
            return None;
        }
        st = s.ready.wait(st).expect("no engine thread panics under a lock");
    }
}

/// Where a call's answers go: each submission's first id, size, submission time, deadline and reply.
struct Addressee {
    first_id: u64,
    queries: usize,
    submitted: Instant,
    deadline: Option<Duration>,
    reply: Arc<dyn Reply>,
}

/// A call's answers, in its requests' order, for the delivering thread.
type Delivery = (Vec<Addressee>, Instant, Vec<(Result<Answer>, ServedBy)>);

/// One call's submissions: where its answers go, when it was taken from the queue, and its requests
/// (the CPU answers those the GPU fails).
struct Call {
    to: Vec<Addressee>,
    taken: Instant,
    requests: Vec<Request>,
}

/// Queries of a call at most that the GPU thread answers itself rather than through the delivering
/// thread: a few answers cost less than waking it, and arrive sooner.
const DELIVER_HERE: usize = 256;

/// The GPU's thread: calls until the backend is dropped and nothing is left. Without a list cache,
/// whatever has arrived goes to the GPU as soon as a pipeline slot is free, while earlier calls
/// compute, and each call's answers leave as soon as its batches are back, whatever the calls before
/// it: at a light load a query is a call of its own, under a heavy one the queue fills the next call
/// while the slots are busy. With a cache a call runs whole (it pipelines its own chunks). Answers are
/// handed to a thread of their own, so that delivering one call's answers overlaps the next.
fn dispatch(s: &Shared) {
    let (batch, slots) = {
        let gpu = lock(&s.searcher);
        (gpu.batch_size().max(1), gpu.slots())
    };
    let (tx, rx) = std::sync::mpsc::channel::<Delivery>();
    let deliverer = std::thread::Builder::new()
        .name("warpsearch-gpu-deliver".into())
        .spawn(move || rx.into_iter().for_each(deliver))
        .expect("a thread can be started");
    if s.cache.is_some() {
        while let Some(subs) = next(s, batch, Wait::Forever) {
            let call = addressees(subs);
            let mut gpu = lock(&s.searcher);
            let answers = guarded(s, &mut gpu, &call.requests);
            // Counted before the answers go, so that a caller woken by the last reads them with it.
            lock(&s.stats).add(&gpu.take_stats());
            drop(gpu);
            if tx.send((call.to, call.taken, answers)).is_err() {
                break;
            }
        }
    } else {
        continuous(s, batch, slots, &tx);
    }
    drop(tx);
    let _ = deliverer.join();
}

/// The GPU thread's loop without a list cache ([`dispatch`]): up to `slots` batches on the GPU. While
/// any is, the thread polls their events and the queue without sleeping (a sleep's wake-up, tens of
/// microseconds, would be added to every answer): it keeps one core busy only while queries run.
fn continuous(s: &Shared, batch: usize, slots: usize, tx: &Sender<Delivery>) {
    // Calls handed to the GPU and not yet answered.
    let mut on_gpu: Vec<(CallId, Call)> = Vec::new();
    loop {
        // Calls whose answers are in (None: the GPU panicked on them).
        let mut done = Vec::new();
        let mut gpu = lock(&s.searcher);
        if !on_gpu.is_empty() {
            if caught(|| gpu.poll()).is_none() {
                // Which batches were lost is unknown: every call still out is waited for alone.
                for (id, c) in on_gpu.drain(..) {
                    done.push((c, caught(|| gpu.wait(id))));
                }
            }
            while let Some((id, answers)) = caught(|| gpu.take_done()).flatten() {
                if let Some(at) = on_gpu.iter().position(|(c, _)| *c == id) {
                    let (_, c) = on_gpu.swap_remove(at);
                    done.push((c, Some(answers)));
                }
            }
        }
        let room = gpu.batches_in_flight() < slots;
        if !done.is_empty() {
            // Counted before the answers go (a call's counters, its submission's included, are in by
            // then), and not at every turn of the polling loop.
            lock(&s.stats).add(&gpu.take_stats());
        }
        drop(gpu);
        for (c, answers) in done {
            let answers = match answers {
                Some(answers) => on_cpu_where_failed(s, &c.requests, answers),
                None => panicked(s, &c.requests),
            };
            if c.requests.len() <= DELIVER_HERE {
                deliver((c.to, c.taken, answers));
            } else if tx.send((c.to, c.taken, answers)).is_err() {
                return;
            }
        }
        if !room {
            // Every slot is busy: the next call waits for one to finish (and grows meanwhile).
            std::thread::yield_now();
            continue;
        }
        let wait = match on_gpu.is_empty() {
            true => Wait::Forever,
            false => Wait::No,
        };
        let Some(subs) = next(s, batch, wait) else {
            if on_gpu.is_empty() {
                // Dropped, with nothing queued and nothing on the GPU.
                return;
            }
            std::thread::yield_now();
            continue;
        };
        let call = addressees(subs);
        let mut gpu = lock(&s.searcher);
        let id = caught(|| gpu.submit_in(&call.requests, None));
        drop(gpu);
        match id {
            Some(id) => on_gpu.push((id, call)),
            None => {
                let answers = panicked(s, &call.requests);
                if tx.send((call.to, call.taken, answers)).is_err() {
                    return;
                }
            }
        }
    }
}

/// `f`, or None where it panics (its call is then answered on the CPU: nothing is lost).
fn caught<T>(f: impl FnOnce() -> T) -> Option<T> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).ok()
}

/// `subs` as one call, taken now: where their answers go and their requests.
fn addressees(subs: Vec<Submission>) -> Call {
    let taken = Instant::now();
    let mut to = Vec::with_capacity(subs.len());
    let mut requests: Vec<Request> = Vec::new();
    for sub in subs {
        to.push(Addressee {
            first_id: sub.first_id,
            queries: sub.requests.len(),
            submitted: sub.submitted,
            deadline: sub.deadline,
            reply: sub.reply,
        });
        if requests.is_empty() {
            requests = sub.requests;
        } else {
            requests.extend(sub.requests);
        }
    }
    Call { to, taken, requests }
}

/// Hands each submission its answers, at once.
fn deliver((to, taken, answers): Delivery) {
    let mut answers = answers.into_iter();
    for a in to {
        // The time the submission waited for its call counts in its queries' latency.
        let waited = taken - a.submitted;
        let missed = a.deadline.is_some_and(|d| a.submitted.elapsed() > d);
        let waiting = |result: Result<Answer>| {
            result.map(|mut answer| {
                answer.latency += waited;
                answer
            })
        };
        let mine = answers.by_ref().take(a.queries);
        a.reply.send_many(
            mine.enumerate()
                .map(|(i, (result, by))| Done {
                    id: a.first_id + i as u64,
                    result: waiting(result),
                    served_by: by,
                    missed_deadline: missed,
                })
                .collect(),
        );
    }
}

/// [`call`], with a call that panics answered on the CPU, whole: nothing is lost.
fn guarded(s: &Shared, gpu: &mut GpuSearcher, requests: &[Request]) -> Vec<(Result<Answer>, ServedBy)> {
    caught(|| call(s, gpu, requests)).unwrap_or_else(|| panicked(s, requests))
}

/// Every request of a call that panicked, answered on the CPU.
fn panicked(s: &Shared, requests: &[Request]) -> Vec<(Result<Answer>, ServedBy)> {
    let n = requests.len() as u64;
    s.notes.gpu_failed(n);
    s.notes.fallback(
        n,
        format!("the GPU backend panicked: {n} queries answered on the CPU"),
    );
    requests
        .iter()
        .map(|r| (s.cpu.answer(r), ServedBy::Cpu))
        .collect()
}

/// Answers every request of one call, in order: on the GPU, and on the CPU what the GPU fails.
fn call(s: &Shared, gpu: &mut GpuSearcher, requests: &[Request]) -> Vec<(Result<Answer>, ServedBy)> {
    match &s.cache {
        // The backend is the GPU's, whose cache the CPU completes: its answers are not told apart.
        Some(ctl) => {
            let mut failures = Failures::default();
            let out = cached::search_batch(gpu, &s.cpu, ctl, requests, &mut failures)
                .into_iter()
                .map(|a| (a, ServedBy::Gpu))
                .collect();
            failures.note(&s.notes);
            out
        }
        None => on_cpu_where_failed(s, requests, gpu.search_batch(requests)),
    }
}

/// The GPU's answers to `requests`, with those it failed answered on the CPU (each reason noted once
/// with its count).
fn on_cpu_where_failed(
    s: &Shared,
    requests: &[Request],
    answers: Vec<std::result::Result<Answer, GpuError>>,
) -> Vec<(Result<Answer>, ServedBy)> {
    let mut failures = Failures::default();
    let out = requests
        .iter()
        .zip(answers)
        .map(|(request, answer)| match answer {
            Ok(a) => (Ok(a), ServedBy::Gpu),
            Err(e) => {
                failures.add(&e);
                (s.cpu.answer(request), ServedBy::Cpu)
            }
        })
        .collect();
    failures.note(&s.notes);
    out
}
