//! A batch's results back: waited for, turned into answers (the parts of a query cut into docID
//! ranges merged), counted in the statistics and, with tracing, its timeline reported; and, in a
//! batch still running whose answers go to host memory, the answers of the queries already done.

use std::time::Instant;

use warpsearch_query::{keep_top_k, Answer, Scored};

use super::calls::CallId;
use super::slot::{InFlight, Slot};
use super::GpuSearcher;
use crate::abi::{COUNT_FAILED, COUNT_PENDING, PHASE_COUNTERS, PH_BLOCKS};
use crate::error::GpuError;
use crate::stats::batch_times;

impl GpuSearcher {
    /// Waits for slot `s`'s batch, if any, and turns its results into answers.
    pub(super) fn harvest(&mut self, s: usize) {
        let Some(job) = self.slots[s].in_flight.take() else {
            return;
        };
        let call = job.call;
        self.collect(s, job);
        self.calls.batch_back(call);
    }

    /// Writes the answers of `job`, the batch slot `s` ran (waiting for it).
    fn collect(&mut self, s: usize, job: InFlight) {
        let slot = &self.slots[s];
        let wait = Instant::now();
        let synced = slot.events[3].synchronize();
        self.stats.wait_ms += wait.elapsed().as_secs_f64() * 1e3;
        let waited = synced.and_then(|_| {
            let t = |a: usize, b: usize| slot.events[a].elapsed_ms(&slot.events[b]).map(|x| x as f64);
            Ok((t(0, 1)?, t(1, 2)?, t(2, 3)?))
        });
        let p = &job.prepared;
        let (h2d, kernel, d2h) = match waited {
            Ok(t) => t,
            Err(e) => {
                // The parts of a query cut into docID ranges are adjacent: one answer each (those
                // answered before the batch failed keep their answers).
                let which: Vec<usize> = query_tasks(&p.slots)
                    .filter(|&(t, _)| !job.early[t])
                    .map(|(t, _)| p.slots[t])
                    .collect();
                self.fail(job.call, &which, |n| {
                    format!("a GPU batch of {n} queries failed ({e})")
                });
                return;
            }
        };
        self.stats.h2d_ms += h2d;
        self.stats.kernel_ms += kernel;
        self.stats.d2h_ms += d2h;
        if let Some(epoch) = &self.trace {
            epoch.report(s, &job, &slot.events, (h2d, kernel, d2h));
        }
        if self.gopts.instrument {
            let ph = slot.h_phases.as_slice();
            for cta in ph.chunks(PHASE_COUNTERS) {
                for (acc, &c) in self.stats.phase_cycles.iter_mut().zip(cta) {
                    *acc += c;
                }
                self.stats.decoded_blocks += cta[PH_BLOCKS];
            }
            let ns = &slot.h_task_ns.as_slice()[..2 * p.slots.len()];
            self.stats.keep_times(batch_times(ns, &p.slots, kernel));
        }
        let latency = job.started.elapsed();
        let mut failed = Vec::new();
        for (t, end) in query_tasks(&p.slots) {
            if job.early[t] {
                continue;
            }
            let i = p.slots[t];
            match query_hits(slot, t..end, job.k) {
                Some(hits) => self.calls.answer(job.call, i, Ok(Answer { hits, latency })),
                None => failed.push(i),
            }
        }
        self.fail(job.call, &failed, |n| {
            format!("{n} queries failed on the GPU (a malformed block)")
        });
    }

    /// Answers the queries of slot `s`'s batch whose tasks are all done while the batch still runs
    /// (its answers in host memory: [`crate::GpuOptions::map_answers`]), for
    /// [`GpuSearcher::take_early`].
    pub(super) fn answer_early(&mut self, s: usize) {
        let slot = &mut self.slots[s];
        let Some(job) = slot.in_flight.as_mut() else {
            return;
        };
        let ready = finished(&mut job.pending, |t| slot.h_count.volatile(t));
        if ready.is_empty() {
            return;
        }
        let slot = &self.slots[s];
        let job = slot.in_flight.as_ref().expect("in flight");
        // The kernel wrote each task's hits before its count (fenced); read them after the counts.
        std::sync::atomic::fence(std::sync::atomic::Ordering::Acquire);
        let latency = job.started.elapsed();
        let mut answered = Vec::with_capacity(ready.len());
        for (t, end) in ready {
            let i = job.prepared.slots[t];
            // A failed or malformed part leaves the query to the batch's end, where it is failed.
            let Some(hits) = query_hits(slot, t..end, job.k) else {
                continue;
            };
            let answer = Answer { hits, latency };
            self.calls.answer(job.call, i, Ok(answer.clone()));
            self.answered_early.push((job.call, i, answer));
            answered.push(t);
        }
        self.stats.answered_early += answered.len() as u64;
        let job = self.slots[s].in_flight.as_mut().expect("in flight");
        for t in answered {
            job.early[t] = true;
        }
    }

