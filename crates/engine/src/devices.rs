//! The machine's GPUs outside answering queries: how many there are, the device an index build
//! inverts on, and `gpu-check`'s measurements of one. The binary reaches the GPU crate only through
//! the engine, so that what it can do with a GPU is what the engine offers.

use std::sync::{Arc, Mutex, OnceLock};
use std::thread::JoinHandle;
use std::time::Instant;

use warpsearch_gpu::kernels::{Decoder, KernelBench};
use warpsearch_gpu::{Gpu, GpuBuilder, GpuError};
use warpsearch_index::build::{DeviceInverter, InvertJob, Inverted, TupleStream};
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
/// `memory_mb` MiB of it where one is given (`--gpu-memory-mb`). It opens on a thread of its own while the build
/// reads and analyses (a build needs it only once its postings are counted), so that the driver's
/// start and the kernels' compilation overlap the analysis; where it cannot open, the build says why
/// and inverts on the CPU ([`DeviceInverter::ready`]).
pub fn build_device(ordinal: usize, memory_mb: Option<u64>) -> Arc<dyn DeviceInverter> {
    let open = move || {
        GpuBuilder::open(ordinal)
            .map(|gpu| match memory_mb {
                Some(mb) => gpu.with_memory_budget(mb.saturating_mul(1 << 20)),
                None => gpu,
            })
            .map_err(|e| e.to_string())
    };
    let opened = OnceLock::new();
    let thread = match std::thread::Builder::new()
        .name("warpsearch-gpu-open".into())
        .spawn(open)
    {
        Ok(handle) => Some(handle),
        Err(e) => {
            let _ = opened.set(Err(format!("no thread to open the GPU on: {e}")));
            None
        }
    };
    Arc::new(Opening {
        opened,
        thread: Mutex::new(thread),
    })
}

/// A GPU being opened for a build ([`build_device`]).
struct Opening {
    opened: OnceLock<Result<GpuBuilder, String>>,
    thread: Mutex<Option<JoinHandle<Result<GpuBuilder, String>>>>,
}

impl Opening {
    /// The opened GPU, waiting for it the first time; or why it did not open.
    fn gpu(&self) -> Result<&GpuBuilder, &str> {
        self.opened
            .get_or_init(|| {
                let handle = self.thread.lock().unwrap_or_else(|p| p.into_inner()).take();
                match handle {
                    Some(h) => h
                        .join()
                        .unwrap_or_else(|_| Err("opening the GPU panicked".into())),
                    None => Err("the GPU was not opened".into()),
                }
            })
            .as_ref()
            .map_err(String::as_str)
    }
}

impl DeviceInverter for Opening {
    fn describe(&self) -> String {
        self.gpu()
            .map_or_else(|e| format!("no GPU ({e})"), DeviceInverter::describe)
    }

    /// A constant: `auto` decides by it without waiting for the GPU.
    fn min_postings(&self) -> u64 {
        warpsearch_gpu::build::AUTO_MIN_POSTINGS
    }

    fn invert(&self, job: &InvertJob<'_>) -> Result<Inverted, Box<dyn std::error::Error + Send + Sync>> {
        self.gpu().map_err(|e| e.to_string())?.invert(job)
    }

    fn max_postings(&self, job: &InvertJob<'_>) -> Option<u64> {
        self.gpu().ok()?.max_postings(job)
    }

    fn ready(&self) -> Result<(), String> {
        self.gpu().map(|_| ()).map_err(str::to_string)
    }

    /// A stream once the GPU has opened; None before, without waiting for it.
    fn stream(&self, parts: usize) -> Option<Box<dyn TupleStream>> {
        if self.opened.get().is_none() {
            let open = self.thread.lock().unwrap_or_else(|p| p.into_inner());
            if open.as_ref().is_some_and(|h| !h.is_finished()) {
                return None;
            }
        }
        self.gpu().ok()?.stream(parts)
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
