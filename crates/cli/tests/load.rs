//! `warpsearch load` against a running `warpsearch serve` on the loopback interface: in closed and open
//! loop every query is answered once, under the CPU and the hybrid backends, and the generator's counts
//! equal the server's own (`/metrics`); a server with a tiny queue refuses with 429s, which the
//! generator counts; a missing server or a bad URL is a clear error. Correctness only: no timing is
//! checked.

mod common;

use std::path::Path;

use common::{text, warpsearch, Server};
use serde_json::Value;

/// `warpsearch load` against `server` (its RSS sampled) with the queries of `queries` and `args`; the
/// JSON report.
fn load(server: &Server, queries: &Path, args: &[&str]) -> Value {
    let json = queries.with_extension("load.json");
    let url = format!("http://{}", server.addr);
    let pid = server.child.id().to_string();
    let mut all = vec![
        "load",
        "--url",
        &url,
        "--queries",
        queries.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
        "--server-pid",
        &pid,
    ];
    all.extend_from_slice(args);
    let out = warpsearch(&all);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("queries/s") && stdout.contains("server RSS"),
        "{stdout}"
    );
    serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap()
}

fn n(v: &Value, key: &str) -> u64 {
    v[key].as_u64().unwrap_or_else(|| panic!("no count {key} in {v}"))
}

/// Every query of `run` answered, none refused or failed, and its latencies in order.
fn all_answered(run: &Value) {
    assert_eq!(n(run, "answered"), n(run, "queries"), "{run}");
    assert_eq!(n(run, "refused"), 0, "{run}");
    assert_eq!(run["errors"], serde_json::json!({}), "{run}");
    let lat = &run["latency_ms"];
    assert!(
        lat["p50"].as_f64().unwrap() <= lat["p99"].as_f64().unwrap(),
        "{run}"
    );
    assert!(
        lat["p99"].as_f64().unwrap() <= lat["max"].as_f64().unwrap(),
        "{run}"
    );
}

#[test]
fn every_query_is_answered_once_in_closed_and_open_loop_on_cacm() {
    let dir = tempfile::tempdir().unwrap();
    let Some((data, index)) = common::cacm_index(dir.path()) else {
        return;
    };
    let topics = dir.path().join("topics.tsv");
    std::fs::copy(data.join("topics.tsv"), &topics).unwrap();
    let num_queries = std::fs::read_to_string(&topics).unwrap().lines().count() as u64;
    for (backend, options, arrivals) in [
        ("cpu", &["--closed-queries", "100"][..], "poisson"),
        // Two connections: most open-loop requests wait for one.
        (
            "hybrid",
            &["--closed-duration", "0.3", "--connections", "2"],
            "fixed",
        ),
    ] {
        // No shedding by time: on a slow machine 6,000 queries/s is past the engine's capacity, and
        // the server would rightly refuse some requests (CI on two cores did); here every query must
        // be answered. Shedding by queue size is tested below, by time in `serve::pace`.
        let server = Server::start(
            &index,
            &[
                "--backend",
                backend,
                "--hybrid-workers",
                "2",
                "--threads",
                "2",
                "--shed-ms",
                "0",
            ],
        );
        let mut args = vec!["--batch", "3", "--clients", "4", "--rates", "3000,6000"];
        args.extend(["--duration", "0.2", "--arrivals", arrivals, "--mode", "and-or"]);
        args.extend_from_slice(options);
        let r = load(&server, &topics, &args);
        assert_eq!((n(&r, "num_queries"), n(&r, "batch")), (num_queries, 3));
        assert_eq!(r["mode"], "and-or");
        assert!(r["backend"].as_str().unwrap().starts_with("serve: "), "{r}");
        let c = &r["closed_loop"];
        all_answered(c);
        if backend == "cpu" {
            // 100 queries: 33 requests of 3 and one of 1.
            assert_eq!((n(c, "queries"), n(c, "requests")), (100, 34), "{c}");
        } else {
            assert!(n(c, "queries") > 0, "{c}");
        }
        let open = r["open_loop"].as_array().unwrap();
        assert_eq!(open.len(), 2);
        // 0.2 s of arrivals, at least 1,000 requests of 3 (the 64 topics repeat).
        for (run, (rate, queries)) in open.iter().zip([(3000.0, 3000), (6000.0, 3000)]) {
            assert_eq!(run["rate"].as_f64(), Some(rate));
            assert_eq!(n(run, "queries"), queries, "{run}");
            all_answered(run);
        }
        let timeline = r["timeline"].as_array().unwrap();
        let sum = |key| timeline.iter().map(|s| n(s, key)).sum::<u64>();
        assert_eq!((sum("queries"), sum("answered")), (6000, 6000), "{timeline:?}");
        // The server answered exactly the warm-up pass, the closed loop and the open loop.
        assert_eq!(
            server.metric("warpsearch_queries_total"),
            num_queries + n(c, "queries") + 6000
        );
        let rss = r["server_rss"]["samples_s_kib"].as_array().unwrap();
        assert!(
            !rss.is_empty() && rss.iter().all(|s| s[1].as_u64().unwrap() > 0),
            "{rss:?}"
        );
    }
}

