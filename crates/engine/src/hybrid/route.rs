//! A query's way into the hybrid: its features and predicted costs, the processor predicted to finish
//! it first, and whether to split it.
//!
//! A query is split only when there is spare capacity (at least two CPU threads idle), into as many
//! parts as threads are idle (at most `split_parts`), and only when its parts are predicted to end
//! sooner than the whole query would on either processor: intra-query parallelism shortens one query's
//! latency at the price of some repeated work (every part sets up its own cursors), which a loaded
//! system cannot afford, and a split waits for its slowest part. A burst of many queries (a closed
//! loop) is never split.

use std::sync::Arc;
use std::time::{Duration, Instant};

use rayon::prelude::*;

use warpsearch_index::Index;
use warpsearch_query::{DocRange, Mode, Request};

use super::hedge::Hedger;
use super::stats::bump;
use super::{lock, Router};
use crate::cost::{CostModel, Features};
use crate::exec::cpu::CpuExecutor;
use crate::exec::gather::Gather;
use crate::exec::gpu::GpuExecutor;
use crate::exec::{Batch, Items, Task};
use crate::reply::{Done, Reply, ServedBy};

/// What a query is predicted to cost.
struct Estimate {
    features: Features,
    /// Seconds on one CPU core.
    cpu: f64,
    /// Seconds it adds to a GPU call.
    gpu: f64,
    /// Seconds of a GPU call's fixed cost (at least the measured latency of a small call).
    intercept: f64,
}

fn estimate(
    router: &Router,
    model: &CostModel,
    gpu_latency: f64,
    request: &Request,
    features: Features,
) -> Estimate {
    let mode = request.mode;
    // A query that matches nothing is answered at once by whichever processor takes it.
    let (cpu, gpu) = if request.query.matches_nothing(mode) {
        (1e-6, 0.0)
    } else if router.has_gpu {
        (model.cpu(mode, &features), model.gpu_marginal(mode, &features))
    } else {
        (model.cpu(mode, &features), f64::INFINITY)
    };
    Estimate {
        features,
        cpu,
        gpu,
        intercept: model.gpu_batch(mode, 0.0).max(gpu_latency),
    }
}

/// What each processor has to do before it can start a new query, as the router assigns queries.
struct Loads {
    has_gpu: bool,
    margin: f64,
    /// Whether the queries are a large batch, whose caller waits for its last answer: they then go
    /// where they finish soonest counting the CPU's queue, not only to free threads.
    whole_batch: bool,
    /// CPU threads free (a query given to one starts at once), the threads, and the predicted seconds
    /// on one core of what the CPU has queued.
    cpu_free: usize,
    workers: f64,
    cpu_backlog: f64,
    /// Queries the GPU has queued or running, and its measured rate.
    gpu_queries: f64,
    gpu_rate: f64,
}

/// Whether a CPU thread with nothing to do takes `batch`, the oldest of the GPU's queue, while the
/// GPU has `gpu_load` queries queued or running ([`Loads::steal_pays`]). A batch of whole queries
/// without predictions (none of the hybrid's) is taken; a hedge's copy, whose query the CPU runs
/// already, never.
pub(crate) fn cpu_may_take(router: &Router, batch: &Batch, gpu_load: usize) -> bool {
    let Items::Tasks(tasks) = &batch.items else {
        return true;
    };
    if tasks.iter().any(|t| t.copy) {
        return false;
    }
    let (longest, total) = tasks
        .iter()
        .fold((0.0f64, 0.0), |(l, t), task| (l.max(task.cost), t + task.cost));
    let r = *lock(&router.rates);
    let loads = Loads {
        has_gpu: true,
        margin: router.options.margin.max(0.0),
        whole_batch: false,
        cpu_free: 1,
        workers: router.options.cpu_workers.max(1) as f64,
        cpu_backlog: 0.0,
        gpu_queries: gpu_load as f64,
        gpu_rate: r.gpu_rate.max(1e-9),
    };
    loads.steal_pays(longest, total, r.gpu_latency)
}

