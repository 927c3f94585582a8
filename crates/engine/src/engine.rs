//! [`Engine`]: a backend chosen once, batches of requests, and the CPU answering whatever the GPU
//! fails (a failed batch, a malformed block, a request beyond the GPU's limits), so that every request
//! gets exactly one answer.

use std::sync::Arc;

use warpsearch_cpu::CpuSearcher;
use warpsearch_gpu::{CacheBudget, Gpu, GpuError, GpuOptions, GpuSearcher, GpuStats};
use warpsearch_index::Result;
use warpsearch_query::{Answer, Request, Scorer};

use crate::backend::{Backend, BackendChoice};
use crate::cache::{CacheCtl, CacheOptions, CacheStats};
use crate::hybrid::{Hybrid, HybridOptions, HybridStats};
use crate::EngineError;

/// How an engine is made.
#[derive(Debug, Clone)]
pub struct EngineOptions {
    /// The backend asked for.
    pub backend: BackendChoice,
    /// The GPU engine's tunables.
    pub gpu: GpuOptions,
    /// The hybrid scheduler's (None: defaults for this machine).
    pub hybrid: Option<HybridOptions>,
    /// How the GPU's list cache is filled, when `gpu.cache` caches part of the index.
    pub cache: Option<CacheOptions>,
}

impl Default for EngineOptions {
    fn default() -> Self {
        EngineOptions {
            backend: BackendChoice::Auto,
            gpu: GpuOptions::default(),
            hybrid: None,
            cache: None,
        }
    }
}

/// What runs the queries.
enum Runner {
    Cpu,
    Gpu(Box<GpuSearcher>, Option<Arc<CacheCtl>>),
    Hybrid(Arc<Hybrid>),
}

/// Answers requests on the chosen backend, with the CPU as the GPU's fallback.
pub struct Engine {
    cpu: CpuSearcher,
    runner: Runner,
    choice: Option<String>,
    notes: Vec<String>,
    fallback_queries: u64,
}

