//! The scheduler's threads: a CPU worker per core runs one task at a time; the GPU dispatcher owns the
//! GPU searcher and runs one batch at a time. Both pick under the state lock ([`super::queues`]) and
//! run outside it.

use std::sync::Arc;
use std::time::Instant;

use warpsearch_gpu::GpuSearcher;
use warpsearch_query::{DocRange, Mode, Part, Request};

use super::job::{Processor, ServedBy};
use super::queues::{Pick, Policy, Preference};
use super::stats::bump;
use super::{lock, Shared};
use crate::cost::Features;

fn policy(s: &Shared) -> Policy {
    Policy {
        urgency: s.options.urgency,
        cpu_workers: s.options.cpu_workers,
        max_batch: s.options.max_batch.max(1),
        batch_target: s.options.batch_target.as_secs_f64(),
    }
}

/// Counts a finished query.
fn count_done(s: &Shared, done: Option<(ServedBy, std::time::Duration, bool)>) {
    if let Some((by, _, missed)) = done {
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

fn observe(s: &Shared, seen: &mut Vec<(Mode, Features, f64)>) {
    if !seen.is_empty() {
        let mut model = lock(&s.model);
        for (mode, f, seconds) in seen.drain(..) {
            model.observe_cpu(mode, &f, seconds);
        }
    }
}

/// Runs tasks on the CPU until the scheduler stops and nothing is left.
pub(super) fn cpu_worker(s: &Arc<Shared>) {
    let mut seen = Vec::with_capacity(OBSERVE_EVERY);
    loop {
        if seen.len() >= OBSERVE_EVERY {
            observe(s, &mut seen);
        }
        let (task, pick) = {
            let mut st = lock(&s.state);
            loop {
                if let Some(next) = st.queues.next_for_cpu(Instant::now(), &policy(s), s.has_gpu) {
                    break next;
                }
                if !seen.is_empty() {
                    // Going idle: hand over the measurements first (not under the state lock).
                    drop(st);
                    observe(s, &mut seen);
                    st = lock(&s.state);
                    continue;
                }
                if st.shutdown {
                    return;
                }
                st.idle_cpu += 1;
                st = s
                    .cpu_ready
                    .wait(st)
                    .expect("no scheduler thread panics under a lock");
                st.idle_cpu -= 1;
            }
        };
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
        let result = s.cpu.search_part(&job.request, job.request.mode, part);
        if task.range.is_none() && !job.request.query.matches_nothing(job.request.mode) {
            seen.push((job.request.mode, job.features, started.elapsed().as_secs_f64()));
        }
        count_done(s, job.finish_part(result, Processor::Cpu));
    }
}

/// Runs batches on the GPU until the scheduler stops and nothing is left; a task the GPU fails goes
/// back to the CPU as a part (run first).
pub(super) fn gpu_dispatcher(s: &Arc<Shared>, mut gpu: GpuSearcher) {
    loop {
        let batch = {
            let mut st = lock(&s.state);
            loop {
                let intercept = {
                    let m = lock(&s.model);
                    m.gpu_batch(Mode::Or, 0.0)
                };
                let batch = st
                    .queues
                    .next_for_gpu(Instant::now(), &policy(s), |cost| intercept + cost);
                if !batch.is_empty() {
                    st.queues.gpu_in_flight += batch.iter().map(|(t, _)| t.gpu_cost).sum::<f64>();
                    break batch;
                }
                if st.shutdown {
                    return;
                }
                st = s
                    .gpu_ready
                    .wait(st)
                    .expect("no scheduler thread panics under a lock");
            }
        };
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
        let requests: Vec<Request> = batch.iter().map(|(t, _)| t.job.request.clone()).collect();
        let ranges: Vec<DocRange> = batch
            .iter()
            .map(|(t, _)| t.range.unwrap_or(DocRange::ALL))
            .collect();
        let started = Instant::now();
        let answers = gpu.search_batch_in(&requests, Some(&ranges));
        let seconds = started.elapsed().as_secs_f64();
        let modes = requests.iter().map(|r| r.mode);
        if let Some(mode) = modes.clone().next().filter(|m| modes.clone().all(|x| x == *m)) {
            let work: f64 = batch.iter().map(|(t, _)| t.work).sum();
            lock(&s.model).observe_gpu(mode, work, seconds);
        }
        {
            let g = gpu.take_stats();
            let mut total = lock(&s.gpu_stats);
            total.add(&g);
        }
        let in_flight: f64 = batch.iter().map(|(t, _)| t.gpu_cost).sum();
        let mut failed = Vec::new();
        for ((task, _), answer) in batch.into_iter().zip(answers) {
            match answer {
                Ok(a) => count_done(s, task.job.finish_part(Ok(a.hits), Processor::Gpu)),
                Err(_) => failed.push(task),
            }
        }
        let mut st = lock(&s.state);
        st.queues.gpu_in_flight = (st.queues.gpu_in_flight - in_flight).max(0.0);
        if !failed.is_empty() {
            bump(&s.counters.gpu_fallbacks, failed.len() as u64);
            bump(&s.unreported_fallbacks, failed.len() as u64);
            for mut t in failed {
                t.preference = Preference::Cpu;
                st.queues.parts.push_front(t);
            }
            drop(st);
            s.cpu_ready.notify_all();
        }
    }
}
