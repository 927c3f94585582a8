//! [`Engine`]: a backend chosen once, batches of requests, and the CPU answering whatever the GPU
//! fails (a failed batch, a malformed block, a request beyond the GPU's limits), so that every request
//! gets exactly one answer.

use std::sync::Arc;

use warpsearch_cpu::CpuSearcher;
use warpsearch_gpu::{Gpu, GpuError, GpuOptions, GpuSearcher, GpuStats};
use warpsearch_index::Result;
use warpsearch_query::{Answer, Request, Scorer};

use crate::backend::{Backend, BackendChoice};
use crate::EngineError;

/// How an engine is made.
#[derive(Debug, Clone, Copy)]
pub struct EngineOptions {
    /// The backend asked for.
    pub backend: BackendChoice,
    /// The GPU engine's tunables.
    pub gpu: GpuOptions,
}

impl Default for EngineOptions {
    fn default() -> Self {
        EngineOptions {
            backend: BackendChoice::Auto,
            gpu: GpuOptions::default(),
        }
    }
}

/// What runs the queries.
enum Runner {
    Cpu,
    Gpu(Box<GpuSearcher>),
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
    /// An engine over `scorer` on the backend `options` ask for. `auto` takes the GPU where CUDA is
    /// present and the GPU serves the options, else the CPU, and says which and why in
    /// [`Engine::choice`]; `gpu` makes the GPU's refusal an error.
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
        let gpu = Gpu::open(0).and_then(|g| GpuSearcher::new(Arc::new(g), scorer, options.gpu));
        match (gpu, options.backend) {
            (Ok(g), BackendChoice::Gpu) => engine.runner = Runner::Gpu(Box::new(g)),
            (Ok(g), _) => {
                engine.choice = Some(format!("backend auto: GPU, {}", g.describe()));
                engine.runner = Runner::Gpu(Box::new(g));
            }
            (Err(e), BackendChoice::Gpu) => return Err(EngineError::GpuRequired(e)),
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
            Runner::Gpu(_) => Backend::Gpu,
        }
    }

    /// What `auto` chose and why, in one line (None for an explicit choice).
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

    /// The GPU searcher, when the GPU runs queries.
    pub fn gpu(&self) -> Option<&GpuSearcher> {
        match &self.runner {
            Runner::Gpu(g) => Some(g),
            _ => None,
        }
    }

    /// The backend in a few words, for reports.
    pub fn describe(&self) -> String {
        match &self.runner {
            Runner::Gpu(g) => format!("gpu ({})", g.gpu().describe()),
            Runner::Cpu => format!("cpu ({} threads)", rayon::current_num_threads()),
        }
    }

    /// How many requests one [`Engine::search_batch`] call should carry: the GPU pipelines kernel
    /// batches within one call, the CPU bounds the results held at once.
    pub fn batch_hint(&self) -> usize {
        match self.runner {
            Runner::Cpu => 4096,
            Runner::Gpu(_) => 1 << 20,
        }
    }

    /// Answers every request, in order: exactly one answer each.
    pub fn search_batch(&mut self, requests: &[Request]) -> Vec<Result<Answer>> {
        let gpu = match &mut self.runner {
            Runner::Cpu => return self.cpu.search_batch(requests),
            Runner::Gpu(g) => g,
        };
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

    /// Runs every request `passes` times (warming caches and the GPU), then forgets the GPU's counters.
    pub fn warm_up(&mut self, requests: &[Request], passes: usize) -> Result<()> {
        for _ in 0..passes {
            for r in self.search_batch(requests) {
                r?;
            }
        }
        self.take_gpu_stats();
        Ok(())
    }

    /// What happened that a user should hear of since the last call (fallbacks to the CPU).
    pub fn take_notes(&mut self) -> Vec<String> {
        std::mem::take(&mut self.notes)
    }

    /// Requests the CPU answered after the GPU failed them, since the engine was made.
    pub fn fallback_queries(&self) -> u64 {
        self.fallback_queries
    }

    /// The GPU's counters since the last call (None on the CPU).
    pub fn take_gpu_stats(&mut self) -> Option<GpuStats> {
        match &mut self.runner {
            Runner::Gpu(g) => Some(g.take_stats()),
            Runner::Cpu => None,
        }
    }
}
