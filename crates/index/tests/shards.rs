//! Sharded indexes on disk: each shard's lists are the single index's lists of its documents, with the
//! single index's bounds' statistics; parallel and sequential builds write the same bytes; opening
//! refuses shards that do not belong together (statistics of their own, another build, a shard opened
//! alone), and a split that does not fit the collection is an error that says what to do.

use std::path::{Path, PathBuf};

use warpsearch_index::build::{build_from_jsonl, BuildOptions};
use warpsearch_index::format::files;
use warpsearch_index::shards::{ShardPart, ShardSplit, Sharding};
use warpsearch_index::testdata::{same_lists_in_shards, without_build_id};
use warpsearch_index::{AnalyzerConfig, Bm25Params, Codec, DocOrder, Index, IndexError, WriterOptions};

use warpsearch_index::testdata::XorShift as Rng;

/// `n` documents of skewed random words as JSONL in `dir/in.jsonl`, static scores in `dir/static.tsv`.
fn collection(dir: &Path, n: usize, seed: u64) -> PathBuf {
    let mut rng = Rng(seed | 1);
    let (mut lines, mut statics) = (String::new(), String::new());
    for d in 0..n {
        let words: Vec<String> = (0..rng.below(30))
            .map(|_| {
                format!(
                    "w{}",
                    [rng.below(4), rng.below(50), rng.below(2000)][rng.below(3) as usize]
                )
            })
            .collect();
        lines.push_str(&format!(
            "{{\"id\": \"doc{d}\", \"contents\": \"{}\"}}\n",
            words.join(" ")
        ));
        statics.push_str(&format!("doc{d}\t{}\n", rng.below(100)));
    }
    std::fs::write(dir.join("static.tsv"), statics).unwrap();
    std::fs::write(dir.join("in.jsonl"), lines).unwrap();
    dir.join("in.jsonl")
}

fn options(dir: &Path, shards: Option<Sharding>) -> BuildOptions {
    let mut opts = BuildOptions::new(WriterOptions {
        codec: Codec::PForDelta,
        analyzer: AnalyzerConfig::whitespace(),
        bm25: Bm25Params::default(),
        doc_order: DocOrder::Input,
        force: true,
    });
    opts.static_scores = Some(dir.join("static.tsv"));
    opts.store = true;
    // A small budget: the build spills and merges runs.
    opts.memory_budget = 64 << 10;
    opts.shards = shards;
    opts
}

fn build(dir: &Path, name: &str, shards: Option<Sharding>) -> std::result::Result<PathBuf, IndexError> {
    let out = dir.join(name);
    build_from_jsonl(&dir.join("in.jsonl"), &out, &options(dir, shards))?;
    Ok(out)
}

fn sharding(split: ShardSplit, parallel: bool) -> Option<Sharding> {
    Some(Sharding {
        split,
        parallel,
        part: ShardPart::All,
    })
}

/// Every file under `dir`, by its path relative to `dir`, with its build identities zeroed
/// ([`without_build_id`]: meta.json's set identity, the head's, too).
fn files_of(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
                continue;
            }
            let bytes = without_build_id(std::fs::read(&p).unwrap());
            out.push((p.strip_prefix(dir).unwrap().display().to_string(), bytes));
        }
    }
    out.sort();
    out
}

/// Panics unless the directories `a` and `b` hold the same files, subdirectories included, with the
/// same bytes (build identities aside).
fn same_files(a: &Path, b: &Path, what: &str) {
    let (fa, fb) = (files_of(a), files_of(b));
    assert_eq!(
        fa.iter().map(|f| &f.0).collect::<Vec<_>>(),
        fb.iter().map(|f| &f.0).collect::<Vec<_>>(),
        "{what}"
    );
    for ((name, x), (_, y)) in fa.iter().zip(&fb) {
        assert!(
            x == y,
            "{what}: {name} differs between {} and {}",
            a.display(),
            b.display()
        );
    }
}

#[test]
fn each_shard_holds_the_single_index_lists_of_its_documents() {
    let tmp = tempfile::tempdir().unwrap();
    collection(tmp.path(), 2000, 3);
    let one = Index::open(build(tmp.path(), "one", None).unwrap()).unwrap();
    let head =
        Index::open(build(tmp.path(), "shards", sharding(ShardSplit::Count(3), true)).unwrap()).unwrap();
    assert_eq!(head.shards().len(), 3);
    assert_eq!(head.meta().num_docs, one.meta().num_docs);
    assert_eq!(head.meta().num_terms, one.meta().num_terms);
    assert_eq!(head.meta().num_postings, one.meta().num_postings);
    assert_eq!(head.meta().total_doc_len, one.meta().total_doc_len);
    let ones = one.bm25();
    for shard in head.shards() {
        // Every shard scores with the collection's statistics.
        let b = shard.index().bm25();
        assert_eq!(
            (b.num_docs, b.avg_doc_len.to_bits()),
            (ones.num_docs, ones.avg_doc_len.to_bits())
        );
        assert_eq!(shard.index().static_range(), one.meta().static_scores);
    }
    same_lists_in_shards(&one, &head);
    for d in [0u32, 666, 667, 1999] {
        assert_eq!(head.doc_id(d), one.doc_id(d));
        assert_eq!(head.doc(d).unwrap(), one.doc(d).unwrap());
    }
}

