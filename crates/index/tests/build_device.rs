//! The build's device path (`BuildOptions::device`), with a reference inverter on the CPU in place of a
//! GPU: what a device returns under the `DeviceInverter` contract is written as the CPU's own inversion
//! is, file for file; a device that fails, a collection too small for `auto` and a missing device are
//! inverted on the CPU, with a note saying why. SIMD-BP128 lists the device encodes are written as they
//! are, in one pass or in passes of which some are encoded and some not.

use std::path::Path;
use std::sync::Arc;

use warpsearch_index::bm25::loosen_bound;
use warpsearch_index::build::{
    build_from_jsonl, build_from_lines, BuildOn, BuildOptions, DeviceInverter, EncodedLists, InvertJob,
    Inverted, NewTuples, TupleStream,
};
use warpsearch_index::testdata::{edge_collection, same_index_files};
use warpsearch_index::{BlockMeta, Codec, Index, BLOCK_LEN};

/// The contract, computed plainly: tuples sorted by (rank, final docID), offsets, and each block's
/// loosened largest score; SIMD-BP128 lists encoded on every other call (the first included), as a
/// GPU encodes them where it has the memory.
#[derive(Default)]
struct Reference {
    fail: bool,
    /// Postings it takes in one pass (None: any number).
    max: Option<u64>,
    calls: std::sync::atomic::AtomicUsize,
    /// Takes the tuples while they are gathered: from its n-th call to `stream` on (None: never).
    stream_from: Option<usize>,
    /// The postings its stream takes at most.
    stream_max: usize,
    streams_asked: std::sync::atomic::AtomicUsize,
}

/// The reference's stream: the tuples taken, partition by partition, which must be the job's.
struct ReferenceStream {
    parts: Vec<[Vec<u32>; 3]>,
    max: usize,
    held: usize,
}

impl TupleStream for ReferenceStream {
    fn add(&mut self, new: &[NewTuples<'_>]) -> Result<bool, String> {
        let n: usize = new.iter().map(|t| t.2.len()).sum();
        if self.held + n > self.max {
            return Ok(false);
        }
        self.held += n;
        for &(p, term, doc, tf) in new {
            for (column, new) in self.parts[p].iter_mut().zip([term, doc, tf]) {
                column.extend_from_slice(new);
            }
        }
        Ok(true)
    }

    fn invert(
        self: Box<Self>,
        job: &InvertJob<'_>,
    ) -> Result<Inverted, Box<dyn std::error::Error + Send + Sync>> {
        for (p, part) in job.parts.iter().enumerate() {
            let [term, doc, tf] = &self.parts[p];
            assert!(
                term == part.term && doc == part.doc && tf == part.tf,
                "partition {p}: the stream took other tuples than the job's"
            );
        }
        let mut inv = invert_plainly(job);
        inv.phases.push(("streamed", std::time::Duration::ZERO));
        Ok(inv)
    }
}

/// `inv`'s lists encoded with SIMD-BP128, their bounds `inv.block_max`.
fn encode(inv: &Inverted) -> EncodedLists {
    let mut e = EncodedLists {
        word_starts: vec![0],
        ..EncodedLists::default()
    };
    let mut bounds = inv.block_max.iter();
    for w in inv.starts.windows(2) {
        let (s, end) = (w[0] as usize, w[1] as usize);
        let first = e.words.len();
        for (d, f) in inv.docs[s..end]
            .chunks(BLOCK_LEN)
            .zip(inv.tfs[s..end].chunks(BLOCK_LEN))
        {
            let offset = (e.words.len() - first) as u32;
            let freq_offset = Codec::SimdBp.encode_block(Default::default(), d, f, &mut e.words);
            e.blocks.push(BlockMeta {
                first_doc: d[0],
                last_doc: d[d.len() - 1],
                offset,
                freq_offset,
                max_score: *bounds.next().unwrap(),
            });
        }
        e.word_starts.push(e.words.len() as u64);
        e.cf.push(inv.tfs[s..end].iter().map(|&f| f as u64).sum());
    }
    e
}

impl DeviceInverter for Reference {
    fn describe(&self) -> String {
        "reference".into()
    }
    fn min_postings(&self) -> u64 {
        1000
    }
    fn max_postings(&self, _job: &InvertJob<'_>) -> Option<u64> {
        self.max
    }
    fn invert(&self, job: &InvertJob<'_>) -> Result<Inverted, Box<dyn std::error::Error + Send + Sync>> {
        if self.fail {
            return Err("device lost".into());
        }
        if self.max.is_some_and(|m| job.num_postings > m) {
            return Err(format!("{} postings in one pass, over {:?}", job.num_postings, self.max).into());
        }
        let mut inv = invert_plainly(job);
        let call = self.calls.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if job.codec == Codec::SimdBp && call.is_multiple_of(2) {
            inv.encoded = Some(encode(&inv));
            (inv.docs, inv.tfs, inv.block_max) = Default::default();
        }
        Ok(inv)
    }

