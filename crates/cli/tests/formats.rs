//! The inputs and outputs users have, end to end through the binary: BEIR and MS MARCO collections,
//! TREC topic and JSON query files, BEIR qrels, `evaluate -m`, runs of 1,000 hits by default, stored
//! documents (`index --store`, `warpsearch doc`), and a clear error for each malformed input.

mod common;

use std::path::Path;

use common::{text, warpsearch};

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// The measure `name`'s mean in `evaluate`'s output.
fn value(report: &str, name: &str) -> f64 {
    report
        .lines()
        .find(|l| l.starts_with(&format!("{name}\tall\t")))
        .unwrap_or_else(|| panic!("no {name} in {report}"))
        .rsplit('\t')
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

/// A BEIR data set: 40 documents, 3 queries, qrels with a header.
fn beir(dir: &Path) {
    let corpus: String = (0..40)
        .map(|i| {
            format!(
                "{{\"_id\": \"d{i}\", \"title\": \"title{i}\", \"text\": \"shared words {} {}\", \"metadata\": {{}}}}\n",
                if i % 2 == 0 { "even" } else { "odd" },
                "filler ".repeat(i % 7)
            )
        })
        .collect();
    std::fs::write(dir.join("corpus.jsonl"), corpus).unwrap();
    std::fs::write(
        dir.join("queries.jsonl"),
        "{\"_id\": \"q1\", \"text\": \"even words\", \"metadata\": {}}\n\
         {\"_id\": \"q2\", \"text\": \"odd\"}\n\
         {\"_id\": \"q3\", \"text\": \"title7\"}\n",
    )
    .unwrap();
    std::fs::create_dir_all(dir.join("qrels")).unwrap();
    std::fs::write(
        dir.join("qrels/test.tsv"),
        "query-id\tcorpus-id\tscore\nq1\td4\t1\nq1\td6\t2\nq2\td3\t1\nq3\td7\t1\n",
    )
    .unwrap();
}

#[test]
fn a_beir_data_set_indexes_searches_and_evaluates_without_conversion() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    beir(d);
    let idx = d.join("idx");
    let out = warpsearch(&[
        "index",
        "--input",
        s(&d.join("corpus.jsonl")),
        "-o",
        s(&idx),
        "--title",
        "--store",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains(r#"id "_id", text "title" + "text""#),
        "{}",
        text(&out.stderr)
    );
    // search writes up to 1,000 hits a query unless told otherwise: here every matching document.
    let run = d.join("run");
    let out = warpsearch(&[
        "search",
        "--index",
        s(&idx),
        "--queries",
        s(&d.join("queries.jsonl")),
        "-o",
        s(&run),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let run_text = std::fs::read_to_string(&run).unwrap();
    assert_eq!(
        run_text.lines().filter(|l| l.starts_with("q1 ")).count(),
        40,
        "{run_text}"
    );
    assert_eq!(run_text.lines().filter(|l| l.starts_with("q2 ")).count(), 20);
    // The title is indexed: q3 finds d7 first.
    assert!(
        run_text.lines().any(|l| l.starts_with("q3 Q0 d7 1 ")),
        "{run_text}"
    );
    let out = warpsearch(&[
        "evaluate",
        "--qrels",
        s(&d.join("qrels/test.tsv")),
        "--run",
        s(&run),
        "-m",
        "nDCG@10",
        "-m",
        "recip_rank",
        "-m",
        "P.1,5",
        "-m",
        "recall.1000",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let report = text(&out.stdout);
    assert_eq!(value(&report, "num_q"), 3.0);
    assert_eq!(value(&report, "recall_1000"), 1.0, "{report}");
    assert!(
        text(&out.stderr).is_empty(),
        "a full run warns of nothing: {}",
        text(&out.stderr)
    );
    for name in ["ndcg_cut_10", "recip_rank", "P_1", "P_5"] {
        let v = value(&report, name);
        assert!((0.0..=1.0).contains(&v), "{report}");
    }
    // Stored documents come back by id, as they were read.
    let out = warpsearch(&["doc", "--index", s(&idx), "d7", "d0"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let corpus = std::fs::read_to_string(d.join("corpus.jsonl")).unwrap();
    let lines: Vec<&str> = corpus.lines().collect();
    assert_eq!(text(&out.stdout), format!("{}\n{}\n", lines[7], lines[0]));
    let out = warpsearch(&["doc", "--index", s(&idx), "nope"]);
    assert!(!out.status.success() && text(&out.stderr).contains("no document has the id 'nope'"));
    // JSON output carries the stored documents on request, each in its hit, as the server's does.
    let out = warpsearch(&[
        "search",
        "--index",
        s(&idx),
        "--query",
        "title7",
        "--format",
        "json",
        "--docs",
        "--k",
        "1",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let line: serde_json::Value = serde_json::from_str(text(&out.stdout).trim()).unwrap();
    assert_eq!(line["hits"][0]["doc"].as_str(), Some(lines[7]), "{line}");
    let out = warpsearch(&["search", "--index", s(&idx), "--query", "title7", "--docs"]);
    assert!(!out.status.success() && text(&out.stderr).contains("--format json"));
    // An index without --store says how to get one.
    let plain = common::index_with(&d.join("corpus.jsonl"), &d.join("plain"), &[]);
    let out = warpsearch(&["doc", "--index", s(&plain), "d7"]);
    assert!(
        text(&out.stderr).contains("index --store"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn shallow_runs_are_evaluated_with_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    beir(d);
    let idx = common::index_with(&d.join("corpus.jsonl"), &d.join("idx"), &[]);
    let run = d.join("run");
    let out = warpsearch(&[
        "search",
        "--index",
        s(&idx),
        "--queries",
        s(&d.join("queries.jsonl")),
        "-o",
        s(&run),
        "--k",
        "2",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = warpsearch(&[
        "evaluate",
        "--qrels",
        s(&d.join("qrels/test.tsv")),
        "--run",
        s(&run),
    ]);
    let err = text(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("at most 2 hits per query") && err.contains("recall_1000"),
        "{err}"
    );
    let out = warpsearch(&[
        "evaluate",
        "--qrels",
        s(&d.join("qrels/test.tsv")),
        "--run",
        s(&run),
        "-m",
        "bpref",
    ]);
    assert!(!out.status.success() && text(&out.stderr).contains("unknown measure 'bpref'"));
}

#[test]
fn ms_marco_tsv_and_trec_topics_give_the_runs_of_their_jsonl_and_tsv_twins() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let texts = [
        "cats and dogs",
        "dogs bark loudly",
        "cats purr",
        "a fish swims",
        "dogs and fish",
    ];
    let tsv: String = texts
        .iter()
        .enumerate()
        .map(|(i, t)| format!("{i}\t{t}\n"))
        .collect();
    let jsonl: String = texts
        .iter()
        .enumerate()
        .map(|(i, t)| format!("{{\"id\": \"{i}\", \"contents\": \"{t}\"}}\n"))
        .collect();
    std::fs::write(d.join("collection.tsv"), tsv).unwrap();
    std::fs::write(d.join("docs.jsonl"), jsonl).unwrap();
    let a = common::index_with(&d.join("collection.tsv"), &d.join("a"), &[]);
    let b = common::index_with(&d.join("docs.jsonl"), &d.join("b"), &[]);
    std::fs::write(d.join("queries.tsv"), "101\tdogs\n102\tcats fish\n").unwrap();
    std::fs::write(
        d.join("topics.txt"),
        "<top>\n<num> Number: 101\n<title> dogs\n<desc> Description:\nabout dogs\n</top>\n\n\
         <top>\n<num> Number: 102\n<title> Topic: cats fish\n<narr> Narrative:\nany\n</top>\n",
    )
    .unwrap();
    let run = |index: &Path, queries: &str| {
        let out = warpsearch(&["search", "--index", s(index), "--queries", s(&d.join(queries))]);
        assert!(out.status.success(), "{}", text(&out.stderr));
        text(&out.stdout)
    };
    let reference = run(&b, "queries.tsv");
    assert_eq!(reference.lines().filter(|l| l.starts_with("101 ")).count(), 3);
    assert_eq!(run(&a, "queries.tsv"), reference);
    assert_eq!(run(&a, "topics.txt"), reference);
}

#[test]
fn malformed_collections_and_query_files_are_named_by_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let index_err = |name: &str, content: &str, extra: &[&str]| {
        let input = d.join(name);
        std::fs::write(&input, content).unwrap();
        let output = d.join("out");
        let mut args = vec!["index", "--input", s(&input), "-o", s(&output), "--force"];
        args.extend_from_slice(extra);
        let out = warpsearch(&args);
        assert!(!out.status.success(), "{name} was accepted");
        assert!(!d.join("out").exists());
        text(&out.stderr)
    };
    let e = index_err("plain.jsonl", "just some words\n", &[]);
    assert!(
        e.contains("plain.jsonl:1") && e.contains("not a collection format"),
        "{e}"
    );
    let e = index_err("trec.jsonl", "<DOC>\n<DOCNO>1</DOCNO>\n</DOC>\n", &[]);
    assert!(e.contains("trec.jsonl:1") && e.contains("<DOC>"), "{e}");
    let e = index_err("mixed.tsv", "1\tone\n{\"id\": \"2\", \"contents\": \"x\"}\n", &[]);
    assert!(e.contains("mixed.tsv:2"), "{e}");
    let e = index_err(
        "beir.jsonl",
        "{\"_id\": \"1\", \"text\": \"a\"}\n{\"_id\": \"2\", \"body\": \"b\"}\n",
        &[],
    );
    assert!(e.contains("beir.jsonl:2") && e.contains("\"text\""), "{e}");
    let e = index_err(
        "f.jsonl",
        "{\"key\": \"1\", \"body\": \"a\"}\n{\"key\": 2, \"body\": [1]}\n",
        &["--id-field", "key", "--fields", "body"],
    );
    assert!(e.contains("f.jsonl:2") && e.contains("\"body\""), "{e}");
    let e = index_err(
        "nofield.jsonl",
        "{\"key\": \"1\", \"body\": \"a\"}\n",
        &["--id-field", "nokey"],
    );
    assert!(e.contains("nofield.jsonl:1") && e.contains("nokey"), "{e}");
    // Query files.
    let idx = common::index_of(d, &["cats and dogs", "fish"]);
    let search_err = |name: &str, content: &str| {
        let q = d.join(name);
        std::fs::write(&q, content).unwrap();
        let out = warpsearch(&["search", "--index", s(&idx), "--queries", s(&q)]);
        assert!(
            !out.status.success(),
            "{name} was accepted: {}",
            text(&out.stdout)
        );
        text(&out.stderr)
    };
    let e = search_err("t1.txt", "<top>\n<num> 1\n<title> cats\n</top>\nstray text\n");
    assert!(e.contains("t1.txt:5") && e.contains("outside a <top>"), "{e}");
    let e = search_err("t2.txt", "<top>\n<title> cats\n</top>\n");
    assert!(e.contains("t2.txt:1") && e.contains("no <num>"), "{e}");
    let e = search_err("t3.txt", "<top>\n<num> 1\n<title> cats\n");
    assert!(e.contains("t3.txt:1") && e.contains("no </top>"), "{e}");
    let e = search_err(
        "q.jsonl",
        "{\"_id\": \"1\", \"text\": \"cats\"}\n{\"_id\": \"2\"}\n",
    );
    assert!(e.contains("q.jsonl:2"), "{e}");
    let e = search_err("p.txt", "1\tcats\n<top>\n");
    assert!(e.contains("p.txt:2") && e.contains("<top>"), "{e}");
    // --store and field options with a CIFF import are refused.
    let out = warpsearch(&[
        "index",
        "--ciff",
        s(&d.join("x.ciff")),
        "-o",
        s(&d.join("o")),
        "--store",
    ]);
    assert!(text(&out.stderr).contains("--store"), "{}", text(&out.stderr));
}

#[test]
fn bench_into_a_missing_folder_is_refused_before_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let idx = common::index_of(d, &["cats and dogs", "fish"]);
    std::fs::write(d.join("q.txt"), "cats\n").unwrap();
    for flag in ["--svg", "--json"] {
        let target = d.join("absent").join("report");
        let out = warpsearch(&[
            "bench",
            "--index",
            s(&idx),
            "--queries",
            s(&d.join("q.txt")),
            flag,
            s(&target),
        ]);
        let err = text(&out.stderr);
        assert!(!out.status.success(), "{err}");
        assert!(err.contains("absent") && err.contains("does not exist"), "{err}");
        assert!(
            text(&out.stdout).is_empty(),
            "nothing was measured: {}",
            text(&out.stdout)
        );
    }
}

#[test]
fn top_level_help_describes_the_tool_not_three_commands() {
    let out = warpsearch(&["--help"]);
    let help = text(&out.stdout);
    assert!(help.starts_with("warpsearch: exact top-k BM25 search"), "{help}");
    for command in [
        "index",
        "search",
        "evaluate",
        "doc",
        "serve",
        "bench",
        "synth",
        "gpu-check",
    ] {
        assert!(
            help.contains(&format!("\n  {command} ")),
            "{command} missing: {help}"
        );
    }
    let out = warpsearch(&["index", "--help"]);
    assert!(text(&out.stdout).contains(".gz"), "{}", text(&out.stdout));
}

#[test]
fn inspect_and_export_take_the_index_as_every_command_does() {
    let dir = tempfile::tempdir().unwrap();
    let idx = common::index_of(dir.path(), &["cats and dogs", "fish"]);
    let positional = warpsearch(&["inspect", s(&idx), "--json"]);
    let flagged = warpsearch(&["inspect", "--index", s(&idx), "--json"]);
    assert!(flagged.status.success(), "{}", text(&flagged.stderr));
    assert_eq!(positional.stdout, flagged.stdout);
    let ciff = dir.path().join("x.ciff");
    let out = warpsearch(&["export", "--index", s(&idx), "--ciff", s(&ciff)]);
    assert!(out.status.success() && ciff.exists(), "{}", text(&out.stderr));
    let out = warpsearch(&["inspect"]);
    assert!(
        !out.status.success() && text(&out.stderr).contains("<INDEX>"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn search_is_quiet_unless_asked_for_its_statistics() {
    let dir = tempfile::tempdir().unwrap();
    let idx = common::index_of(dir.path(), &["cats and dogs", "fish"]);
    let out = warpsearch(&["search", "--index", s(&idx), "--query", "cats"]);
    assert!(out.status.success());
    assert_eq!(text(&out.stderr), "", "nothing but answers");
    let out = warpsearch(&["search", "--index", s(&idx), "--query", "cats", "--stats"]);
    assert!(
        text(&out.stderr).contains("backend auto: "),
        "{}",
        text(&out.stderr)
    );
}
