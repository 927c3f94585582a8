//! The kernels' source and NVRTC's options: the files of `kernels/` (built in, or a directory's) as one
//! translation unit with the ABI's layout checks appended, compiled for exact float arithmetic with
//! every shared number given as a `-D` define ([`crate::abi::defines`]).

use std::path::Path;

use cudarc::nvrtc::{compile_ptx_with_opts, CompileOptions};

use crate::abi;
use crate::driver;
use crate::error::GpuError;
use crate::options::KernelOptions;

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

/// The index build's translation unit: the shared definitions and the build kernels, with the structs'
/// layout checks appended ([`abi::build_layout_checks`]). Always the built-in files: the build has no
/// kernel variants.
pub fn build_source() -> String {
    [
        KERNEL_FILES[0].1,
        include_str!("../kernels/build.cu"),
        &abi::build_layout_checks(),
    ]
    .concat()
}

/// Compiles the index build's kernels to PTX without a device (NVRTC alone, for an H100's `sm_90`), for
/// a compile check.
pub fn compile_build_check() -> Result<String, GpuError> {
    if !driver::nvrtc_present() {
        return Err(GpuError::Unavailable(
            "no NVRTC library (libnvrtc.so not found)".into(),
        ));
    }
    let kernels = KernelOptions::default();
    let ptx = compile_ptx_with_opts(build_source(), compile_options(9, 0, &kernels))
        .map_err(|e| GpuError::Compile(format!("{e}")))?;
    Ok(ptx.to_src())
}

/// The CUDA source of every kernel that `kernels` asks for: the built-in files, or those of the same
/// names in [`KernelOptions::source_dir`]. The second is for kernel work on the lent GPU machine, which
/// has no Rust toolchain: a variant of the kernels runs with the same binary (docs/kernels.md).
pub fn kernel_source(kernels: &KernelOptions) -> Result<String, GpuError> {
    kernel_source_from(kernels.source_dir, kernels.threads)
}

/// The built-in kernel source (`None`), or the one the files of `dir` make, with the ABI's layout
/// checks for kernels of `threads` threads ([`abi::layout_checks`]) appended.
fn kernel_source_from(dir: Option<&Path>, threads: u32) -> Result<String, GpuError> {
    let checks = abi::layout_checks(threads);
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
                "{}: {e} (the kernels' source directory must hold the files of crates/gpu/kernels)",
                path.display()
            ))
        })?;
        source.push_str(&text);
    }
    source.push_str(&checks);
    Ok(source)
}

/// NVRTC options: exact IEEE float arithmetic (no fused multiply-add, IEEE division, no flush to
/// zero) so that scores round as the CPU's; machine code for the device's own architecture; the
/// shared numbers as `-D` defines, with `kernels`' threads and register caps.
pub(crate) fn compile_options(major: i32, minor: i32, kernels: &KernelOptions) -> CompileOptions {
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
            .chain(abi::defines(
                kernels.threads,
                min_ctas(kernels, Mode::And),
                min_ctas(kernels, Mode::Or),
            ))
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
/// second argument, which caps registers per thread): [`KernelOptions::min_ctas`] for both, else the
/// measured default of each ([`DEFAULT_MIN_CTAS_AND`], [`DEFAULT_MIN_CTAS`]).
pub fn min_ctas(kernels: &KernelOptions, mode: Mode) -> u32 {
    kernels.min_ctas.unwrap_or(match mode {
        Mode::And => DEFAULT_MIN_CTAS_AND,
        Mode::Or => DEFAULT_MIN_CTAS,
    })
}

/// The OR entry point's default of [`min_ctas`]: three CTAs of 256 threads per SM, which caps it at 80
/// registers a thread (the kernel takes more uncapped, and then fits two CTAs per SM); three measured
/// faster than two and four (docs/decisions/014-gpu-launch-parameters.md).
pub const DEFAULT_MIN_CTAS: u32 = 3;

/// The AND entry point's default of [`min_ctas`]: five CTAs per SM (48 registers a thread), which its
/// shared memory allows since the sort buffer and the decoders' scratch left the static shared memory;
/// five measured fastest (docs/decisions/014-gpu-launch-parameters.md).
pub const DEFAULT_MIN_CTAS_AND: u32 = 5;

/// Compiles the kernel source `kernels` asks for to PTX without a device (NVRTC alone, for an H100's
/// `sm_90`), for a compile check.
pub fn compile_check(kernels: &KernelOptions) -> Result<String, GpuError> {
    kernels.check()?;
    if !driver::nvrtc_present() {
        return Err(GpuError::Unavailable(
            "no NVRTC library (libnvrtc.so not found)".into(),
        ));
    }
    let ptx = compile_ptx_with_opts(kernel_source(kernels)?, compile_options(9, 0, kernels))
        .map_err(|e| GpuError::Compile(format!("{e}")))?;
    Ok(ptx.to_src())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_files_from_a_directory_replace_the_built_in_ones() {
        let kernels = Path::new(env!("CARGO_MANIFEST_DIR")).join("kernels");
        let built_in = kernel_source_from(None, 256).unwrap();
        assert!(built_in.contains("search_or"));
        assert_eq!(kernel_source_from(Some(&kernels), 256).unwrap(), built_in);
        let tmp = tempfile::tempdir().unwrap();
        for (name, text) in KERNEL_FILES {
            let text = if name == "or.cu" { "// a variant\n" } else { text };
            std::fs::write(tmp.path().join(name), text).unwrap();
        }
        let variant = kernel_source_from(Some(tmp.path()), 256).unwrap();
        assert!(variant.contains("// a variant") && !variant.contains("or_windows_many"));
        std::fs::remove_file(tmp.path().join("score.cu")).unwrap();
        let err = kernel_source_from(Some(tmp.path()), 256).unwrap_err().to_string();
        assert!(
            err.contains("score.cu") && err.contains("crates/gpu/kernels"),
            "{err}"
        );
    }

    #[test]
    fn kernel_options_reach_nvrtc_as_defines_and_the_layout_checks() {
        let has = |kernels: &KernelOptions, define: &str| {
            compile_options(9, 0, kernels).options.iter().any(|o| o == define)
        };
        let defaults = KernelOptions::default();
        for d in ["-DTHREADS=256", "-DMIN_CTAS_AND=5", "-DMIN_CTAS_OR=3"] {
            assert!(has(&defaults, d), "{d}");
        }
        assert_eq!(compile_options(9, 0, &defaults).fmad, Some(false));
        let narrow = KernelOptions {
            threads: 128,
            min_ctas: Some(2),
            source_dir: None,
        };
        for d in ["-DTHREADS=128", "-DMIN_CTAS_AND=2", "-DMIN_CTAS_OR=2"] {
            assert!(has(&narrow, d), "{d}");
        }
        // The appended checks are those of the kernels' threads per CTA.
        let source = kernel_source(&narrow).unwrap();
        assert!(source.ends_with(&abi::layout_checks(128)));
        assert!(source.contains("static_assert(CHUNK == 512"));
    }
}
