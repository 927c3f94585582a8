//! The index built on the GPU is the CPU's, file for file (build identity aside): random collections
//! with the edge cases (empty and one-term documents, a term in every document, documents longer than a
//! block, non-ASCII text), every codec, `--title`, static scores and the global-score order; and the
//! passages where `../shared` has them. Skipped, saying so, where there is no GPU.

use std::path::Path;
use std::sync::Arc;

use warpsearch_index::build::{build_from_jsonl, BuildOn, BuildOptions, DeviceInverter, InvertJob, Inverted};
use warpsearch_index::testdata::{edge_collection, same_index_files};
use warpsearch_index::{AnalyzerConfig, Codec};

fn options(codec: Codec) -> BuildOptions {
    warpsearch_index::testdata::title_options(codec)
}

/// The GPU taking at most `max` postings a pass, so that a small collection is inverted in passes.
struct Capped {
    gpu: Arc<warpsearch_gpu::GpuBuilder>,
    max: u64,
}

impl DeviceInverter for Capped {
    fn describe(&self) -> String {
        self.gpu.describe()
    }
    fn min_postings(&self) -> u64 {
        0
    }
    fn invert(&self, job: &InvertJob<'_>) -> Result<Inverted, Box<dyn std::error::Error + Send + Sync>> {
        assert!(job.num_postings <= self.max, "a pass over the cap");
        self.gpu.invert(job)
    }
    fn max_postings(&self, job: &InvertJob<'_>) -> Option<u64> {
        Some(self.max.min(self.gpu.max_postings(job)?))
    }
}

/// Builds `input` on the CPU and on the GPU and checks the GPU inverted and wrote the CPU's files;
/// returns the passes it took.
fn cpu_and_gpu_agree(
    input: &Path,
    dir: &Path,
    name: &str,
    opts: &BuildOptions,
    gpu: &Arc<dyn DeviceInverter>,
) -> usize {
    let cpu = dir.join(format!("{name}-cpu"));
    let on_gpu = dir.join(format!("{name}-gpu"));
    let report = build_from_jsonl(input, &cpu, opts).unwrap();
    assert_eq!(report.device, None);
    let mut g = opts.clone();
    g.build_on = BuildOn::Gpu;
    g.device = Some(gpu.clone());
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
    report.device_passes
}

/// The GPU builder as the build takes it.
fn device(gpu: Arc<warpsearch_gpu::GpuBuilder>) -> Arc<dyn DeviceInverter> {
    gpu
}

#[test]
fn gpu_build_writes_the_cpu_files() {
    let Some(gpu) = warpsearch_gpu::testing::builder().map(device) else {
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
    let Some(gpu) = warpsearch_gpu::testing::builder().map(device) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("docs.jsonl");
    let statics = edge_collection(&input, 20_000, 9);
    cpu_and_gpu_agree(&input, dir.path(), "big", &options(Codec::SimdBp), &gpu);
    // Copies through staging buffers of 1,000 u32s: every partition's tuples go up, and the lists
    // come back, in many chunks, the last one short.
    let small_stage = device(Arc::new(
        warpsearch_gpu::GpuBuilder::open(0)
            .unwrap()
            .with_min_postings(0)
            .with_stage_len(1_000),
    ));
    cpu_and_gpu_agree(
        &input,
        dir.path(),
        "big-stage",
        &options(Codec::SimdBp),
        &small_stage,
    );
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
    opts.device = Some(device(gpu));
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
    let opts = options(Codec::SimdBp);
    cpu_and_gpu_agree(&input, dir.path(), "passages", &opts, &device(gpu.clone()));
    // In passes, as a collection larger than the device's memory is.
    let postings = build_from_jsonl(&input, &dir.path().join("count"), &opts)
        .unwrap()
        .meta
        .num_postings;
    let capped: Arc<dyn DeviceInverter> = Arc::new(Capped {
        gpu,
        max: postings / 5,
    });
    let passes = cpu_and_gpu_agree(&input, dir.path(), "passages-passes", &opts, &capped);
    assert!(passes >= 5, "{passes} passes");
}

/// Postings over what one pass takes (a cap, and the builder's own memory budget) are inverted in
/// passes over whole partitions, with the CPU's files.
#[test]
fn gpu_build_in_passes_writes_the_cpu_files() {
    let Some(gpu) = warpsearch_gpu::testing::builder() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("docs.jsonl");
    let statics = edge_collection(&input, 20_000, 12);
    let plain = options(Codec::SimdBp);
    let postings = build_from_jsonl(&input, &dir.path().join("count"), &plain)
        .unwrap()
        .meta
        .num_postings;
    let mut ordered = options(Codec::EliasFano);
    ordered.static_scores = Some(statics);
    ordered.reorder_alpha = Some(0.4);
    for (name, opts) in [("plain", &plain), ("gs", &ordered)] {
        for parts in [2, 7] {
            let capped: Arc<dyn DeviceInverter> = Arc::new(Capped {
                gpu: gpu.clone(),
                max: postings / parts,
            });
            let passes = cpu_and_gpu_agree(&input, dir.path(), &format!("{name}-{parts}"), opts, &capped);
            assert!(
                passes > parts as usize - 1,
                "{name}: {passes} passes for a cap of 1/{parts}"
            );
        }
    }
    // The builder's memory budget: a pass takes 28 bytes a posting beside its terms and documents.
    let budgeted = warpsearch_gpu::GpuBuilder::open(0)
        .unwrap()
        .with_min_postings(0)
        .with_memory_budget(postings / 3 * 28 + (postings + 20_000) * 12);
    let passes = cpu_and_gpu_agree(&input, dir.path(), "budget", &plain, &device(Arc::new(budgeted)));
    assert!(passes >= 2, "{passes} passes within a third of the memory");
}
