//! `index --shards N` on CACM: `search` writes the same runs and JSON (documents, score bits) from the
//! shards as from one index, in every mode at k 10 and 1,000, however the shards were written (on
//! threads, one after another, or part by part with `--part`);
//! `serve` answers the same hits; `bench`, `inspect` and `doc` take the sharded directory; `export`
//! and `--backend gpu` refuse it with a message that says what to do.

mod common;

use std::path::Path;

use common::{index_with, search, text, warpsearch, Server};

#[test]
fn cacm_sharded_answers_as_one_index() {
    let Some(data) = warpsearch_index::testdata::shared_data("cacm") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let docs = data.join("docs.jsonl");
    let topics = data.join("topics.tsv");
    let one = index_with(&docs, &dir.path().join("one"), &["--title", "--store"]);
    let four = index_with(
        &docs,
        &dir.path().join("four"),
        &["--title", "--store", "--shards", "4"],
    );
    let three = index_with(
        &docs,
        &dir.path().join("three"),
        &["--title", "--shards", "3", "--shards-sequential"],
    );
    // Part by part (`--part`): the head, then each shard, the last first, as other hosts would.
    let two = dir.path().join("two");
    for part in ["head", "1", "0"] {
        index_with(
            &docs,
            &two,
            &["--title", "--store", "--shards", "2", "--part", part],
        );
    }
    let run = |index: &Path, mode: &str, k: usize, format: &str| {
        let out = search(index, &topics, mode, k, "cpu", &["--format", format]);
        assert!(out.status.success(), "{}", text(&out.stderr));
        out.stdout
    };
    for mode in ["and", "or", "and-or"] {
        for k in [10, 1000] {
            for format in ["trec", "json"] {
                let want = run(&one, mode, k, format);
                assert!(!want.is_empty());
                assert!(
                    want == run(&four, mode, k, format),
                    "4 shards, {mode} k {k} {format}"
                );
                assert!(
                    want == run(&three, mode, k, format),
                    "3 shards, {mode} k {k} {format}"
                );
                assert!(
                    want == run(&two, mode, k, format),
                    "2 shards built part by part, {mode} k {k} {format}"
                );
            }
        }
    }

    let inspect = warpsearch(&["inspect", "--index", four.to_str().unwrap()]);
    assert!(inspect.status.success(), "{}", text(&inspect.stderr));
    assert!(
        text(&inspect.stdout).contains("shards       4"),
        "{}",
        text(&inspect.stdout)
    );

    let bench = warpsearch(&[
        "bench",
        "--index",
        four.to_str().unwrap(),
        "--queries",
        topics.to_str().unwrap(),
    ]);
    assert!(bench.status.success(), "{}", text(&bench.stderr));

    let doc = |index: &Path| {
        warpsearch(&[
            "doc",
            "--index",
            index.to_str().unwrap(),
            "CACM-2000",
            "CACM-3204",
        ])
    };
    let (a, b) = (doc(&one), doc(&four));
    assert!(a.status.success() && b.status.success(), "{}", text(&b.stderr));
    assert_eq!(a.stdout, b.stdout);

    let export = warpsearch(&[
        "export",
        "--index",
        four.to_str().unwrap(),
        "--ciff",
        dir.path().join("x.ciff").to_str().unwrap(),
    ]);
    assert!(!export.status.success());
    assert!(
        text(&export.stderr).contains("without --shards"),
        "{}",
        text(&export.stderr)
    );

    let hybrid = search(&four, &topics, "or", 10, "hybrid", &[]);
    assert!(!hybrid.status.success());
    assert!(
        text(&hybrid.stderr).contains("use --backend cpu, gpu or auto"),
        "{}",
        text(&hybrid.stderr)
    );
    // The shards on the GPUs answer as the single index; without a device, `gpu` says there is none.
    let gpu = search(&four, &topics, "or", 10, "gpu", &[]);
    if warpsearch_engine::devices::gpu_count() == 0 {
        assert!(!gpu.status.success());
        assert!(
            text(&gpu.stderr).contains("no CUDA device"),
            "{}",
            text(&gpu.stderr)
        );
        eprintln!("skipped: no CUDA device for the shards' GPU run");
    } else {
        assert!(gpu.status.success(), "{}", text(&gpu.stderr));
        assert!(gpu.stdout == search(&one, &topics, "or", 10, "cpu", &[]).stdout);
    }

    let body = r#"{"queries": [{"id": "a", "text": "parallel algorithms"}, {"id": "b", "text": "computer program language"}, {"id": "c", "text": "zzzunknown"}], "k": 20, "docs": true}"#;
    let hits = |index: &Path| {
        let server = Server::start(index, &["--backend", "cpu"]);
        let (status, mut v) = server.json("POST", "/search", body);
        assert_eq!(status, 200, "{v}");
        // The time taken differs; the hits, scores and documents must not.
        v.as_object_mut().unwrap().remove("took_ms");
        v
    };
    assert_eq!(hits(&one), hits(&four));
}
