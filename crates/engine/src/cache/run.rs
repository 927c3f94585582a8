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

use super::{complete, gpu_request, CacheCtl, Partial, Split};

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
    rayon::scope(|scope| {
        for (c, reqs) in requests.chunks(chunk).enumerate() {
            // A replan that fails leaves an empty cache: slower, still exact.
            let _ = ctl.maybe_replan(gpu);
            let base = c * chunk;
            let splits: Vec<Split> = reqs.iter().map(|r| ctl.split(gpu, r, all)).collect();
            let on_gpu: Vec<usize> = (0..reqs.len()).filter(|&i| splits[i] != Split::Cpu).collect();
            let gpu_reqs: Vec<Request> = on_gpu.iter().map(|&i| gpu_request(&reqs[i], splits[i])).collect();
            let ranges: Vec<DocRange> = on_gpu
                .iter()
                .map(|&i| match splits[i] {
                    Split::Partial(g, _) => g,
                    _ => all,
                })
                .collect();
            let answers = gpu.search_batch_in(&gpu_reqs, Some(&ranges));
            // What the CPU does for this batch: completions, failures, queries the GPU cannot take.
            let mut work: Vec<(usize, Option<(Partial, Answer)>)> = Vec::new();
            for i in (0..reqs.len()).filter(|&i| splits[i] == Split::Cpu) {
                work.push((base + i, None));
            }
            for (&i, answer) in on_gpu.iter().zip(answers) {
                match (answer, splits[i]) {
                    (Ok(a), Split::Partial(_, rest)) => {
                        let partial = Partial {
                            hits: a.hits.clone(),
                            rest,
                            whole: all,
                        };
                        work.push((base + i, Some((partial, a))));
                    }
                    (Ok(a), _) => {
                        ctl.observe(&reqs[i], Some(&a.hits));
                        out[base + i] = Some(Ok(a));
                    }
                    (Err(_), _) => {
                        failed += 1;
                        work.push((base + i, None))
                    }
                }
            }
            let tx = tx.clone();
            scope.spawn(move |_| {
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
