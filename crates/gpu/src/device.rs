//! Opening the GPU: driver and NVRTC presence, the context, and the kernels compiled at start-up.

use std::sync::Arc;
use std::time::{Duration, Instant};

use cudarc::driver::sys::{CUdevice_attribute, CUfunction_attribute};
use cudarc::driver::{CudaContext, CudaFunction, CudaModule};
use cudarc::nvrtc::{compile_ptx_with_opts, CompileOptions};

use crate::GpuError;

/// The CUDA source of every kernel: one translation unit, the files of `kernels/` in dependency order
/// (`common.cuh` lists them).
pub const KERNEL_SOURCE: &str = concat!(
    include_str!("../kernels/common.cuh"),
    include_str!("../kernels/decode.cu"),
    include_str!("../kernels/topk.cu"),
    include_str!("../kernels/query_state.cuh"),
    include_str!("../kernels/score.cu"),
    include_str!("../kernels/and.cu"),
    include_str!("../kernels/or.cu"),
    include_str!("../kernels/search.cu"),
    include_str!("../kernels/check.cu"),
);

/// Threads per CTA of every kernel (`THREADS` in the source, set at compile time): 128 or 256 from
/// `WARPSEARCH_GPU_THREADS`, else [`DEFAULT_THREADS`]. An AND chunk holds this many candidates.
pub fn threads() -> u32 {
    static T: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    *T.get_or_init(|| {
        std::env::var("WARPSEARCH_GPU_THREADS")
            .ok()
            .and_then(|v| v.parse().ok())
            .filter(|t| [128, 256].contains(t))
            .unwrap_or(DEFAULT_THREADS)
    })
}

/// AND candidates per step of a CTA (`CHUNK`: 4 per thread), and blocks of decode scratch per CTA.
pub fn chunk() -> usize {
    threads() as usize * 4
}

/// The default of [`threads`].
pub const DEFAULT_THREADS: u32 = 256;
/// Entries of the per-CTA top-k buffer (`TOPK_CAP`).
pub const TOPK_CAP: usize = 36864;
/// Largest k the GPU kernels select (`MAX_K_GPU` bounds the shared-memory sort; 1,000 is promised).
pub const MAX_K: usize = 1000;
/// Postings of the largest OR query the sort path takes (`MAX_SMALL_OR`).
pub const MAX_SMALL_OR: u32 = 4096;
/// Largest OR window (`MAX_WINDOW`).
pub const MAX_WINDOW: u32 = 32768;
/// Postings per block.
pub const BLOCK_LEN: usize = 128;

/// Dynamic shared memory of an OR launch with a window of `window` documents: the accumulators,
/// per-warp decode staging (docIDs and frequencies of one block per warp) and a bit per document of the
/// window (those its lists touched).
pub fn or_shared_bytes(window: u32) -> u32 {
    window * 4 + 2 * (threads() / 32) * BLOCK_LEN as u32 * 4 + window / 8
}

/// Dynamic shared memory of an AND launch: four arrays of [`chunk`] words (candidates, their first
/// list's frequencies, their blocks, the selected blocks).
pub fn and_shared_bytes() -> u32 {
    16 * chunk() as u32
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
}

