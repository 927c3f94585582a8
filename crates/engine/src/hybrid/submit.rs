//! A query's way into the scheduler: its features and predicted costs, its preferred processor, and
//! whether to split it — all under one lock per burst of queries.
//!
//! A query is split only when there is spare capacity (at least two CPU workers idle), into as many
//! parts as workers are idle (at most `split_parts`): intra-query parallelism shortens one query's
//! latency at the price of some repeated work (every part sets up its own cursors), which a loaded
//! system cannot afford. A burst of many queries (a closed loop) is never split.

use std::sync::Arc;
use std::time::Duration;

use rayon::prelude::*;

use warpsearch_query::{DocRange, Mode, Request};

use super::job::Job;
use super::queues::{Preference, Task};
use super::stats::bump;
use super::{lock, Shared};
use crate::cost::{CostModel, Features};
use crate::reply::Reply;

/// What a query is predicted to cost.
struct Estimate {
    features: Features,
    /// Seconds on one CPU core.
    cpu: f64,
    /// Seconds it adds to a GPU batch.
    gpu: f64,
    /// Seconds of a GPU batch's fixed cost (at least the measured latency of a small batch).
    intercept: f64,
    /// Postings the GPU touches.
    work: f64,
    preference: Preference,
}

fn estimate(
    s: &Shared,
    model: &mut CostModel,
    gpu_latency: f64,
    request: &Request,
    features: Features,
) -> Estimate {
    let mode = request.mode;
    // A query that matches nothing is answered at once by whichever processor takes it.
    let trivial = request.query.matches_nothing(mode);
    let (cpu, gpu) = if trivial {
        (1e-6, 0.0)
    } else if s.has_gpu {
        (model.cpu(mode, &features), model.gpu_marginal(mode, &features))
    } else {
        (model.cpu(mode, &features), f64::INFINITY)
    };
    // docs/references.md#ding-gpu-query-processing: a query markedly cheaper on one processor (relative to a typical query) joins that
    // processor's queue; the rest may go to either.
    let margin = (1.0 + s.options.margin).ln();
    let preference = if !s.has_gpu || trivial {
        Preference::Cpu
    } else {
        match model.suitability(mode, &features) {
            x if x > margin => Preference::Gpu,
            x if x < -margin => Preference::Cpu,
            _ => Preference::Either,
        }
    };
    Estimate {
        features,
        cpu,
        gpu,
        intercept: model.gpu_batch(mode, 0.0).max(gpu_latency),
        work: features.gpu_work(mode),
        preference,
    }
}

/// Queues `requests` (each answered once, on `reply`, with its id).
pub(super) fn submit(
    s: &Shared,
    requests: Vec<(u64, Request)>,
    deadline: Option<Duration>,
    reply: &Arc<dyn Reply>,
) {
    let index = s.cpu.scorer().index().clone();
    let gpu_latency = lock(&s.rates).gpu_latency;
    let estimates = |requests: &[(u64, Request)]| -> Vec<Estimate> {
        let features: Vec<Features> = requests
            .iter()
            .map(|(_, r)| Features::of(&index, &r.query))
            .collect();
        let mut model = lock(&s.model);
        requests
            .iter()
            .zip(features)
            .map(|((_, r), f)| estimate(s, &mut model, gpu_latency, r, f))
            .collect()
    };
    if requests.len() > 1 {
        // A burst (a closed loop): never split, and made and pushed a chunk at a time, so that the
        // workers start on the first tasks while the rest are made. Made all before the first was
        // pushed, a burst of 500,000 queries kept the workers waiting for most of a second.
        lock(&s.state).queues.incoming += requests.len();
        let queue = |chunk: Vec<(u64, Request)>| {
            // Counted out of `incoming` however this ends (a panic included), once.
            let mut coming = Incoming { s, left: chunk.len() };
            let e = estimates(&chunk);
            let tasks: Vec<Task> = chunk
                .into_iter()
                .zip(e)
                .map(|((id, request), e)| {
                    whole(Job::new(id, request, e.features, deadline, reply.clone(), 1), &e)
                })
                .collect();
            let mut st = lock(&s.state);
            st.queues.incoming -= std::mem::take(&mut coming.left);
            for t in tasks {
                st.queues.push(t);
            }
            drop(st);
            s.cpu_ready.notify_all();
            s.gpu_ready.notify_all();
        };
        // A burst of several chunks is made on all cores (in no set order: every answer goes to its
        // id): one thread made about 870,000 tasks a second (the development machine, one worker
        // beside it), which bounds a closed loop of cheap queries where the processors together
        // answer more. One chunk (a server's request) is made where it is submitted, and so is a
        // burst submitted from a rayon thread: that thread may hold a lock (the Python package's
        // engine) that a job stolen while it waits would take again.
        if requests.len() <= BURST_CHUNK || rayon::current_thread_index().is_some() {
            let mut requests = requests.into_iter().peekable();
            while requests.peek().is_some() {
                queue(requests.by_ref().take(BURST_CHUNK).collect());
            }
        } else {
            requests.into_par_iter().chunks(BURST_CHUNK).for_each(queue);
        }
        return;
    }
    let e = estimates(&requests);
    if let Some(((id, request), e)) = requests.into_iter().zip(e).next() {
        submit_one(s, id, request, e, deadline, reply);
    }
}