    fn stream(&self, parts: usize) -> Option<Box<dyn TupleStream>> {
        let asked = self
            .streams_asked
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        (self.stream_from? <= asked).then(|| {
            Box::new(ReferenceStream {
                parts: vec![Default::default(); parts],
                max: self.stream_max,
                held: 0,
            }) as Box<dyn TupleStream>
        })
    }
}

/// The contract's lists of `job`, computed plainly.
fn invert_plainly(job: &InvertJob<'_>) -> Inverted {
    {
        let mut tuples: Vec<(u32, u32, u32)> = Vec::new();
        for p in &job.parts {
            for i in 0..p.doc.len() {
                let doc = job.new_id.map_or(p.doc[i], |m| m[p.doc[i] as usize]);
                tuples.push((p.rank[p.term[i] as usize], doc, p.tf[i]));
            }
        }
        tuples.sort_unstable();
        let mut inv = Inverted {
            starts: vec![0; job.num_terms as usize + 1],
            ..Inverted::default()
        };
        for &(r, _, _) in &tuples {
            inv.starts[r as usize + 1] += 1;
        }
        for r in 0..job.num_terms as usize {
            inv.starts[r + 1] += inv.starts[r];
        }
        inv.docs = tuples.iter().map(|t| t.1).collect();
        inv.tfs = tuples.iter().map(|t| t.2).collect();
        for w in inv.starts.windows(2) {
            let (s, e) = (w[0] as usize, w[1] as usize);
            let idf = job.bm25.idf((e - s) as u64);
            for block in tuples[s..e].chunks(BLOCK_LEN) {
                let max = block
                    .iter()
                    .map(|&(_, d, tf)| job.bm25.score(idf, tf, job.lens[d as usize]))
                    .fold(0f32, f32::max);
                inv.block_max.push(loosen_bound(max));
            }
        }
        inv.phases.push(("reference", std::time::Duration::ZERO));
        inv
    }
}

fn options(codec: Codec) -> BuildOptions {
    warpsearch_index::testdata::title_options(codec)
}

fn with_device(opts: &BuildOptions, on: BuildOn, fail: bool) -> BuildOptions {
    on_device(
        opts,
        on,
        Reference {
            fail,
            ..Reference::default()
        },
    )
}

/// `opts` inverting on `device` where `on` says.
fn on_device(opts: &BuildOptions, on: BuildOn, device: impl DeviceInverter + 'static) -> BuildOptions {
    let mut o = opts.clone();
    o.build_on = on;
    o.device = Some(Arc::new(device));
    o
}

fn build(input: &Path, out: &Path, opts: &BuildOptions) -> warpsearch_index::build::BuildReport {
    build_from_jsonl(input, out, opts).unwrap()
}

/// Asserts that one of the report's notes holds every one of `words`.
fn says(report: &warpsearch_index::build::BuildReport, words: &[&str]) {
    assert!(
        report.notes.iter().any(|n| words.iter().all(|w| n.contains(w))),
        "no note says {words:?}: {:?}",
        report.notes
    );
}

#[test]
fn device_lists_are_written_as_the_cpu_lists() {
    let dir = tempfile::tempdir().unwrap();
    for (n, seed) in [(0usize, 1u64), (1, 2), (900, 3)] {
        let input = dir.path().join(format!("docs-{n}.jsonl"));
        let statics = edge_collection(&input, n, seed);
        for codec in Codec::ALL {
            let mut ordered = options(codec);
            ordered.static_scores = Some(statics.clone());
            ordered.reorder_alpha = Some(0.4);
            for (name, opts) in [("plain", options(codec)), ("gs", ordered)] {
                let cpu = dir.path().join(format!("{n}-{codec}-{name}-cpu"));
                let dev = dir.path().join(format!("{n}-{codec}-{name}-dev"));
                assert_eq!(build(&input, &cpu, &opts).device, None);
                let report = build(&input, &dev, &with_device(&opts, BuildOn::Gpu, false));
                assert_eq!(report.device.as_deref(), Some("reference"));
                assert_eq!(report.device_phases.len(), 1, "the device's phases are reported");
                assert!(report.notes.is_empty(), "{:?}", report.notes);
                same_index_files(&cpu, &dev);
            }
        }
    }
}

#[test]
fn a_failed_device_build_finishes_on_the_cpu_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("docs.jsonl");
    edge_collection(&input, 300, 5);
    let opts = options(Codec::SimdBp);
    build(&input, &dir.path().join("cpu"), &opts);
    let report = build(
        &input,
        &dir.path().join("failed"),
        &with_device(&opts, BuildOn::Gpu, true),
    );
    assert_eq!(report.device, None);
    says(&report, &["device lost", "CPU"]);
    same_index_files(&dir.path().join("cpu"), &dir.path().join("failed"));
}

