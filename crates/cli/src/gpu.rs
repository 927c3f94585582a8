//! The GPU side of the CLI: the GPU options of `search` and `bench`, their counters, and `gpu-check`.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use anyhow::Result;
use std::time::Duration;
use warpsearch_engine::{EngineOptions, HybridOptions};
use warpsearch_gpu::kernels::{Decoder, KernelBench};
use warpsearch_gpu::{Gpu, GpuOptions, GpuStats, KernelOptions};
use warpsearch_index::Codec;

use crate::args::{GpuCheckArgs, ScorerArgs};

/// The engine options `a` asks for (the GPU's result buffers sized for `max_k`).
pub fn engine_options(a: &ScorerArgs, max_k: usize) -> EngineOptions {
    EngineOptions {
        backend: a.backend,
        gpu: GpuOptions {
            batch_size: a.gpu.gpu_batch,
            window: a.gpu.gpu_window,
            memory_budget: a.gpu.gpu_memory,
            instrument: a.gpu.gpu_profile,
            split_cost: never_if_zero(a.gpu.gpu_split_or),
            and_split_cost: never_if_zero(a.gpu.gpu_split_and),
            split_waves: a.gpu.gpu_split_waves,
            small_or: a.gpu.gpu_small_or,
            merge_ratio: a.gpu.gpu_merge_ratio,
            max_k,
            kernels: environment().kernels,
            host_gather: environment().host_gather,
            trace: environment().trace,
            ..GpuOptions::default()
        },
        hybrid: Some(hybrid_options(a)),
        ..EngineOptions::default()
    }
}

