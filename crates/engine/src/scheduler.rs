//! [`Scheduler`]: the one way a query runs. It owns the two executors (`crates/engine/src/exec/`) and decides
//! which takes each query; its settings are the backends:
//!
//! - the CPU alone: every submission goes to the CPU executor whole;
//! - the GPU: every submission goes to the GPU executor whole (a caller that waits for a whole batch
//!   runs its call on its own thread), and the CPU executor answers what the GPU fails;
//! - the hybrid ([`crate::hybrid`]): each query goes to the processor predicted to finish it first, or
//!   is split between them.
//!
//! Whatever the setting, what the GPU fails reaches the CPU in one place, and a query's parts merge
//! in one place.

use std::sync::{Arc, Weak};
use std::time::Duration;

use warpsearch_cpu::CpuSearcher;
use warpsearch_gpu::{GpuMemory, GpuSearcher, GpuStats};
use warpsearch_index::Result;
use warpsearch_query::{Answer, Request};

use crate::backend::Backend;
use crate::cache::CacheCtl;
use crate::exec::cpu::CpuExecutor;
use crate::exec::gpu::GpuExecutor;
use crate::exec::{Batch, Learn};
use crate::hybrid::hedge::Hedger;
use crate::hybrid::{route, HybridOptions, HybridStats, Router};
use crate::notes::Notes;
use crate::reply::{wait_for, Reply};

/// The executors and the setting that feeds them.
pub struct Scheduler {
    // Dropped first: it sends queries to the GPU executor (the CPU's threads hold it weakly).
    hedger: Option<Arc<Hedger>>,
    // Dropped next: the GPU's failures go to the CPU executor, which must outlive it.
    gpu: Option<GpuExecutor>,
    cpu: CpuExecutor,
    /// The hybrid's routing (None: every query goes to the one processor of the setting).
    router: Option<Arc<Router>>,
    searcher: CpuSearcher,
}

impl Scheduler {
    /// The CPU alone, on `threads` threads.
    pub(crate) fn cpu_only(cpu: CpuSearcher, threads: usize) -> std::io::Result<Scheduler> {
        Ok(Scheduler {
            hedger: None,
            gpu: None,
            cpu: CpuExecutor::start(&cpu, threads)?,
            router: None,
            searcher: cpu,
        })
    }

    /// The GPU (with its list cache's policy `cache`), the CPU answering what it fails on `threads`
    /// threads; failures are noted in `notes`.
    pub(crate) fn gpu_only(
        cpu: CpuSearcher,
        gpu: GpuSearcher,
        cache: Option<Arc<CacheCtl>>,
        threads: usize,
        notes: Arc<Notes>,
    ) -> std::io::Result<Scheduler> {
        let executor = CpuExecutor::start(&cpu, threads)?;
        let gpu = GpuExecutor::start(gpu, cache, executor.handle(), cpu.clone(), notes);
        Ok(Scheduler {
            hedger: None,
            gpu: Some(gpu),
            cpu: executor,
            router: None,
            searcher: cpu,
        })
    }

    /// The hybrid over `cpu` and, if given, `gpu`.
    pub fn hybrid(cpu: CpuSearcher, gpu: Option<GpuSearcher>, options: HybridOptions) -> Scheduler {
        Scheduler::hybrid_with(cpu, gpu.map(|g| (g, None)), options, Arc::default())
    }

    /// The hybrid over `cpu` and, if given, `gpu` with the policy of its list cache; the GPU's
    /// failures are noted in `notes`.
    pub(crate) fn hybrid_with(
        cpu: CpuSearcher,
        gpu: Option<(GpuSearcher, Option<Arc<CacheCtl>>)>,
        options: HybridOptions,
        notes: Arc<Notes>,
    ) -> Scheduler {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        // The GPU prepares its calls on threads of its own: on the cores the CPU workers keep busy,
        // its host work would wait behind theirs and hold the GPU back
        // (docs/decisions/018-hybrid-scheduler-defaults.md).
        let host_threads = match options.host_threads {
            _ if gpu.is_none() => 0,
            None => (cores / 4).max(1),
            Some(n) => n,
        };
        let options = HybridOptions {
            cpu_workers: match (options.gpu_cpu_workers, options.cpu_workers) {
                (Some(n), _) if gpu.is_some() => n.max(1),
                (_, 0) if gpu.is_some() => cores.saturating_sub(1 + host_threads).max(1),
                (_, 0) => cores,
                (_, n) => n,
            },
            host_threads: Some(host_threads),
            ..options
        };
        let cached = gpu.as_ref().is_some_and(|g| g.1.is_some());
        let router = Arc::new(Router::new(options, gpu.is_some(), cached));
        let learn: Arc<dyn Learn> = router.clone();
        let executor = CpuExecutor::start(&cpu, options.cpu_workers).expect("threads can be started");
        executor.set_learn(learn.clone());
        let gpu = gpu.map(|(mut g, cache)| {
            if host_threads > 0 {
                g.set_host_pool(Arc::new(
                    rayon::ThreadPoolBuilder::new()
                        .num_threads(host_threads)
                        .thread_name(|i| format!("warpsearch-gpu-host-{i}"))
                        .build()
                        .expect("threads can be started"),
                ));
            }
            let gpu = GpuExecutor::start(g, cache, executor.handle(), cpu.clone(), notes.clone());
            gpu.set_learn(learn.clone());
            let hedger = options.hedge_after.map(|_| {
                let queue = gpu.handle();
                Arc::new(Hedger::start(
                    Box::new(move |batch| queue.submit(batch)),
                    router.clone(),
                ))
            });
            let sizes = router.clone();
            gpu.set_call_size(Box::new(move || sizes.call_size()));
            let judge = router.clone();
            let stealer = gpu.stealer(
                learn.clone(),
                Box::new(move |batch, load| route::cpu_may_take(&judge, batch, load)),
            );
            // A query the CPU takes from the GPU's queue is hedged as one routed to the CPU is.
            let (hedges, weak) = (router.clone(), hedger.as_ref().map(Arc::downgrade));
            executor.set_steal(Box::new(move || {
                let batch = stealer()?;
                let hedger = weak.as_ref().and_then(Weak::upgrade);
                Some(route::hedge_stolen(&hedges, hedger.as_deref(), batch))
            }));
            let (cpu_queue, lags) = (executor.handle(), router.clone());
            gpu.set_take_from_cpu(Box::new(move |max| {
                let taken = lags
                    .cpu_lags(cpu_queue.backlog())
                    .then(|| cpu_queue.take(max()))??;
                lags.taken_by_gpu(taken.len());
                Some(taken)
            }));
            (gpu, hedger)
        });
        let (gpu, hedger) = gpu.map_or((None, None), |(g, h)| (Some(g), h));
        Scheduler {
            hedger,
            gpu,
            cpu: executor,
            router: Some(router),
            searcher: cpu,
        }
    }

