//! [`Engine`]: the one front door. A backend chosen once; requests submitted from any thread, each
//! answer delivered to the submitter's [`Reply`] as soon as it is ready; the CPU answering whatever the
//! GPU fails (a failed batch, a malformed block, a request beyond the GPU's limits), so that every
//! request gets exactly one answer.

use std::sync::Arc;
use std::time::Duration;

use rayon::prelude::*;
use warpsearch_cpu::CpuSearcher;
use warpsearch_gpu::{CacheBudget, Gpu, GpuMemory, GpuOptions, GpuSearcher, GpuStats};
use warpsearch_index::Result;
use warpsearch_query::{Answer, Request, Scorer};

use crate::backend::{Backend, BackendChoice};
use crate::cache::{CacheCtl, CacheOptions, CacheStats};
use crate::hybrid::{HybridOptions, HybridStats};
use crate::notes::Notes;
use crate::replicas::{Replica, Replicas};
use crate::reply::{wait_for, Reply, Submit};
use crate::scheduler::Scheduler;
use crate::shards::Shards;
use crate::EngineError;

/// How an engine is made.
#[derive(Debug, Clone)]
pub struct EngineOptions {
    /// The backend asked for.
    pub backend: BackendChoice,
    /// Threads of the CPU backend (0: as many as the current rayon pool has, which `--threads` sets).
    pub cpu_threads: usize,
    /// The GPU engine's tunables.
    pub gpu: GpuOptions,
    /// The hybrid scheduler's (None: defaults for this machine).
    pub hybrid: Option<HybridOptions>,
    /// How the GPU's list cache is filled, when `gpu.cache` caches part of the index.
    pub cache: Option<CacheOptions>,
    /// The CUDA device the GPU backend runs on.
    pub device: usize,
}

impl Default for EngineOptions {
    fn default() -> Self {
        EngineOptions {
            backend: BackendChoice::Auto,
            cpu_threads: 0,
            gpu: GpuOptions::default(),
            hybrid: None,
            cache: None,
            device: 0,
        }
    }
}

/// What runs the queries.
enum Runner {
    /// One index on this machine's processors, in the setting the backend asks.
    One(Scheduler),
    /// A sharded index: an engine per shard, their answers merged.
    Shards(Arc<Shards<Engine>>),
    /// The same index on several GPUs, an engine each.
    Replicas(Replicas<Engine>),
}

/// Answers requests on the chosen backend, with the CPU as the GPU's fallback. `Send + Sync`: one
/// engine is shared by every thread that submits (a server's handlers, a Python program's threads).
pub struct Engine {
    cpu: CpuSearcher,
    runner: Runner,
    choice: Option<String>,
    notes: Arc<Notes>,
}

