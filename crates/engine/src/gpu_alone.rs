//! The GPU backend: one thread owns the GPU searcher (and the policy of its list cache) and answers
//! submissions in calls. A call takes every submission waiting when the last call ends, up to a kernel
//! batch's worth of queries (a submission is never cut: a closed loop's million queries go in one call,
//! which pipelines its batches), so that a stream of single queries is batched as it arrives. What the
//! GPU fails is answered on the CPU in the same call, exactly once. A submission whose reply is no
//! longer wanted when a call takes it is dropped.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use warpsearch_cpu::CpuSearcher;
use warpsearch_gpu::{GpuError, GpuMemory, GpuSearcher, GpuStats, MemoryProbe};
use warpsearch_index::Result;
use warpsearch_query::{Answer, Request};

use crate::cache::CacheCtl;
use crate::notes::Notes;
use crate::reply::{lock, Done, Reply, ServedBy};

/// Queries waiting for the GPU, with where their answers go.
struct Submission {
    first_id: u64,
    requests: Vec<Request>,
    submitted: Instant,
    deadline: Option<Duration>,
    reply: Sink,
}

/// Where a submission's answers go: a [`Reply`], or, for a caller that waits for a whole batch, one
/// channel message with every answer in order (a closed loop of a million queries then costs no work
/// per answer beyond the GPU's own).
enum Sink {
    Each(Arc<dyn Reply>),
    Whole(std::sync::mpsc::SyncSender<Vec<Result<Answer>>>),
}

/// Work for the GPU's thread that needs the searcher itself.
type Control = Box<dyn FnOnce(&mut GpuSearcher) + Send>;

#[derive(Default)]
struct State {
    queue: VecDeque<Submission>,
    controls: VecDeque<Control>,
    /// Set when the [`GpuAlone`] is dropped: the thread finishes the queue and stops.
    closed: bool,
}