/// `batch`, taken by a CPU thread from the GPU's queue, hedged where it is one whole query: sent to
/// the GPU again if the CPU has not answered it within `hedge_after` times the GPU's latency.
pub(crate) fn hedge_stolen(router: &Router, hedger: Option<&Hedger>, batch: Batch) -> Batch {
    let Some(hedger) = hedger else {
        return batch;
    };
    let Items::Tasks(tasks) = &batch.items else {
        return batch;
    };
    let [task] = tasks.as_slice() else {
        return batch;
    };
    if task.gather.is_some() {
        return batch;
    }
    let latency = lock(&router.rates).gpu_latency;
    let (submitted, deadline, reply) = (batch.submitted, batch.deadline, batch.reply.clone());
    let first = hedger.watch(task, latency, Instant::now(), submitted, deadline, reply);
    Batch {
        reply: first,
        ..batch
    }
}

/// Which executor takes a query.
#[derive(Clone, Copy, PartialEq)]
enum To {
    Cpu,
    Gpu,
}

impl Loads {
    fn now(router: &Router, cpu: &CpuExecutor, gpu: Option<&GpuExecutor>, whole_batch: bool) -> Loads {
        let r = *lock(&router.rates);
        Loads {
            has_gpu: gpu.is_some(),
            margin: router.options.margin.max(0.0),
            whole_batch,
            cpu_free: cpu.free(),
            workers: cpu.threads().max(1) as f64,
            cpu_backlog: cpu.backlog(),
            gpu_queries: gpu.map_or(0, GpuExecutor::load) as f64,
            gpu_rate: r.gpu_rate.max(1e-9),
        }
    }

    /// Whether a CPU thread with nothing to do should take a batch of the GPU's queue whose tasks are
    /// predicted at `longest` and `total` seconds on one core: only where the CPU's threads are
    /// predicted to answer it sooner, by the margin, than the GPU (its queue and a call's latency
    /// `latency`) would. A long query taken by a core that would finish it after the GPU is the
    /// hybrid's worst tail.
    fn steal_pays(&self, longest: f64, total: f64, latency: f64) -> bool {
        let cpu_done = longest.max(total / self.workers);
        cpu_done * (1.0 + self.margin) < self.gpu_done(latency, 0.0)
    }

    /// Seconds until the GPU, given work now, answers it: a call's fixed cost `intercept`, what it has
    /// queued or running at its measured rate, and the work's own `seconds`.
    fn gpu_done(&self, intercept: f64, seconds: f64) -> f64 {
        intercept + self.gpu_queries / self.gpu_rate + seconds
    }

    /// Whether a query split into `cpu_parts` CPU parts over `1 − gpu_share` of the documents and a
    /// GPU part over the rest (where `gpu_part`) is predicted to be answered sooner, by the margin,
    /// than whole by the processor that answers it first: a split waits for its slowest part, so one
    /// whose CPU parts outlast the GPU's answer to the whole query only lengthens it.
    fn split_pays(&self, e: &Estimate, cpu_parts: usize, gpu_share: f64, gpu_part: bool) -> bool {
        let cpu_part = match cpu_parts {
            0 => 0.0,
            p => e.cpu * (1.0 - gpu_share) / p as f64,
        };
        let gpu_part = match gpu_part {
            true => self.gpu_done(e.intercept, e.gpu * gpu_share),
            false => 0.0,
        };
        let whole = match self.has_gpu {
            true => e.cpu.min(self.gpu_done(e.intercept, e.gpu)),
            false => e.cpu,
        };
        cpu_part.max(gpu_part) * (1.0 + self.margin) < whole
    }