impl Engine {
    /// An engine over `scorer` on the backend `options` ask for. `auto` runs the GPU backend where
    /// CUDA is present and the GPU serves the options, else the CPU, and says which and why in
    /// [`Engine::choice`]; `gpu` makes the GPU's refusal an error; `hybrid` without a usable GPU runs
    /// the scheduler on the CPU alone and says why.
    pub fn new(scorer: Arc<Scorer>, options: EngineOptions) -> std::result::Result<Engine, EngineError> {
        let cpu = CpuSearcher::new(scorer.clone());
        let notes = Arc::new(Notes::default());
        let threads = match options.cpu_threads {
            0 => rayon::current_num_threads(),
            n => n,
        };
        let cpu_backend = |choice: Option<String>| -> std::result::Result<Engine, EngineError> {
            let scheduler = Scheduler::cpu_only(cpu.clone(), threads).map_err(EngineError::Threads)?;
            Ok(Engine {
                cpu: cpu.clone(),
                runner: Runner::One(scheduler),
                choice,
                notes: notes.clone(),
            })
        };
        if options.backend == BackendChoice::Cpu {
            return cpu_backend(None);
        }
        let gpu = Gpu::open_with(options.device, &options.gpu.kernels).and_then(|g| {
            // A static cache plan comes first: it fixes the cache's shape on the device.
            let mut gopts = options.gpu;
            // Only the GPU backend (auto's too) has the cores to itself while it prepares a batch.
            gopts.parallel_host &= options.backend != BackendChoice::Hybrid;
            let cache = match gopts.cache {
                Some(budget) => {
                    let copts = options.cache.clone().unwrap_or_default();
                    let (ctl, plan) = CacheCtl::prepare(&cpu, copts, budget.cache_bytes)?;
                    gopts.cache = Some(CacheBudget {
                        shape: Some(ctl.shape(scorer.index(), &plan)),
                        ..budget
                    });
                    Some((ctl, plan))
                }
                None => None,
            };
            let mut g = GpuSearcher::new(Arc::new(g), scorer, gopts)?;
            let ctl = match cache {
                Some((ctl, plan)) => {
                    let ctl = Arc::new(ctl);
                    ctl.install(&mut g, &plan)?;
                    Some(ctl)
                }
                None => None,
            };
            Ok((g, ctl))
        });
        let hybrid = |gpu: Option<(GpuSearcher, Option<Arc<CacheCtl>>)>| {
            Scheduler::hybrid_with(
                cpu.clone(),
                gpu,
                options.hybrid.unwrap_or_default(),
                notes.clone(),
            )
        };
        let gpu_only = |(g, ctl): (GpuSearcher, Option<Arc<CacheCtl>>)| {
            Scheduler::gpu_only(cpu.clone(), g, ctl, threads, notes.clone()).map_err(EngineError::Threads)
        };
        let (scheduler, choice) = match (gpu, options.backend) {
            (Ok(g), BackendChoice::Gpu) => (gpu_only(g)?, None),
            // The GPU backend answers more queries a second than the hybrid, and at the same rate
            // sooner but for light loads of cheap queries (docs/decisions/029-continuous-gpu-calls.md);
            // the CPU answers what it fails.
            (Ok(g), BackendChoice::Auto) => {
                let line = format!("backend auto: gpu; {}", g.0.describe());
                (gpu_only(g)?, Some(line))
            }
            (Ok(g), choice) => {
                let line = format!(
                    "backend {}: hybrid, CPU and GPU together; {}",
                    choice.name(),
                    g.0.describe()
                );
                (hybrid(Some(g)), Some(line))
            }
            (Err(e), BackendChoice::Gpu) => return Err(EngineError::GpuRequired(e)),
            (Err(e), BackendChoice::Hybrid) => {
                let h = hybrid(None);
                let workers = h.hybrid_options().map_or(0, |o| o.cpu_workers);
                let line = format!(
                    "backend hybrid: the CPU alone, {workers} workers, long queries split among them ({e})"
                );
                (h, Some(line))
            }
            (Err(e), _) => {
                return cpu_backend(Some(format!("backend auto: CPU on {threads} threads ({e})")));
            }
        };
        let runner = Runner::One(scheduler);
        Ok(Engine {
            cpu,
            runner,
            choice,
            notes,
        })
    }

    /// The engine of a sharded index: `head` is the scorer of its head (requests are analysed
    /// against it), `shards` an engine per shard of `members` (the head's shard numbers, in that
    /// order), each over that shard's scorer with the same options, run on `threads` threads each.
    pub(crate) fn sharded(
        head: Arc<Scorer>,
        members: Vec<usize>,
        shards: Vec<Engine>,
        threads: usize,
        choice: Option<String>,
    ) -> Engine {
        let index = head.index().clone();
        Engine {
            cpu: CpuSearcher::new(head),
            runner: Runner::Shards(Arc::new(Shards::new(index, members, shards, threads))),
            choice,
            notes: Arc::new(Notes::default()),
        }
    }

    /// One engine over `engines` (replicas, each on a GPU of its own as `--gpus` makes them): queries
    /// go to the least loaded, a batch is cut among them, and one whose GPU fails is left out for a
    /// while (its queries answered on its CPU meanwhile). Refused unless there is at least one and
    /// all are over the same index and options, since any replica's answer must be the answer.
    pub fn replicas(engines: Vec<Engine>) -> std::result::Result<Engine, EngineError> {
        Engine::replicated(engines, None)
    }

