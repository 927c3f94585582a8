//! The index built on the GPU is the CPU's, file for file (build identity aside): random collections
//! with the edge cases (empty and one-term documents, a term in every document, documents longer than a
//! block, non-ASCII text), every codec, `--title`, static scores and the global-score order; and the
//! passages where `../shared` has them. Skipped, saying so, where there is no GPU.

use std::path::Path;
use std::sync::Arc;

use warpsearch_index::build::{build_from_jsonl, BuildOn, BuildOptions, DeviceInverter, InvertJob, Inverted};
use warpsearch_index::testdata::{edge_collection, same_index_files};
use warpsearch_index::{AnalyzerConfig, BlockMeta, Codec, BLOCK_LEN};

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
/// returns the passes it took, and whether it took the tuples while they were gathered.
fn cpu_and_gpu_agree(
    input: &Path,
    dir: &Path,
    name: &str,
    opts: &BuildOptions,
    gpu: &Arc<dyn DeviceInverter>,
) -> (usize, bool) {
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
    let names: Vec<&str> = report.device_phases.iter().map(|(n, _)| *n).collect();
    let streamed = names.first() == Some(&"copy up beside the analysis");
    if report.meta.num_postings > 0 {
        // The device's time comes phase by phase: the copies up beside the analysis where it took
        // them then, the sort, and the copies back last.
        assert_eq!(names.get(streamed as usize), Some(&"sort"), "{name}: {names:?}");
        assert_eq!(names.last(), Some(&"copy the lists back"), "{name}: {names:?}");
        // SIMD-BP128's blocks are encoded on the device, the other codecs' on the cores.
        let simdbp = opts.writer.codec == Codec::SimdBp;
        assert_eq!(names.contains(&"encode"), simdbp, "{name}: {names:?}");
    }
    same_index_files(&cpu, &on_gpu);
    (report.device_passes, streamed)
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
            let (_, streamed) =
                cpu_and_gpu_agree(&input, dir.path(), &format!("{n}-{codec}-plain"), &plain, &gpu);
            // The builder itself takes the tuples while they are gathered.
            assert_eq!(streamed, n > 0, "{n} documents");
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
    let (passes, _) = cpu_and_gpu_agree(&input, dir.path(), "passages-passes", &opts, &capped);
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
            let (passes, _) =
                cpu_and_gpu_agree(&input, dir.path(), &format!("{name}-{parts}"), opts, &capped);
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
    let (passes, streamed) =
        cpu_and_gpu_agree(&input, dir.path(), "budget", &plain, &device(Arc::new(budgeted)));
    assert!(!streamed, "within the budget, the stream takes nothing");
    assert!(passes >= 2, "{passes} passes within a third of the memory");
}

/// A list of `n` postings whose docID gaps minus one are of width `gap_bits` in one block (one gap
/// exactly that wide, the others narrow) and whose frequencies minus one are of width `tf_bits` in one
/// block, from a generator seeded with `seed`; docIDs stay below 2^32 − 1.
fn wide_list(n: usize, gap_bits: u32, tf_bits: u32, seed: u64) -> (Vec<u32>, Vec<u32>) {
    let mut state = seed;
    let mut next = move || {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        (z ^ (z >> 31)) as u32
    };
    let narrow = |v: u32, bits: u32| if bits >= 32 { v } else { v & ((1u32 << bits) - 1) };
    let at_width = |v: u32, bits: u32| match bits {
        0 => 0,
        b => narrow(v, b - 1) | 1 << (b - 1),
    };
    // The wide gap is not a block's first posting (whose gap is not encoded).
    let wide_gap = (n > 1)
        .then(|| 1 + next() as usize % (n - 1))
        .filter(|i| i % BLOCK_LEN != 0);
    let wide_tf = next() as usize % n;
    let mut docs = Vec::with_capacity(n);
    let mut doc = next() % 1000;
    let mut tfs = Vec::with_capacity(n);
    for i in 0..n {
        if i > 0 {
            let gap = match wide_gap == Some(i) {
                true => at_width(next(), gap_bits.min(31)),
                false => narrow(next(), gap_bits.min(4)),
            };
            doc += 1 + gap;
        }
        docs.push(doc);
        let tf_minus_one = match i == wide_tf {
            true => at_width(next(), tf_bits),
            false => narrow(next(), tf_bits.min(3)),
        };
        tfs.push(tf_minus_one.saturating_add(1).max(1));
    }
    (docs, tfs)
}

