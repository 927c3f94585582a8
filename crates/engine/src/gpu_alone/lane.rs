//! `auto`'s CPU lane beside the GPU backend. A query goes to a CPU thread only where one is idle and the
//! query's predicted time there is below the GPU's recent latency: at a light load a cheap query is
//! answered at a core's speed (a GPU call costs a fraction of a millisecond whatever its size), and
//! under load, or where queries cost a core milliseconds, the GPU answers them. No query waits for a
//! core, so the lane never lengthens a queue; both processors are exact, so the answers are the same.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use warpsearch_cpu::CpuSearcher;
use warpsearch_index::Index;
use warpsearch_query::{Mode, Request};

use crate::cost::{CostModel, Features};
use crate::cpu_workers::CpuWorkers;
use crate::reply::{lock, Done, Reply};

/// The CPU's prior time a posting, before its first queries are measured: an order of magnitude above
/// a core's measured cost, so that the lane starts with the cheapest queries and learns from them.
const PRIOR_PER_POSTING: f64 = 50e-9;

/// The GPU's latency assumed before its first answers.
const FIRST_GPU_LATENCY: Duration = Duration::from_millis(1);

/// What the lane and its replies share.
struct Shared {
    threads: usize,
    /// Queries on the lane's threads now (at most `threads`).
    busy: AtomicUsize,
    model: Mutex<CostModel>,
    /// An exponential mean of the GPU's answer latency, in nanoseconds.
    gpu_latency_ns: AtomicU64,
}

/// The CPU threads of `auto`'s lane.
pub(crate) struct CpuLane {
    workers: CpuWorkers,
    shared: Arc<Shared>,
    index: Arc<Index>,
}

impl CpuLane {
    /// A lane of `threads` threads answering on `cpu`.
    pub fn start(cpu: &CpuSearcher, threads: usize) -> std::io::Result<CpuLane> {
        let workers = CpuWorkers::start(cpu, threads)?;
        let shared = Arc::new(Shared {
            threads: workers.threads(),
            busy: AtomicUsize::new(0),
            model: Mutex::new(CostModel::with_cpu_prior(PRIOR_PER_POSTING)),
            gpu_latency_ns: AtomicU64::new(FIRST_GPU_LATENCY.as_nanos() as u64),
        });
        Ok(CpuLane {
            workers,
            shared,
            index: cpu.scorer().index().clone(),
        })
    }

    /// The lane's threads.
    pub fn threads(&self) -> usize {
        self.shared.threads
    }

    /// Submits to an idle thread each request that it answers sooner than the GPU, and returns the
    /// others as runs of consecutive ids (`first_id + i` is request i's id), in order, for the GPU.
    pub fn take(
        &self,
        first_id: u64,
        requests: Vec<Request>,
        deadline: Option<Duration>,
        reply: &Arc<dyn Reply>,
    ) -> Vec<(u64, Vec<Request>)> {
        let s = &self.shared;
        let mut runs: Vec<(u64, Vec<Request>)> = Vec::new();
        let gpu = Duration::from_nanos(s.gpu_latency_ns.load(Ordering::Relaxed)).as_secs_f64();
        for (i, request) in requests.into_iter().enumerate() {
            let id = first_id + i as u64;
            match self.claim(&request, gpu) {
                Some(features) => {
                    let reply: Arc<dyn Reply> = Arc::new(CpuReply {
                        inner: reply.clone(),
                        shared: s.clone(),
                        mode: request.mode,
                        features,
                    });
                    self.workers.submit(id, vec![request], deadline, reply);
                }
                None => match runs.last_mut() {
                    Some((first, run)) if *first + run.len() as u64 == id => run.push(request),
                    _ => runs.push((id, vec![request])),
                },
            }
        }
        runs
    }

    /// A thread for `request` (reserved) and its features, where one is idle and the request's
    /// predicted time on it is below `gpu` seconds.
    fn claim(&self, request: &Request, gpu: f64) -> Option<Features> {
        let s = &self.shared;
        if s.busy.load(Ordering::Relaxed) >= s.threads {
            return None;
        }
        let features = Features::of(&self.index, &request.query);
        if lock(&s.model).cpu(request.mode, &features) >= gpu {
            return None;
        }
        s.busy
            .fetch_update(Ordering::AcqRel, Ordering::Relaxed, |b| {
                (b < s.threads).then_some(b + 1)
            })
            .ok()
            .map(|_| features)
    }

    /// `reply`, noting the latency of the GPU's answers on their way.
    pub fn gpu_reply(&self, reply: Arc<dyn Reply>) -> Arc<dyn Reply> {
        Arc::new(GpuReply {
            inner: reply,
            shared: self.shared.clone(),
        })
    }
}

/// A query on the lane: its answer frees its thread and teaches the model.
struct CpuReply {
    inner: Arc<dyn Reply>,
    shared: Arc<Shared>,
    mode: Mode,
    features: Features,
}

impl Reply for CpuReply {
    fn send(&self, done: Done) {
        if let Ok(a) = &done.result {
            lock(&self.shared.model).observe_cpu(self.mode, &self.features, a.latency.as_secs_f64());
        }
        self.inner.send(done);
    }

    fn wanted(&self) -> bool {
        self.inner.wanted()
    }
}