    pub(crate) fn replicated(
        engines: Vec<Engine>,
        choice: Option<String>,
    ) -> std::result::Result<Engine, EngineError> {
        let Some(first) = engines.first() else {
            return Err(EngineError::Config("replicas need at least one engine".into()));
        };
        let scorer = first.scorer().clone();
        if let Some(other) = engines.iter().find(|e| {
            !Arc::ptr_eq(e.scorer().index(), scorer.index()) || e.scorer().options() != scorer.options()
        }) {
            return Err(EngineError::Config(format!(
                "replicas must share one index and its options: {} and {} differ",
                scorer.index().dir().display(),
                other.scorer().index().dir().display()
            )));
        }
        Ok(Engine {
            cpu: CpuSearcher::new(scorer),
            runner: Runner::Replicas(Replicas::new(engines)),
            choice,
            notes: Arc::new(Notes::default()),
        })
    }

    /// The engines this one runs through (a sharded index's, replicas'), none for a backend of its
    /// own.
    fn members(&self) -> Vec<&Engine> {
        match &self.runner {
            Runner::Shards(s) => s.engines().collect(),
            Runner::Replicas(r) => r.members().iter().collect(),
            _ => Vec::new(),
        }
    }

    /// Queues `requests` and returns at once; request i's answer (exactly one) goes to `reply` with id
    /// `first_id + i`, from the engine's thread that finished it, as soon as it is ready. `deadline`:
    /// the time allowed from now (None: none, as in a closed loop); every answer says whether it was
    /// missed.
    pub fn submit(
        &self,
        first_id: u64,
        requests: Vec<Request>,
        deadline: Option<Duration>,
        reply: Arc<dyn Reply>,
    ) {
        // An empty submission has no answer to give: no runner sees one.
        if requests.is_empty() {
            return;
        }
        match &self.runner {
            Runner::One(s) => s.submit(first_id, requests, deadline, reply),
            Runner::Shards(s) => s.submit(first_id, requests, deadline, reply),
            Runner::Replicas(r) => r.submit(first_id, requests, deadline, reply),
        }
    }

    /// Answers every request (all submitted at once, without a deadline) and waits for the answers,
    /// in order: exactly one each. The GPU backend runs the call on this thread (no copy of the
    /// requests, no hand-over of a million answers); the others through [`Engine::submit`].
    pub fn search_batch(&self, requests: &[Request]) -> Vec<Result<Answer>> {
        if requests.is_empty() {
            return Vec::new();
        }
        match &self.runner {
            Runner::One(s) => s.search_batch(requests),
            Runner::Replicas(r) => r.search_batch(requests),
            Runner::Shards(_) => wait_for(requests, |owned, reply| self.submit(0, owned, None, reply)),
        }
    }

    /// The backend that runs queries.
    pub fn backend(&self) -> Backend {
        match &self.runner {
            Runner::One(s) => s.backend(),
            Runner::Shards(..) | Runner::Replicas(_) => self.members()[0].backend(),
        }
    }

    /// What `auto` (or a hybrid without a GPU) chose and why, in one line (None otherwise).
    pub fn choice(&self) -> Option<&str> {
        self.choice.as_deref()
    }

    /// The scorer (index and options). For a sharded index, its head's: it analyses queries against the
    /// collection's dictionary and names the collection's documents, and plans no query (its shards'
    /// engines do).
    pub fn scorer(&self) -> &Arc<Scorer> {
        self.cpu.scorer()
    }

    /// Where early termination stops each request on the CPU (the docID whose bound stopped it; None
    /// where its lists ran to their end), or None where these options never stop early (no global-score
    /// order). The queries run again, on every core.
    pub fn early_stops(&self, requests: &[Request]) -> Result<Option<Vec<Option<u32>>>> {
        if !self.cpu.scorer().early_termination() {
            return Ok(None);
        }
        requests
            .par_iter()
            .map(|r| self.cpu.stop_doc(r))
            .collect::<Result<Vec<_>>>()
            .map(Some)
    }