impl Gpu {
    /// Opens device `ordinal`, or says why there is none: no driver library, no NVRTC, no device, or a
    /// failing driver. Never panics when CUDA is absent.
    pub fn open(ordinal: usize) -> Result<Gpu, GpuError> {
        // With dynamic loading, the first call into a missing library would panic: look first.
        if !unsafe { cudarc::driver::sys::is_culib_present() } {
            return Err(GpuError::Unavailable(
                "no CUDA driver (libcuda.so not found)".into(),
            ));
        }
        if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
            return Err(GpuError::Unavailable(
                "no NVRTC library (libnvrtc.so not found): install the CUDA toolkit's runtime compiler"
                    .into(),
            ));
        }
        let count = CudaContext::device_count()
            .map_err(|e| GpuError::Unavailable(format!("CUDA driver failed: {e}")))?;
        if count <= ordinal as i32 {
            return Err(GpuError::Unavailable(if count == 0 {
                "no CUDA device".into()
            } else {
                format!("no CUDA device {ordinal} ({count} present)")
            }));
        }
        let ctx = CudaContext::new(ordinal)?;
        // Buffers are synchronised explicitly (one stream per pipeline slot, events per batch).
        unsafe { ctx.disable_event_tracking() };
        let name = ctx.name()?;
        let (major, minor) = ctx.compute_capability()?;
        let multiprocessors =
            ctx.attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)? as u32;
        let start = Instant::now();
        let ptx = compile_ptx_with_opts(KERNEL_SOURCE, compile_options(major, minor))
            .map_err(|e| GpuError::Compile(format!("{e}")))?;
        let compile_time = start.elapsed();
        let module = ctx.load_module(ptx)?;
        let search_and = module.load_function("search_and")?;
        let search_or = module.load_function("search_or")?;
        let decode = module.load_function("decode_blocks")?;
        let topk = module.load_function("topk_segments")?;
        // The OR window's accumulators are dynamic shared memory above the 48 KiB default: allow the
        // largest window once (searchers with smaller windows launch with less). AND's arrays fit the
        // default today (by under 3 KiB at 256 threads), but both entry points get the same allowance,
        // as the one kernel had before them, so that a larger shared state cannot fail AND's launches.
        for kernel in [&search_and, &search_or] {
            kernel.set_attribute(
                CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                or_shared_bytes(MAX_WINDOW) as i32,
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
        })
    }

    /// The device's name, e.g. "NVIDIA H100 80GB HBM3".
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Streaming multiprocessors.
    pub fn multiprocessors(&self) -> u32 {
        self.multiprocessors
    }

    /// How long NVRTC took to compile the kernels.
    pub fn compile_time(&self) -> Duration {
        self.compile_time
    }

    /// Registers per thread, static shared memory per CTA, and resident CTAs per SM of the query kernel's
    /// entry points (AND; OR with `window`) and of the decode kernel.
    pub fn kernel_resources(&self, window: u32) -> Result<String, GpuError> {
        let per_sm = |func: &CudaFunction, smem: u32| {
            func.occupancy_max_active_blocks_per_multiprocessor(threads(), smem as usize, None)
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
            "{}; {} (window {window}); {}",
            entry("search_and", &self.search_and, and_shared_bytes())?,
            entry("search_or", &self.search_or, or_shared_bytes(window))?,
            entry("decode_blocks", &self.decode, 0)?,
        ))
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

/// NVRTC options: exact IEEE float arithmetic (no fused multiply-add, IEEE division, no flush to
/// zero) so that scores round as the CPU's; machine code for the device's own architecture.
fn compile_options(major: i32, minor: i32) -> CompileOptions {
    let arch = match (major, minor) {
        (7, 0) => Some("sm_70"),
        (7, 5) => Some("sm_75"),
        (8, 0) => Some("sm_80"),
        (8, 6) => Some("sm_86"),
        (8, 9) => Some("sm_89"),
        (9, 0) => Some("sm_90"),
        (10, 0) => Some("sm_100"),
        (12, 0) => Some("sm_120"),
        _ => None,
    };
    CompileOptions {
        ftz: Some(false),
        prec_sqrt: Some(true),
        prec_div: Some(true),
        fmad: Some(false),
        use_fast_math: Some(false),
        arch,
        // Line info costs nothing at run time and lets compute-sanitizer name source lines.
        options: vec![
            "--std=c++17".into(),
            "-lineinfo".into(),
            format!("-DMIN_CTAS={}", min_ctas()),
            format!("-DTHREADS={}", threads()),
        ],
        ..Default::default()
    }
}

/// Resident CTAs per SM that the query kernel is compiled for (`__launch_bounds__`' second argument, which
/// caps registers per thread): `WARPSEARCH_GPU_MIN_CTAS`, else the measured default.
pub fn min_ctas() -> u32 {
    std::env::var("WARPSEARCH_GPU_MIN_CTAS")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&n| (1..=8).contains(&n))
        .unwrap_or(DEFAULT_MIN_CTAS)
}

/// The default of [`min_ctas`]: three CTAs of 256 threads per SM, which caps the query kernel at 80
/// registers a thread (it takes 124 uncapped, two CTAs per SM). On the H200 (25M collection, 2026-11-25)
/// AND rose 24% with it, and OR 8% with the window of 8,192 that lets three CTAs' shared memory fit an
/// SM ([`GpuOptions::window`](crate::GpuOptions)); bench/RESULTS.md, issue 14.
pub const DEFAULT_MIN_CTAS: u32 = 3;

/// Compiles the kernel source to PTX without a device (NVRTC alone), for a compile check.
pub fn compile_check() -> Result<String, GpuError> {
    if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        return Err(GpuError::Unavailable(
            "no NVRTC library (libnvrtc.so not found)".into(),
        ));
    }
    let ptx = compile_ptx_with_opts(KERNEL_SOURCE, compile_options(9, 0))
        .map_err(|e| GpuError::Compile(format!("{e}")))?;
    Ok(ptx.to_src())
}