/// Shards written in parallel or one after another, and from spilled runs or from the partitions in
/// memory (in input and global-score order): the same bytes.
#[test]
fn parallel_sequential_and_in_memory_sharded_builds_write_the_same_bytes() {
    let tmp = tempfile::tempdir().unwrap();
    collection(tmp.path(), 1500, 5);
    for (split, alpha) in [
        (ShardSplit::Count(4), None),
        (ShardSplit::Starts(vec![0, 128, 1024]), None),
        (ShardSplit::Count(3), Some(0.4)),
    ] {
        let with = |name: &str, parallel: bool, budget: Option<usize>| {
            let mut o = options(tmp.path(), sharding(split.clone(), parallel));
            o.reorder_alpha = alpha;
            if let Some(b) = budget {
                o.memory_budget = b;
            }
            let out = tmp.path().join(name);
            let report = build_from_jsonl(&tmp.path().join("in.jsonl"), &out, &o).unwrap();
            (out, report.runs)
        };
        let (a, runs) = with("parallel", true, None);
        assert!(runs > 0, "the small budget spills");
        let (b, _) = with("sequential", false, None);
        let (c, runs) = with("memory", true, Some(1 << 30));
        assert_eq!(runs, 0, "nothing spilled: the lists come from memory");
        for other in [&b, &c] {
            same_files(&a, other, &format!("{split:?} alpha {alpha:?}"));
        }
    }
}

/// The head built alone (`--part head`), then each shard on its own (`--part i`, here on threads of
/// their own, the last first, as separate processes or hosts would): the same files as one build,
/// build identities aside, in input order and in global-score order; the index opens only once
/// every shard is built, and a part that does not fit its head is refused. Parts that spill to disk
/// within a small memory budget write the same files.
#[test]
fn a_sharded_index_built_part_by_part_is_the_whole_builds() {
    let tmp = tempfile::tempdir().unwrap();
    collection(tmp.path(), 1500, 9);
    for (split, alpha) in [
        (ShardSplit::Count(4), None),
        (ShardSplit::Starts(vec![0, 128, 1024]), Some(0.4)),
    ] {
        let opts = |part: ShardPart| {
            let mut o = options(
                tmp.path(),
                Some(Sharding {
                    split: split.clone(),
                    parallel: true,
                    part,
                }),
            );
            o.reorder_alpha = alpha;
            o
        };
        let input = tmp.path().join("in.jsonl");
        let whole = tmp.path().join("whole");
        build_from_jsonl(&input, &whole, &opts(ShardPart::All)).unwrap();
        let parts = tmp.path().join("parts");
        build_from_jsonl(&input, &parts, &opts(ShardPart::Head)).unwrap();
        let err = Index::open(&parts)
            .err()
            .expect("no shard is built yet")
            .to_string();
        assert!(
            err.contains("is not built yet") && err.contains("--part 0"),
            "{err}"
        );
        let n = match &split {
            ShardSplit::Count(n) => *n,
            ShardSplit::Starts(s) => s.len(),
        };
        std::thread::scope(|scope| {
            for i in (0..n).rev() {
                let (input, parts, o) = (&input, &parts, opts(ShardPart::Shard(i)));
                scope.spawn(move || build_from_jsonl(input, parts, &o).unwrap());
            }
        });
        same_files(&whole, &parts, &format!("{split:?} alpha {alpha:?}"));
        Index::open(&parts).unwrap();
        // Within a small memory budget each part spills sorted runs and merges them: the same files.
        let spilled = tmp.path().join(format!("parts-spilled-{}", alpha.is_some()));
        let tight = |part: ShardPart| {
            let mut o = opts(part);
            o.memory_budget = 20_000;
            o
        };
        build_from_jsonl(&input, &spilled, &tight(ShardPart::Head)).unwrap();
        for i in 0..n {
            let report = build_from_jsonl(&input, &spilled, &tight(ShardPart::Shard(i))).unwrap();
            assert!(report.runs > 1, "shard {i}: {} runs", report.runs);
        }
        same_files(&whole, &spilled, &format!("spilled, {split:?} alpha {alpha:?}"));
        // A part built again needs --force; a part that does not fit its head is refused, named.
        let mut again = opts(ShardPart::Shard(0));
        again.writer.force = false;
        let again = build_from_jsonl(&input, &parts, &again).err().unwrap();
        assert!(again.to_string().contains("--force"), "{again}");
        let beyond = build_from_jsonl(&input, &parts, &opts(ShardPart::Shard(n)))
            .err()
            .unwrap();
        assert!(
            beyond.to_string().contains(&format!("has shards 0 to {}", n - 1)),
            "{beyond}"
        );
        let mut other = opts(ShardPart::Shard(1));
        other.writer.codec = Codec::EliasFano;
        other.writer.force = true;
        let codec = build_from_jsonl(&input, &parts, &other).err().unwrap();
        assert!(codec.to_string().contains("same options"), "{codec}");
        let mut count = opts(ShardPart::Shard(1));
        count.shards.as_mut().unwrap().split = ShardSplit::Count(7);
        let split_err = build_from_jsonl(&input, &parts, &count).err().unwrap();
        assert!(
            split_err.to_string().contains("--shards the head was built with"),
            "{split_err}"
        );
        // An input missing some of a shard's documents.
        let text = std::fs::read_to_string(&input).unwrap();
        let short = tmp.path().join("short.jsonl");
        std::fs::write(&short, text.lines().take(1400).collect::<Vec<_>>().join("\n")).unwrap();
        let mut last = opts(ShardPart::Shard(n - 1));
        last.writer.force = true;
        let missing = build_from_jsonl(&short, &parts, &last).err().unwrap();
        assert!(missing.to_string().contains("documents of shard"), "{missing}");
        // The index is still whole: the refused builds replaced nothing.
        Index::open(&parts).unwrap();
    }
}