/// The GPU settings the environment gives, read once: the kernels' threads per CTA
/// (`WARPSEARCH_GPU_THREADS`: 128 or 256), their register cap (`WARPSEARCH_GPU_MIN_CTAS`: 1 to 8
/// resident CTAs per SM) and source (`WARPSEARCH_GPU_KERNELS`: a directory of kernel files), the
/// host's gather of staged words (`WARPSEARCH_GPU_GATHER=1`) and the cache's trace
/// (`WARPSEARCH_CACHE_TRACE`). A value out of range is the default.
fn environment() -> GpuOptions {
    static ENV: OnceLock<GpuOptions> = OnceLock::new();
    *ENV.get_or_init(|| {
        let number = |name: &str| std::env::var(name).ok().and_then(|v| v.parse::<u32>().ok());
        let kernels = KernelOptions {
            threads: number("WARPSEARCH_GPU_THREADS")
                .filter(|t| [128, 256].contains(t))
                .unwrap_or(KernelOptions::default().threads),
            min_ctas: number("WARPSEARCH_GPU_MIN_CTAS").filter(|n| (1..=8).contains(n)),
            // Named once for the process: the options keep it as a `'static` path.
            source_dir: std::env::var_os("WARPSEARCH_GPU_KERNELS")
                .map(|d| &*Box::leak(PathBuf::from(d).into_boxed_path()) as &'static Path),
        };
        let trace = std::env::var_os("WARPSEARCH_CACHE_TRACE").is_some();
        GpuOptions {
            kernels,
            host_gather: std::env::var_os("WARPSEARCH_GPU_GATHER").is_some_and(|v| v == "1"),
            trace,
            ..GpuOptions::default()
        }
    })
}

/// The hybrid scheduler's options from `a` (0 workers: the engine's default for the machine).
fn hybrid_options(a: &ScorerArgs) -> HybridOptions {
    let g = &a.gpu;
    HybridOptions {
        cpu_workers: g.hybrid_workers.unwrap_or(0),
        gpu_cpu_workers: g.hybrid_gpu_workers,
        host_threads: g.hybrid_host_threads,
        max_batch: g.gpu_batch.max(1),
        batch_target: Duration::from_secs_f64(g.hybrid_batch_ms.max(0.0) / 1e3),
        split_above: (g.hybrid_split_ms > 0.0).then(|| Duration::from_secs_f64(g.hybrid_split_ms / 1e3)),
        split_parts: g.hybrid_split_parts.max(1),
        split_gpu_share: g.hybrid_split_gpu_share.0,
        ..HybridOptions::default()
    }
}

/// One line of GPU counters for --stats.
pub fn gpu_stats_line(s: &GpuStats) -> String {
    let mut line = format!(
        "GPU: {} batches, {} queries; host→device {:.2} MiB in {:.2} ms, kernels {:.2} ms, device→host \
         {:.2} MiB in {:.2} ms, host preparation {:.2} ms, staging {:.2} ms, waiting {:.2} ms; {} queries answered by the CPU after a GPU failure",
        s.batches,
        s.queries,
        s.h2d_bytes as f64 / (1u64 << 20) as f64,
        s.h2d_ms,
        s.kernel_ms,
        s.d2h_bytes as f64 / (1u64 << 20) as f64,
        s.d2h_ms,
        s.prepare_ms,
        s.stage_ms,
        s.wait_ms,
        s.failed_queries
    );
    if let Some(shares) = s.phase_shares() {
        let parts: Vec<String> = shares
            .iter()
            .map(|(name, share)| format!("{name} {:.1}%", 100.0 * share))
            .collect();
        let all = s.query_blocks();
        line.push_str(&format!(
            "; kernel phases (share of CTA cycles): {}; blocks decoded {} of the queries' {all} ({:.1}%)",
            parts.join(", "),
            s.decoded_blocks,
            100.0 * s.decoded_blocks as f64 / all.max(1) as f64
        ));
    }
    line
}

/// `warpsearch gpu-check`.
pub fn gpu_check(a: GpuCheckArgs) -> Result<()> {
    let gpu = Gpu::open_with(0, &environment().kernels);
    let gpu = Arc::new(gpu.map_err(|e| anyhow::anyhow!("no usable GPU: {e}"))?);
    println!("device: {}", gpu.describe());
    println!("NVRTC compile: {:.0} ms", gpu.compile_time().as_secs_f64() * 1e3);
    // The default codec's launches (the decoders' scratch of other codecs takes shared memory too).
    println!(
        "{}",
        gpu.kernel_resources(gpu.default_or_window(Codec::SimdBp)?, Codec::SimdBp)?
    );
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
    let copy = bench.copy_bandwidth(1 << 30, a.reps)?;
    // SIMD-BP128 has two decoders on the GPU: the OR windows' (into registers) and AND's (into memory).
    let decoders: &[(Decoder, &str)] = if index.codec() == Codec::SimdBp {
        &[
            (Decoder::Registers, ", into registers"),
            (Decoder::Memory, ", into memory"),
        ]
    } else {
        &[(Decoder::Memory, "")]
    };
    let blocks = index.block_metas().len() as f64;
    for &(decoder, how) in decoders {
        let (time, postings, bytes) = bench.decode_all_timed(a.reps, decoder)?;
        let secs = time.as_secs_f64();
        // Each posting is two integers (docID and frequency); bytes moved: encoded words read, skip data
        // read (20 bytes per block), two u32 written per posting.
        let moved = bytes as f64 + blocks * 20.0 + postings as f64 * 8.0;
        println!(
            "decode ({} codec{how}): {} postings in {:.3} ms = {:.2} G integers/s; {:.1} GB/s moved ({:.0}% of \
             the copy bandwidth {:.1} GB/s, read + write)",
            index.codec(),
            postings,
            secs * 1e3,
            2.0 * postings as f64 / secs / 1e9,
            moved / secs / 1e9,
            100.0 * moved / secs / copy,
            copy / 1e9
        );
    }
    Ok(())
}

/// A split cost of 0 means "never split".
fn never_if_zero(cost: u64) -> u64 {
    if cost == 0 {
        u64::MAX
    } else {
        cost
    }
}
