//! The scheduler's threads: a CPU worker per core runs one task at a time; the GPU dispatcher owns the
//! GPU searcher and hands it a batch while the last one computes (at most two on it); a
//! post-processing thread answers the GPU's results (docs/references.md#pruned-list-caching section 3.1: a second CPU thread
//! post-processes while the next batch computes). All pick under the state lock ([`super::queues`])
//! and work outside it.

use std::collections::VecDeque;
use std::sync::mpsc::{channel, Receiver};
use std::sync::Arc;
use std::time::Instant;

use rayon::prelude::*;

use warpsearch_gpu::{CallId, GpuError, GpuSearcher};
use warpsearch_query::{Answer, DocRange, Mode, Part, Request};

use super::job::Processor;
use super::queues::{Pick, Policy, Preference, Task};
use super::stats::bump;
use super::{ewma, lock, Shared};
use crate::cache::CacheCtl;
use crate::cost::Features;
use crate::notes::Failures;
use crate::reply::ServedBy;
use crate::split::{complete, gpu_request, take_answer, Partial, Split};

fn policy(s: &Shared) -> Policy {
    let r = *lock(&s.rates);
    Policy {
        urgency: s.options.urgency,
        max_batch: s.options.max_batch.max(1),
        batch_target: s.options.batch_target.as_secs_f64(),
        gpu_rate: r.gpu_rate,
        cpu_rate: r.cpu_rate(s.options.cpu_workers),
        gpu_latency: r.gpu_latency,
    }
}

/// Counts a finished query (before its answer is sent: [`super::job::Job::finish_part`]).
fn count_done(s: &Shared) -> impl FnOnce(ServedBy, std::time::Duration, bool) + '_ {
    move |by, _, missed| {
        let c = &s.counters;
        bump(
            match by {
                ServedBy::Cpu => &c.cpu_queries,
                ServedBy::Gpu => &c.gpu_queries,
                ServedBy::Both => &c.both_queries,
            },
            1,
        );
        if missed {
            bump(&c.deadline_misses, 1);
        }
    }
}

/// CPU measurements a worker gathers before it takes the model's lock (one lock per batch of them).
const OBSERVE_EVERY: usize = 16;

/// A worker's measurements not yet handed over: whole queries for the cost model, every task's
/// seconds for the CPU's rate.
#[derive(Default)]
struct Seen {
    queries: Vec<(Mode, Features, f64)>,
    tasks: u32,
    seconds: f64,
}

impl Seen {
    fn hand_over(&mut self, s: &Shared) {
        if self.tasks == 0 {
            return;
        }
        let mut model = lock(&s.model);
        for (mode, f, seconds) in self.queries.drain(..) {
            model.observe_cpu(mode, &f, seconds);
        }
        drop(model);
        ewma(
            &mut lock(&s.rates).cpu_task,
            self.seconds / self.tasks as f64,
            0.2,
        );
        (self.tasks, self.seconds) = (0, 0.0);
    }
}

/// Most tasks a CPU worker takes under one lock of the queues.
const TAKE_MAX: usize = 8;
/// A worker takes more tasks under the same lock while those taken are predicted to cost less than
/// this many seconds together: queries of a few µs (AND on the passages) otherwise took the queues'
/// lock once each, from every worker.
const TAKE_SECONDS: f64 = 50e-6;