    /// Queues `requests`; request i's answer (exactly one) goes to `reply` with id `first_id + i`.
    pub fn submit(
        &self,
        first_id: u64,
        requests: Vec<Request>,
        deadline: Option<Duration>,
        reply: Arc<dyn Reply>,
    ) {
        if requests.is_empty() {
            return;
        }
        match (&self.router, &self.gpu) {
            (Some(router), gpu) => route::submit(
                router,
                &self.cpu,
                gpu.as_ref(),
                self.hedger.as_deref(),
                self.searcher.scorer().index(),
                first_id,
                requests,
                deadline,
                reply,
            ),
            (None, Some(gpu)) => gpu.submit(Batch::queries(first_id, requests, deadline, reply)),
            (None, None) => self
                .cpu
                .submit(Batch::queries(first_id, requests, deadline, reply)),
        }
    }

    /// Answers every request (all submitted at once, without a deadline) and waits for the answers,
    /// in order. The GPU setting runs the call on this thread (no copy of the requests, no hand-over
    /// of a million answers).
    pub fn search_batch(&self, requests: &[Request]) -> Vec<Result<Answer>> {
        if requests.is_empty() {
            return Vec::new();
        }
        if let (None, Some(gpu)) = (&self.router, &self.gpu) {
            return gpu.search_batch(requests);
        }
        wait_for(requests, |owned, reply| self.submit(0, owned, None, reply))
    }

    /// The backend this setting is.
    pub fn backend(&self) -> Backend {
        match (&self.router, &self.gpu) {
            (Some(_), _) => Backend::Hybrid,
            (None, Some(_)) => Backend::Gpu,
            (None, None) => Backend::Cpu,
        }
    }

    /// Whether a GPU answers queries.
    pub fn has_gpu(&self) -> bool {
        self.gpu.is_some()
    }

    /// The hybrid's options, their worker count resolved (None in the other settings).
    pub fn hybrid_options(&self) -> Option<&HybridOptions> {
        self.router.as_deref().map(Router::options)
    }

    /// The CPU executor's threads.
    pub fn cpu_threads(&self) -> usize {
        self.cpu.threads()
    }

    /// The GPU's memory now (None without a GPU, or where the driver does not answer).
    pub fn gpu_memory(&self) -> Option<GpuMemory> {
        self.gpu.as_ref().and_then(GpuExecutor::memory)
    }

    /// The CUDA device the GPU is (None without one).
    pub fn device(&self) -> Option<usize> {
        self.gpu.as_ref().map(GpuExecutor::device)
    }

    /// The GPU in a few words (None without one).
    pub fn describe_gpu(&self) -> Option<&str> {
        self.gpu.as_ref().map(GpuExecutor::describe)
    }

    /// The list cache's policy, when the GPU caches part of the index.
    pub(crate) fn cache(&self) -> Option<&Arc<CacheCtl>> {
        self.gpu.as_ref().and_then(GpuExecutor::cache)
    }

    /// Queries per second the hybrid answers at full load, from its measured rates (None in the
    /// other settings).
    pub fn capacity(&self) -> Option<f64> {
        self.router.as_ref().map(|r| r.capacity())
    }

    /// The GPU's counters since the last call (None without a GPU).
    pub fn take_gpu_stats(&self) -> Option<GpuStats> {
        self.gpu.as_ref().map(GpuExecutor::take_stats)
    }

    /// The hybrid's counters since the last call, with its prediction errors (None in the other
    /// settings).
    pub fn take_stats(&self) -> Option<HybridStats> {
        self.router.as_ref().map(|r| r.take_stats())
    }

    /// Waits until the dynamic cache policy has taken in the queries run so far and made the plan
    /// they call for, then applies a plan made, if it is worth its copies, and waits for them.
    pub fn settle_cache(&self) {
        if let (Some(gpu), Some(ctl)) = (&self.gpu, self.cache()) {
            ctl.settle();
            gpu.with_searcher(GpuSearcher::apply_ready_plan);
        }
    }
}
