//! The GPU executor: one thread answers batches in calls on the GPU searcher (with the policy of its
//! list cache). A call takes every batch waiting when a pipeline slot is free, up to a call's worth of
//! queries (a batch is never cut), while the calls before it compute; each call's answers leave as
//! soon as its batches are back, so that a query waits neither for a batch to fill nor behind an
//! unrelated long one. A batch whose reply is no longer wanted when a call takes it is dropped. A
//! caller that waits for a whole batch runs its call on its own thread instead, with the searcher
//! locked: a closed loop's million queries then cost no copy, no hand-over and no per-answer delivery.
//! Either way what the GPU fails goes to the CPU executor ([`fall_back`], the one place it is done),
//! exactly once.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use warpsearch_gpu::{CallId, GpuError, GpuMemory, GpuSearcher, GpuStats, MemoryProbe, ThreadTimes};
use warpsearch_index::{IndexError, Result};
use warpsearch_query::{Answer, DocRange, Mode, Request};

use super::cpu::{CpuQueue, Steal};
use super::{cached, Batch, Items, Learn, Task};
use crate::cache::CacheCtl;
use crate::notes::{Failures, Notes};
use crate::reply::{lock, Collect, Done, Reply, ServedBy};

#[derive(Default)]
struct State {
    queue: VecDeque<Batch>,
    /// Set when the [`GpuExecutor`] is dropped: the thread finishes the queue and stops.
    closed: bool,
}

/// How many queries the GPU's next call takes at most (the hybrid's, from its measured rates).
type CallSize = Box<dyn Fn() -> usize + Send + Sync>;

/// Whether a CPU thread takes a batch of the GPU's queue, given it and the GPU's load in queries.
pub(crate) type StealPays = Box<dyn Fn(&Batch, usize) -> bool + Send + Sync>;

/// Up to so many queries (the call's limit, asked only where there is something to take) from the
/// CPU's queue, where the scheduler lets the GPU take them.
pub(crate) type TakeFromCpu = Box<dyn Fn(&dyn Fn() -> usize) -> Option<Batch> + Send + Sync>;

struct Shared {
    /// Where what the GPU fails is answered.
    cpu: CpuQueue,
    cache: Option<Arc<CacheCtl>>,
    /// Held for a call: by the GPU's thread, or by a caller of [`GpuExecutor::search_batch`].
    searcher: Mutex<GpuSearcher>,
    state: Mutex<State>,
    ready: Condvar,
    /// Queries queued and not yet taken by a call.
    queued: AtomicUsize,
    /// Queries on the GPU (taken by a call and not yet answered).
    on_device: AtomicUsize,
    stats: Mutex<GpuStats>,
    notes: Arc<Notes>,
    learn: OnceLock<Arc<dyn Learn>>,
    call_size: OnceLock<CallSize>,
    /// Where the GPU takes queries from when its own queue is empty (the CPU's, in the hybrid).
    take_from_cpu: OnceLock<TakeFromCpu>,
    /// What completes a cached call's queries on the cores.
    cpu_searcher: warpsearch_cpu::CpuSearcher,
}

impl Shared {
    fn submit(&self, batch: Batch) {
        self.queued.fetch_add(batch.len(), Ordering::Relaxed);
        lock(&self.state).queue.push_back(batch);
        self.ready.notify_one();
    }
}

/// A handle that queues batches for the GPU executor (the hedger's).
pub(crate) struct GpuQueue(Arc<Shared>);

impl GpuQueue {
    /// Queues `batch` (not empty); its answers go to its reply.
    pub fn submit(&self, batch: Batch) {
        self.0.submit(batch);
    }
}

/// The GPU executor's thread and its queue.
pub(crate) struct GpuExecutor {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
    memory: MemoryProbe,
    describe: String,
    device: usize,
}

