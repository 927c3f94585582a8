//! A batch's results back: waited for, turned into answers (the parts of a query cut into docID
//! ranges merged), counted in the statistics and, with tracing, its timeline reported.

use std::time::Instant;

use warpsearch_query::{merge_top_k, Answer, Scored};

use super::calls::CallId;
use super::slot::InFlight;
use super::GpuSearcher;
use crate::abi::{COUNT_FAILED, PHASE_COUNTERS, PH_BLOCKS};
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
                // The parts of a query cut into docID ranges are adjacent: one answer each.
                let mut which: Vec<usize> = p.slots.clone();
                which.dedup();
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
        let k = job.k;
        let (counts, docs, scores) = (
            slot.h_count.as_slice(),
            slot.h_doc.as_slice(),
            slot.h_score.as_slice(),
        );
        let mut failed = Vec::new();
        // Descriptors of one query are adjacent: its docID-range parts, whose top-k lists merge into the
        // query's (each document belongs to one part, so the merged top k is exact).
        let mut out = 0;
        while out < p.slots.len() {
            let i = p.slots[out];
            let end = out + p.slots[out..].iter().take_while(|&&j| j == i).count();
            let parts: Option<Vec<Vec<Scored>>> = (out..end)
                .map(|part| {
                    let c = counts[part];
                    (c != COUNT_FAILED && c as usize <= k).then(|| {
                        let base = part * k;
                        (0..c as usize)
                            .map(|j| Scored {
                                doc: docs[base + j],
                                score: scores[base + j],
                            })
                            .collect()
                    })
                })
                .collect();
            match parts {
                Some(mut parts) => {
                    let hits = if parts.len() == 1 {
                        parts.pop().expect("one part")
                    } else {
                        merge_top_k(&parts, k)
                    };
                    self.calls.answer(job.call, i, Ok(Answer { hits, latency }));
                }
                None => failed.push(i),
            }
            out = end;
        }
        self.fail(job.call, &failed, |n| {
            format!("{n} queries failed on the GPU (a malformed block)")
        });
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
