//! Opening the GPU: driver and NVRTC presence, the context, and the kernels compiled at start-up.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cudarc::driver::sys::{CUdevice_attribute, CUfunction_attribute};
use cudarc::driver::{CudaContext, CudaFunction, CudaModule};
use cudarc::nvrtc::{compile_ptx_with_opts, CompileOptions};

use warpsearch_codec::Codec;

use crate::abi::{self, CANDIDATES_PER_THREAD, MAX_K_GPU};
pub use crate::abi::{BLOCK_LEN, MAX_K, MAX_SMALL_OR, MAX_WINDOW, TOPK_CAP};
use crate::driver;
use crate::GpuError;

/// The files of `kernels/` in dependency order (`common.cuh` lists them), with their text as built.
/// Concatenated, they are one translation unit.
const KERNEL_FILES: [(&str, &str); 9] = [
    ("common.cuh", include_str!("../kernels/common.cuh")),
    ("decode.cu", include_str!("../kernels/decode.cu")),
    ("topk.cu", include_str!("../kernels/topk.cu")),
    ("query_state.cuh", include_str!("../kernels/query_state.cuh")),
    ("score.cu", include_str!("../kernels/score.cu")),
    ("and.cu", include_str!("../kernels/and.cu")),
    ("or.cu", include_str!("../kernels/or.cu")),
    ("search.cu", include_str!("../kernels/search.cu")),
    ("check.cu", include_str!("../kernels/check.cu")),
];

/// The CUDA source of every kernel: the built-in files, or with `WARPSEARCH_GPU_KERNELS=DIR` the files
/// of the same names in DIR. The second is for kernel work on the lent GPU machine, which has no Rust
/// toolchain: a variant of the kernels runs with the same binary, as a wrapper script in `AB_BUILDS`
/// of `scripts/device-speed.sh ab` (docs/kernels.md).
pub fn kernel_source() -> Result<String, GpuError> {
    kernel_source_from(
        std::env::var_os("WARPSEARCH_GPU_KERNELS")
            .map(PathBuf::from)
            .as_deref(),
    )
}

/// The built-in kernel source (`None`), or the one the files of `dir` make, with the ABI's layout
/// checks ([`abi::layout_checks`]) appended.
fn kernel_source_from(dir: Option<&Path>) -> Result<String, GpuError> {
    let checks = abi::layout_checks(threads());
    let Some(dir) = dir else {
        return Ok(KERNEL_FILES
            .iter()
            .map(|(_, text)| *text)
            .chain([&checks[..]])
            .collect());
    };
    let mut source = String::new();
    for (name, _) in KERNEL_FILES {
        let path = dir.join(name);
        let text = std::fs::read_to_string(&path).map_err(|e| {
            GpuError::Compile(format!(
                "{}: {e} (WARPSEARCH_GPU_KERNELS names a directory holding the files of crates/gpu/kernels)",
                path.display()
            ))
        })?;
        source.push_str(&text);
    }
    source.push_str(&checks);
    Ok(source)
}

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

/// AND candidates per step of a CTA (`CHUNK`: [`CANDIDATES_PER_THREAD`] per thread), and blocks of
/// decode scratch per CTA.
pub fn chunk() -> usize {
    threads() as usize * CANDIDATES_PER_THREAD
}

/// The default of [`threads`].
pub const DEFAULT_THREADS: u32 = 256;
/// Words of the PForDelta and Rice decoders' scratch per warp (`xs`: 4 · BLOCK_LEN).
const SCRATCH_WORDS_PER_WARP: u32 = 4 * BLOCK_LEN as u32;

/// The OR window's part of an OR launch's dynamic shared memory: the accumulators (at least 2,048
/// floats, since the final sort's 1,024 keys reuse them) and a bit per document of the window (those
/// its lists touched). The sort path's keys and contributions also live there.
pub fn or_window_bytes(window: u32) -> u32 {
    window.max(2 * MAX_K_GPU) * 4 + window / 8 // the sort's keys take two floats' room each
}

/// An OR query's per-term arrays ([`abi::or_state_bytes`] for [`threads`]).
pub fn or_state_bytes() -> u32 {
    abi::or_state_bytes(threads())
}

/// Dynamic shared memory of an OR launch with a window of `window` documents over an index in `codec`:
/// [`or_window_bytes`], [`or_state_bytes`], then the decoders' scratch ([`decode_scratch_bytes`]).
pub fn or_shared_bytes(window: u32, codec: Codec) -> u32 {
    or_window_bytes(window) + or_state_bytes() + decode_scratch_bytes(codec)
}

/// Dynamic shared memory of an AND launch over an index in `codec`: four arrays of [`chunk`] words
/// (candidates, their first list's frequencies, their blocks, the selected blocks), then the decoders'
/// scratch.
pub fn and_shared_bytes(codec: Codec) -> u32 {
    16 * chunk() as u32 + decode_scratch_bytes(codec)
}

