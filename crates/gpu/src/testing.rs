//! For the GPU tests of this crate and the engine's (compiled only with the `testing` feature, which
//! their dev-dependencies turn on): the device opened once per test process, with the kernels
//! compiled as the environment of the test run asks, and lines that show in every log however the
//! harness captures output (a skipped test says why).
//!
//! The test runs on the GPU machine set the kernels' compilation through the environment, as the
//! `warpsearch` binary reads it: `WARPSEARCH_GPU_THREADS` (128 or 256 threads per CTA),
//! `WARPSEARCH_GPU_MIN_CTAS` (1 to 8 resident CTAs per SM) and `WARPSEARCH_GPU_KERNELS` (a directory
//! of kernel files). Test code may read the environment; the library itself does not.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use crate::device::Gpu;
use crate::error::GpuError;
use crate::options::{GpuOptions, KernelOptions};

/// The kernels' compilation the test run's environment asks for (the defaults where it says
/// nothing, or a value out of range, as the binary does).
pub fn kernel_options() -> KernelOptions {
    static KERNELS: OnceLock<KernelOptions> = OnceLock::new();
    *KERNELS.get_or_init(|| {
        let number = |name: &str| std::env::var(name).ok().and_then(|v| v.parse::<u32>().ok());
        let defaults = KernelOptions::default();
        KernelOptions {
            threads: number("WARPSEARCH_GPU_THREADS")
                .filter(|t| [128, 256].contains(t))
                .unwrap_or(defaults.threads),
            min_ctas: number("WARPSEARCH_GPU_MIN_CTAS").filter(|n| (1..=8).contains(n)),
            source_dir: std::env::var_os("WARPSEARCH_GPU_KERNELS")
                .map(|d| &*Box::leak(PathBuf::from(d).into_boxed_path()) as &'static Path),
        }
    })
}

/// [`GpuOptions::default`] with the kernels' compilation of [`kernel_options`]: for tests that open
/// their GPU through the engine.
pub fn gpu_options() -> GpuOptions {
    GpuOptions {
        kernels: kernel_options(),
        ..GpuOptions::default()
    }
}

/// The first GPU, opened once per process with [`kernel_options`]; None, after saying "skipped: no
/// CUDA device (why)" on standard error, where there is none. Any other failure to open it (the
/// kernels do not compile or load) panics: on a machine with a GPU that is a failure, not a skip.
pub fn gpu() -> Option<Arc<Gpu>> {
    static GPU: OnceLock<Result<Arc<Gpu>, (bool, String)>> = OnceLock::new();
    let opened = GPU.get_or_init(|| {
        Gpu::open_with(0, &kernel_options())
            .map(Arc::new)
            .map_err(|e| (matches!(e, GpuError::Unavailable(_)), e.to_string()))
    });
    match opened {
        Ok(g) => Some(g.clone()),
        Err((true, why)) => {
            say(&format!("skipped: no CUDA device ({why})"));
            None
        }
        Err((false, why)) => panic!("the GPU is there but does not open: {why}"),
    }
}

/// Writes a line to standard error past the test harness's capture, so that skips show in every log.
pub fn say(line: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "{line}");
}

/// The first GPU opened for index builds ([`crate::GpuBuilder`], used from any number of postings);
/// None, after saying "skipped: no CUDA device (why)", where there is none. Any other failure panics,
/// as [`gpu`]'s does.
pub fn builder() -> Option<Arc<crate::GpuBuilder>> {
    static BUILDER: OnceLock<Result<Arc<crate::GpuBuilder>, (bool, String)>> = OnceLock::new();
    let opened = BUILDER.get_or_init(|| {
        crate::GpuBuilder::open(0)
            .map(|b| Arc::new(b.with_min_postings(0)))
            .map_err(|e| (matches!(e, GpuError::Unavailable(_)), e.to_string()))
    });
    match opened {
        Ok(b) => Some(b.clone()),
        Err((true, why)) => {
            say(&format!("skipped: no CUDA device ({why})"));
            None
        }
        Err((false, why)) => panic!("the GPU is there but the build kernels do not open: {why}"),
    }
}
