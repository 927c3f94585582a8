//! The index a build writes is the same, byte for byte (build identity aside), whatever the number of
//! threads: random collections with the edge cases (empty and one-term documents, a term in every
//! document, documents longer than a block, non-ASCII text), every codec, `--title`, static scores and
//! the global-score order, in memory and spilled to disk; and CACM.

use std::path::Path;

use warpsearch_index::build::{build_from_jsonl, BuildOptions};
use warpsearch_index::testdata::{edge_collection, same_index_files};
use warpsearch_index::Codec;

fn options(codec: Codec) -> BuildOptions {
    warpsearch_index::testdata::title_options(codec)
}

/// Builds `input` into `out` on a pool of `threads` threads.
fn build_on(threads: usize, input: &Path, out: &Path, opts: &BuildOptions) -> usize {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .unwrap();
    pool.install(|| build_from_jsonl(input, out, opts).unwrap()).runs
}

#[test]
fn every_thread_count_writes_the_same_files() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("docs.jsonl");
    let statics = edge_collection(&input, 1500, 7);
    for codec in Codec::ALL {
        let mut variants = vec![("plain", options(codec))];
        let mut ordered = options(codec);
        ordered.static_scores = Some(statics.clone());
        ordered.reorder_alpha = Some(0.4);
        variants.push(("global-score", ordered));
        let mut spilled = options(codec);
        spilled.memory_budget = 20_000;
        spilled.static_scores = Some(statics.clone());
        variants.push(("spilled", spilled));
        for (name, opts) in variants {
            let reference = dir.path().join(format!("{codec}-{name}-1"));
            let runs = build_on(1, &input, &reference, &opts);
            assert_eq!(runs > 0, name == "spilled", "{name}: {runs} runs");
            for threads in [2, 3, 8] {
                let out = dir.path().join(format!("{codec}-{name}-{threads}"));
                build_on(threads, &input, &out, &opts);
                same_index_files(&reference, &out);
            }
        }
    }
}

/// A spilled build (runs merged from disk) writes the index an in-memory build writes.
#[test]
fn spilled_and_in_memory_builds_write_the_same_files() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("docs.jsonl");
    edge_collection(&input, 800, 3);
    let opts = options(Codec::SimdBp);
    let mut tiny = opts.clone();
    tiny.memory_budget = 5_000;
    build_on(2, &input, &dir.path().join("memory"), &opts);
    assert!(build_on(2, &input, &dir.path().join("disk"), &tiny) > 10);
    same_index_files(&dir.path().join("memory"), &dir.path().join("disk"));
}

#[test]
fn cacm_is_the_same_on_one_thread_and_many() {
    let Some(cacm) = warpsearch_index::testdata::shared_data("cacm/docs.jsonl") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let opts = options(Codec::SimdBp);
    build_on(1, &cacm, &dir.path().join("one"), &opts);
    for threads in [2, 4] {
        let out = dir.path().join(format!("t{threads}"));
        build_on(threads, &cacm, &out, &opts);
        same_index_files(&dir.path().join("one"), &out);
    }
}