    /// The processor predicted to finish `e` first, its load counted. The CPU takes a query only when
    /// it is predicted to finish it sooner by the margin, and, but for a large batch, only on a free
    /// thread: a query queued behind another on a core waits for all of it, where the GPU answers
    /// many at once (and a thread with nothing to do takes the oldest batch of the GPU's queue where
    /// more than one waits and it answers it sooner, [`Loads::steal_pays`]).
    fn choose(&mut self, e: &Estimate) -> To {
        if !self.has_gpu {
            return To::Cpu;
        }
        let gpu_done = self.gpu_done(e.intercept, e.gpu);
        let cpu_done = match (self.cpu_free, self.whole_batch) {
            (0, false) => f64::INFINITY,
            (0, true) => self.cpu_backlog / self.workers + e.cpu,
            _ => e.cpu,
        };
        if cpu_done * (1.0 + self.margin) < gpu_done {
            match self.cpu_free {
                0 => self.cpu_backlog += e.cpu,
                _ => self.cpu_free -= 1,
            }
            To::Cpu
        } else {
            self.gpu_queries += 1.0;
            To::Gpu
        }
    }
}

/// Counts each answer by who gave it (before it is sent, so that a caller woken by the last answer
/// reads counters that include it).
struct Counted {
    reply: Arc<dyn Reply>,
    router: Arc<Router>,
}

impl Counted {
    fn count(&self, done: &Done) {
        let c = &self.router.counters;
        bump(
            match done.served_by {
                ServedBy::Cpu => &c.cpu_queries,
                ServedBy::Gpu => &c.gpu_queries,
                ServedBy::Both => &c.both_queries,
            },
            1,
        );
        if done.missed_deadline {
            bump(&c.deadline_misses, 1);
        }
    }
}

impl Reply for Counted {
    fn send(&self, done: Done) {
        self.count(&done);
        self.reply.send(done);
    }

    fn send_many(&self, done: Vec<Done>) {
        for d in &done {
            self.count(d);
        }
        self.reply.send_many(done);
    }

    fn wanted(&self) -> bool {
        self.reply.wanted()
    }
}

/// Tasks routed together per look at the executors' loads in a burst.
const BURST_CHUNK: usize = 1024;

/// Routes `requests` (request i's answer goes to `reply` with id `first_id + i`).
#[allow(clippy::too_many_arguments)]
pub(crate) fn submit(
    router: &Arc<Router>,
    cpu: &CpuExecutor,
    gpu: Option<&GpuExecutor>,
    hedger: Option<&Hedger>,
    index: &Arc<Index>,
    first_id: u64,
    requests: Vec<Request>,
    deadline: Option<Duration>,
    reply: Arc<dyn Reply>,
) {
    let reply: Arc<dyn Reply> = Arc::new(Counted {
        reply,
        router: router.clone(),
    });
    let submitted = Instant::now();
    let estimates = |requests: &[Request]| -> Vec<Estimate> {
        let features: Vec<Features> = requests.iter().map(|r| Features::of(index, &r.query)).collect();
        let gpu_latency = lock(&router.rates).gpu_latency;
        let model = lock(&router.model);
        requests
            .iter()
            .zip(features)
            .map(|(r, f)| estimate(router, &model, gpu_latency, r, f))
            .collect()
    };
    if requests.len() == 1 {
        let e = estimates(&requests).pop().expect("one estimate");
        let request = requests.into_iter().next().expect("one request");
        let to = Executors { cpu, gpu, hedger };
        submit_one(
            router, to, index, first_id, request, e, submitted, deadline, reply,
        );
        return;
    }
    let whole_batch = requests.len() > BURST_CHUNK;
    // A burst (a closed loop): never split; routed and queued a chunk at a time, so that the
    // executors start on the first while the rest are made, each chunk against the loads as the
    // chunks before it left them.
    let route = |(c, chunk): (usize, Vec<Request>)| {
        let e = estimates(&chunk);
        let mut loads = Loads::now(router, cpu, gpu, whole_batch);
        let (mut to_cpu, mut to_gpu) = (Vec::new(), Vec::new());
        for (i, (request, e)) in chunk.into_iter().zip(e).enumerate() {
            let task = Task {
                learn: Some(e.features),
                cost: e.cpu,
                ..Task::whole(first_id + (c * BURST_CHUNK + i) as u64, request)
            };
            match loads.choose(&e) {
                To::Cpu => to_cpu.push(task),
                To::Gpu => to_gpu.push(task),
            }
        }
        if !to_gpu.is_empty() {
            let gpu = gpu.expect("the GPU is chosen only where there is one");
            gpu.submit(Batch::tasks(to_gpu, submitted, deadline, reply.clone()));
        }
        if !to_cpu.is_empty() {
            cpu.submit(Batch::tasks(to_cpu, submitted, deadline, reply.clone()));
        }
    };
    let here = requests.len() <= BURST_CHUNK || rayon::current_thread_index().is_some();
    let chunks = || {
        let mut requests = requests.into_iter().peekable();
        std::iter::from_fn(move || {
            requests.peek()?;
            Some(requests.by_ref().take(BURST_CHUNK).collect::<Vec<_>>())
        })
        .enumerate()
    };
    // A burst of several chunks is routed on all cores (in no set order: every answer goes to its
    // id). One chunk (a server's request) is routed where it is submitted, and so is a burst
    // submitted from a rayon thread: that thread may hold a lock (the Python package's engine) that
    // a job stolen while it waits would take again.
    if here {
        chunks().for_each(route);
    } else {
        chunks().par_bridge().for_each(route);
    }
}