/// Queues one query: whole, or split when there is spare capacity and it is long.
fn submit_one(
    s: &Shared,
    id: u64,
    request: Request,
    e: Estimate,
    deadline: Option<Duration>,
    reply: &Arc<dyn Reply>,
) {
    let num_docs = s.cpu.scorer().index().num_docs();
    let mut st = lock(&s.state);
    // Spare capacity: at least two workers idle (so that the parts run at once, side by side).
    let spare = st.idle_cpu > 1;
    let split = spare
        && request.mode != Mode::AndOr
        && !request.query.matches_nothing(request.mode)
        && s.options
            .split_above
            .is_some_and(|limit| e.cpu > limit.as_secs_f64());
    let cpu_parts = if split {
        st.idle_cpu.clamp(1, s.options.split_parts.max(1))
    } else {
        1
    };
    // The GPU's share of a split query: its part (latency a + s·g) should end when the CPU parts
    // ((1 − s)·c / P) do; or the share the options fix.
    let gpu_share = match (split && s.has_gpu, s.options.split_gpu_share) {
        (false, _) => 0.0,
        (true, Some(share)) => share.clamp(0.0, 1.0),
        (true, None) => {
            let per_part = e.cpu / cpu_parts as f64;
            ((per_part - e.intercept) / (e.gpu + per_part)).clamp(0.0, 0.9)
        }
    };
    let gpu_part = gpu_share >= 0.05;
    // A GPU share of every document leaves nothing to the CPU.
    let cpu_parts = if gpu_share >= 1.0 { 0 } else { cpu_parts };
    let tasks = cpu_parts + usize::from(gpu_part);
    let job = Arc::new(Job::new(id, request, e.features, deadline, reply.clone(), tasks));
    if !split || (tasks == 1 && !gpu_part) {
        job.set_parts(1);
        st.queues.push(whole_task(job, &e));
        drop(st);
        s.cpu_ready.notify_one();
        s.gpu_ready.notify_one();
        return;
    }
    bump(&s.counters.splits, 1);
    let part = |range: DocRange, share: f64, preference| Task {
        job: job.clone(),
        range: Some(range),
        cpu_cost: e.cpu * share,
        work: e.work * share,
        preference,
        completion: None,
    };
    let cut = ((gpu_share * num_docs as f64) as u32).min(num_docs);
    if gpu_part {
        st.queues
            .gpu
            .push_front(part(DocRange::half_open(0, cut), gpu_share, Preference::Gpu));
    }
    let start = if gpu_part { cut } else { 0 };
    let span = (num_docs - start) as u64;
    for p in 0..cpu_parts as u64 {
        let lo = start + (span * p / cpu_parts as u64) as u32;
        let hi = start + (span * (p + 1) / cpu_parts as u64) as u32;
        let share = (hi - lo) as f64 / num_docs.max(1) as f64;
        st.queues
            .parts
            .push_front(part(DocRange::half_open(lo, hi), share, Preference::Cpu));
    }
    drop(st);
    s.cpu_ready.notify_all();
    s.gpu_ready.notify_one();
}

/// Tasks pushed per lock acquisition in a burst.
const BURST_CHUNK: usize = 1024;

/// Tasks of a burst's chunk not yet queued, taken out of [`super::queues::Queues::incoming`] when
/// dropped: so that a chunk that panics while it is made does not leave them counted for good.
struct Incoming<'a> {
    s: &'a Shared,
    left: usize,
}

impl Drop for Incoming<'_> {
    fn drop(&mut self) {
        if self.left > 0 {
            let mut st = self
                .s
                .state
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            st.queues.incoming -= self.left;
        }
    }
}

/// The one task of an unsplit query.
fn whole_task(job: Arc<Job>, e: &Estimate) -> Task {
    Task {
        job,
        range: None,
        cpu_cost: e.cpu,
        work: e.work,
        preference: e.preference,
        completion: None,
    }
}

fn whole(job: Job, e: &Estimate) -> Task {
    whole_task(Arc::new(job), e)
}