/// Runs tasks on the CPU until the scheduler stops and nothing is left.
pub(super) fn cpu_worker(s: &Arc<Shared>) {
    let mut seen = Seen::default();
    let mut mine: VecDeque<(Task, Pick)> = VecDeque::new();
    loop {
        if seen.tasks as usize >= OBSERVE_EVERY {
            seen.hand_over(s);
        }
        if mine.is_empty() {
            let p = policy(s);
            let mut st = lock(&s.state);
            loop {
                let now = Instant::now();
                if let Some(next) = st.queues.next_for_cpu(now, &p, s.has_gpu) {
                    let mut cost = next.0.cpu_cost;
                    // More only where no worker waits for work (it would take them) and none is
                    // urgent (it would wait behind the others here, unseen by the other workers).
                    let mut more = next.1 != Pick::Urgent && st.idle_cpu == 0;
                    mine.push_back(next);
                    while more && mine.len() < TAKE_MAX && cost < TAKE_SECONDS {
                        let Some(next) = st.queues.next_for_cpu(now, &p, s.has_gpu) else {
                            break;
                        };
                        cost += next.0.cpu_cost;
                        more = next.1 != Pick::Urgent;
                        // An urgent one runs first.
                        if more {
                            mine.push_back(next);
                        } else {
                            mine.push_front(next);
                        }
                    }
                    break;
                }
                if seen.tasks > 0 {
                    // Going idle: hand over the measurements first (not under the state lock).
                    drop(st);
                    seen.hand_over(s);
                    st = lock(&s.state);
                    continue;
                }
                // Stop only when the GPU can hand back no failed task any more.
                if st.shutdown && st.queues.gpu_in_flight == 0 && st.post_pending == 0 {
                    return;
                }
                st.idle_cpu += 1;
                st = s
                    .cpu_ready
                    .wait(st)
                    .expect("no scheduler thread panics under a lock");
                st.idle_cpu -= 1;
            }
        }
        let (task, pick) = mine.pop_front().expect("taken above");
        // A task of a query no longer wanted is dropped (its query gets no answer).
        if !task.job.wanted() {
            continue;
        }
        match pick {
            Pick::Stolen => bump(&s.counters.steals_by_cpu, 1),
            Pick::Urgent => bump(&s.counters.urgent, 1),
            _ => {}
        }
        let job = &task.job;
        let part = Part {
            range: task.range.unwrap_or(DocRange::ALL),
            floor: job.floor(),
        };
        let started = Instant::now();
        if let Some(partial) = &task.completion {
            // The rest of what the GPU answered in part (the list cache lacked its blocks).
            let result = complete(&s.cpu, &job.request, partial, job.floor());
            if let Some(c) = &s.cache {
                c.completed(started.elapsed().as_secs_f64());
                if let Ok(h) = &result {
                    c.observe(&job.request, Some(h));
                }
            }
            job.finish_part(result, Processor::Both, count_done(s));
            continue;
        }
        let result = s.cpu.search_part(&job.request, job.request.mode, part);
        let seconds = started.elapsed().as_secs_f64();
        if task.range.is_none() && !job.request.query.matches_nothing(job.request.mode) {
            seen.queries.push((job.request.mode, job.features, seconds));
        }
        seen.tasks += 1;
        seen.seconds += seconds;
        job.finish_part(result, Processor::Cpu, count_done(s));
    }
}

/// A GPU batch's tasks and their answers, for the post-processing thread.
type Finished = Vec<(Task, Result<Answer, GpuError>)>;

/// What the GPU dispatcher takes from the queues.
enum Take {
    Batch(Vec<(Task, Pick)>),
    /// Nothing now, with a call on the GPU to collect instead of waiting.
    Nothing,
    /// The scheduler stops and nothing is left.
    Stop,
}

/// The next GPU batch; waits for one only when no call is on the GPU (`busy`).
fn take(s: &Shared, busy: bool) -> Take {
    let p = policy(s);
    let mut st = lock(&s.state);
    loop {
        let mut batch = st.queues.next_for_gpu(Instant::now(), &p);
        if !batch.is_empty() {
            // Tasks of queries no longer wanted are dropped, unanswered.
            batch.retain(|(t, _)| t.job.wanted());
            if batch.is_empty() {
                continue;
            }
            st.queues.gpu_in_flight += batch.len();
            return Take::Batch(batch);
        }
        if busy {
            return Take::Nothing;
        }
        if st.shutdown {
            return Take::Stop;
        }
        st = s
            .gpu_ready
            .wait(st)
            .expect("no scheduler thread panics under a lock");
    }
}

/// A call on the GPU: its tasks (one request per range of their splits), the one mode of its requests
/// (if they share one), their predicted work, and when it was handed over.
struct OnGpu {
    call: CallId,
    tasks: Vec<(Task, Pick)>,
    splits: Vec<Split>,
    mode: Option<Mode>,
    work: f64,
    submitted: Instant,
}