#[test]
fn a_server_with_a_tiny_queue_sheds_with_429_and_the_generator_counts_them() {
    let dir = tempfile::tempdir().unwrap();
    let index = common::index_of(
        dir.path(),
        &["the quick brown fox", "a fox and a dog", "brown bears eat fish"],
    );
    let queries = dir.path().join("q.txt");
    std::fs::write(&queries, "brown fox\nfox dog\nbears\nquick brown bears eat\n").unwrap();
    // No queue at all: every request is refused.
    let server = Server::start(&index, &["--backend", "cpu", "--max-in-flight", "0"]);
    let r = load(
        &server,
        &queries,
        &[
            "--warmup",
            "0",
            "--closed-queries",
            "50",
            "--clients",
            "4",
            "--rates",
            "2000",
            "--duration",
            "0.1",
        ],
    );
    let (c, o) = (&r["closed_loop"], &r["open_loop"][0]);
    assert_eq!(
        (n(c, "refused"), n(c, "refused_requests"), n(c, "answered")),
        (50, 50, 0),
        "{c}"
    );
    assert_eq!((n(o, "refused"), n(o, "answered")), (1000, 0), "{o}");
    assert!(
        c["latency_ms"].is_null() && c["errors"] == serde_json::json!({}),
        "{c}"
    );
    assert_eq!(server.metric("warpsearch_rejected_requests_total"), 1050);
    drop(server);

    // A queue of one query and eight clients on one thread: some requests are answered and some refused
    // (how many depends on timing), each counted as the server counts it.
    let server = Server::start(
        &index,
        &["--backend", "cpu", "--max-in-flight", "1", "--threads", "1"],
    );
    let r = load(
        &server,
        &queries,
        &[
            "--warmup",
            "0",
            "--closed-queries",
            "400",
            "--clients",
            "8",
            "--rates",
            "5000",
            "--duration",
            "0.2",
        ],
    );
    let runs = [&r["closed_loop"], &r["open_loop"][0]];
    for run in runs {
        assert_eq!(n(run, "answered") + n(run, "refused"), n(run, "queries"), "{run}");
        assert_eq!(run["errors"], serde_json::json!({}), "{run}");
    }
    let total = |key| runs.iter().map(|run| n(run, key)).sum::<u64>();
    assert_eq!(server.metric("warpsearch_queries_total"), total("answered"));
    assert_eq!(
        server.metric("warpsearch_rejected_requests_total"),
        total("refused_requests")
    );
}

#[test]
fn a_missing_server_or_a_bad_url_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let queries = dir.path().join("q.txt");
    std::fs::write(&queries, "fox\n").unwrap();
    // A port nobody listens on: one the system gave and took back.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let q = queries.to_str().unwrap();
    let nowhere = format!("http://127.0.0.1:{port}");
    for (args, message) in [
        (vec!["--url", nowhere.as_str()], "no warpsearch server answers at"),
        (vec!["--url", "https://127.0.0.1:1"], "give http://HOST:PORT"),
        (vec!["--url", nowhere.as_str(), "--batch", "0"], "--batch"),
        (vec!["--url", nowhere.as_str(), "--rates", "0"], "--rates"),
    ] {
        let mut all = vec!["load", "--queries", q];
        all.extend(args);
        let out = warpsearch(&all);
        let stderr = text(&out.stderr);
        assert!(
            !out.status.success() && stderr.contains(message),
            "{all:?}: {stderr}"
        );
    }
}