/// The per-warp scratch of the PForDelta and Rice decoders (4 · 128 words a warp; `QueryShared::xs` in
/// the kernels), which other codecs' launches go without: the 16 KiB it took in every CTA's static
/// shared memory kept OR windows of 16,384 documents at two CTAs an SM.
pub fn decode_scratch_bytes(codec: Codec) -> u32 {
    match codec {
        Codec::PForDelta | Codec::Rice => (threads() / 32) * SCRATCH_WORDS_PER_WARP * 4,
        Codec::EliasFano | Codec::SimdBp => 0,
    }
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
        if !driver::driver_present() {
            return Err(GpuError::Unavailable(
                "no CUDA driver (libcuda.so not found)".into(),
            ));
        }
        if !driver::nvrtc_present() {
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
        driver::disable_event_tracking(&ctx);
        let name = ctx.name()?;
        let (major, minor) = ctx.compute_capability()?;
        let multiprocessors =
            ctx.attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)? as u32;
        let start = Instant::now();
        let ptx = compile_ptx_with_opts(kernel_source()?, compile_options(major, minor))
            .map_err(|e| GpuError::Compile(format!("{e}")))?;
        let compile_time = start.elapsed();
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
                or_shared_bytes(MAX_WINDOW, Codec::PForDelta).max(and_shared_bytes(Codec::PForDelta)) as i32,
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
    /// entry points (AND; OR with `window`) over an index in `codec`, and of the decode kernel.
    pub fn kernel_resources(&self, window: u32, codec: Codec) -> Result<String, GpuError> {
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
            "{}; {} (window {window}); {} (index codec {codec})",
            entry("search_and", &self.search_and, and_shared_bytes(codec))?,
            entry("search_or", &self.search_or, or_shared_bytes(window, codec))?,
            entry("decode_blocks", &self.decode, 0)?,
        ))
    }

    /// The OR window (`GpuOptions::window` 0) for an index in `codec`: the largest whose shared memory
    /// costs no resident CTAs. Each window has fixed costs (block selection, clearing and scanning its
    /// bits, a barrier per list), blocks that straddle two windows are decoded twice, and a larger
    /// window gives its warps more blocks at a time. On the H100 and the 25M collection, with SIMD-BP128
    /// lists, 16,384 (three CTAs an SM) ran OR 24% faster than 8,192; PForDelta and Rice, whose
    /// decoders take shared scratch, get 8,192 there (bench/RESULTS.md, issue 14, twelfth session).
    pub fn default_or_window(&self, codec: Codec) -> Result<u32, GpuError> {
        // The occupancy query needs the context current on this thread (a searcher may be made on any).
        self.ctx.bind_to_thread()?;
        let ctas = |w: u32| {
            self.search_or.occupancy_max_active_blocks_per_multiprocessor(
                threads(),
                or_shared_bytes(w, codec) as usize,
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
        options: ["--std=c++17".to_string(), "-lineinfo".to_string()]
            .into_iter()
            .chain(abi::defines(threads(), min_ctas(Mode::And), min_ctas(Mode::Or)))
            .collect(),
        ..Default::default()
    }
}

/// Which entry point of the query kernel ([`min_ctas`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// `search_and` (AND and and-or's AND pass).
    And,
    /// `search_or`.
    Or,
}

/// Resident CTAs per SM that an entry point of the query kernel is compiled for (`__launch_bounds__`'
/// second argument, which caps registers per thread): `WARPSEARCH_GPU_MIN_CTAS` for both, else the
/// measured default of each ([`DEFAULT_MIN_CTAS_AND`], [`DEFAULT_MIN_CTAS`]).
pub fn min_ctas(mode: Mode) -> u32 {
    std::env::var("WARPSEARCH_GPU_MIN_CTAS")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&n| (1..=8).contains(&n))
        .unwrap_or(match mode {
            Mode::And => DEFAULT_MIN_CTAS_AND,
            Mode::Or => DEFAULT_MIN_CTAS,
        })
}

/// The OR entry point's default of [`min_ctas`]: three CTAs of 256 threads per SM, which caps it at 80
/// registers a thread (the kernel took 124 uncapped, two CTAs per SM). On the H200 (25M collection,
/// 2026-11-25) AND rose 24% with it, and OR 8% with the window of 8,192 that then let three CTAs' shared
/// memory fit an SM (16,384 since the twelfth session: [`Gpu::default_or_window`]). Four CTAs (64
/// registers, window 8,192) ran OR 9.5% slower on the H100 (twelfth session); bench/RESULTS.md, issue 14.
pub const DEFAULT_MIN_CTAS: u32 = 3;

/// The AND entry point's default of [`min_ctas`]: five CTAs per SM (48 registers a thread), which its
/// shared memory allows since the sort buffer and the decoders' scratch left the static shared memory.
/// AND top-10 on the 25M collection rose 15.6% from three CTAs to four and 4.4% more at five (H100,
/// twelfth session; bench/RESULTS.md, issue 14).
pub const DEFAULT_MIN_CTAS_AND: u32 = 5;

/// Compiles the kernel source to PTX without a device (NVRTC alone), for a compile check.
pub fn compile_check() -> Result<String, GpuError> {
    if !driver::nvrtc_present() {
        return Err(GpuError::Unavailable(
            "no NVRTC library (libnvrtc.so not found)".into(),
        ));
    }
    let ptx = compile_ptx_with_opts(kernel_source()?, compile_options(9, 0))
        .map_err(|e| GpuError::Compile(format!("{e}")))?;
    Ok(ptx.to_src())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_files_from_a_directory_replace_the_built_in_ones() {
        let kernels = Path::new(env!("CARGO_MANIFEST_DIR")).join("kernels");
        let built_in = kernel_source_from(None).unwrap();
        assert!(built_in.contains("search_or"));
        assert_eq!(kernel_source_from(Some(&kernels)).unwrap(), built_in);
        let tmp = tempfile::tempdir().unwrap();
        for (name, text) in KERNEL_FILES {
            let text = if name == "or.cu" { "// a variant\n" } else { text };
            std::fs::write(tmp.path().join(name), text).unwrap();
        }
        let variant = kernel_source_from(Some(tmp.path())).unwrap();
        assert!(variant.contains("// a variant") && !variant.contains("or_windows_many"));
        std::fs::remove_file(tmp.path().join("score.cu")).unwrap();
        let err = kernel_source_from(Some(tmp.path())).unwrap_err().to_string();
        assert!(
            err.contains("score.cu") && err.contains("WARPSEARCH_GPU_KERNELS"),
            "{err}"
        );
    }
}
