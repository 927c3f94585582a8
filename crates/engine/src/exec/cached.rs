//! The GPU backend with a list cache: a call's queries go in chunks (one by default,
//! [`CacheCtl::chunks`]), each split by what the cache (and a batch's staging space) covers; the GPU
//! answers its parts, and CPU threads complete the partial ones. With several, two chunks are in
//! flight: chunk i+1 is split and sent while chunk i computes, and chunk i's completions run while
//! chunk i+1 computes (docs/references.md#pruned-list-caching section 3.1.4: post-processing hidden
//! behind the GPU; docs/decisions/017-list-cache-pipeline.md).

use std::sync::mpsc::{channel, Sender};
use std::time::{Duration, Instant};

use rayon::prelude::*;
use warpsearch_cpu::CpuSearcher;
use warpsearch_gpu::{CallId, GpuError, GpuSearcher};
use warpsearch_index::{IndexError, Result};
use warpsearch_query::{Answer, DocRange, Request};

use crate::cache::{kth, CacheCtl};
use crate::split::{complete, gpu_request, take_answer, Partial, Split};

/// The fewest queries a chunk holds (fewer chunks than [`CacheCtl::chunks`] for a short call), so that
/// a kernel batch still fills the GPU's persistent grid with work (a choice, not a measured optimum).
pub const MIN_CHUNK: usize = 256;

/// Queries per chunk of a call of `n`: `n` over `chunks`, at least [`MIN_CHUNK`], at most `batch`.
pub fn chunk_size(n: usize, chunks: usize, batch: usize) -> usize {
    n.div_ceil(chunks.max(1)).max(MIN_CHUNK).min(batch.max(1))
}

/// A chunk on the GPU: where its queries start, their splits and its GPU call.
struct Sent {
    base: usize,
    len: usize,
    splits: Vec<Split>,
    call: CallId,
    started: Instant,
    /// Time to split it and to hand it to the GPU.
    split: Duration,
    submit: Duration,
}

/// What the CPU does for a chunk: completions (with the GPU's part and its latency) and queries the
/// GPU cannot take (none); and the GPU's whole answers with their k-th scores, for the
/// dynamic policy.
struct Work {
    jobs: Vec<(usize, Option<(Partial, Duration)>)>,
    seen: Vec<(usize, Option<f32>)>,
}

/// A query's answer from a cached call: final (the GPU's, completed on the CPU where the cache lacked
/// part of it, or the CPU's where the GPU could not start it), or what the GPU failed with (the
/// caller's fallback answers it on the CPU).
pub(crate) type Cached = std::result::Result<Result<Answer>, GpuError>;

/// Answers every request, in order, exactly once: the GPU's parts, completed on the CPU; what the GPU
/// cannot take, on the CPU; what it fails, left to the caller with its error.
pub(crate) fn search_batch(
    gpu: &mut GpuSearcher,
    cpu: &CpuSearcher,
    ctl: &CacheCtl,
    requests: &[Request],
) -> Vec<Cached> {
    let mut out: Vec<Option<Cached>> = (0..requests.len()).map(|_| None).collect();
    let (tx, rx) = channel::<(usize, Result<Answer>)>();
    let all = DocRange {
        first: 0,
        last: cpu.scorer().index().num_docs().saturating_sub(1),
    };
    let size = chunk_size(requests.len(), ctl.chunks(), gpu.batch_size());
    rayon::scope(|scope| {
        let mut in_flight: Option<Sent> = None;
        for (c, reqs) in requests.chunks(size).enumerate() {
            let started = Instant::now();
            // On all cores: a chunk's splits took the GPU's thread 15–30 ms on the 25M collection. The
            // view is the cache as the previous chunk left it (a plan applies behind a call's last
            // batch, and a term is read from the cache only where its prefix covers a whole range).
            let view = gpu.view();
            let splits: Vec<Split> = reqs.par_iter().map(|r| ctl.split(&view, r, all)).collect();
            // One GPU request per range: `Two` gives two, adjacent.
            let (gpu_reqs, ranges): (Vec<Request>, Vec<DocRange>) = splits
                .iter()
                .enumerate()
                .flat_map(|(i, s)| s.gpu_ranges(all).map(move |r| (i, r)))
                .map(|(i, r)| (gpu_request(&reqs[i], splits[i]), r))
                .unzip();
            let split = started.elapsed();
            let call = gpu.submit_in(&gpu_reqs, Some(&ranges));
            let sent = Sent {
                base: c * size,
                len: reqs.len(),
                splits,
                call,
                started,
                split,
                submit: started.elapsed() - split,
            };
            // The previous chunk computed while this one was split and sent: its answers, then its
            // CPU work beside this chunk's kernels.
            if let Some(prev) = in_flight.replace(sent) {
                let work = collect(gpu, requests, prev, all, &mut out);
                spawn_work(scope, cpu, ctl, requests, work, tx.clone());
            }
        }
        if let Some(last) = in_flight.take() {
            let work = collect(gpu, requests, last, all, &mut out);
            spawn_work(scope, cpu, ctl, requests, work, tx.clone());
        }
    });
    drop(tx);
    for (i, r) in rx {
        out[i] = Some(Ok(r));
    }
    out.into_iter()
        .map(|a| {
            a.unwrap_or_else(|| {
                Ok(Err(IndexError::Invalid(
                    "a query was left unanswered (a bug)".into(),
                )))
            })
        })
        .collect()
}