    /// Whether a GPU answers queries.
    pub fn has_gpu(&self) -> bool {
        match &self.runner {
            Runner::One(s) => s.has_gpu(),
            Runner::Shards(..) | Runner::Replicas(_) => self.members().iter().any(|e| e.has_gpu()),
        }
    }

    /// The GPU's memory now: what the index takes and the device's use (None without a GPU, or where
    /// the driver does not answer); over several GPUs, their sums (a device counted once).
    pub fn gpu_memory(&self) -> Option<GpuMemory> {
        match &self.runner {
            Runner::One(s) => s.gpu_memory(),
            Runner::Shards(..) | Runner::Replicas(_) => {
                let engines = self.gpu_engines();
                let mut devices: Vec<(usize, &GpuMemory)> = Vec::new();
                for (d, m) in &engines {
                    if !devices.iter().any(|(seen, _)| seen == d) {
                        devices.push((*d, m));
                    }
                }
                (!engines.is_empty()).then(|| GpuMemory {
                    index: engines.iter().map(|(_, m)| m.index).sum(),
                    used: devices.iter().map(|(_, m)| m.used).sum(),
                    total: devices.iter().map(|(_, m)| m.total).sum(),
                })
            }
        }
    }

    /// The device and memory of every GPU backend this engine runs through (itself, or its shards'
    /// and replicas', however nested), where the driver answers.
    fn gpu_engines(&self) -> Vec<(usize, GpuMemory)> {
        match &self.runner {
            Runner::One(s) => s.device().zip(s.gpu_memory()).into_iter().collect(),
            _ => self.members().into_iter().flat_map(Engine::gpu_engines).collect(),
        }
    }

    /// Queries the GPU failed (a failed batch or call; answered on the CPU) since the engine was made.
    pub fn gpu_failures(&self) -> u64 {
        self.notes.gpu_failures() + self.members().iter().map(|e| e.gpu_failures()).sum::<u64>()
    }

    /// Queries per second the engine answers at full load, where it measures it (the hybrid
    /// scheduler's rates; None for the other backends).
    pub fn capacity(&self) -> Option<f64> {
        match &self.runner {
            Runner::One(s) => s.capacity(),
            _ => None,
        }
    }

    /// The backend in a few words, for reports.
    pub fn describe(&self) -> String {
        match &self.runner {
            Runner::One(s) => match (s.hybrid_options(), s.describe_gpu()) {
                (None, Some(gpu)) => gpu.to_string(),
                (None, None) => format!("cpu ({} threads)", s.cpu_threads()),
                (Some(h), gpu) => format!(
                    "hybrid ({} CPU workers{})",
                    h.cpu_workers,
                    match (gpu, h.host_threads.unwrap_or(0)) {
                        (None, _) => ", no GPU".to_string(),
                        (Some(_), 0) => " and the GPU".to_string(),
                        (Some(_), n) => format!(" and the GPU, with {n} host threads of its own"),
                    }
                ),
            },
            Runner::Shards(s) => match self.members()[0].backend() {
                Backend::Cpu => format!("cpu, {} shards ({} threads each)", s.len(), s.threads()),
                _ => format!("{} shards, each on {}", s.len(), distinct(self.members())),
            },
            Runner::Replicas(r) => format!(
                "{} replicas of the index, each on {}",
                r.members().len(),
                distinct(self.members())
            ),
        }
    }

    /// How many requests one [`Engine::search_batch`] call should carry: the GPU pipelines kernel
    /// batches within one call, the CPU bounds the results held at once.
    pub fn batch_hint(&self) -> usize {
        match &self.runner {
            Runner::One(s) if s.backend() == Backend::Cpu => 4096,
            Runner::Shards(..) => self.members()[0].batch_hint(),
            _ => 1 << 20,
        }
    }

