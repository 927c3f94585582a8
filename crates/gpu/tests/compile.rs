//! The kernel source compiles with NVRTC (needs only libnvrtc, no GPU); skipped where NVRTC is absent.
//! The kernels are compiled as on the device: for the threads per CTA, register cap and source
//! directory the test run's environment sets (`warpsearch_gpu::testing::kernel_options`).

use warpsearch_gpu::GpuError;

/// The compiled PTX holds every entry point of `names`; a compiler that cannot be loaded is a skip said
/// on standard error, any other failure a panic.
fn has_entries(compiled: Result<String, GpuError>, names: &[&str]) -> Option<String> {
    match compiled {
        Ok(ptx) => {
            for name in names {
                assert!(
                    ptx.contains(&format!(".entry {name}")),
                    "{name} missing from the PTX"
                );
            }
            Some(ptx)
        }
        Err(GpuError::Unavailable(why)) => {
            use std::io::Write;
            // Past the harness's capture, so that the skip shows in every log.
            let _ = writeln!(std::io::stderr(), "skipped: {why}");
            None
        }
        Err(e) => panic!("{e}"),
    }
}

#[test]
fn kernels_compile_with_nvrtc() {
    let kernels = warpsearch_gpu::testing::kernel_options();
    let names = ["search_and", "search_or", "decode_blocks", "topk_segments"];
    if let Some(ptx) = has_entries(warpsearch_gpu::device::compile_check(&kernels), &names) {
        if let Some(path) = std::env::var_os("WARPSEARCH_PTX_OUT") {
            std::fs::write(path, &ptx).unwrap();
        }
    }
}

/// The index build's kernels (their own translation unit) compile with NVRTC; skipped where it is absent.
#[test]
fn build_kernels_compile_with_nvrtc() {
    let names = [
        "build_rank_keys",
        "build_map_docs",
        "build_gather",
        "radix_histogram",
        "scan_exclusive",
        "radix_scatter",
        "list_starts",
        "block_bounds",
    ];
    has_entries(warpsearch_gpu::device::compile_build_check(), &names);
}