impl Engine {
    /// An engine over `scorer` on the backend `options` ask for. `auto` runs the hybrid scheduler
    /// where CUDA is present and the GPU serves the options, else the CPU, and says which and why in
    /// [`Engine::choice`]; `gpu` makes the GPU's refusal an error; `hybrid` without a usable GPU runs
    /// the scheduler on the CPU alone and says why.
    pub fn new(scorer: Arc<Scorer>, options: EngineOptions) -> std::result::Result<Engine, EngineError> {
        let cpu = CpuSearcher::new(scorer.clone());
        let mut engine = Engine {
            cpu: cpu.clone(),
            runner: Runner::Cpu,
            choice: None,
            notes: Vec::new(),
            fallback_queries: 0,
        };
        if options.backend == BackendChoice::Cpu {
            return Ok(engine);
        }
        let gpu = Gpu::open(0).and_then(|g| {
            // A static cache plan comes first: it fixes the cache's shape on the device.
            let mut gopts = options.gpu;
            // Only the GPU backend has the cores to itself while it prepares a batch.
            gopts.parallel_host &= options.backend == BackendChoice::Gpu;
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
            Hybrid::with_cache(cpu.clone(), gpu, options.hybrid.unwrap_or_default())
        };
        match (gpu, options.backend) {
            (Ok((g, ctl)), BackendChoice::Gpu) => engine.runner = Runner::Gpu(Box::new(g), ctl),
            (Ok(g), choice) => {
                let line = format!(
                    "backend {}: hybrid, CPU and GPU together; {}",
                    choice.name(),
                    g.0.describe()
                );
                engine.choice = Some(line);
                engine.runner = Runner::Hybrid(Arc::new(hybrid(Some(g))));
            }
            (Err(e), BackendChoice::Gpu) => return Err(EngineError::GpuRequired(e)),
            (Err(e), BackendChoice::Hybrid) => {
                let h = hybrid(None);
                engine.choice = Some(format!(
                    "backend hybrid: the CPU alone, {} workers, long queries split among them ({e})",
                    h.options().cpu_workers
                ));
                engine.runner = Runner::Hybrid(Arc::new(h));
            }
            (Err(e), _) => {
                engine.choice = Some(format!(
                    "backend auto: CPU on {} threads ({e})",
                    rayon::current_num_threads()
                ));
            }
        }
        Ok(engine)
    }

    /// The backend that runs queries.
    pub fn backend(&self) -> Backend {
        match self.runner {
            Runner::Cpu => Backend::Cpu,
            Runner::Gpu(..) => Backend::Gpu,
            Runner::Hybrid(_) => Backend::Hybrid,
        }
    }

    /// What `auto` (or a hybrid without a GPU) chose and why, in one line (None otherwise).
    pub fn choice(&self) -> Option<&str> {
        self.choice.as_deref()
    }

    /// The scorer (index and options).
    pub fn scorer(&self) -> &Arc<Scorer> {
        self.cpu.scorer()
    }

    /// The CPU searcher (which also answers the GPU's failures).
    pub fn cpu(&self) -> &CpuSearcher {
        &self.cpu
    }

    /// The GPU searcher, when the GPU alone runs queries.
    pub fn gpu(&self) -> Option<&GpuSearcher> {
        match &self.runner {
            Runner::Gpu(g, _) => Some(g),
            _ => None,
        }
    }

    /// The hybrid scheduler, when it runs queries.
    pub fn hybrid(&self) -> Option<&Hybrid> {
        match &self.runner {
            Runner::Hybrid(h) => Some(h),
            _ => None,
        }
    }

    /// The hybrid scheduler, shared: for callers that submit from many threads at once (a server's
    /// handlers) without holding the engine.
    pub fn shared_hybrid(&self) -> Option<Arc<Hybrid>> {
        match &self.runner {
            Runner::Hybrid(h) => Some(h.clone()),
            _ => None,
        }
    }

    /// The backend in a few words, for reports.
    pub fn describe(&self) -> String {
        self.describe_on(rayon::current_num_threads())
    }

    /// [`Engine::describe`] for an engine run on a pool of `threads` threads (a CPU engine uses the
    /// current rayon pool's, which need not be the one it is described from).
    pub fn describe_on(&self, threads: usize) -> String {
        match &self.runner {
            Runner::Gpu(g, ctl) => format!(
                "gpu ({}){}",
                g.gpu().describe(),
                ctl.as_ref().map_or(String::new(), |c| format!(
                    ", list cache {} λ {}",
                    c.policy().name(),
                    c.ratio()
                ))
            ),
            Runner::Cpu => format!("cpu ({threads} threads)"),
            Runner::Hybrid(h) => format!(
                "hybrid ({} CPU workers{})",
                h.options().cpu_workers,
                match (h.has_gpu(), h.options().host_threads.unwrap_or(0)) {
                    (false, _) => ", no GPU".to_string(),
                    (true, 0) => " and the GPU".to_string(),
                    (true, n) => format!(" and the GPU, with {n} host threads of its own"),
                }
            ),
        }
    }

    /// How many requests one [`Engine::search_batch`] call should carry: the GPU pipelines kernel
    /// batches within one call, the CPU bounds the results held at once.
    pub fn batch_hint(&self) -> usize {
        match self.runner {
            Runner::Cpu => 4096,
            _ => 1 << 20,
        }
    }

    /// Answers every request, in order: exactly one answer each.
    pub fn search_batch(&mut self, requests: &[Request]) -> Vec<Result<Answer>> {
        let gpu = match &mut self.runner {
            Runner::Cpu => return self.cpu.search_batch(requests),
            Runner::Hybrid(h) => {
                let answers = h.search_batch(requests);
                let fallbacks = h.take_fallbacks();
                if fallbacks > 0 {
                    self.fallback_queries += fallbacks;
                    self.notes.push(format!(
                        "the GPU failed {fallbacks} tasks: they were answered on the CPU"
                    ));
                }
                return answers;
            }
            Runner::Gpu(g, ctl) => (g, ctl.clone()),
        };
        let (gpu, ctl) = gpu;
        if let Some(ctl) = &ctl {
            let (answers, failed) = crate::cache::run::search_batch(gpu, &self.cpu, ctl, requests);
            if failed > 0 {
                self.fallback_queries += failed;
                self.notes.push(format!(
                    "the GPU failed {failed} queries: they were answered on the CPU"
                ));
            }
            return answers;
        }
        let answers = gpu.search_batch(requests);
        let mut out = Vec::with_capacity(requests.len());
        let mut failures: Vec<(String, usize)> = Vec::new();
        for (request, answer) in requests.iter().zip(answers) {
            out.push(match answer {
                Ok(a) => Ok(a),
                Err(e) => {
                    let why = match &e {
                        GpuError::Failed(why) => why.clone(),
                        other => format!("the GPU cannot answer it ({other})"),
                    };
                    match failures.iter_mut().find(|(w, _)| *w == why) {
                        Some((_, n)) => *n += 1,
                        None => failures.push((why, 1)),
                    }
                    self.fallback_queries += 1;
                    self.cpu.answer(request)
                }
            });
        }
        for (why, n) in failures {
            self.notes.push(format!("{why}: {n} queries answered on the CPU"));
        }
        out
    }

    /// Runs every request `passes` times (warming caches, the GPU and the cost model), settles the
    /// list cache ([`Engine::settle_cache`]) and forgets the counters; returns the list cache's
    /// counters over the warm-up, the settle and the first plan included (None without a cache).
    pub fn warm_up(&mut self, requests: &[Request], passes: usize) -> Result<Option<CacheStats>> {
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

    /// On the GPU backend, waits until the dynamic cache policy has taken in the queries run so far
    /// and made the plan they call for (one per epoch of them; a last partial epoch waits for more),
    /// then applies a plan made, if it is worth its copies, and waits for them. Within a call, plans
    /// land behind its last batch once made, and the GPU never waits for one: a plan of a warm-up
    /// pass would otherwise land only behind the next call (in a closed loop, the next pass). The
    /// hybrid applies its plans as they come.
    pub fn settle_cache(&mut self) {
        if let Runner::Gpu(g, Some(ctl)) = &mut self.runner {
            ctl.settle();
            g.apply_ready_plan();
        }
    }

    /// What happened that a user should hear of since the last call (fallbacks to the CPU).
    pub fn take_notes(&mut self) -> Vec<String> {
        std::mem::take(&mut self.notes)
    }

    /// Requests the CPU answered after the GPU failed them, since the engine was made.
    pub fn fallback_queries(&self) -> u64 {
        self.fallback_queries
    }

    /// The GPU's counters since the last call (None without a GPU).
    pub fn take_gpu_stats(&mut self) -> Option<GpuStats> {
        match &mut self.runner {
            Runner::Gpu(g, _) => Some(g.take_stats()),
            Runner::Hybrid(h) if h.has_gpu() => Some(h.take_gpu_stats()),
            _ => None,
        }
    }

    /// The list cache's counters since the last call (None without a list cache).
    pub fn take_cache_stats(&mut self) -> Option<CacheStats> {
        match &self.runner {
            Runner::Gpu(_, Some(c)) => Some(c.take_stats()),
            Runner::Hybrid(h) => h.cache().map(|c| c.take_stats()),
            _ => None,
        }
    }

    /// The hybrid scheduler's counters since the last call (None for the other backends).
    pub fn take_hybrid_stats(&mut self) -> Option<HybridStats> {
        self.hybrid().map(Hybrid::take_stats)
    }
}
