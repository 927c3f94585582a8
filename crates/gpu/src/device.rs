//! Opening the GPU: driver and NVRTC presence, the context, and the kernels compiled at start-up (for
//! the threads per CTA and register caps of [`KernelOptions`]); the shared memory each launch takes.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cudarc::driver::sys::{CUdevice_attribute, CUfunction_attribute};
use cudarc::driver::{CudaContext, CudaFunction, CudaModule};
use cudarc::nvrtc::{compile_ptx_with_opts, Ptx};

use warpsearch_codec::Codec;

use crate::abi::{self, CANDIDATES_PER_THREAD, MAX_K_GPU};
pub use crate::abi::{BLOCK_LEN, MAX_K, MAX_SMALL_OR, MAX_WINDOW, TOPK_CAP};
use crate::driver;
use crate::error::GpuError;
pub use crate::nvrtc::{
    compile_build_check, compile_check, min_ctas, Mode, DEFAULT_MIN_CTAS, DEFAULT_MIN_CTAS_AND,
};
use crate::nvrtc::{compile_options, kernel_source};
pub use crate::options::{KernelOptions, DEFAULT_THREADS};

/// AND candidates per step of a CTA of `threads` threads (`CHUNK`: [`CANDIDATES_PER_THREAD`] per
/// thread), and blocks of decode scratch per CTA.
pub fn chunk(threads: u32) -> usize {
    threads as usize * CANDIDATES_PER_THREAD
}

/// Words of the PForDelta and Rice decoders' scratch per warp (`xs`: 4 · BLOCK_LEN).
const SCRATCH_WORDS_PER_WARP: u32 = 4 * BLOCK_LEN as u32;

/// The OR window's part of an OR launch's dynamic shared memory: the accumulators (at least 2,048
/// floats, since the final sort's 1,024 keys reuse them) and a bit per document of the window (those
/// its lists touched). The sort path's keys and contributions also live there.
pub fn or_window_bytes(window: u32) -> u32 {
    window.max(2 * MAX_K_GPU) * 4 + window / 8 // the sort's keys take two floats' room each
}

/// Dynamic shared memory of an OR launch of CTAs of `threads` threads with a window of `window`
/// documents over an index in `codec`: [`or_window_bytes`], the per-term arrays
/// ([`abi::or_state_bytes`]), then the decoders' scratch ([`decode_scratch_bytes`]).
pub fn or_shared_bytes(window: u32, codec: Codec, threads: u32) -> u32 {
    or_window_bytes(window) + abi::or_state_bytes(threads) + decode_scratch_bytes(codec, threads)
}

/// Dynamic shared memory of an AND launch of CTAs of `threads` threads over an index in `codec`: four
/// arrays of [`chunk`] words (candidates, their first list's frequencies, their blocks, the selected
/// blocks), then the decoders' scratch.
pub fn and_shared_bytes(codec: Codec, threads: u32) -> u32 {
    16 * chunk(threads) as u32 + decode_scratch_bytes(codec, threads)
}

/// The per-warp scratch of the PForDelta and Rice decoders (4 · 128 words a warp; `QueryShared::xs` in
/// the kernels), which other codecs' launches go without: the 16 KiB it took in every CTA's static
/// shared memory kept OR windows of 16,384 documents at two CTAs an SM.
pub fn decode_scratch_bytes(codec: Codec, threads: u32) -> u32 {
    match codec {
        Codec::PForDelta | Codec::Rice => (threads / 32) * SCRATCH_WORDS_PER_WARP * 4,
        Codec::EliasFano | Codec::SimdBp => 0,
    }
}

/// A context on device `ordinal`, or why there is none: no driver library, no NVRTC, no device, or a
/// failing driver. Looks for the libraries before calling into them, so that it never panics where CUDA
/// is absent.
pub(crate) fn open_context(ordinal: usize) -> Result<Arc<CudaContext>, GpuError> {
    // With dynamic loading, the first call into a missing library would panic: look first.
    if !driver::driver_present() {
        return Err(GpuError::Unavailable(
            "no CUDA driver (libcuda.so not found)".into(),
        ));
    }
    if !driver::nvrtc_present() {
        return Err(GpuError::Unavailable(
            "no NVRTC library (libnvrtc.so not found): install the CUDA toolkit's runtime compiler".into(),
        ));
    }
    let count =
        CudaContext::device_count().map_err(|e| GpuError::Unavailable(format!("CUDA driver failed: {e}")))?;
    if count <= ordinal as i32 {
        return Err(GpuError::Unavailable(if count == 0 {
            "no CUDA device".into()
        } else {
            format!("no CUDA device {ordinal} ({count} present)")
        }));
    }
    Ok(CudaContext::new(ordinal)?)
}