#[test]
fn auto_uses_the_device_only_from_its_threshold_on_one_thread_and_says_why_not() {
    let dir = tempfile::tempdir().unwrap();
    let small = dir.path().join("small.jsonl");
    edge_collection(&small, 20, 6);
    let opts = options(Codec::SimdBp);
    let report = build(
        &small,
        &dir.path().join("small"),
        &with_device(&opts, BuildOn::Auto, false),
    );
    assert_eq!(report.device, None);
    says(&report, &["fewer than"]);
    let large = dir.path().join("large.jsonl");
    edge_collection(&large, 400, 7);
    // On one thread, past the threshold: the device.
    let threads = |n| rayon::ThreadPoolBuilder::new().num_threads(n).build().unwrap();
    let report = threads(1).install(|| {
        build(
            &large,
            &dir.path().join("large"),
            &with_device(&opts, BuildOn::Auto, false),
        )
    });
    assert_eq!(report.device.as_deref(), Some("reference"));
    // On two threads or more the cores invert faster: the CPU, and why.
    let report = threads(2).install(|| {
        build(
            &large,
            &dir.path().join("two"),
            &with_device(&opts, BuildOn::Auto, false),
        )
    });
    assert_eq!(report.device, None);
    says(&report, &["on 2 threads the cores invert faster"]);
    same_index_files(&dir.path().join("large"), &dir.path().join("two"));
    // Asked for a GPU where there is none: the CPU, and why.
    let none = on_device(&opts, BuildOn::Gpu, Unready("no CUDA device"));
    let report = build(&large, &dir.path().join("none"), &none);
    says(&report, &["no CUDA device"]);
    same_index_files(&dir.path().join("large"), &dir.path().join("none"));
}

/// Postings over what the device takes at once are inverted in passes over whole partitions, and the
/// files are the CPU's whatever the number of passes; a partition alone over the limit is inverted on
/// the CPU, with a note saying why.
#[test]
fn a_device_inverts_in_passes_what_it_cannot_take_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("docs.jsonl");
    let statics = edge_collection(&input, 900, 11);
    for codec in [Codec::SimdBp, Codec::PForDelta] {
        let mut ordered = options(codec);
        ordered.static_scores = Some(statics.clone());
        ordered.reorder_alpha = Some(0.4);
        for (name, opts) in [("plain", options(codec)), ("gs", ordered)] {
            let cpu = dir.path().join(format!("{codec}-{name}-cpu"));
            let postings = build(&input, &cpu, &opts).meta.num_postings;
            let mut passes_seen = Vec::new();
            // From one pass (the limit at the postings) to many (a small share of them).
            for share in [1.0, 0.99, 0.5, 0.2, 0.07] {
                let max = ((postings as f64 * share) as u64).max(1);
                let device = Reference {
                    max: Some(max),
                    ..Reference::default()
                };
                let o = on_device(&opts, BuildOn::Gpu, device);
                let dev = dir.path().join(format!("{codec}-{name}-{max}"));
                let report = build(&input, &dev, &o);
                if report.device.is_none() {
                    // Only where one partition alone is over the limit.
                    assert!(
                        report.notes.iter().any(|n| n.contains("one partition holds")),
                        "{max}: {:?}",
                        report.notes
                    );
                } else {
                    assert!(report.notes.is_empty(), "{:?}", report.notes);
                    passes_seen.push(report.device_passes);
                }
                same_index_files(&cpu, &dev);
            }
            assert_eq!(passes_seen.first(), Some(&1), "{passes_seen:?}");
            assert!(passes_seen.iter().any(|&p| p >= 3), "{passes_seen:?}");
        }
    }
    // A limit below every partition: the CPU, and why.
    let device = Reference {
        max: Some(1),
        ..Reference::default()
    };
    let o = on_device(&options(Codec::SimdBp), BuildOn::Gpu, device);
    let report = build(&input, &dir.path().join("tiny"), &o);
    assert_eq!(report.device, None);
    says(&report, &["one partition holds", "CPU"]);
    let cpu = dir.path().join(format!("{}-plain-cpu", Codec::SimdBp));
    same_index_files(&cpu, &dir.path().join("tiny"));
}

