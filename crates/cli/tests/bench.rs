//! `warpsearch bench` end to end through the binary: the table, the JSON report, and bad options.

mod common;

use common::warpsearch;

#[test]
fn bench_reports_closed_and_open_loop_in_json() {
    let dir = tempfile::tempdir().unwrap();
    let docs: String = (0..300)
        .map(|i| {
            format!(
                "{{\"id\": \"d{i}\", \"contents\": \"alpha beta{} gamma{}\"}}\n",
                i % 7,
                i % 13
            )
        })
        .collect();
    std::fs::write(dir.path().join("in.jsonl"), docs).unwrap();
    let index = common::index_jsonl(&dir.path().join("in.jsonl"), &dir.path().join("idx"));
    let queries = dir.path().join("q.txt");
    std::fs::write(&queries, "alpha beta3\ngamma5 beta1\nzzz\n").unwrap();
    let json = dir.path().join("report.json");
    let out = warpsearch(&[
        "bench",
        "--index",
        index.to_str().unwrap(),
        "--queries",
        queries.to_str().unwrap(),
        "--mode",
        "and",
        "--backend",
        "cpu",
        "--rates",
        "2000,20000",
        "--duration",
        "0.1",
        "--deadline-ms",
        "50",
        "--json",
        json.to_str().unwrap(),
        "--svg",
        dir.path().join("plot").to_str().unwrap(),
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        stdout.contains("closed") && stdout.contains("2000/s") && stdout.contains("20000/s"),
        "{stdout}"
    );
    let report: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(report["num_queries"], 3);
    assert_eq!(report["mode"], "and");
    assert_eq!(report["from_text"], false);
    assert!(report["closed_loop"]["qps"].as_f64().unwrap() > 0.0);
    let open = report["open_loop"].as_array().unwrap();
    assert_eq!(open.len(), 2);
    for (run, rate) in open.iter().zip([2000.0, 20000.0]) {
        assert_eq!(run["rate"].as_f64().unwrap(), rate);
        // At least 1,000 arrivals (the three queries repeat), each answered once.
        let n = run["queries"].as_u64().unwrap();
        assert!(n >= 1000, "{run}");
        let lat = &run["latency_ms"];
        assert!(lat["p50"].as_f64().unwrap() <= lat["p99"].as_f64().unwrap());
        assert!(lat["p99"].as_f64().unwrap() <= lat["max"].as_f64().unwrap());
        assert!(run["missed"].as_u64().unwrap() <= n);
    }
    for plot in ["plot-latency-cdf.svg", "plot-latency-vs-rate.svg"] {
        let svg = std::fs::read_to_string(dir.path().join(plot)).unwrap();
        assert!(svg.starts_with("<svg") && svg.contains("polyline"), "{plot}");
    }
    // From text: the same queries analysed inside the closed loop, three times over.
    let text_json = dir.path().join("text.json");
    let (i, q) = (index.to_str().unwrap(), queries.to_str().unwrap());
    let out = warpsearch(&[
        "bench",
        "--index",
        i,
        "--queries",
        q,
        "--mode",
        "and",
        "--backend",
        "cpu",
        "--text",
        "--passes",
        "3",
        "--json",
        text_json.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("3 queries (3 passes in the closed loop)"),
        "{stdout}"
    );
    assert!(stdout.contains(", from text"), "{stdout}");
    let text: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&text_json).unwrap()).unwrap();
    assert_eq!(
        (text["from_text"].as_bool(), text["num_queries"].as_u64()),
        (Some(true), Some(3))
    );
    assert!(text["closed_loop"]["qps"].as_f64().unwrap() > 0.0);
    assert_eq!(
        (text["passes"].as_u64(), text["closed_loop"]["queries"].as_u64()),
        (Some(3), Some(9))
    );
    assert_eq!(report["closed_loop"]["queries"], 3);
    let bars = dir.path().join("bars.svg");
    let out = warpsearch(&[
        "bench-plot",
        json.to_str().unwrap(),
        json.to_str().unwrap(),
        "--svg",
        bars.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let svg = std::fs::read_to_string(&bars).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("and top-10 cpu"), "{svg}");
    let not_a_report = warpsearch(&[
        "bench-plot",
        queries.to_str().unwrap(),
        "--svg",
        bars.to_str().unwrap(),
    ]);
    assert!(!not_a_report.status.success());
    let bad = warpsearch(&[
        "bench",
        "--index",
        index.to_str().unwrap(),
        "--queries",
        queries.to_str().unwrap(),
        "--rates",
        "0",
    ]);
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("--rates"));
}