impl Drop for CpuReply {
    /// The thread is free once its query is answered or dropped unanswered (its reply no longer
    /// wanted): the worker lets go of the submission either way.
    fn drop(&mut self) {
        self.shared.busy.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A GPU submission's reply: its answers' latency goes into the lane's mean.
struct GpuReply {
    inner: Arc<dyn Reply>,
    shared: Arc<Shared>,
}

impl Reply for GpuReply {
    fn send(&self, done: Done) {
        self.send_many(vec![done]);
    }

    fn send_many(&self, done: Vec<Done>) {
        // The slowest answer of a call is its latency (its queries left together).
        let latest = done
            .iter()
            .filter_map(|d| d.result.as_ref().ok().map(|a| a.latency))
            .max();
        if let Some(l) = latest {
            let now = l.as_nanos().min(u64::MAX as u128) as u64;
            let mean = self.shared.gpu_latency_ns.load(Ordering::Relaxed);
            // An eighth of the way to the newest call: a mean over the last few calls.
            let next = mean - mean / 8 + now / 8;
            self.shared.gpu_latency_ns.store(next, Ordering::Relaxed);
        }
        self.inner.send_many(done);
    }

    fn wanted(&self) -> bool {
        self.inner.wanted()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc::channel;

    use warpsearch_index::build::{build_from_jsonl, BuildOptions};
    use warpsearch_index::{AnalyzerConfig, Bm25Params, DocOrder, WriterOptions};
    use warpsearch_query::{Query, Scorer, SearchOptions};

    use super::*;

    fn searcher(dir: &std::path::Path) -> CpuSearcher {
        let lines: String = (0..300)
            .map(|d| {
                format!(
                    "{{\"id\":\"d{d}\",\"contents\":\"a{} b{} c{}\"}}\n",
                    d % 7,
                    d % 11,
                    d % 13
                )
            })
            .collect();
        std::fs::write(dir.join("in.jsonl"), lines).unwrap();
        let opts = BuildOptions::new(WriterOptions {
            codec: warpsearch_codec::Codec::SimdBp,
            analyzer: AnalyzerConfig::whitespace(),
            bm25: Bm25Params::default(),
            doc_order: DocOrder::Input,
            force: true,
        });
        build_from_jsonl(&dir.join("in.jsonl"), &dir.join("idx"), &opts).unwrap();
        let index = Arc::new(Index::open(dir.join("idx")).unwrap());
        CpuSearcher::new(Arc::new(
            Scorer::new(index.clone(), SearchOptions::new(&index)).unwrap(),
        ))
    }

    #[test]
    fn the_lane_takes_what_an_idle_thread_answers_sooner_and_returns_the_rest_by_id() {
        let tmp = tempfile::tempdir().unwrap();
        let cpu = searcher(tmp.path());
        let index = cpu.scorer().index().clone();
        let lane = CpuLane::start(&cpu, 2).unwrap();
        let requests: Vec<Request> = (0..40)
            .map(|i| {
                Request::new(
                    Query::parse(&index, &format!("a{} b{}", i % 7, i % 11)),
                    Mode::Or,
                    5,
                )
            })
            .collect();
        let (tx, rx) = channel::<Done>();
        let reply: Arc<dyn Reply> = Arc::new(tx);
        let runs = lane.take(100, requests.clone(), None, &reply);
        drop(reply);
        // The GPU's runs: consecutive ids, in order, each request the one submitted under its id.
        let mut gpu_ids = Vec::new();
        for (first, run) in &runs {
            for (i, r) in run.iter().enumerate() {
                let id = first + i as u64;
                assert_eq!(
                    r.query.terms,
                    requests[(id - 100) as usize].query.terms,
                    "id {id}"
                );
                gpu_ids.push(id);
            }
        }
        assert!(gpu_ids.windows(2).all(|w| w[0] < w[1]), "runs in order");
        // The lane's: the other ids, each answered once, exactly as the CPU searcher answers it.
        let cpu_ids: Vec<u64> = (100..140).filter(|id| !gpu_ids.contains(id)).collect();
        assert!(!cpu_ids.is_empty(), "an idle lane takes a cheap query");
        assert!(cpu_ids.len() <= 40);
        let mut got: Vec<Done> = rx.iter().collect();
        got.sort_by_key(|d| d.id);
        assert_eq!(got.iter().map(|d| d.id).collect::<Vec<_>>(), cpu_ids);
        for d in got {
            let want = cpu.answer(&requests[(d.id - 100) as usize]).unwrap().hits;
            assert_eq!(d.result.unwrap().hits, want, "id {}", d.id);
        }
        // Every thread free again once its query is answered.
        assert_eq!(lane.shared.busy.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn a_busy_lane_takes_nothing() {
        let tmp = tempfile::tempdir().unwrap();
        let cpu = searcher(tmp.path());
        let index = cpu.scorer().index().clone();
        let lane = CpuLane::start(&cpu, 2).unwrap();
        lane.shared.busy.store(2, Ordering::Relaxed);
        let requests: Vec<Request> = (0..5)
            .map(|i| Request::new(Query::parse(&index, &format!("a{i}")), Mode::And, 5))
            .collect();
        let (tx, _rx) = channel::<Done>();
        let reply: Arc<dyn Reply> = Arc::new(tx);
        let runs = lane.take(7, requests, None, &reply);
        assert_eq!(runs.len(), 1);
        assert_eq!((runs[0].0, runs[0].1.len()), (7, 5));
        lane.shared.busy.store(0, Ordering::Relaxed);
    }
}
