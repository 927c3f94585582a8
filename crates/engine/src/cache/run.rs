//! The GPU backend with a list cache: each kernel batch's queries are split by what the cache (and a
//! batch's staging space) covers, the GPU answers its parts, and CPU threads complete the partial ones
//! while the GPU runs the next batch (papers/000 section 3.1.4: post-processing hidden behind the GPU).

use std::sync::mpsc::channel;
use std::time::Instant;

use rayon::prelude::*;
use warpsearch_cpu::CpuSearcher;
use warpsearch_gpu::GpuSearcher;
use warpsearch_index::{IndexError, Result};
use warpsearch_query::{Answer, DocRange, Request};

use super::{complete, gpu_request, kth, take_answer, CacheCtl, Partial, Split};

/// Answers every request, in order, exactly once: the GPU's parts, completed on the CPU; what the GPU
/// fails or cannot take, on the CPU. Also returns how many the GPU failed.
pub fn search_batch(
    gpu: &mut GpuSearcher,
    cpu: &CpuSearcher,
    ctl: &CacheCtl,
    requests: &[Request],
) -> (Vec<Result<Answer>>, u64) {
    let mut failed = 0u64;
    let mut out: Vec<Option<Result<Answer>>> = (0..requests.len()).map(|_| None).collect();
    let (tx, rx) = channel::<(usize, Result<Answer>)>();
    let all = DocRange {
        first: 0,
        last: cpu.scorer().index().num_docs().saturating_sub(1),
    };
    let chunk = gpu.batch_size().max(1);
    let trace = warpsearch_gpu::cache::tracing();
    rayon::scope(|scope| {
        for (c, reqs) in requests.chunks(chunk).enumerate() {
            let base = c * chunk;
            let started = Instant::now();
            // On all cores: a chunk's splits took the GPU's thread 15–30 ms on the 25M collection.
            let view = gpu.view();
            let splits: Vec<Split> = reqs.par_iter().map(|r| ctl.split(&view, r, all)).collect();
            // One GPU request per range: `Two` gives two, adjacent.
            let on_gpu: Vec<(usize, DocRange)> = splits
                .iter()
                .enumerate()
                .flat_map(|(i, s)| s.gpu_ranges(all).map(move |r| (i, r)))
                .collect();
            let gpu_reqs: Vec<Request> = on_gpu
                .iter()
                .map(|&(i, _)| gpu_request(&reqs[i], splits[i]))
                .collect();
            let ranges: Vec<DocRange> = on_gpu.iter().map(|&(_, r)| r).collect();
            let split_at = started.elapsed();
            let mut answers = gpu.search_batch_in(&gpu_reqs, Some(&ranges)).into_iter();
            let gpu_at = started.elapsed();
            // What the CPU does for this batch: completions, failures, queries the GPU cannot take.
            let mut work: Vec<(usize, Option<(Partial, Answer)>)> = Vec::new();
            // The GPU's whole answers, for the dynamic policy: observed on the CPU while the GPU runs
            // the next chunk, not on the GPU's thread (a microsecond or more a query).
            let mut seen: Vec<(usize, Option<f32>)> = Vec::new();
            for (i, &split) in splits.iter().enumerate().filter(|&(_, &s)| s != Split::Cpu) {
                let (answer, or_pass) = take_answer(split, &reqs[i], &mut answers);
                // and-or with fewer than k AND documents still needs its OR pass (nothing else left).
                let rest = match split {
                    Split::Partial(_, rest) => Some(rest),
                    _ => or_pass.then_some(DocRange::EMPTY),
                };
                match (answer, rest) {
                    (Ok(a), Some(rest)) => {
                        let partial = Partial {
                            hits: a.hits.clone(),
                            rest,
                            whole: all,
                        };
                        work.push((base + i, Some((partial, a))));
                    }
                    (Ok(a), None) => {
                        seen.push((base + i, kth(&reqs[i], Some(&a.hits))));
                        out[base + i] = Some(Ok(a));
                    }
                    (Err(_), _) => {
                        failed += 1;
                        work.push((base + i, None))
                    }
                }
            }
            for i in (0..reqs.len()).filter(|&i| splits[i] == Split::Cpu) {
                work.push((base + i, None));
            }
            if trace {
                let ms = |d: std::time::Duration| d.as_secs_f64() * 1e3;
                eprintln!(
                    "cache chunk: {} queries; splits {:.1} ms, GPU {:.1} ms, answers sorted {:.1} ms",
                    reqs.len(),
                    ms(split_at),
                    ms(gpu_at - split_at),
                    ms(started.elapsed() - gpu_at)
                );
            }
            let tx = tx.clone();
            scope.spawn(move |_| {
                ctl.observe_all(seen.iter().map(|&(i, kth)| (&requests[i], kth)));
                work.into_par_iter().for_each_with(tx, |tx, (i, job)| {
                    let request = &requests[i];
                    let result = match job {
                        None => cpu.answer(request),
                        Some((partial, gpu_answer)) => {
                            let t = Instant::now();
                            let hits = complete(cpu, request, &partial, f32::NEG_INFINITY);
                            ctl.completed(t.elapsed().as_secs_f64());
                            if let Ok(h) = &hits {
                                ctl.observe(request, Some(h));
                            }
                            hits.map(|hits| Answer {
                                hits,
                                latency: gpu_answer.latency + t.elapsed(),
                            })
                        }
                    };
                    let _ = tx.send((i, result));
                });
            });
        }
    });
    drop(tx);
    for (i, r) in rx {
        out[i] = Some(r);
    }
    let answers = out
        .into_iter()
        .map(|a| a.unwrap_or_else(|| Err(IndexError::Invalid("a query was left unanswered (a bug)".into()))))
        .collect();
    (answers, failed)
}