/// Where a query can go: the executors, and the hedger of the queries given to the CPU.
#[derive(Clone, Copy)]
struct Executors<'a> {
    cpu: &'a CpuExecutor,
    gpu: Option<&'a GpuExecutor>,
    hedger: Option<&'a Hedger>,
}

/// Routes one query: whole, or split when there is spare capacity and it is long. A whole query
/// given to the CPU while there is a GPU is hedged: sent to the GPU as well if the CPU has not
/// answered it by the time the GPU was predicted to (times `hedge_after`).
#[allow(clippy::too_many_arguments)]
fn submit_one(
    router: &Arc<Router>,
    to: Executors,
    index: &Index,
    id: u64,
    request: Request,
    e: Estimate,
    submitted: Instant,
    deadline: Option<Duration>,
    reply: Arc<dyn Reply>,
) {
    let Executors { cpu, gpu, hedger } = to;
    let options = &router.options;
    let idle = cpu.free();
    let mut loads = Loads::now(router, cpu, gpu, false);
    let cpu_parts = idle.clamp(1, options.split_parts.max(1));
    // The GPU's share of a split query: its part (latency a + s·g) should end when the CPU parts
    // ((1 − s)·c / P) do; or the share the options fix. A GPU with a list cache takes whole queries
    // only.
    let gpu_share = match (gpu.is_some() && !router.cached, options.split_gpu_share) {
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
    // Spare capacity (at least two threads free, so that the parts run at once, side by side), a
    // long query, and parts predicted to end sooner than the whole query would.
    let split = idle > 1
        && request.mode != Mode::AndOr
        && !request.query.matches_nothing(request.mode)
        && options
            .split_above
            .is_some_and(|limit| e.cpu > limit.as_secs_f64())
        && loads.split_pays(&e, cpu_parts, gpu_share, gpu_part);
    if !split {
        let task = Task {
            learn: Some(e.features),
            cost: e.cpu,
            ..Task::whole(id, request)
        };
        let gpu_done = loads.gpu_done(e.intercept, e.gpu);
        // A hedger exists only beside a GPU, and only where hedging is asked for.
        match (loads.choose(&e), gpu, hedger) {
            (To::Gpu, Some(gpu), _) => {
                gpu.submit(Batch::tasks(vec![task], submitted, deadline, reply));
            }
            (To::Cpu, _, Some(hedger)) => {
                let first = hedger.watch(&task, gpu_done, submitted, submitted, deadline, reply);
                cpu.submit(Batch::tasks(vec![task], submitted, deadline, first));
            }
            _ => cpu.submit(Batch::tasks(vec![task], submitted, deadline, reply)),
        }
        return;
    }
    let parts = cpu_parts + usize::from(gpu_part);
    bump(&router.counters.splits, 1);
    let num_docs = index.num_docs();
    let gather = Arc::new(Gather::new(id, request.k, parts, submitted, deadline, reply));
    let part = |range: DocRange, share: f64| Task {
        id,
        request: request.clone(),
        range,
        gather: Some(gather.clone()),
        learn: None,
        cost: e.cpu * share,
        copy: false,
    };
    let cut = ((gpu_share * num_docs as f64) as u32).min(num_docs);
    let start = if gpu_part { cut } else { 0 };
    let span = (num_docs - start) as u64;
    let tasks: Vec<Task> = (0..cpu_parts as u64)
        .map(|p| {
            let lo = start + (span * p / cpu_parts as u64) as u32;
            let hi = start + (span * (p + 1) / cpu_parts as u64) as u32;
            part(
                DocRange::half_open(lo, hi),
                (hi - lo) as f64 / num_docs.max(1) as f64,
            )
        })
        .collect();
    if let (true, Some(gpu)) = (gpu_part, gpu) {
        let task = part(DocRange::half_open(0, cut), gpu_share);
        gpu.submit(Batch::tasks(vec![task], submitted, deadline, gather.clone()));
    }
    if !tasks.is_empty() {
        cpu.submit(Batch::tasks(tasks, submitted, deadline, gather));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A query predicted at `cpu` seconds on a core and `gpu` seconds of a GPU call, whose latency
    /// floor is 1 ms.
    fn query(cpu: f64, gpu: f64) -> Estimate {
        Estimate {
            features: Features {
                shortest: 1,
                second: 0,
                sum: 1,
                terms: 1,
                ..Features::default()
            },
            cpu,
            gpu,
            intercept: 0.001,
        }
    }

    /// Loads with a GPU answering 100,000 queries a second, `free` CPU threads of 4, and `backlog`
    /// seconds queued on the CPU.
    fn loads(free: usize, backlog: f64, whole_batch: bool) -> Loads {
        Loads {
            has_gpu: true,
            margin: 0.2,
            whole_batch,
            cpu_free: free,
            workers: 4.0,
            cpu_backlog: backlog,
            gpu_queries: 0.0,
            gpu_rate: 100_000.0,
        }
    }

    #[test]
    fn the_cpu_takes_a_query_on_a_free_thread_only_when_it_finishes_it_sooner_by_the_margin() {
        // 0.5 ms on a core against the GPU's 1 ms floor: the CPU, while it has a free thread.
        let mut l = loads(2, 0.0, false);
        assert!(l.choose(&query(0.0005, 0.0)) == To::Cpu);
        assert!(l.choose(&query(0.0005, 0.0)) == To::Cpu);
        assert_eq!(l.cpu_free, 0);
        // No thread free: the GPU, however cheap the query is on a core.
        assert!(l.choose(&query(0.0005, 0.0)) == To::Gpu);
        assert_eq!(l.gpu_queries, 1.0);
        // 0.9 ms is sooner than the GPU's 1 ms, but not by 20%: the GPU.
        let mut l = loads(4, 0.0, false);
        assert!(l.choose(&query(0.0009, 0.0)) == To::Gpu);
        assert_eq!(l.cpu_free, 4);
    }

    #[test]
    fn the_gpu_queue_counts_in_its_completion() {
        // 5 ms on a core loses to an idle GPU (1 ms) and wins against 1,000 queries queued there
        // (1 + 10 ms).
        let mut l = loads(1, 0.0, false);
        assert!(l.choose(&query(0.005, 0.0)) == To::Gpu);
        let mut l = loads(1, 0.0, false);
        l.gpu_queries = 1000.0;
        assert!(l.choose(&query(0.005, 0.0)) == To::Cpu);
    }

    #[test]
    fn a_large_batch_queues_on_the_cpu_while_it_finishes_sooner_there() {
        // No thread free, 4 ms queued on 4 threads: 1 ms to wait, plus 0.1 ms, against the GPU's
        // 1 ms floor and its queue.
        let mut l = loads(0, 0.004, true);
        l.gpu_queries = 1000.0;
        assert!(l.choose(&query(0.0001, 0.0)) == To::Cpu);
        assert!((l.cpu_backlog - 0.0041).abs() < 1e-12);
        // The same query of an open loop's submission waits for no queue on the CPU: the GPU.
        let mut l = loads(0, 0.004, false);
        l.gpu_queries = 1000.0;
        assert!(l.choose(&query(0.0001, 0.0)) == To::Gpu);
        // A batch shares out between the two: of 2,000 queries of 0.1 ms on a core, some go to each.
        let mut l = loads(0, 0.0, true);
        let to_cpu = (0..2000)
            .filter(|_| l.choose(&query(0.0001, 0.00001)) == To::Cpu)
            .count();
        assert!(to_cpu > 0 && to_cpu < 2000, "{to_cpu} of 2,000 to the CPU");
    }

    #[test]
    fn a_free_thread_takes_from_the_gpu_queue_only_what_it_answers_sooner() {
        // An idle GPU answers in its 10 ms latency: a query of 5 ms on a core is taken, one of 9 ms
        // (sooner, but not by 20%) and one of 100 ms are left to it.
        let l = loads(1, 0.0, false);
        assert!(l.steal_pays(0.005, 0.005, 0.010));
        assert!(!l.steal_pays(0.009, 0.009, 0.010));
        assert!(!l.steal_pays(0.1, 0.1, 0.010));
        // With 10,000 queries ahead on the GPU (100 ms more), the 50 ms query is taken.
        let mut l = loads(1, 0.0, false);
        l.gpu_queries = 10_000.0;
        assert!(l.steal_pays(0.05, 0.05, 0.010));
        // A batch of 1,000 queries of 1 ms each is shared by the 4 threads: 250 ms, against the
        // GPU's 110 ms, is left to it.
        assert!(!l.steal_pays(0.001, 1.0, 0.010));
    }

    #[test]
    fn a_query_is_split_only_where_its_parts_end_before_the_whole_query_would() {
        // 100 ms on a core, 2 ms of the GPU's work, an idle GPU (1 ms floor): the GPU answers the
        // whole in 3 ms, and 4 CPU parts of 70% of the documents take 17.5 ms: no split.
        let l = loads(4, 0.0, false);
        let long = query(0.1, 0.002);
        assert!(!l.split_pays(&long, 4, 0.3, true));
        // With 10,000 queries ahead of it on the GPU (103 ms): the split (its GPU part 101.6 ms)
        // is not sooner by 20% either; CPU parts alone (25 ms) are.
        let mut l = loads(4, 0.0, false);
        l.gpu_queries = 10_000.0;
        assert!(!l.split_pays(&long, 4, 0.3, true));
        assert!(l.split_pays(&long, 4, 0.0, false));
        // Without a GPU, parts on idle threads always end before the whole query.
        let mut l = loads(4, 0.0, false);
        l.has_gpu = false;
        assert!(l.split_pays(&query(0.006, 0.0), 2, 0.0, false));
        // One part is the whole query: never sooner.
        assert!(!l.split_pays(&query(0.006, 0.0), 1, 0.0, false));
    }

    #[test]
    fn a_hedges_copy_is_never_taken_back_by_the_cpu() {
        use crate::hybrid::HybridOptions;
        use warpsearch_query::Query;
        let router = Router::new(HybridOptions::default(), true, false);
        let (tx, _rx) = std::sync::mpsc::channel();
        let reply: Arc<dyn Reply> = Arc::new(tx);
        let batch = |copy: bool| {
            let request = Request::new(Query::from_ids(&[Some(1)]), Mode::Or, 10);
            let task = Task {
                cost: 1e-6,
                copy,
                ..Task::whole(1, request)
            };
            Batch::tasks(vec![task], Instant::now(), None, reply.clone())
        };
        // A microsecond on a core against the GPU's 10 ms (its default latency): taken, unless the
        // CPU runs the query already.
        assert!(cpu_may_take(&router, &batch(false), 0));
        assert!(!cpu_may_take(&router, &batch(true), 0));
    }

    #[test]
    fn without_a_gpu_every_query_goes_to_the_cpu() {
        let mut l = loads(0, 10.0, false);
        l.has_gpu = false;
        assert!(l.choose(&query(1.0, 0.0)) == To::Cpu);
    }
}
