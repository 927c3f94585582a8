//! The index built on the GPU is the CPU's, file for file (build identity aside): random collections
//! with the edge cases (empty and one-term documents, a term in every document, documents longer than a
//! block, non-ASCII text), every codec, `--title`, static scores and the global-score order; and the
//! passages where `../shared` has them. Skipped, saying so, where there is no GPU.

use std::path::Path;
use std::sync::Arc;

use warpsearch_index::build::{build_from_jsonl, BuildOn, BuildOptions, DeviceInverter};
use warpsearch_index::testdata::{edge_collection, same_index_files};
use warpsearch_index::{AnalyzerConfig, Codec};

fn options(codec: Codec) -> BuildOptions {
    warpsearch_index::testdata::title_options(codec)
}

/// Builds `input` on the CPU and on the GPU and checks the GPU inverted and wrote the CPU's files.
fn cpu_and_gpu_agree(
    input: &Path,
    dir: &Path,
    name: &str,
    opts: &BuildOptions,
    gpu: &Arc<warpsearch_gpu::GpuBuilder>,
) {
    let cpu = dir.join(format!("{name}-cpu"));
    let on_gpu = dir.join(format!("{name}-gpu"));
    let report = build_from_jsonl(input, &cpu, opts).unwrap();
    assert_eq!(report.device, None);
    let mut g = opts.clone();
    g.build_on = BuildOn::Gpu;
    g.device = Some(gpu.clone() as Arc<dyn DeviceInverter>);
    let report = build_from_jsonl(input, &on_gpu, &g).unwrap();
    // A fallback to the CPU would compare the CPU with itself: it is a failure here.
    assert!(report.notes.is_empty(), "{name}: {:?}", report.notes);
    assert_eq!(report.device.as_deref(), Some(gpu.describe().as_str()), "{name}");
    if report.meta.num_postings > 0 {
        // The device's time comes phase by phase, the sort first and the copies back last.
        let names: Vec<&str> = report.device_phases.iter().map(|(n, _)| *n).collect();
        assert_eq!(names.first(), Some(&"sort"), "{name}: {names:?}");
        assert_eq!(names.last(), Some(&"copy the lists back"), "{name}: {names:?}");
    }
    same_index_files(&cpu, &on_gpu);
}

#[test]
fn gpu_build_writes_the_cpu_files() {
    let Some(gpu) = warpsearch_gpu::testing::builder() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    for (n, seed) in [(0usize, 1u64), (1, 2), (7, 3), (1500, 4)] {
        let input = dir.path().join(format!("docs-{n}.jsonl"));
        let statics = edge_collection(&input, n, seed);
        for codec in Codec::ALL {
            let plain = options(codec);
            cpu_and_gpu_agree(&input, dir.path(), &format!("{n}-{codec}-plain"), &plain, &gpu);
            let mut ordered = options(codec);
            ordered.static_scores = Some(statics.clone());
            ordered.reorder_alpha = Some(0.4);
            cpu_and_gpu_agree(&input, dir.path(), &format!("{n}-{codec}-gs"), &ordered, &gpu);
        }
        let mut whitespace = options(Codec::SimdBp);
        whitespace.writer.analyzer = AnalyzerConfig::whitespace();
        whitespace.include_title = false;
        cpu_and_gpu_agree(&input, dir.path(), &format!("{n}-ws"), &whitespace, &gpu);
    }
}

/// More postings than a radix tile (4,096) and more terms than one digit (256), so that every sort
/// pass and the scan's chunks run more than once.
#[test]
fn gpu_build_of_many_tiles_writes_the_cpu_files() {
    let Some(gpu) = warpsearch_gpu::testing::builder() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("docs.jsonl");
    let statics = edge_collection(&input, 20_000, 9);
    cpu_and_gpu_agree(&input, dir.path(), "big", &options(Codec::SimdBp), &gpu);
    let mut ordered = options(Codec::PForDelta);
    ordered.static_scores = Some(statics);
    ordered.reorder_alpha = Some(0.5);
    cpu_and_gpu_agree(&input, dir.path(), "big-gs", &ordered, &gpu);
}

/// A build whose postings were spilled to disk is merged on the CPU, and says so.
#[test]
fn spilled_gpu_build_says_it_merged_on_the_cpu() {
    let Some(gpu) = warpsearch_gpu::testing::builder() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("docs.jsonl");
    edge_collection(&input, 500, 5);
    let mut opts = options(Codec::SimdBp);
    opts.memory_budget = 5_000;
    opts.build_on = BuildOn::Gpu;
    opts.device = Some(gpu as Arc<dyn DeviceInverter>);
    let report = build_from_jsonl(&input, &dir.path().join("idx"), &opts).unwrap();
    assert_eq!(report.device, None);
    assert!(
        report.notes.iter().any(|n| n.contains("spilled")),
        "{:?}",
        report.notes
    );
}

#[test]
fn passages_gpu_build_writes_the_cpu_files() {
    let Some(gpu) = warpsearch_gpu::testing::builder() else {
        return;
    };
    // The passages where a run provides them (the device carries them as a file); else CACM.
    let input = match std::env::var_os("WARPSEARCH_PASSAGES") {
        Some(p) => p.into(),
        None => match warpsearch_index::testdata::shared_data("cacm/docs.jsonl") {
            Some(p) => p,
            None => return,
        },
    };
    let dir = tempfile::tempdir().unwrap();
    cpu_and_gpu_agree(&input, dir.path(), "passages", &options(Codec::SimdBp), &gpu);
}