impl GpuExecutor {
    /// Starts the thread that runs `gpu` (with its list cache's policy `cache`); what it fails goes to
    /// `cpu` and is noted in `notes`. `searcher` completes a cached call's queries on the cores.
    pub fn start(
        gpu: GpuSearcher,
        cache: Option<Arc<CacheCtl>>,
        cpu: CpuQueue,
        searcher: warpsearch_cpu::CpuSearcher,
        notes: Arc<Notes>,
    ) -> GpuExecutor {
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
            queued: AtomicUsize::new(0),
            on_device: AtomicUsize::new(0),
            stats: Mutex::default(),
            notes,
            learn: OnceLock::new(),
            call_size: OnceLock::new(),
            take_from_cpu: OnceLock::new(),
            cpu_searcher: searcher,
        });
        let s = shared.clone();
        let thread = std::thread::Builder::new()
            .name("warpsearch-gpu".into())
            .spawn(move || dispatch(&s))
            .expect("a thread can be started");
        GpuExecutor {
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

    /// The GPU in a few words.
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

    /// Queries queued or on the GPU, not yet answered.
    pub fn load(&self) -> usize {
        self.shared.queued.load(Ordering::Relaxed) + self.shared.on_device.load(Ordering::Relaxed)
    }

    /// Hands what the GPU measures to `learn` (set once, before any batch).
    pub fn set_learn(&self, learn: Arc<dyn Learn>) {
        let _ = self.shared.learn.set(learn);
    }

    /// Bounds each call's queries by `size` (set once, before any batch; else a kernel batch's).
    pub fn set_call_size(&self, size: CallSize) {
        let _ = self.shared.call_size.set(size);
    }

    /// Lets the GPU, with nothing queued, take queries from `take` (set once, before any batch).
    pub fn set_take_from_cpu(&self, take: TakeFromCpu) {
        let _ = self.shared.take_from_cpu.set(take);
    }

    /// Queues `batch` (not empty); its answers go to its reply.
    pub fn submit(&self, batch: Batch) {
        self.shared.submit(batch);
    }

    /// A handle that queues batches here (answered while the executor lives).
    pub fn handle(&self) -> GpuQueue {
        GpuQueue(self.shared.clone())
    }

    /// What a CPU thread with nothing to do takes from this queue: the oldest batch, where more than
    /// one waits (those behind it still make the GPU's next call) and `pays` (given the batch and the
    /// queries queued or on the GPU) says the CPU answers it sooner; the oldest has waited longest.
    /// `learn` hears how many queries it took.
    pub fn stealer(&self, learn: Arc<dyn Learn>, pays: StealPays) -> Steal {
        let shared = Arc::downgrade(&self.shared);
        Box::new(move || {
            let s = shared.upgrade()?;
            let mut st = lock(&s.state);
            if st.queue.len() < 2 {
                return None;
            }
            let load = s.queued.load(Ordering::Relaxed) + s.on_device.load(Ordering::Relaxed);
            if !pays(st.queue.front()?, load) {
                return None;
            }
            let batch = st.queue.pop_front()?;
            drop(st);
            s.queued.fetch_sub(batch.len(), Ordering::Relaxed);
            learn.stolen(batch.len());
            Some(batch)
        })
    }

    /// Answers every request (submitted at once, without a deadline) on this thread, in order.
    pub fn search_batch(&self, requests: &[Request]) -> Vec<Result<Answer>> {
        let s = &self.shared;
        let mut gpu = lock(&s.searcher);
        let answers = match &s.cache {
            Some(ctl) => caught(|| cached_call(s, &mut gpu, ctl, requests)),
            None => caught(|| gpu.search_batch(requests)).map(|a| a.into_iter().map(Gpu::from).collect()),
        };
        lock(&s.stats).add(&gpu.take_stats());
        drop(gpu);
        let answers = answers.unwrap_or_else(|| panicked(requests.len()));
        answer_failed_here(s, requests, answers)
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

impl Drop for GpuExecutor {
    /// Answers what is queued, then stops the thread.
    fn drop(&mut self) {
        lock(&self.shared.state).closed = true;
        self.shared.ready.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The GPU's answer to one query: whole, failed (the CPU answers it), or already final (a cached
/// call's, whose CPU work is done).
enum Gpu {
    Answer(std::result::Result<Answer, GpuError>),
    Final(Result<Answer>),
}

impl From<std::result::Result<Answer, GpuError>> for Gpu {
    fn from(a: std::result::Result<Answer, GpuError>) -> Gpu {
        Gpu::Answer(a)
    }
}

/// A call with a list cache: its queries split by what the cache covers, the GPU's parts completed
/// on the cores ([`cached::search_batch`]); what the GPU failed is left to [`fall_back`].
fn cached_call(s: &Shared, gpu: &mut GpuSearcher, ctl: &CacheCtl, requests: &[Request]) -> Vec<Gpu> {
    cached::search_batch(gpu, &s.cpu_searcher, ctl, requests)
        .into_iter()
        .map(|a| match a {
            Ok(answer) => Gpu::Final(answer),
            Err(e) => Gpu::Answer(Err(e)),
        })
        .collect()
}

/// Every query of a call that panicked, as failed.
fn panicked(n: usize) -> Vec<Gpu> {
    (0..n)
        .map(|_| Gpu::Answer(Err(GpuError::Failed("the GPU backend panicked".into()))))
        .collect()
}

/// `f`, or None where it panics (its call is then answered on the CPU: nothing is lost).
fn caught<T>(f: impl FnOnce() -> T) -> Option<T> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).ok()
}

/// The one place where what the GPU failed goes to the CPU: each reason noted once with its count,
/// the scheduler told, and every failed query queued on the CPU executor with its own reply.
fn fall_back(s: &Shared, failures: Failures, batches: Vec<Batch>) {
    if let Some(learn) = s.learn.get() {
        learn.failed(failures.count());
    }
    failures.note(&s.notes);
    for batch in batches {
        s.cpu.submit(batch);
    }
}

/// A caller's batch answered: the GPU's answers, and what it failed answered by the CPU executor,
/// waited for here.
fn answer_failed_here(s: &Shared, requests: &[Request], answers: Vec<Gpu>) -> Vec<Result<Answer>> {
    let mut out: Vec<Option<Result<Answer>>> = Vec::with_capacity(requests.len());
    // The failed queries, numbered in order for the CPU, and where each goes.
    let (mut failed, mut at) = (Vec::new(), Vec::new());
    let mut failures = Failures::default();
    for (i, a) in answers.into_iter().enumerate() {
        match a {
            Gpu::Final(a) => out.push(Some(a)),
            Gpu::Answer(Ok(a)) => out.push(Some(Ok(a))),
            Gpu::Answer(Err(e)) => {
                failures.add(&e);
                failed.push(Task::whole(failed.len() as u64, requests[i].clone()));
                at.push(i);
                out.push(None);
            }
        }
    }
    if !failed.is_empty() {
        let collect = Arc::new(Collect::new(failed.len()));
        let batch = Batch::tasks(failed, Instant::now(), None, collect.clone());
        fall_back(s, failures, vec![batch]);
        for (i, a) in at.into_iter().zip(collect.wait()) {
            out[i] = Some(a);
        }
    }
    out.into_iter()
        .map(|a| a.unwrap_or_else(|| Err(IndexError::Invalid("a query was left unanswered (a bug)".into()))))
        .collect()
}

/// Whether the GPU thread waits for batches.
#[derive(Clone, Copy, PartialEq)]
enum Wait {
    /// Until some arrive or the executor is dropped (nothing is on the GPU).
    Forever,
    /// Not at all (calls are on the GPU: it goes back to collect them).
    No,
}

/// The batches of the GPU thread's next call, up to `limit()` queries (a batch is never cut; the
/// limit is asked only where there is something to take, since the polling loop calls this at every
/// turn); None where nothing came within `wait`, or the executor is dropped and nothing is left.
fn next(s: &Shared, limit: &dyn Fn() -> usize, wait: Wait) -> Option<Vec<Batch>> {
    let mut st = lock(&s.state);
    loop {
        // Batches whose answers are no longer wanted are dropped, unanswered.
        st.queue.retain(|b| {
            let wanted = b.reply.wanted();
            if !wanted {
                s.queued.fetch_sub(b.len(), Ordering::Relaxed);
            }
            wanted
        });
        if !st.queue.is_empty() {
            let limit = limit();
            let mut taken = Vec::new();
            let mut queries = 0;
            while let Some(b) = st.queue.front() {
                if queries > 0 && queries + b.len() > limit {
                    break;
                }
                queries += b.len();
                taken.extend(st.queue.pop_front());
            }
            s.queued.fetch_sub(queries, Ordering::Relaxed);
            s.on_device.fetch_add(queries, Ordering::Relaxed);
            return Some(taken);
        }
        if st.closed {
            return None;
        }
        if let Some(take) = s.take_from_cpu.get() {
            // Nothing queued here: queries the CPU has queued beyond what it soon reaches.
            drop(st);
            if let Some(batch) = take(limit) {
                s.on_device.fetch_add(batch.len(), Ordering::Relaxed);
                return Some(vec![batch]);
            }
            if wait == Wait::No {
                return None;
            }
            // The CPU's queue may grow without a word to this thread: it looks again soon.
            st = lock(&s.state);
            if st.queue.is_empty() && !st.closed {
                st = s
                    .ready
                    .wait_timeout(st, LOOK_AGAIN)
                    .expect("no engine thread panics under a lock")
                    .0;
            }
            continue;
        }
        if wait == Wait::No {
            return None;
        }
        st = s.ready.wait(st).expect("no engine thread panics under a lock");
    }
}

/// How often an idle GPU looks at the CPU's queue, where it may take from it.
const LOOK_AGAIN: Duration = Duration::from_millis(1);

/// Where a call's answers go: each batch's first id (or its tasks' ids and ranges), size, submission
/// time, deadline and reply.
struct Addressee {
    first_id: u64,
    /// The tasks' ids and documents, for a batch of tasks.
    tasks: Option<Vec<(u64, DocRange)>>,
    queries: usize,
    submitted: Instant,
    deadline: Option<Duration>,
    reply: Arc<dyn Reply>,
}

impl Addressee {
    /// Its query `i`'s id and documents.
    fn query(&self, i: usize) -> (u64, DocRange) {
        match &self.tasks {
            Some(tasks) => tasks[i],
            None => (self.first_id + i as u64, DocRange::ALL),
        }
    }
}

/// One call: where its answers go, when it was taken from the queue, its requests (the CPU answers
/// those the GPU fails) and their documents (None: all of each), and what the scheduler predicted of
/// it.
struct Call {
    to: Vec<Addressee>,
    taken: Instant,
    requests: Vec<Request>,
    ranges: Option<Vec<DocRange>>,
    /// The one mode of its requests, if they share one, and their predicted work.
    mode: Option<Mode>,
    work: f64,
    /// Per request: whether its answer has left already, before the call's end (empty: none has).
    sent: Vec<bool>,
    /// Where each addressee's requests start among the call's.
    starts: Vec<usize>,
}

impl Call {
    /// Where request `i`'s answer goes: its addressee, and its id there.
    fn address(&self, i: usize) -> (&Addressee, u64) {
        let at = self.starts.partition_point(|&start| start <= i) - 1;
        let a = &self.to[at];
        (a, a.query(i - self.starts[at]).0)
    }

    /// Request `i`'s answer, to hand over now, before the rest of the call's (the GPU found it done
    /// while its batch ran): where it goes and what; the call's end then skips it. None where it has
    /// left already.
    fn answer_early(&mut self, i: usize, mut answer: Answer) -> Option<(Arc<dyn Reply>, Done)> {
        if self.sent.is_empty() {
            self.sent = vec![false; self.requests.len()];
        }
        if std::mem::replace(&mut self.sent[i], true) {
            return None;
        }
        let (a, id) = self.address(i);
        answer.latency += self.taken - a.submitted;
        let missed = a.deadline.is_some_and(|d| a.submitted.elapsed() > d);
        let done = Done {
            id,
            result: Ok(answer),
            served_by: ServedBy::Gpu,
            missed_deadline: missed,
        };
        Some((a.reply.clone(), done))
    }
}

/// Hands over answers that left before their calls ended, each run of one reply's at once.
fn send_early(answers: Vec<(Arc<dyn Reply>, Done)>) {
    let mut answers = answers.into_iter().peekable();
    while let Some((reply, done)) = answers.next() {
        let mut run = vec![done];
        while let Some((_, d)) = answers.next_if(|(r, _)| Arc::ptr_eq(r, &reply)) {
            run.push(d);
        }
        match run.len() {
            1 => reply.send(run.pop().expect("one")),
            _ => reply.send_many(run),
        }
    }
}

/// Answers for the delivering thread: a call's, or answers that left before their calls ended.
enum Delivery {
    Call(Call, Vec<Gpu>),
    Early(Vec<(Arc<dyn Reply>, Done)>),
}

/// Queries of a call at most that the GPU thread answers itself rather than through the delivering
/// thread: a few answers cost less than waking it, and arrive sooner.
const DELIVER_HERE: usize = 256;

/// The GPU's thread: calls until the executor is dropped and nothing is left. Without a list cache,
/// whatever has arrived goes to the GPU as soon as a pipeline slot is free, while earlier calls
/// compute, and each call's answers leave as soon as its batches are back, whatever the calls before
/// it: at a light load a query is a call of its own, under a heavy one the queue fills the next call
/// while the slots are busy. With a cache a call runs whole (it pipelines its own chunks). Answers are
/// handed to a thread of their own, so that delivering one call's answers overlaps the next.
fn dispatch(s: &Arc<Shared>) {
    let (batch, slots) = {
        let gpu = lock(&s.searcher);
        (gpu.batch_size().max(1), gpu.slots())
    };
    let limit = || match s.call_size.get() {
        Some(size) => size().clamp(1, batch),
        None => batch,
    };
    let (tx, rx) = std::sync::mpsc::channel::<Delivery>();
    let deliverer = {
        let s = s.clone();
        std::thread::Builder::new()
            .name("warpsearch-gpu-deliver".into())
            .spawn(move || {
                rx.into_iter().for_each(|d| match d {
                    Delivery::Call(call, answers) => deliver(&s, call, answers),
                    Delivery::Early(answers) => send_early(answers),
                })
            })
            .expect("a thread can be started")
    };
    if let Some(ctl) = &s.cache {
        while let Some(batches) = next(s, &limit, Wait::Forever) {
            let call = addressees(batches);
            let sent = Instant::now();
            let mut gpu = lock(&s.searcher);
            let answers = caught(|| cached_call(s, &mut gpu, ctl, &call.requests))
                .unwrap_or_else(|| panicked(call.requests.len()));
            // Counted before the answers go, so that a caller woken by the last reads them with it.
            lock(&s.stats).add(&gpu.take_stats());
            drop(gpu);
            learn(s, &call, sent.elapsed().as_secs_f64());
            if tx.send(Delivery::Call(call, answers)).is_err() {
                break;
            }
        }
    } else {
        continuous(s, &limit, slots, &tx);
    }
    drop(tx);
    let _ = deliverer.join();
}

/// Tells the scheduler what a call took.
fn learn(s: &Shared, call: &Call, seconds: f64) {
    if let Some(learn) = s.learn.get() {
        learn.gpu(call.requests.len(), seconds, call.mode, call.work);
    }
}

/// The GPU thread's loop without a list cache ([`dispatch`]): up to `slots` batches on the GPU. While
/// any is, the thread polls their events and the queue without sleeping (a sleep's wake-up, tens of
/// microseconds, would be added to every answer): it keeps one core busy only while queries run.
fn continuous(s: &Shared, limit: &dyn Fn() -> usize, slots: usize, tx: &Sender<Delivery>) {
    // Calls handed to the GPU and not yet answered, with when each was handed over.
    let mut on_gpu: Vec<(CallId, Call, Instant)> = Vec::new();
    // Where this thread's time went since it was last counted, and when the last part ended. A turn's
    // look at the GPU and hand-over of answers are work where they found something, else part of the
    // wait that follows them.
    let mut times = ThreadTimes::default();
    let mut mark = Instant::now();
    loop {
        // Calls whose answers are in (None: the GPU panicked on them).
        let mut done = Vec::new();
        let mut gpu = lock(&s.searcher);
        let mut found = false;
        if !on_gpu.is_empty() {
            found = caught(|| gpu.poll()).unwrap_or_else(|| {
                // Which batches were lost is unknown: every call still out is waited for alone.
                for (id, c, sent) in on_gpu.drain(..) {
                    done.push((c, sent, caught(|| gpu.wait(id))));
                }
                true
            });
            while let Some((id, answers)) = caught(|| gpu.take_done()).flatten() {
                if let Some(at) = on_gpu.iter().position(|(c, _, _)| *c == id) {
                    let (_, c, sent) = on_gpu.swap_remove(at);
                    done.push((c, sent, Some(answers)));
                }
            }
        }
        // Answers done before their batches: those of calls still out leave now (a call just done
        // hands over all of its own).
        let early = gpu.take_early();
        let room = gpu.batches_in_flight() < slots;
        found |= !(done.is_empty() && early.is_empty());
        if !done.is_empty() {
            // Counted before the answers go (a call's counters, its submission's included, are in by
            // then), and not at every turn of the polling loop.
            let mut stats = lock(&s.stats);
            stats.add(&gpu.take_stats());
            stats.thread.add(&std::mem::take(&mut times));
        }
        drop(gpu);
        let polled = lap(&mut mark);
        let early: Vec<(Arc<dyn Reply>, Done)> = early
            .into_iter()
            .filter_map(|(id, i, answer)| {
                let (_, c, _) = on_gpu.iter_mut().find(|(c, _, _)| *c == id)?;
                c.answer_early(i, answer)
            })
            .collect();
        s.on_device.fetch_sub(early.len(), Ordering::Relaxed);
        if early.len() <= DELIVER_HERE {
            send_early(early);
        } else if tx.send(Delivery::Early(early)).is_err() {
            return;
        }
        for (c, sent, answers) in done {
            // What the scheduler learns is a call's latency, hand-over to answers: what a query
            // given to the GPU waits (the calls on it at once overlap).
            learn(s, &c, sent.elapsed().as_secs_f64());
            let answers = match answers {
                Some(answers) => answers.into_iter().map(Gpu::from).collect(),
                None => panicked(c.requests.len()),
            };
            if c.requests.len() <= DELIVER_HERE {
                deliver(s, c, answers);
            } else if tx.send(Delivery::Call(c, answers)).is_err() {
                return;
            }
        }
        let answered = lap(&mut mark);
        let mut in_vain = 0.0;
        match found {
            true => {
                times.collect_ms += polled;
                times.answer_ms += answered;
            }
            false => in_vain = polled + answered,
        }
        if !room {
            // Every slot is busy: the next call waits for one to finish (and grows meanwhile).
            std::thread::yield_now();
            times.full_ms += in_vain + lap(&mut mark);
            continue;
        }
        let wait = match on_gpu.is_empty() {
            true => {
                // Nothing on the GPU: what is counted goes to the statistics before a wait for
                // arrivals, which is not counted (the thread is out of use, between a benchmark's
                // loads too).
                lock(&s.stats).thread.add(&std::mem::take(&mut times));
                Wait::Forever
            }
            false => Wait::No,
        };
        let taken = next(s, limit, wait);
        let took = lap(&mut mark);
        match (wait, taken.is_some()) {
            (Wait::Forever, _) => {}
            (Wait::No, true) => {
                times.take_ms += took;
                times.collect_ms += in_vain;
            }
            (Wait::No, false) => times.idle_ms += took + in_vain,
        }
        let Some(batches) = taken else {
            if on_gpu.is_empty() {
                // Dropped, with nothing queued and nothing on the GPU.
                return;
            }
            std::thread::yield_now();
            times.idle_ms += lap(&mut mark);
            continue;
        };
        let call = addressees(batches);
        times.take_ms += lap(&mut mark);
        times.calls += 1;
        times.call_queries += call.requests.len() as u64;
        let sent = Instant::now();
        let mut gpu = lock(&s.searcher);
        let id = caught(|| gpu.submit_polled_in(&call.requests, call.ranges.as_deref()));
        drop(gpu);
        times.submit_ms += lap(&mut mark);
        match id {
            Some(id) => on_gpu.push((id, call, sent)),
            None => {
                let answers = panicked(call.requests.len());
                if tx.send(Delivery::Call(call, answers)).is_err() {
                    return;
                }
            }
        }
    }
}

/// The ms since `mark`, which moves to now.
fn lap(mark: &mut Instant) -> f64 {
    let now = Instant::now();
    let ms = (now - *mark).as_secs_f64() * 1e3;
    *mark = now;
    ms
}

/// `batches` as one call, taken now: where their answers go, their requests and documents.
fn addressees(batches: Vec<Batch>) -> Call {
    let taken = Instant::now();
    let ranged = batches.iter().any(|b| matches!(b.items, Items::Tasks(_)));
    let mut call = Call {
        to: Vec::with_capacity(batches.len()),
        taken,
        requests: Vec::new(),
        ranges: ranged.then(Vec::new),
        mode: None,
        work: 0.0,
        sent: Vec::new(),
        starts: Vec::with_capacity(batches.len()),
    };
    for b in batches {
        call.starts.push(call.requests.len());
        let queries = b.len();
        let tasks = match b.items {
            Items::Queries(requests) => {
                if let Some(ranges) = &mut call.ranges {
                    ranges.extend(std::iter::repeat_n(DocRange::ALL, requests.len()));
                }
                if call.requests.is_empty() {
                    call.requests = requests;
                } else {
                    call.requests.extend(requests);
                }
                None
            }
            Items::Tasks(tasks) => {
                let mut ids = Vec::with_capacity(tasks.len());
                for t in tasks {
                    if let Some(f) = t.learn {
                        call.work += f.gpu_work(t.request.mode);
                    }
                    ids.push((t.id, t.range));
                    call.ranges.as_mut().expect("ranged").push(t.range);
                    call.requests.push(t.request);
                }
                Some(ids)
            }
        };
        call.to.push(Addressee {
            first_id: b.first_id,
            tasks,
            queries,
            submitted: b.submitted,
            deadline: b.deadline,
            reply: b.reply,
        });
    }
    let mut modes = call.requests.iter().map(|r| r.mode);
    call.mode = modes.next().filter(|m| modes.all(|x| x == *m));
    call
}

/// Hands each batch of a call its answers, at once; what the GPU failed goes to the CPU.
fn deliver(s: &Shared, call: Call, answers: Vec<Gpu>) {
    let early = call.sent.iter().filter(|&&x| x).count();
    s.on_device
        .fetch_sub(call.requests.len() - early, Ordering::Relaxed);
    let sent = |i: usize| call.sent.get(i).copied().unwrap_or(false);
    let mut at = 0;
    let mut answers = answers.into_iter();
    let mut requests = call.requests.into_iter();
    let mut failures = Failures::default();
    let mut to_cpu = Vec::new();
    for a in call.to {
        // The time the batch waited for its call counts in its queries' latency.
        let waited = call.taken - a.submitted;
        let missed = a.deadline.is_some_and(|d| a.submitted.elapsed() > d);
        let mut done = Vec::with_capacity(a.queries);
        let mut failed = Vec::new();
        for i in 0..a.queries {
            let request = requests.next().expect("a request per answer");
            let (id, range) = a.query(i);
            let answer = answers.next().expect("an answer per request");
            at += 1;
            if sent(at - 1) {
                continue;
            }
            let result = match answer {
                Gpu::Final(result) => result,
                Gpu::Answer(Ok(answer)) => Ok(answer),
                Gpu::Answer(Err(e)) => {
                    failures.add(&e);
                    failed.push(Task {
                        range,
                        ..Task::whole(id, request)
                    });
                    continue;
                }
            };
            done.push(Done {
                id,
                result: result.map(|mut answer| {
                    answer.latency += waited;
                    answer
                }),
                served_by: ServedBy::Gpu,
                missed_deadline: missed,
            });
        }
        if !failed.is_empty() {
            to_cpu.push(Batch::tasks(failed, a.submitted, a.deadline, a.reply.clone()));
        }
        if !done.is_empty() {
            a.reply.send_many(done);
        }
    }
    if !to_cpu.is_empty() {
        fall_back(s, failures, to_cpu);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc::{channel, Receiver};

    use warpsearch_query::{Query, Scored};

    use super::*;

    fn requests(n: usize) -> Vec<Request> {
        (0..n)
            .map(|k| Request::new(Query::default(), Mode::Or, k + 1))
            .collect()
    }

    fn answer(doc: u32) -> Answer {
        Answer {
            hits: vec![Scored { doc, score: 1.0 }],
            latency: Duration::ZERO,
        }
    }

    fn sink() -> (Arc<dyn Reply>, Receiver<Done>) {
        let (tx, rx) = channel();
        (Arc::new(tx), rx)
    }

    /// A call of three submissions: whole queries numbered from 100 (3), tasks with their own ids and
    /// ranges (2), whole queries numbered from 7 (1).
    fn call(replies: &[Arc<dyn Reply>; 3]) -> Call {
        let range = DocRange { first: 5, last: 9 };
        let tasks = vec![
            Task {
                range,
                ..Task::whole(40, requests(1).remove(0))
            },
            Task::whole(41, requests(1).remove(0)),
        ];
        addressees(vec![
            Batch::queries(100, requests(3), None, replies[0].clone()),
            Batch::tasks(tasks, Instant::now(), None, replies[1].clone()),
            Batch::queries(7, requests(1), None, replies[2].clone()),
        ])
    }

    #[test]
    fn a_calls_requests_are_found_by_their_submission_and_id() {
        let (a, _ra) = sink();
        let (b, _rb) = sink();
        let (c, _rc) = sink();
        let call = call(&[a, b, c]);
        let ids: Vec<u64> = (0..6).map(|i| call.address(i).1).collect();
        assert_eq!(ids, vec![100, 101, 102, 40, 41, 7]);
        assert_eq!(call.to[1].query(0).1, DocRange { first: 5, last: 9 });
    }

    #[test]
    fn an_early_answer_goes_once_to_its_reply_and_the_calls_end_skips_it() {
        let (a, ra) = sink();
        let (b, rb) = sink();
        let (c, rc) = sink();
        let mut call = call(&[a, b, c]);
        // Requests 1 (id 101) and 4 (task 41) are done early; request 4 again finds it sent.
        let mut early: Vec<(Arc<dyn Reply>, Done)> = [(1, 11), (4, 44)]
            .into_iter()
            .map(|(i, doc)| call.answer_early(i, answer(doc)).expect("not sent yet"))
            .collect();
        assert!(
            call.answer_early(4, answer(44)).is_none(),
            "an answer leaves once"
        );
        // One reply's answers go together.
        early.push(call.answer_early(0, answer(10)).expect("not sent yet"));
        send_early(early);
        let got = |r: &Receiver<Done>| -> Vec<(u64, u32)> {
            r.try_iter()
                .map(|d| (d.id, d.result.unwrap().hits[0].doc))
                .collect()
        };
        assert_eq!(got(&ra), vec![(101, 11), (100, 10)]);
        assert_eq!(got(&rb), vec![(41, 44)]);
        assert!(got(&rc).is_empty());
        assert_eq!(
            call.sent,
            vec![true, true, false, false, true, false],
            "the call's end skips requests 0, 1 and 4"
        );
    }
}