struct Shared {
    cpu: CpuSearcher,
    cache: Option<Arc<CacheCtl>>,
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
        let describe = format!(
            "gpu ({}){}",
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
            state: Mutex::default(),
            ready: Condvar::new(),
            stats: Mutex::default(),
            notes,
        });
        let s = shared.clone();
        let thread = std::thread::Builder::new()
            .name("warpsearch-gpu".into())
            .spawn(move || dispatch(&s, gpu))
            .expect("a thread can be started");
        GpuAlone {
            shared,
            thread: Some(thread),
            memory,
            describe,
        }
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

    /// Queues `requests`; query i's answer goes to `reply` with id `first_id + i`.
    pub fn submit(
        &self,
        first_id: u64,
        requests: Vec<Request>,
        deadline: Option<Duration>,
        reply: Arc<dyn Reply>,
    ) {
        self.queue(first_id, requests, deadline, Sink::Each(reply));
    }

    /// Answers every request (submitted at once, without a deadline) and waits for the answers, in
    /// order.
    pub fn search_batch(&self, requests: Vec<Request>) -> Vec<Result<Answer>> {
        let n = requests.len();
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        self.queue(0, requests, None, Sink::Whole(tx));
        rx.recv().unwrap_or_else(|_| {
            let lost = || {
                Err(warpsearch_index::IndexError::Invalid(
                    "the GPU backend lost a query".into(),
                ))
            };
            (0..n).map(|_| lost()).collect()
        })
    }

    fn queue(&self, first_id: u64, requests: Vec<Request>, deadline: Option<Duration>, reply: Sink) {
        if requests.is_empty() {
            if let Sink::Whole(tx) = reply {
                let _ = tx.send(Vec::new());
            }
            return;
        }
        lock(&self.shared.state).queue.push_back(Submission {
            first_id,
            requests,
            submitted: Instant::now(),
            deadline,
            reply,
        });
        self.shared.ready.notify_one();
    }

    /// Runs `f` on the GPU's thread between calls and waits for it.
    pub fn with_searcher(&self, f: impl FnOnce(&mut GpuSearcher) + Send + 'static) {
        let (tx, rx) = std::sync::mpsc::channel();
        let control: Control = Box::new(move |g| {
            f(g);
            let _ = tx.send(());
        });
        lock(&self.shared.state).controls.push_back(control);
        self.shared.ready.notify_one();
        // An error: the thread is gone (it panicked), and with it the work.
        let _ = rx.recv();
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

/// What the GPU's thread takes next.
enum Next {
    Call(Vec<Submission>),
    Control(Control),
    Stop,
}

fn next(s: &Shared, batch: usize) -> Next {
    let mut st = lock(&s.state);
    loop {
        if let Some(c) = st.controls.pop_front() {
            return Next::Control(c);
        }
        // Submissions whose answers are no longer wanted are dropped, unanswered.
        st.queue.retain(|sub| match &sub.reply {
            Sink::Each(reply) => reply.wanted(),
            Sink::Whole(_) => true,
        });
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
            return Next::Call(taken);
        }
        if st.closed {
            return Next::Stop;
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
    reply: Sink,
}

/// A call's answers, in its requests' order, for the delivering thread.
type Delivery = (Vec<Addressee>, Instant, Vec<(Result<Answer>, ServedBy)>);

/// The GPU's thread: calls until the backend is dropped and nothing is left. Answers are handed to
/// a thread of their own, so that delivering one call's answers overlaps the next call.
fn dispatch(s: &Shared, mut gpu: GpuSearcher) {
    let batch = gpu.batch_size().max(1);
    let (tx, rx) = std::sync::mpsc::channel::<Delivery>();
    let deliverer = std::thread::Builder::new()
        .name("warpsearch-gpu-deliver".into())
        .spawn(move || rx.into_iter().for_each(deliver))
        .expect("a thread can be started");
    loop {
        let subs = match next(s, batch) {
            Next::Control(c) => {
                c(&mut gpu);
                continue;
            }
            Next::Stop => break,
            Next::Call(subs) => subs,
        };
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
        let run = std::panic::AssertUnwindSafe(|| call(s, &mut gpu, &requests));
        // A call that panics is answered on the CPU, whole: nothing is lost.
        let answers = std::panic::catch_unwind(run).unwrap_or_else(|_| {
            let n = requests.len() as u64;
            s.notes.fallback(
                n,
                format!("the GPU backend panicked: {n} queries answered on the CPU"),
            );
            requests
                .iter()
                .map(|r| (s.cpu.answer(r), ServedBy::Cpu))
                .collect()
        });
        // Counted before the answers go, so that a caller woken by the last reads counters with it.
        lock(&s.stats).add(&gpu.take_stats());
        if tx.send((to, taken, answers)).is_err() {
            break;
        }
    }
    drop(tx);
    let _ = deliverer.join();
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
        match a.reply {
            Sink::Each(reply) => reply.send_many(
                mine.enumerate()
                    .map(|(i, (result, by))| Done {
                        id: a.first_id + i as u64,
                        result: waiting(result),
                        served_by: by,
                        missed_deadline: missed,
                    })
                    .collect(),
            ),
            // The caller may be gone; the answers are then unwanted.
            Sink::Whole(tx) => drop(tx.send(mine.map(|(result, _)| waiting(result)).collect())),
        }
    }
}

/// Answers every request of one call, in order: on the GPU, and on the CPU what the GPU fails (each
/// reason noted once with its count).
fn call(s: &Shared, gpu: &mut GpuSearcher, requests: &[Request]) -> Vec<(Result<Answer>, ServedBy)> {
    if let Some(ctl) = &s.cache {
        let (answers, failed) = crate::cache::run::search_batch(gpu, &s.cpu, ctl, requests);
        if failed > 0 {
            s.notes.fallback(
                failed,
                format!("the GPU failed {failed} queries: they were answered on the CPU"),
            );
        }
        // The backend is the GPU's, whose cache the CPU completes: its answers are not told apart.
        return answers.into_iter().map(|a| (a, ServedBy::Gpu)).collect();
    }
    let answers = gpu.search_batch(requests);
    let mut out = Vec::with_capacity(requests.len());
    let mut failures: Vec<(String, u64)> = Vec::new();
    for (request, answer) in requests.iter().zip(answers) {
        out.push(match answer {
            Ok(a) => (Ok(a), ServedBy::Gpu),
            Err(e) => {
                let why = match &e {
                    GpuError::Failed(why) => why.clone(),
                    other => format!("the GPU cannot answer it ({other})"),
                };
                match failures.iter_mut().find(|(w, _)| *w == why) {
                    Some((_, n)) => *n += 1,
                    None => failures.push((why, 1)),
                }
                (s.cpu.answer(request), ServedBy::Cpu)
            }
        });
    }
    for (why, n) in failures {
        s.notes
            .fallback(n, format!("{why}: {n} queries answered on the CPU"));
    }
    out
}