/// Runs batches on the GPU until the scheduler stops and nothing is left; answers go to the
/// post-processing thread. A batch is handed to the GPU while the one before computes (at most two
/// calls on it), so that its host work (cutting by the cache, descriptors, staging) overlaps the
/// kernels.
pub(super) fn gpu_dispatcher(s: &Arc<Shared>, mut gpu: GpuSearcher) {
    let (tx, rx) = channel::<Finished>();
    let post = {
        let s = s.clone();
        std::thread::Builder::new()
            .name("warpsearch-gpu-post".into())
            .spawn(move || post_process(&s, rx))
            .expect("a thread can be started")
    };
    let mut on_gpu: VecDeque<OnGpu> = VecDeque::new();
    // When the GPU's last call came back: the calls run one after the other, so the next one's GPU
    // time starts there or at its hand-over, whichever is later.
    let mut last_back = Instant::now();
    let mut deliver = |gpu: &mut GpuSearcher, c: OnGpu, answers: Vec<Result<Answer, GpuError>>| {
        let now = Instant::now();
        let seconds = (now - c.submitted.max(last_back)).as_secs_f64();
        last_back = now;
        let n = c.tasks.len();
        lock(&s.rates).observe_gpu_batch(n, seconds);
        if let Some(mode) = c.mode {
            lock(&s.model).observe_gpu(mode, c.work, seconds);
        }
        lock(&s.gpu_stats).add(&gpu.take_stats());
        {
            let mut st = lock(&s.state);
            st.queues.gpu_in_flight -= n;
            st.post_pending += 1;
        }
        tx.send(join_answers(c.tasks, &c.splits, answers)).is_ok()
    };
    loop {
        let batch = match take(s, !on_gpu.is_empty()) {
            Take::Batch(batch) => Some(batch),
            Take::Nothing => None,
            Take::Stop => break,
        };
        // Nothing new, or two calls on the GPU already: collect the oldest first.
        if batch.is_none() || on_gpu.len() >= 2 {
            let c = on_gpu.pop_front().expect("a call on the GPU");
            let answers = gpu.wait(c.call);
            if !deliver(&mut gpu, c, answers) {
                return;
            }
        }
        let Some(batch) = batch else { continue };
        let c = &s.counters;
        bump(&c.gpu_batches, 1);
        bump(&c.gpu_tasks, batch.len() as u64);
        bump(
            &c.steals_by_gpu,
            batch.iter().filter(|(_, p)| *p == Pick::Stolen).count() as u64,
        );
        bump(
            &c.urgent,
            batch.iter().filter(|(_, p)| *p == Pick::Urgent).count() as u64,
        );
        let share = match &s.cache {
            None => GpuShare::whole(batch),
            Some(c) => split_by_cache(s, c, &gpu, batch),
        };
        if share.tasks.is_empty() {
            continue;
        }
        let modes = share.requests.iter().map(|r| r.mode);
        let mode = modes.clone().next().filter(|m| modes.clone().all(|x| x == *m));
        let work = share.tasks.iter().map(|(t, _)| t.work).sum();
        let submitted = Instant::now();
        let call = gpu.submit_in(&share.requests, Some(&share.ranges));
        on_gpu.push_back(OnGpu {
            call,
            tasks: share.tasks,
            splits: share.splits,
            mode,
            work,
            submitted,
        });
        // Handing over a call collects the batches before it that finished meanwhile.
        while let Some((id, answers)) = gpu.take_done() {
            // A call may come back before an older one (one the GPU had nothing to do for).
            let at = on_gpu.iter().position(|c| c.call == id);
            let c = on_gpu
                .remove(at.expect("a call on the GPU"))
                .expect("a call at its place");
            if !deliver(&mut gpu, c, answers) {
                return;
            }
        }
    }
    drop(tx);
    let _ = post.join();
}

/// Answers the GPU's results; a task the GPU failed goes back to the CPU as a part (run first).
fn post_process(s: &Shared, rx: Receiver<Finished>) {
    for finished in rx {
        let mut failed = Vec::new();
        let mut failures = Failures::default();
        let mut completions = Vec::new();
        for (mut task, answer) in finished {
            match (answer, task.completion.take()) {
                (Ok(a), Some(mut partial)) => {
                    // The CPU completes the documents the GPU's part left out, first.
                    partial.hits = a.hits;
                    let mut t = task;
                    t.range = Some(partial.rest);
                    t.completion = Some(partial);
                    t.preference = Preference::Cpu;
                    completions.push(t);
                }
                (Ok(a), None) => {
                    if let Some(c) = &s.cache {
                        c.observe(&task.job.request, Some(&a.hits));
                    }
                    task.job.finish_part(Ok(a.hits), Processor::Gpu, count_done(s))
                }
                (Err(e), partial) => {
                    failures.add(&e);
                    let mut t = task;
                    if let Some(p) = partial {
                        t.range = (p.whole != DocRange::ALL).then_some(p.whole);
                    }
                    failed.push(t)
                }
            }
        }
        bump(&s.counters.gpu_fallbacks, failures.count());
        failures.note(&s.notes);
        let mut st = lock(&s.state);
        for mut t in failed {
            t.preference = Preference::Cpu;
            st.queues.parts.push_front(t);
        }
        for t in completions {
            st.queues.parts.push_front(t);
        }
        st.post_pending -= 1;
        drop(st);
        s.cpu_ready.notify_all();
    }
}