#[test]
fn shards_with_statistics_of_their_own_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    collection(tmp.path(), 600, 7);
    let out = build(tmp.path(), "shards", sharding(ShardSplit::Count(2), true)).unwrap();
    // Shard 1 replaced by an index of the same documents built alone, with its own statistics.
    let lines: Vec<String> = std::fs::read_to_string(tmp.path().join("in.jsonl"))
        .unwrap()
        .lines()
        .skip(300)
        .map(|l| format!("{l}\n"))
        .collect();
    let part = tmp.path().join("part");
    std::fs::create_dir(&part).unwrap();
    std::fs::write(part.join("in.jsonl"), lines.concat()).unwrap();
    std::fs::copy(tmp.path().join("static.tsv"), part.join("static.tsv")).unwrap();
    let alone = build(&part, "alone", None).unwrap();
    let shard1 = out.join(files::shard_dir(1));
    std::fs::remove_dir_all(&shard1).unwrap();
    std::fs::rename(&alone, &shard1).unwrap();
    let e = Index::open(&out)
        .err()
        .expect("a shard with statistics of its own is refused")
        .to_string();
    assert!(
        e.contains(&shard1.display().to_string())
            && e.contains("statistics of its own")
            && e.contains("--shards"),
        "{e}"
    );
}

#[test]
fn a_shard_of_another_build_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    collection(tmp.path(), 500, 9);
    let a = build(tmp.path(), "a", sharding(ShardSplit::Count(2), true)).unwrap();
    let b = build(tmp.path(), "b", sharding(ShardSplit::Count(2), false)).unwrap();
    let shard = a.join(files::shard_dir(0));
    std::fs::remove_dir_all(&shard).unwrap();
    std::fs::rename(b.join(files::shard_dir(0)), &shard).unwrap();
    let e = Index::open(&a)
        .err()
        .expect("a shard of another build is refused")
        .to_string();
    assert!(
        e.contains(&shard.display().to_string()) && e.contains("another build"),
        "{e}"
    );
}

#[test]
fn a_shard_opened_alone_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    collection(tmp.path(), 100, 11);
    let out = build(tmp.path(), "shards", sharding(ShardSplit::Count(2), true)).unwrap();
    let e = Index::open(out.join(files::shard_dir(1)))
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.contains("shard 1 of 2") && e.contains(&out.display().to_string()),
        "{e}"
    );
}

#[test]
fn splits_that_do_not_fit_the_collection_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    collection(tmp.path(), 10, 13);
    for (split, says) in [
        (ShardSplit::Count(11), "at most 10 shards"),
        (ShardSplit::Count(0), "at least one shard"),
        (ShardSplit::Starts(vec![0, 5, 5]), "non-empty ranges"),
        (ShardSplit::Starts(vec![1, 5]), "the first"),
        (ShardSplit::Starts(vec![0, 10]), "below 10"),
    ] {
        let e = build(tmp.path(), "bad", sharding(split.clone(), true))
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains(says), "{split:?}: {e}");
        assert!(!tmp.path().join("bad").exists(), "{split:?} left an index behind");
    }
    // One shard a document is the most there can be.
    let out = build(tmp.path(), "ten", sharding(ShardSplit::Count(10), true)).unwrap();
    assert_eq!(Index::open(out).unwrap().shards().len(), 10);
}

#[test]
fn a_sharded_index_is_replaced_whole_with_force() {
    let tmp = tempfile::tempdir().unwrap();
    collection(tmp.path(), 300, 15);
    let out = build(tmp.path(), "shards", sharding(ShardSplit::Count(4), true)).unwrap();
    build(tmp.path(), "shards", sharding(ShardSplit::Count(2), true)).unwrap();
    let head = Index::open(&out).unwrap();
    assert_eq!(head.shards().len(), 2);
    assert!(!out.join(files::shard_dir(2)).exists());
    // A single index replaces it too, and the other way round.
    build(tmp.path(), "shards", None).unwrap();
    assert!(!Index::open(&out).unwrap().is_sharded());
    assert!(!out.join(files::shard_dir(0)).exists());
}