    /// Marks requests `which` of call `call` failed, with `why(number of queries)` as the reason.
    pub(super) fn fail(&mut self, call: CallId, which: &[usize], why: impl Fn(usize) -> String) {
        if which.is_empty() {
            return;
        }
        let why = why(which.len());
        self.stats.failed_queries += which.len() as u64;
        for &i in which {
            self.calls.answer(call, i, Err(GpuError::Failed(why.clone())));
        }
    }
}

/// The tasks (first, end) of each query of a batch whose task `t` answers query `slots[t]`: a
/// query's docID-range parts are adjacent.
pub(super) fn query_tasks(slots: &[usize]) -> impl Iterator<Item = (usize, usize)> + '_ {
    let mut t = 0;
    std::iter::from_fn(move || {
        let first = t;
        let i = *slots.get(first)?;
        t += slots[first..].iter().take_while(|&&j| j == i).count();
        Some((first, t))
    })
}

/// Of `pending` (each query's tasks, first and end), those whose every task's count (`count(t)`) is
/// in, taken out of it: the queries that can be answered. A query with a failed or malformed part is
/// taken out too and left to the batch's end.
fn finished(pending: &mut Vec<(usize, usize)>, count: impl Fn(usize) -> u32) -> Vec<(usize, usize)> {
    let mut ready = Vec::new();
    pending.retain(|&(t, end)| {
        let done = (t..end).all(|u| count(u) != COUNT_PENDING);
        if done {
            ready.push((t, end));
        }
        !done
    });
    ready
}

/// The hits of the query answered by tasks `tasks` of `slot`'s batch at `k`: its parts' top-k lists
/// merged (each document belongs to one part, so the merged top k is exact); None where a part
/// failed (a malformed block) or its count is out of range.
fn query_hits(slot: &Slot, tasks: std::ops::Range<usize>, k: usize) -> Option<Vec<Scored>> {
    let parts = tasks.len();
    // The counts first, to refuse a failed part and to allocate exactly (a task's count, once in,
    // is written no more).
    let mut total = 0;
    for t in tasks.clone() {
        let c = slot.h_count.volatile(t);
        if c == COUNT_FAILED || c as usize > k {
            return None;
        }
        total += c as usize;
    }
    let mut hits = Vec::with_capacity(total);
    for t in tasks {
        let at = t * k..t * k + slot.h_count.volatile(t) as usize;
        // SAFETY: the task's count is in, read after its hits: the kernel writes them no more.
        let (docs, scores) = unsafe { (slot.h_doc.written(at.clone()), slot.h_score.written(at)) };
        hits.extend(
            docs.iter()
                .zip(scores)
                .map(|(&doc, &score)| Scored { doc, score }),
        );
    }
    // One part's hits are its top k, best first, as the kernel wrote them.
    if parts > 1 {
        keep_top_k(&mut hits, k);
    }
    Some(hits)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_querys_tasks_are_its_adjacent_parts() {
        let got: Vec<_> = query_tasks(&[4, 4, 4, 1, 7, 7]).collect();
        assert_eq!(got, vec![(0, 3), (3, 4), (4, 6)]);
        assert_eq!(query_tasks(&[]).count(), 0);
    }

    #[test]
    fn a_query_is_answered_once_all_its_parts_are_in() {
        // Query A: tasks 0..2, B: 2..3, C: 3..6; A's second part and C's last are still running.
        let mut counts = [10, COUNT_PENDING, 3, 10, 10, COUNT_PENDING];
        let mut pending = vec![(0, 2), (2, 3), (3, 6)];
        let got = finished(&mut pending, |t| counts[t]);
        assert_eq!((got, pending.clone()), (vec![(2, 3)], vec![(0, 2), (3, 6)]));
        // A's part comes back failed: A is taken out (left to the batch's end), C stays.
        counts[1] = COUNT_FAILED;
        let got = finished(&mut pending, |t| counts[t]);
        assert_eq!((got, pending.clone()), (vec![(0, 2)], vec![(3, 6)]));
        counts[5] = 0;
        assert_eq!(finished(&mut pending, |t| counts[t]), vec![(3, 6)]);
        assert!(pending.is_empty());
        assert!(finished(&mut pending, |t| counts[t]).is_empty());
    }
}