/// What a batch sends the GPU: its tasks, and per task one request and docID range, or two for a
/// [`Split::Two`] (the second range's blocks staged from where the cached prefixes end).
struct GpuShare {
    tasks: Vec<(Task, Pick)>,
    /// How each task was split (its requests and ranges are [`Split::gpu_ranges`]'s, in order).
    splits: Vec<Split>,
    requests: Vec<Request>,
    ranges: Vec<DocRange>,
}

impl GpuShare {
    /// Every task whole, one request each (no list cache: the GPU holds the whole index).
    fn whole(tasks: Vec<(Task, Pick)>) -> GpuShare {
        GpuShare {
            requests: tasks.iter().map(|(t, _)| t.job.request.clone()).collect(),
            ranges: tasks
                .iter()
                .map(|(t, _)| t.range.unwrap_or(DocRange::ALL))
                .collect(),
            splits: vec![Split::Gpu; tasks.len()],
            tasks,
        }
    }
}

/// Each task's answer: a task sent as two ranges gets their two answers merged, and when and-or still
/// needs its OR pass, a completion over its documents (nothing left to search but that pass).
fn join_answers(
    tasks: Vec<(Task, Pick)>,
    splits: &[Split],
    answers: Vec<Result<Answer, GpuError>>,
) -> Finished {
    let mut answers = answers.into_iter();
    tasks
        .into_iter()
        .zip(splits)
        .map(|((mut t, _), &split)| {
            let (answer, or_pass) = take_answer(split, &t.job.request, &mut answers);
            if or_pass {
                let whole = t.range.unwrap_or(DocRange::ALL);
                t.completion = Some(Box::new(Partial {
                    hits: Vec::new(),
                    rest: DocRange::EMPTY,
                    whole,
                }));
            }
            (t, answer)
        })
        .collect()
}

/// The GPU's share of each task of `batch` by what the list cache covers: tasks the GPU cannot start go
/// back to the CPU; tasks it answers in part carry their completion; tasks whose lists are cached in
/// part run as two ranges, the cached one and the rest, staged (docs/references.md#pruned-list-caching section 3.1: a batch
/// carries only the blocks the cache lacks).
fn split_by_cache(s: &Shared, c: &CacheCtl, gpu: &GpuSearcher, batch: Vec<(Task, Pick)>) -> GpuShare {
    let last = s.cpu.scorer().index().num_docs().saturating_sub(1);
    let mut share = GpuShare {
        tasks: Vec::new(),
        splits: Vec::new(),
        requests: Vec::new(),
        ranges: Vec::new(),
    };
    let mut to_cpu = Vec::new();
    let view = gpu.view();
    let whole = |t: &Task| {
        let range = t.range.unwrap_or(DocRange::ALL);
        DocRange {
            first: range.first,
            last: range.last.min(last),
        }
    };
    let cut = |(t, _): &(Task, Pick)| c.split(&view, &t.job.request, whole(t));
    let splits: Vec<Split> = match &s.host_pool {
        Some(pool) => pool.install(|| batch.par_iter().map(cut).collect()),
        None => batch.iter().map(cut).collect(),
    };
    for ((mut t, pick), split) in batch.into_iter().zip(splits) {
        let range = t.range.unwrap_or(DocRange::ALL);
        match split {
            Split::Cpu => {
                to_cpu.push(t);
                continue;
            }
            Split::Partial(_, rest) => {
                t.completion = Some(Box::new(Partial {
                    hits: Vec::new(),
                    rest,
                    whole: range,
                }));
            }
            Split::Gpu | Split::Two(..) => {}
        }
        let before = share.ranges.len();
        share.ranges.extend(split.gpu_ranges(range));
        let request = gpu_request(&t.job.request, split);
        share
            .requests
            .extend(std::iter::repeat_n(request, share.ranges.len() - before));
        share.splits.push(split);
        share.tasks.push((t, pick));
    }
    if !to_cpu.is_empty() {
        let mut st = lock(&s.state);
        st.queues.gpu_in_flight -= to_cpu.len();
        for mut t in to_cpu {
            t.preference = Preference::Cpu;
            st.queues.parts.push_front(t);
        }
        drop(st);
        s.cpu_ready.notify_all();
    }
    share
}
