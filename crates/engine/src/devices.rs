//! The machine's GPUs outside answering queries: how many there are, the device an index build
//! inverts on, and `gpu-check`'s measurements of one. The binary reaches the GPU crate only through
//! the engine, so that what it can do with a GPU is what the engine offers.

use std::sync::Arc;
use std::time::Instant;

use warpsearch_gpu::kernels::{Decoder, KernelBench};
use warpsearch_gpu::{Gpu, GpuBuilder, GpuError};
use warpsearch_index::build::DeviceInverter;
use warpsearch_index::{Codec, Index};

use crate::KernelConfig;

/// What stops `gpu-check`.
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    /// GPU 0 could not be opened (no driver, no device, the kernels do not compile).
    #[error("no usable GPU: {0}")]
    NoGpu(GpuError),
    /// A measurement failed on the GPU.
    #[error(transparent)]
    Gpu(#[from] GpuError),
}

/// CUDA devices present (0 without a driver).
pub fn gpu_count() -> usize {
    warpsearch_gpu::device_count()
}

/// The device an index build inverts its postings on (`--build-on gpu|auto`), each pass within
/// `memory_budget` bytes of it where one is given, or why there is none.
pub fn build_device(ordinal: usize, memory_budget: Option<u64>) -> Result<Arc<dyn DeviceInverter>, String> {
    match GpuBuilder::open(ordinal) {
        Ok(gpu) => Ok(Arc::new(match memory_budget {
            Some(bytes) => gpu.with_memory_budget(bytes),
            None => gpu,
        })),
        Err(e) => Err(e.to_string()),
    }
}

/// `gpu-check`: GPU 0, its kernels' compilation and resources, and with an index, its upload, the
/// host-to-device copy bandwidth and every decoder's speed over all of its postings (the best of
/// `reps` timed runs). Each finding goes to `say` as soon as it is measured.
pub fn gpu_check(
    kernels: &KernelConfig,
    index: Option<&Index>,
    reps: usize,
    mut say: impl FnMut(String),
) -> Result<(), CheckError> {
    let gpu = Gpu::open_with(0, &kernels.options()).map_err(CheckError::NoGpu)?;
    let gpu = Arc::new(gpu);
    say(format!("device: {}", gpu.describe()));
    say(format!(
        "NVRTC compile: {:.0} ms",
        gpu.compile_time().as_secs_f64() * 1e3
    ));
    // The default codec's launches (the decoders' scratch of other codecs takes shared memory too).
    say(gpu.kernel_resources(gpu.default_or_window(Codec::SimdBp)?, Codec::SimdBp)?);
    let Some(index) = index else {
        return Ok(());
    };
    let t = Instant::now();
    let bench = KernelBench::new(gpu.clone(), index)?;
    say(format!(
        "index upload: {:.1} MiB in {:.0} ms",
        warpsearch_gpu::residency::device_bytes(index) as f64 / (1u64 << 20) as f64,
        t.elapsed().as_secs_f64() * 1e3
    ));
    let copy = bench.copy_bandwidth(1 << 30, reps)?;
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
        let (time, postings, bytes) = bench.decode_all_timed(reps, decoder)?;
        let secs = time.as_secs_f64();
        // Each posting is two integers (docID and frequency); bytes moved: encoded words read, skip data
        // read (20 bytes per block), two u32 written per posting.
        let moved = bytes as f64 + blocks * 20.0 + postings as f64 * 8.0;
        say(format!(
            "decode ({} codec{how}): {} postings in {:.3} ms = {:.2} G integers/s; {:.1} GB/s moved ({:.0}% of \
             the copy bandwidth {:.1} GB/s, read + write)",
            index.codec(),
            postings,
            secs * 1e3,
            2.0 * postings as f64 / secs / 1e9,
            moved / secs / 1e9,
            100.0 * moved / secs / copy,
            copy / 1e9
        ));
    }
    Ok(())
}
