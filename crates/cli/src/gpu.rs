//! The GPU side of the CLI: the GPU's counters as lines and `gpu-check`.

use std::sync::Arc;
use std::time::Instant;

use anyhow::Result;
use warpsearch_gpu::kernels::{Decoder, KernelBench};
use warpsearch_gpu::Gpu;
use warpsearch_index::Codec;

use crate::args::GpuCheckArgs;

/// `warpsearch gpu-check`.
pub fn gpu_check(a: GpuCheckArgs) -> Result<()> {
    let gpu = Gpu::open_with(0, &a.kernels.options());
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