/// How many CUDA devices the driver shows (0 where there is no driver or it fails).
pub fn device_count() -> usize {
    if !driver::driver_present() {
        return 0;
    }
    CudaContext::device_count().map_or(0, |n| n.max(0) as usize)
}

/// The query kernels' PTX for devices of compute capability `major.minor` compiled as `kernels` asks,
/// with how long NVRTC took: compiled once a process for each, since the PTX depends on nothing else
/// (several GPUs of one kind, and the engines of several shards on one GPU, load the same).
fn compiled(major: i32, minor: i32, kernels: &KernelOptions) -> Result<(Ptx, Duration), GpuError> {
    type Compiled = ((i32, i32, KernelOptions), (Ptx, Duration));
    static DONE: Mutex<Vec<Compiled>> = Mutex::new(Vec::new());
    let key = (major, minor, *kernels);
    // Held while compiling, so that engines opened side by side compile once.
    let mut done = DONE.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, hit)) = done.iter().find(|(k, _)| *k == key) {
        return Ok(hit.clone());
    }
    let start = Instant::now();
    let ptx = compile_ptx_with_opts(kernel_source(kernels)?, compile_options(major, minor, kernels))
        .map_err(|e| GpuError::Compile(format!("{e}")))?;
    let made = (ptx, start.elapsed());
    done.push((key, made.clone()));
    Ok(made)
}

/// One opened GPU with the compiled kernels.
pub struct Gpu {
    pub(crate) ctx: Arc<CudaContext>,
    /// The query kernel's two entry points, compiled from one body (`search_body` in the source).
    pub(crate) search_and: CudaFunction,
    pub(crate) search_or: CudaFunction,
    pub(crate) decode: CudaFunction,
    pub(crate) topk: CudaFunction,
    _module: Arc<CudaModule>,
    name: String,
    multiprocessors: u32,
    compile_time: Duration,
    /// Threads per CTA the kernels were compiled for (`THREADS`), which every launch uses.
    threads: u32,
}

impl Gpu {
    /// Opens device `ordinal` with the kernels compiled as by default ([`KernelOptions::default`]);
    /// [`Gpu::open_with`] says more.
    pub fn open(ordinal: usize) -> Result<Gpu, GpuError> {
        Gpu::open_with(ordinal, &KernelOptions::default())
    }