/// A device that could not be made ready (one opened beside the analysis that failed to open), and
/// why.
struct Unready(&'static str);

impl DeviceInverter for Unready {
    fn describe(&self) -> String {
        "unready".into()
    }
    fn min_postings(&self) -> u64 {
        0
    }
    fn invert(&self, _job: &InvertJob<'_>) -> Result<Inverted, Box<dyn std::error::Error + Send + Sync>> {
        panic!("a device that is not ready is never asked to invert")
    }
    fn ready(&self) -> Result<(), String> {
        Err(self.0.into())
    }
}

#[test]
fn a_device_that_does_not_open_leaves_the_build_to_the_cpu_and_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("docs.jsonl");
    edge_collection(&input, 300, 13);
    let opts = options(Codec::SimdBp);
    build(&input, &dir.path().join("cpu"), &opts);
    let o = on_device(&opts, BuildOn::Gpu, Unready("the driver is gone"));
    let report = build(&input, &dir.path().join("unready"), &o);
    assert_eq!(report.device, None);
    assert!(
        report
            .notes
            .iter()
            .any(|n| n == "no GPU to build on (the driver is gone): inverted on the CPU"),
        "{:?}",
        report.notes
    );
    same_index_files(&dir.path().join("cpu"), &dir.path().join("unready"));
}

/// A device that takes the tuples while they are gathered gets each partition's once and in order,
/// from the batch after which it first takes a stream (all it missed, then each batch's), and writes
/// the CPU's files; a stream that stops taking them (the device's memory) leaves them to go up at the
/// inversion, and a build that spills inverts on the CPU.
#[test]
fn a_device_takes_the_tuples_while_they_are_gathered() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("docs.jsonl");
    edge_collection(&input, 900, 21);
    let text = std::fs::read_to_string(&input).unwrap();
    let lines: Vec<Vec<u8>> = text.lines().map(|l| l.as_bytes().to_vec()).collect();
    // Batches of 40 lines: the build gathers the tuples in 23 steps.
    let batches = || {
        lines
            .chunks(40)
            .map(|c| Ok(c.to_vec()))
            .collect::<Vec<_>>()
            .into_iter()
    };
    for codec in [Codec::SimdBp, Codec::EliasFano] {
        let opts = options(codec);
        let cpu = dir.path().join(format!("{codec}-cpu"));
        assert_eq!(
            build_from_lines("docs", batches(), &cpu, &opts).unwrap().device,
            None
        );
        let postings = Index::open(&cpu).unwrap().meta().num_postings as usize;
        for (from, max, streamed) in [
            (0, usize::MAX, true),
            (5, usize::MAX, true),
            (0, postings / 2, false),
        ] {
            let device = Reference {
                stream_from: Some(from),
                stream_max: max,
                ..Reference::default()
            };
            let dev = dir.path().join(format!("{codec}-{from}-{max}"));
            let report =
                build_from_lines("docs", batches(), &dev, &on_device(&opts, BuildOn::Gpu, device)).unwrap();
            assert!(report.notes.is_empty(), "{:?}", report.notes);
            let names: Vec<&str> = report.device_phases.iter().map(|p| p.0).collect();
            assert_eq!(names.contains(&"streamed"), streamed, "{from} {max}: {names:?}");
            assert_eq!(
                names.first() == Some(&"copy up beside the analysis"),
                streamed,
                "{names:?}"
            );
            same_index_files(&cpu, &dev);
        }
    }
    // Spilled to disk: the stream stops, the runs are merged on the CPU.
    let mut opts = options(Codec::SimdBp);
    opts.memory_budget = 5_000;
    let device = Reference {
        stream_from: Some(0),
        stream_max: usize::MAX,
        ..Reference::default()
    };
    let report = build_from_lines(
        "docs",
        batches(),
        &dir.path().join("spilled"),
        &on_device(&opts, BuildOn::Gpu, device),
    )
    .unwrap();
    assert_eq!(report.device, None);
    says(&report, &["spilled"]);
}