    /// Runs every request `passes` times (warming caches, the GPU and the cost model), settles the
    /// list cache ([`Engine::settle_cache`]) and forgets the counters; returns the list cache's
    /// counters over the warm-up, the settle and the first plan included (None without a cache).
    pub fn warm_up(&self, requests: &[Request], passes: usize) -> Result<Option<CacheStats>> {
        for _ in 0..passes {
            for r in self.search_batch(requests) {
                r?;
            }
        }
        if passes > 0 {
            self.settle_cache();
        }
        self.take_gpu_stats();
        self.take_hybrid_stats();
        Ok(self.take_cache_stats())
    }

    /// With a list cache, waits until the dynamic cache policy has taken in the queries run so far
    /// and made the plan they call for (one per epoch of them; a last partial epoch waits for more),
    /// then applies a plan made, if it is worth its copies, and waits for them. Within a call, plans
    /// land behind its last batch once made, and the GPU never waits for one: a plan of a warm-up
    /// pass would otherwise land only behind the next call (in a closed loop, the next pass).
    pub fn settle_cache(&self) {
        if let Runner::One(s) = &self.runner {
            s.settle_cache();
        }
        for e in self.members() {
            e.settle_cache();
        }
    }

    /// What happened that a user should hear of since the last call (fallbacks to the CPU).
    pub fn take_notes(&self) -> Vec<String> {
        let mut lines = self.notes.take();
        for e in self.members() {
            lines.extend(e.take_notes());
        }
        lines
    }

    /// Requests the CPU answered after the GPU failed them, since the engine was made.
    pub fn fallback_queries(&self) -> u64 {
        self.notes.fallbacks() + self.members().iter().map(|e| e.fallback_queries()).sum::<u64>()
    }

    /// The GPU's counters since the last call (None without a GPU).
    pub fn take_gpu_stats(&self) -> Option<GpuStats> {
        match &self.runner {
            Runner::One(s) => s.take_gpu_stats(),
            Runner::Shards(..) | Runner::Replicas(_) => {
                sum(self.members(), Engine::take_gpu_stats, GpuStats::add)
            }
        }
    }

    /// The list cache's counters since the last call (None without a list cache).
    pub fn take_cache_stats(&self) -> Option<CacheStats> {
        match &self.runner {
            Runner::One(s) => s.cache().map(|c| c.take_stats()),
            Runner::Shards(..) | Runner::Replicas(_) => {
                sum(self.members(), Engine::take_cache_stats, CacheStats::add)
            }
        }
    }

    /// The hybrid scheduler's counters since the last call (None for the other backends).
    pub fn take_hybrid_stats(&self) -> Option<HybridStats> {
        match &self.runner {
            Runner::One(s) => s.take_stats(),
            _ => None,
        }
    }
}

/// The members' counters taken by `take`, added up by `add` (None where no member has any).
fn sum<T>(members: Vec<&Engine>, take: impl Fn(&Engine) -> Option<T>, add: impl Fn(&mut T, &T)) -> Option<T> {
    members.into_iter().filter_map(take).reduce(|mut a, b| {
        add(&mut a, &b);
        a
    })
}

/// The members' descriptions, each once, in order.
fn distinct(members: Vec<&Engine>) -> String {
    let mut seen: Vec<String> = Vec::new();
    for d in members.iter().map(|e| e.describe()) {
        if !seen.contains(&d) {
            seen.push(d);
        }
    }
    seen.join("; ")
}

impl Submit for Engine {
    fn submit(
        &self,
        first_id: u64,
        requests: Vec<Request>,
        deadline: Option<Duration>,
        reply: Arc<dyn Reply>,
    ) {
        Engine::submit(self, first_id, requests, deadline, reply);
    }
}

impl Replica for Engine {
    fn search_batch(&self, requests: &[Request]) -> Vec<Result<Answer>> {
        Engine::search_batch(self, requests)
    }

    fn gpu_failures(&self) -> u64 {
        Engine::gpu_failures(self)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn an_engine_is_shared_by_threads() {
        fn shared<T: Send + Sync>() {}
        shared::<super::Engine>();
    }
}