/// `synth` from the CACM index, at the sample's size from half of it (hold-out) and at twice its size,
/// then `synth-check` against the real index with the CACM topics: reports that the commands stand by.
#[test]
fn synth_and_synth_check_run_end_to_end() {
    let Some(data) = warpsearch_index::testdata::shared_data("cacm") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let p = |name: &str| dir.path().join(name).to_str().unwrap().to_owned();
    let docs = data.join("docs.jsonl");
    let out = warpsearch(&["index", "--input", docs.to_str().unwrap(), "-o", &p("real")]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let real_docs = 3204;
    let per_doc = {
        let out = warpsearch(&["inspect", &p("real"), "--json"]);
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["meta"]["num_docs"], real_docs);
        v["meta"]["num_postings"].as_f64().unwrap() / real_docs as f64
    };
    let per_doc = per_doc.to_string();
    // `synth` into `name` with `extra` options: its report, and what it printed.
    let synth = |name: &str, docs: u32, extra: &[&str]| {
        let (real, out_dir, report) = (p("real"), p(name), p(&format!("{name}.json")));
        let docs_arg = docs.to_string();
        let mut args = vec!["synth", "--like", &real, "-o", &out_dir, "--docs", &docs_arg];
        args.extend_from_slice(&["--report", &report]);
        args.extend_from_slice(extra);
        let out = warpsearch(&args);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let r: serde_json::Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
        assert_eq!(r["docs"], docs);
        (r, String::from_utf8_lossy(&out.stderr).into_owned())
    };
    let (half, _) = synth(
        "half",
        real_docs,
        &["--terms-per-doc", &per_doc, "--templates", "0.5"],
    );
    assert_eq!(half["templates"], real_docs / 2);
    let (double, _) = synth("double", 2 * real_docs, &["--terms-per-doc", &per_doc]);
    assert!(double["passes"].as_f64().unwrap() > 1.9, "{double}");
    let topics = data.join("topics.tsv");
    let out = warpsearch(&[
        "synth-check",
        "--real",
        &p("real"),
        "--synth",
        &p("half"),
        "--queries",
        topics.to_str().unwrap(),
        "--json",
        &p("check.json"),
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("query term pairs"), "{stdout}");
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(p("check.json")).unwrap()).unwrap();
    let within = v["within_2x"]["all"].as_f64().unwrap();
    assert!(v["pairs"].as_u64().unwrap() > 100, "{v}");
    // Half of CACM stands in for all of it: most pairs' intersections are within 2x.
    assert!(within > 0.6, "{v}");
    // A missing sample is a clear error naming it.
    let out = warpsearch(&["synth", "--like", &p("nope"), "-o", &p("x")]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("nope"));

    // Static scores of the sample's documents and a global-score order: bm25-static then stops early,
    // with the same hits as the same collection in input order.
    let statics: String = (1..=real_docs)
        .map(|d| format!("CACM-{d}\t{}\n", d % 10))
        .collect();
    std::fs::write(p("static.tsv"), statics).unwrap();
    for (name, order) in [("gs", "global-score"), ("input", "input")] {
        let static_file = p("static.tsv");
        let (_, stderr) = synth(
            name,
            5000,
            &["--static-scores", &static_file, "--doc-order", order],
        );
        assert!(
            stderr.contains("static scores: 0 template documents had none"),
            "{stderr}"
        );
        let out = warpsearch(&["inspect", &p(name)]);
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(text.contains("static       yes"), "{text}");
        assert_eq!(text.contains("GlobalScore"), order == "global-score", "{text}");
    }
    // `command` (search or bench) of bm25-static OR top-10 on `name`, with `extra` options.
    let static_or = |command: &str, name: &str, extra: &[&str]| {
        let (index, queries) = (p(name), topics.to_str().unwrap().to_owned());
        let mut args = vec![command, "--index", &index, "--queries", &queries, "--mode", "or"];
        args.extend_from_slice(&["--k", "10", "--ranking", "bm25-static", "--backend", "cpu"]);
        args.extend_from_slice(extra);
        warpsearch(&args)
    };
    // bm25-static's hits on `name` with --stats: per query, its scores and its documents above its
    // k-th score (documents tied with the k-th may differ: ties go by docID, which the orders number
    // differently); and what --stats printed.
    let search = |name: &str| {
        let out = static_or("search", name, &["--stats"]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let mut queries: std::collections::BTreeMap<String, Vec<(String, String)>> = Default::default();
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            let f: Vec<&str> = line.split_whitespace().collect();
            let hits = queries.entry(f[0].to_owned()).or_default();
            hits.push((f[4].to_owned(), f[2].to_owned()));
        }
        let hits = queries
            .into_values()
            .map(|hits| {
                let last = hits.last().unwrap().0.clone();
                let scores: Vec<String> = hits.iter().map(|h| h.0.clone()).collect();
                let mut above: Vec<String> = hits.into_iter().filter(|h| h.0 != last).map(|h| h.1).collect();
                above.sort();
                (scores, above)
            })
            .collect::<Vec<_>>();
        (hits, String::from_utf8_lossy(&out.stderr).into_owned())
    };
    let ((gs, gs_stats), (input, input_stats)) = (search("gs"), search("input"));
    // `--stats` says where early termination stopped the queries, on the global-score order only.
    let topics_n = std::fs::read_to_string(&topics).unwrap().lines().count();
    for (name, stderr, stops) in [("gs", gs_stats, true), ("input", input_stats, false)] {
        let line = stderr.lines().find(|l| l.starts_with("early termination: "));
        assert_eq!(line.is_some(), stops, "{stderr}");
        // `bench --json` reports the same stops.
        let json = p(&format!("{name}-bench.json"));
        let out = static_or("bench", name, &["--json", &json]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
        let reported = &report["closed_loop"]["early_termination"];
        if let Some(line) = line {
            let words: Vec<&str> = line.split_whitespace().collect();
            let stopped: usize = words[2].parse().unwrap();
            assert_eq!(words[3..5], ["of", &topics_n.to_string()[..]], "{line}");
            assert!(
                stopped > 0 && stopped <= topics_n && line.contains("% of the docIDs"),
                "{line}"
            );
            assert_eq!(reported["stopped"], stopped, "{reported}");
            assert_eq!(reported["queries"], topics_n, "{reported}");
            let p50 = reported["stop_share_percent"]["p50"].as_f64().unwrap();
            assert!(p50 > 0.0 && p50 <= 100.0, "{reported}");
        } else {
            assert!(reported.is_null(), "{reported}");
        }
    }
    assert!(gs.len() > 50 && gs.iter().any(|q| q.1.len() > 5));
    assert_eq!(gs, input);
    // A bad static-score file is refused, naming the file and the line.
    std::fs::write(p("bad.tsv"), "CACM-1\t0.5\nCACM-2 0.5\n").unwrap();
    let out = warpsearch(&[
        "synth",
        "--like",
        &p("real"),
        "-o",
        &p("bad"),
        "--static-scores",
        &p("bad.tsv"),
        "--doc-order",
        "global-score",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && stderr.contains("bad.tsv:2: expected"),
        "{stderr}"
    );
}

/// `scripts/results.py` turns real `bench --json` reports (which say their command, date and machine)
/// into RESULTS.md's generated section, between its markers only: the hand-kept text around it stays,
/// a second run changes nothing, and a run without a commit is refused. Skipped where there is no
/// python3.
#[test]
fn results_script_writes_the_generated_section_from_reports() {
    if std::process::Command::new("python3")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!("skipped: no python3 for scripts/results.py");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let index = common::index_of(dir.path(), &["alpha beta", "beta gamma", "gamma alpha beta"]);
    let queries = dir.path().join("q.txt");
    std::fs::write(&queries, "alpha\nbeta gamma\n").unwrap();
    let run = dir.path().join("run");
    std::fs::create_dir_all(run.join("tiny")).unwrap();
    for mode in ["and", "or"] {
        let json = run.join(format!("tiny/cpu-{mode}.json"));
        let (i, q, j) = (
            index.to_str().unwrap(),
            queries.to_str().unwrap(),
            json.to_str().unwrap(),
        );
        let args = [
            "bench",
            "--index",
            i,
            "--queries",
            q,
            "--mode",
            mode,
            "--backend",
            "cpu",
            "--json",
            j,
        ];
        let out = warpsearch(&args);
        assert!(out.status.success(), "{}", common::text(&out.stderr));
        let report: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        assert!(
            report["command"].as_str().unwrap().ends_with(&args.join(" ")),
            "{report}"
        );
        assert_eq!(report["date"].as_str().unwrap().len(), 10, "{report}");
        assert!(report["machine"]["cores"].as_u64().unwrap() >= 1, "{report}");
    }
    let results = dir.path().join("RESULTS.md");
    let hand = "# Measured results\n\nA hand-kept table: | x | 1 |\n\n";
    let old = "<!-- results.py: tiny -->\nold figures\n<!-- end results.py: tiny -->\n";
    std::fs::write(&results, format!("{hand}{old}\n## Kept after\n")).unwrap();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/results.py");
    let generate = |extra: &[&str]| {
        std::process::Command::new("python3")
            .arg(script)
            .arg(&run)
            .arg("--results")
            .arg(&results)
            .args(extra)
            .output()
            .unwrap()
    };
    let refused = generate(&[]);
    assert!(!refused.status.success() && common::text(&refused.stderr).contains("--commit"));
    let out = generate(&["--commit", "abc1234", "--machine", "test machine"]);
    assert!(out.status.success(), "{}", common::text(&out.stderr));
    let text = std::fs::read_to_string(&results).unwrap();
    assert!(
        text.starts_with(hand) && text.ends_with("\n## Kept after\n"),
        "{text}"
    );
    assert!(!text.contains("old figures"), "{text}");
    for needle in [
        "| and | 10 | 2 |",
        "| or | 10 | 2 |",
        "abc1234",
        "test machine",
        "--mode and",
    ] {
        assert!(text.contains(needle), "{needle}: {text}");
    }
    let again = generate(&["--commit", "abc1234", "--machine", "test machine", "--check"]);
    assert!(again.status.success(), "{}", common::text(&again.stderr));
}