/// The device's SIMD-BP128 blocks are the CPU codec's, word for word, with the CPU's block metadata
/// and frequency sums: gaps and frequencies of every width from 0 to 32, lists of one posting to
/// several blocks (full, and a short last one), docIDs up to 2^32 − 2.
#[test]
fn gpu_simdbp_blocks_are_the_codecs_for_every_width() {
    let Some(gpu) = warpsearch_gpu::testing::builder() else {
        return;
    };
    let mut lists = Vec::new();
    let mut seed = 1;
    for bits in 0..=32u32 {
        for n in [1, 2, 5, 127, 128, 129, 255, 256, 300] {
            seed += 1;
            lists.push(wide_list(n, bits, 32 - bits, seed));
        }
    }
    // The widest gap: a block from docID 0 to 2^32 − 2.
    let mut widest: Vec<u32> = (0..BLOCK_LEN as u32 - 1).collect();
    widest.push(u32::MAX - 1);
    lists.push((widest, vec![u32::MAX; BLOCK_LEN]));
    let mut starts = vec![0u32];
    let (mut docs, mut tfs) = (Vec::new(), Vec::new());
    for (d, f) in &lists {
        docs.extend_from_slice(d);
        tfs.extend_from_slice(f);
        starts.push(docs.len() as u32);
    }
    let encoded = gpu.encode_simdbp_lists(&starts, &docs, &tfs, u32::MAX).unwrap();
    assert_eq!(encoded.word_starts.len(), lists.len() + 1);
    let mut block = 0;
    for (r, (d, f)) in lists.iter().enumerate() {
        let (mut words, mut metas) = (Vec::new(), Vec::new());
        for (bd, bf) in d.chunks(BLOCK_LEN).zip(f.chunks(BLOCK_LEN)) {
            let offset = words.len() as u32;
            let freq_offset = Codec::SimdBp.encode_block(Default::default(), bd, bf, &mut words);
            metas.push(BlockMeta {
                first_doc: bd[0],
                last_doc: bd[bd.len() - 1],
                offset,
                freq_offset,
                max_score: 0.0,
            });
        }
        let (a, b) = (
            encoded.word_starts[r] as usize,
            encoded.word_starts[r + 1] as usize,
        );
        assert_eq!(
            &encoded.words[a..b],
            &words[..],
            "list {r} of {} postings",
            d.len()
        );
        assert_eq!(
            &encoded.blocks[block..block + metas.len()],
            &metas[..],
            "list {r}"
        );
        block += metas.len();
        let cf: u64 = f.iter().map(|&x| x as u64).sum();
        assert_eq!(encoded.cf[r], cf, "list {r}");
    }
    assert_eq!(block, encoded.blocks.len());
    // A docID repeated, at the edge of a block and inside one, a frequency of 0, a docID not below
    // the documents: the device refuses the lists.
    for (i, what) in [
        (BLOCK_LEN, "repeated docID"),
        (7, "repeated docID"),
        (0, "tf 0"),
        (1, "docID"),
    ] {
        let mut d: Vec<u32> = (0..200).map(|x| x * 3).collect();
        let mut f = vec![1u32; 200];
        match what {
            "tf 0" => f[i] = 0,
            "docID" => d[199] = 1000,
            _ => d[i] = d[i - 1],
        }
        let err = gpu.encode_simdbp_lists(&[0, 200], &d, &f, 1000);
        assert!(err.is_err(), "{what} at {i}");
    }
}