/// Waits for chunk `sent`'s GPU answers (its queries' ranges cut from `all`): the whole ones and the
/// failures go to `out`; the rest, with the queries the GPU never took, become the CPU's work.
fn collect(
    gpu: &mut GpuSearcher,
    requests: &[Request],
    sent: Sent,
    all: DocRange,
    out: &mut [Option<Cached>],
) -> Work {
    let waited = Instant::now();
    let mut answers = gpu.wait(sent.call).into_iter();
    let reqs = &requests[sent.base..][..sent.len];
    let mut work = Work {
        jobs: Vec::new(),
        seen: Vec::new(),
    };
    for (i, &split) in sent.splits.iter().enumerate().filter(|&(_, &s)| s != Split::Cpu) {
        let at = sent.base + i;
        let (answer, or_pass) = take_answer(split, &reqs[i], &mut answers);
        // and-or with fewer than k AND documents still needs its OR pass (nothing else left).
        let rest = match split {
            Split::Partial(_, rest) => Some(rest),
            _ => or_pass.then_some(DocRange::EMPTY),
        };
        match (answer, rest) {
            (Ok(a), Some(rest)) => {
                let partial = Partial {
                    hits: a.hits,
                    rest,
                    whole: all,
                };
                work.jobs.push((at, Some((partial, a.latency))));
            }
            (Ok(a), None) => {
                work.seen.push((at, kth(&reqs[i], Some(&a.hits))));
                out[at] = Some(Ok(Ok(a)));
            }
            (Err(e), _) => out[at] = Some(Err(e)),
        }
    }
    for i in (0..sent.len).filter(|&i| sent.splits[i] == Split::Cpu) {
        work.jobs.push((sent.base + i, None));
    }
    if gpu.options().trace {
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        tracing::debug!(
            queries = sent.len,
            split_ms = ms(sent.split),
            sent_ms = ms(sent.submit),
            waited_ms = ms(waited.elapsed()),
            answers_sorted_ms = ms(sent.started.elapsed()),
            "cache chunk"
        );
    }
    work
}

/// The CPU's work of a chunk, on the pool beside the GPU: partial answers are completed, the rest
/// answered whole; the dynamic policy observes the GPU's whole answers, then the completed ones, in
/// one message each: a message per completion would wake the policy's thread once per query, each time
/// taking a core from the completions (docs/decisions/016-dynamic-cache-policy.md).
fn spawn_work<'s>(
    scope: &rayon::Scope<'s>,
    cpu: &'s CpuSearcher,
    ctl: &'s CacheCtl,
    requests: &'s [Request],
    work: Work,
    tx: Sender<(usize, Result<Answer>)>,
) {
    scope.spawn(move |_| {
        ctl.observe_all(work.seen.iter().map(|&(i, kth)| (&requests[i], kth)));
        let completed: Vec<(usize, Option<f32>)> = work
            .jobs
            .into_par_iter()
            .map_with(tx, |tx, (i, job)| {
                let request = &requests[i];
                let (result, seen) = match job {
                    None => (cpu.answer(request), None),
                    Some((partial, gpu_latency)) => {
                        let t = Instant::now();
                        let hits = complete(cpu, request, &partial, f32::NEG_INFINITY);
                        ctl.completed(t.elapsed().as_secs_f64());
                        let seen = hits.as_ref().ok().map(|h| (i, kth(request, Some(h))));
                        let answer = hits.map(|hits| Answer {
                            hits,
                            latency: gpu_latency + t.elapsed(),
                        });
                        (answer, seen)
                    }
                };
                let _ = tx.send((i, result));
                seen
            })
            .flatten()
            .collect();
        ctl.observe_all(completed.iter().map(|&(i, kth)| (&requests[i], kth)));
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_split_a_call_evenly_within_the_bounds() {
        assert_eq!(chunk_size(5000, 4, 8192), 1250);
        assert_eq!(chunk_size(5001, 4, 8192), 1251);
        // A call of one chunk: nothing to overlap it with.
        assert_eq!(chunk_size(5000, 1, 8192), 5000);
        // At least MIN_CHUNK queries (a short call is one chunk) and at most a batch.
        assert_eq!(chunk_size(100, 4, 8192), MIN_CHUNK);
        assert_eq!(chunk_size(5000, 4, 64), 64);
        assert_eq!(chunk_size(5000, 0, 8192), 5000);
        assert_eq!(chunk_size(0, 4, 0), 1);
    }
}