    /// Opens device `ordinal` and compiles the kernels as `kernels` asks (threads per CTA, register
    /// caps, source), or says why it cannot: options out of range, no driver library, no NVRTC, no
    /// device, a failing driver, or a source that does not compile. Never panics when CUDA is absent.
    pub fn open_with(ordinal: usize, kernels: &KernelOptions) -> Result<Gpu, GpuError> {
        kernels.check()?;
        let ctx = open_context(ordinal)?;
        // Buffers are synchronised explicitly (one stream per pipeline slot, events per batch).
        driver::disable_event_tracking(&ctx);
        let name = ctx.name()?;
        let (major, minor) = ctx.compute_capability()?;
        let multiprocessors =
            ctx.attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)? as u32;
        let threads = kernels.threads;
        let (ptx, compile_time) = compiled(major, minor, kernels)?;
        let module = ctx.load_module(ptx)?;
        let search_and = module.load_function("search_and")?;
        let search_or = module.load_function("search_or")?;
        let decode = module.load_function("decode_blocks")?;
        let topk = module.load_function("topk_segments")?;
        // The OR window's accumulators are dynamic shared memory above the 48 KiB default: allow the
        // largest window, with the decoders' scratch, once (searchers with smaller windows or other codecs
        // launch with less). AND's arrays fit the default, but both entry points get the same allowance,
        // so that a larger shared state cannot fail AND's launches.
        for kernel in [&search_and, &search_or] {
            kernel.set_attribute(
                CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                or_shared_bytes(MAX_WINDOW, Codec::PForDelta, threads)
                    .max(and_shared_bytes(Codec::PForDelta, threads)) as i32,
            )?;
        }
        Ok(Gpu {
            ctx,
            search_and,
            search_or,
            decode,
            topk,
            _module: module,
            name,
            multiprocessors,
            compile_time,
            threads,
        })
    }

    /// The device's name, e.g. "NVIDIA H100 80GB HBM3".
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The CUDA device number it was opened as.
    pub fn ordinal(&self) -> usize {
        self.ctx.ordinal()
    }

    /// Streaming multiprocessors.
    pub fn multiprocessors(&self) -> u32 {
        self.multiprocessors
    }

    /// Threads per CTA of every kernel (`THREADS` in the source, set at compile time).
    pub fn threads(&self) -> u32 {
        self.threads
    }

    /// How long NVRTC took to compile the kernels (once a process for each compute capability and
    /// kernel options: a second GPU of the same kind reports the first's time).
    pub fn compile_time(&self) -> Duration {
        self.compile_time
    }

    /// Registers per thread, static shared memory per CTA, and resident CTAs per SM of the query kernel's
    /// entry points (AND; OR with `window`) over an index in `codec`, and of the decode kernel.
    pub fn kernel_resources(&self, window: u32, codec: Codec) -> Result<String, GpuError> {
        let per_sm = |func: &CudaFunction, smem: u32| {
            func.occupancy_max_active_blocks_per_multiprocessor(self.threads, smem as usize, None)
        };
        let entry = |name: &str, func: &CudaFunction, smem: u32| -> Result<String, GpuError> {
            Ok(format!(
                "{name}: {} registers/thread, {} B static shared, {} CTAs/SM",
                func.num_regs()?,
                func.shared_size_bytes()?,
                per_sm(func, smem)?,
            ))
        };
        Ok(format!(
            "{}; {} (window {window}); {} (index codec {codec})",
            entry(
                "search_and",
                &self.search_and,
                and_shared_bytes(codec, self.threads)
            )?,
            entry(
                "search_or",
                &self.search_or,
                or_shared_bytes(window, codec, self.threads)
            )?,
            entry("decode_blocks", &self.decode, 0)?,
        ))
    }

    /// The OR window (`GpuOptions::window` 0) for an index in `codec`: the largest whose shared memory
    /// costs no resident CTAs. Each window has fixed costs (block selection, clearing and scanning its
    /// bits, a barrier per list), blocks that straddle two windows are decoded twice, and a larger
    /// window gives its warps more blocks at a time. On the H100 and the 25M collection, with SIMD-BP128
    /// lists, 16,384 (three CTAs an SM) ran OR faster than 8,192; PForDelta and Rice, whose decoders take
    /// shared scratch, get 8,192 there (docs/decisions/014-gpu-launch-parameters.md).
    pub fn default_or_window(&self, codec: Codec) -> Result<u32, GpuError> {
        // The occupancy query needs the context current on this thread (a searcher may be made on any).
        self.ctx.bind_to_thread()?;
        let ctas = |w: u32| {
            self.search_or.occupancy_max_active_blocks_per_multiprocessor(
                self.threads,
                or_shared_bytes(w, codec, self.threads) as usize,
                None,
            )
        };
        let most = ctas(256)?;
        let mut best = 256;
        for w in (9..=MAX_WINDOW.trailing_zeros()).map(|s| 1u32 << s) {
            if ctas(w)? >= most {
                best = w;
            }
        }
        Ok(best)
    }

    /// Free and total device memory in bytes.
    pub fn memory_info(&self) -> Result<(usize, usize), GpuError> {
        self.ctx.bind_to_thread()?;
        Ok(cudarc::driver::result::mem_get_info()?)
    }

    /// One line for logs: name, multiprocessors, memory.
    pub fn describe(&self) -> String {
        let mem = self
            .memory_info()
            .map(|(_, total)| format!(", {:.0} GiB", total as f64 / (1u64 << 30) as f64))
            .unwrap_or_default();
        format!("{} ({} SMs{mem})", self.name, self.multiprocessors)
    }
}
