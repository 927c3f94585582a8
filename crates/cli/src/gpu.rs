//! The GPU side of the CLI: `--backend` on `search`, the engine either side, and `gpu-check`.

use std::sync::Arc;
use std::time::Instant;

use anyhow::{bail, Result};
use warpsearch_cpu::{Answer, Query, Searcher};
use warpsearch_gpu::kernels::KernelBench;
use warpsearch_gpu::{Gpu, GpuOptions, GpuSearcher, GpuStats};
use warpsearch_index::Index;

use crate::args::{EngineArgs, GpuCheckArgs};

/// Queries per `search_batch` call on the GPU (the engine splits them into kernel batches).
pub const GPU_CHUNK: usize = 1 << 20;

/// The engine that answers the queries.
pub enum Engine<'a> {
    /// The CPU engine on all threads.
    Cpu(Searcher<'a>),
    /// The GPU engine (the CPU answers what the GPU fails).
    Gpu(Box<GpuSearcher<'a>>),
}

impl Engine<'_> {
    /// Answers every query, in order.
    pub fn search_batch(&mut self, queries: &[Query]) -> Vec<warpsearch_index::Result<Answer>> {
        match self {
            Engine::Cpu(s) => s.search_batch(queries),
            Engine::Gpu(g) => g.search_batch(queries),
        }
    }

    /// Runs every query `passes` times (warming caches and the GPU), then forgets the GPU's counters.
    pub fn warm_up(&mut self, queries: &[Query], passes: usize) -> Result<()> {
        for _ in 0..passes {
            for r in self.search_batch(queries) {
                r?;
            }
        }
        self.take_gpu_stats();
        Ok(())
    }

    /// The GPU's counters since the last call (None on the CPU).
    pub fn take_gpu_stats(&mut self) -> Option<GpuStats> {
        match self {
            Engine::Cpu(_) => None,
            Engine::Gpu(g) => Some(g.take_stats()),
        }
    }
}

/// `--backend`: the CPU, the GPU (an error if it cannot serve these options), or auto, which says in one
/// line what it chose and why.
pub fn choose_backend<'a>(a: &EngineArgs, index: &'a Index, cpu: Searcher<'a>) -> Result<Engine<'a>> {
    if a.backend == "cpu" {
        return Ok(Engine::Cpu(cpu));
    }
    let gopts = GpuOptions {
        batch_size: a.gpu.gpu_batch,
        window: a.gpu.gpu_window,
        memory_budget: a.gpu.gpu_memory,
        instrument: a.gpu.gpu_profile,
        split_cost: if a.gpu.gpu_split == 0 {
            u64::MAX
        } else {
            a.gpu.gpu_split
        },
        small_or: a.gpu.gpu_small_or,
        merge_ratio: a.gpu.gpu_merge_ratio,
        ..GpuOptions::default()
    };
    let options = *cpu.options();
    let gpu = Gpu::open(0).and_then(|g| GpuSearcher::new(Arc::new(g), index, options, gopts));
    match (gpu, a.backend.as_str()) {
        (Ok(g), "gpu") => Ok(Engine::Gpu(Box::new(g))),
        (Ok(g), _) => {
            eprintln!("backend auto: GPU, {}", g.describe());
            Ok(Engine::Gpu(Box::new(g)))
        }
        (Err(e), "gpu") => bail!("--backend gpu: {e}"),
        (Err(e), _) => {
            eprintln!(
                "backend auto: CPU on {} threads ({e})",
                rayon::current_num_threads()
            );
            Ok(Engine::Cpu(cpu))
        }
    }
}

/// One line of GPU counters for --stats.
pub fn gpu_stats_line(s: &GpuStats) -> String {
    let mut line = format!(
        "GPU: {} batches, {} queries; host→device {:.2} MiB in {:.2} ms, kernels {:.2} ms, device→host \
         {:.2} MiB in {:.2} ms, host preparation {:.2} ms; {} queries answered by the CPU after a GPU failure",
        s.batches,
        s.queries,
        s.h2d_bytes as f64 / (1u64 << 20) as f64,
        s.h2d_ms,
        s.kernel_ms,
        s.d2h_bytes as f64 / (1u64 << 20) as f64,
        s.d2h_ms,
        s.prepare_ms,
        s.cpu_fallback_queries
    );
    if let Some(shares) = s.phase_shares() {
        let parts: Vec<String> = shares
            .iter()
            .map(|(name, share)| format!("{name} {:.1}%", 100.0 * share))
            .collect();
        line.push_str(&format!(
            "; kernel phases (share of CTA cycles): {}",
            parts.join(", ")
        ));
    }
    line
}

/// `warpsearch gpu-check`.
pub fn gpu_check(a: GpuCheckArgs) -> Result<()> {
    let gpu = Arc::new(Gpu::open(0).map_err(|e| anyhow::anyhow!("no usable GPU: {e}"))?);
    println!("device: {}", gpu.describe());
    println!("NVRTC compile: {:.0} ms", gpu.compile_time().as_secs_f64() * 1e3);
    println!("{}", gpu.kernel_resources(GpuOptions::default().window)?);
    let Some(dir) = &a.index else {
        return Ok(());
    };
    let index = crate::open(dir)?;
    let t = Instant::now();
    let bench = KernelBench::new(gpu.clone(), &index)?;
    println!(
        "index upload: {:.1} MiB in {:.0} ms",
        warpsearch_gpu::residency::device_bytes(&index) as f64 / (1u64 << 20) as f64,
        t.elapsed().as_secs_f64() * 1e3
    );
    let (time, postings, bytes) = bench.decode_all_timed(a.reps)?;
    let secs = time.as_secs_f64();
    // Each posting is two integers (docID and frequency); bytes moved: encoded words read, skip data
    // read (20 bytes per block), two u32 written per posting.
    let blocks = index.block_metas().len() as f64;
    let moved = bytes as f64 + blocks * 20.0 + postings as f64 * 8.0;
    let copy = bench.copy_bandwidth(1 << 30, a.reps)?;
    println!(
        "decode ({} codec): {} postings in {:.3} ms = {:.2} G integers/s; {:.1} GB/s moved ({:.0}% of the \
         copy bandwidth {:.1} GB/s, read + write)",
        index.codec(),
        postings,
        secs * 1e3,
        2.0 * postings as f64 / secs / 1e9,
        moved / secs / 1e9,
        100.0 * moved / secs / copy,
        copy / 1e9
    );
    Ok(())
}
