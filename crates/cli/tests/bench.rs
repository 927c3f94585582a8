//! `warpsearch bench` end to end through the binary: the table, the JSON report, and bad options.

use std::process::{Command, Output};

fn warpsearch(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_warpsearch"))
        .args(args)
        .output()
        .unwrap()
}

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
    let index = dir.path().join("idx");
    let input = dir.path().join("in.jsonl");
    let out = warpsearch(&[
        "index",
        "--input",
        input.to_str().unwrap(),
        "-o",
        index.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
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
