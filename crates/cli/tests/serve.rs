//! `warpsearch serve` end to end on the loopback interface: the hits over HTTP equal `warpsearch search
//! --format json` (docIDs, f32 scores, ranks) on CACM under the CPU and hybrid backends, every refused
//! request names its field, 429 beyond --max-in-flight, /health, /metrics, every path of
//! docs/openapi.yaml is served, and SIGTERM stops the server cleanly; and the cases of a hostile or
//! careless client: responses never read, requests abandoned, stalled headers and bodies, half-closed
//! connections, oversized or ambiguous bodies, queries of too many terms. No timing is checked (the
//! waits for the server are bounds on a hang).

mod clients;
mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clients::{final_response, heavy_body, heavy_index, post_raw, read_to_close, wait_for_metric};
use common::{assert_lines, Server};
use serde_json::{json, Value};

/// `text` as a URL query value.
fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'.' | b'_' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// A tiny English index.
fn small_index(dir: &Path) -> PathBuf {
    common::index_of(
        dir,
        &["the quick brown fox", "a fox and a dog", "brown bears eat fish"],
    )
}

/// (docid, f32 score, rank) of a JSON hit list; every score must be printed as the shortest decimal of
/// its f32 (never widened to f64 digits) when `shortest`.
fn hits(v: &Value, shortest: bool) -> Vec<(String, f32, u64)> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|h| {
            let score = h["score"].as_f64().unwrap();
            if shortest {
                let short: f64 = (score as f32).to_string().parse().unwrap();
                assert_eq!(score, short, "score {score} is not printed as an f32");
            }
            let docid = h["docid"].as_str().unwrap().to_owned();
            (docid, score as f32, h["rank"].as_u64().unwrap())
        })
        .collect()
}

#[test]
fn served_hits_equal_search_json_on_cacm() {
    let dir = tempfile::tempdir().unwrap();
    let Some((data, index)) = common::cacm_index(dir.path()) else {
        return;
    };
    let topics = data.join("topics.tsv");
    let lines = std::fs::read_to_string(&topics).unwrap();
    let queries: Vec<(&str, &str)> = lines.lines().filter_map(|l| l.split_once('\t')).collect();
    assert!(queries.len() > 50);
    for backend in ["cpu", "hybrid"] {
        let server = Server::start(
            &index,
            &["--backend", backend, "--hybrid-workers", "2", "--threads", "2"],
        );
        for (mode, k) in [("or", 10), ("and", 5), ("and-or", 100)] {
            let out = common::search(&index, &topics, mode, k, "cpu", &["--format", "json"]);
            assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
            let expected: Vec<Value> = String::from_utf8(out.stdout)
                .unwrap()
                .lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect();
            let body = json!({
                "queries": queries.iter().map(|(id, text)| json!({"id": id, "text": text})).collect::<Vec<_>>(),
                "k": k,
                "mode": mode,
            });
            let (status, got) = server.json("POST", "/search", &body.to_string());
            assert_eq!(status, 200, "{got}");
            let results = got["results"].as_array().unwrap();
            assert_eq!(results.len(), expected.len());
            for (r, e) in results.iter().zip(&expected) {
                assert_eq!(r, e, "the same JSON as the server's");
                assert_eq!(
                    hits(&r["hits"], true),
                    hits(&e["hits"], false),
                    "{backend} {mode} query {}",
                    r["id"]
                );
            }
            // GET, for a few of them.
            for ((_, text), e) in queries.iter().zip(&expected).take(5) {
                let path = format!("/search?q={}&k={k}&mode={mode}", encode(text));
                let (status, got) = server.json("GET", &path, "");
                assert_eq!(status, 200, "{got}");
                assert_eq!(hits(&got["hits"], true), hits(&e["hits"], false));
            }
        }
    }
}

#[test]
fn bad_requests_name_their_field() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(
        &small_index(dir.path()),
        &["--backend", "cpu", "--max-body", "1K"],
    );
    let q = json!([{"id": "1", "text": "fox"}]);
    for (body, field) in [
        (json!({"queries": q, "k": 0}).to_string(), "k"),
        (json!({"queries": q, "k": 1001}).to_string(), "k"),
        (json!({"queries": q, "mode": "xor"}).to_string(), "mode"),
        (
            json!({"queries": q, "ranking": "bm25-static"}).to_string(),
            "ranking",
        ),
        (json!({"queries": [{"id": "1"}]}).to_string(), "queries[0].text"),
        (json!({"queries": []}).to_string(), "queries"),
        (json!({"queries": q, "size": 3}).to_string(), "size"),
        ("{not json".to_string(), "body"),
    ] {
        let (status, v) = server.json("POST", "/search", &body);
        assert_eq!((status, v["field"].as_str()), (400, Some(field)), "{body}: {v}");
        assert!(!v["error"].as_str().unwrap().is_empty());
    }
    let (status, v) = server.json("GET", "/search?k=3", "");
    assert_eq!((status, v["field"].as_str()), (400, Some("q")), "{v}");
    let (status, v) = server.json("GET", "/search?q=fox&k=ten", "");
    assert_eq!((status, v["field"].as_str()), (400, Some("k")), "{v}");
    let big = json!({"queries": [{"text": "fox ".repeat(400)}]}).to_string();
    let (status, v) = server.json("POST", "/search", &big);
    assert_eq!((status, v["field"].as_str()), (413, Some("body")), "{v}");
    server.assert_metrics(&["warpsearch_bad_requests_total 11"]);
    // A path or a method the server does not serve: JSON errors too, with the methods it does.
    let (status, head, body) = server.request("DELETE", "/search", "");
    assert_eq!(status, 405, "{body}");
    assert!(head.contains("\r\nallow: get,head,post"), "{head}");
    let v: Value = serde_json::from_str(&body).unwrap();
    assert!(v["error"].as_str().unwrap().starts_with("DELETE"), "{v}");
    let (status, v) = server.json("GET", "/nowhere", "");
    assert_eq!(status, 404, "{v}");
    server.assert_metrics(&["warpsearch_bad_requests_total 13"]);
}

#[test]
fn beyond_max_in_flight_is_429_with_retry_after() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(
        &small_index(dir.path()),
        &["--backend", "cpu", "--max-in-flight", "0"],
    );
    let (status, head, body) = server.request("POST", "/search", r#"{"queries": [{"text": "fox"}]}"#);
    assert_eq!(status, 429, "{body}");
    assert!(head.contains("\r\nretry-after: 1"), "{head}");
    let v: Value = serde_json::from_str(&body).unwrap();
    assert!(v["error"].as_str().unwrap().contains("in flight"), "{v}");
    let (status, _, _) = server.request("GET", "/search?q=fox", "");
    assert_eq!(status, 429);
    server.assert_metrics(&[
        "warpsearch_rejected_requests_total 2",
        "warpsearch_queries_total 0",
    ]);
}

#[test]
fn health_metrics_and_every_openapi_path_are_served() {
    let dir = tempfile::tempdir().unwrap();
    small_index(dir.path());
    // The same documents stored (`index --store`), for `/doc/{docid}`.
    let index = common::index_with(
        &dir.path().join("in.jsonl"),
        &dir.path().join("stored"),
        &["--store"],
    );
    let server = Server::start(&index, &["--backend", "hybrid", "--hybrid-workers", "1"]);
    let (status, v) = server.json("GET", "/health", "");
    assert_eq!(
        (status, v["status"].as_str(), v["documents"].as_u64()),
        (200, Some("ready"), Some(3)),
        "{v}"
    );
    let (status, v) = server.json("GET", "/search?q=brown%20fox&k=2", "");
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["hits"][0]["docid"], "doc0");
    let (status, head, metrics) = server.request("GET", "/metrics", "");
    assert_eq!(status, 200);
    assert!(head.contains("content-type: text/plain"), "{head}");
    assert_lines(
        &metrics,
        &["warpsearch_queries_total 1", "warpsearch_queries_in_flight 0"],
    );
    let sum_of = |prefix: &str| -> u64 {
        metrics
            .lines()
            .filter(|l| l.starts_with(prefix))
            .map(|l| l.rsplit(' ').next().unwrap().parse::<u64>().unwrap())
            .sum()
    };
    // The one query was served by the CPU, the GPU or both (where a GPU takes part), and its latency
    // counted under that backend.
    assert_eq!(sum_of("warpsearch_hybrid_served_"), 1, "{metrics}");
    assert_eq!(sum_of("warpsearch_query_latency_seconds_count{"), 1, "{metrics}");
    let gpu = metrics.contains("backend=\"gpu\"");
    // With a GPU, its memory: the index's bytes within what the device uses.
    let gauge = |name: &str| {
        metrics
            .lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse::<f64>().ok())
    };
    let memory = [
        "warpsearch_gpu_index_bytes",
        "warpsearch_gpu_memory_used_bytes",
        "warpsearch_gpu_memory_total_bytes",
    ]
    .map(gauge);
    if gpu {
        let [Some(index), Some(used), Some(total)] = memory else {
            panic!("GPU memory missing:\n{metrics}")
        };
        assert!(0.0 < index && index <= used && used <= total, "{metrics}");
    } else {
        assert_eq!(memory, [None, None, None], "{metrics}");
        eprintln!("skipped: the GPU's series of /metrics (no CUDA device here)");
    }
    let spec = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/openapi.yaml"))
        .unwrap();
    let paths: Vec<&str> = spec
        .lines()
        .filter(|l| l.starts_with("  /") && l.ends_with(':'))
        .map(|l| l.trim().trim_end_matches(':'))
        .collect();
    assert_eq!(paths, ["/search", "/doc/{docid}", "/health", "/metrics"]);
    for path in paths {
        let query = if path == "/search" { "?q=fox" } else { "" };
        let path = path.replace("{docid}", "doc1");
        let (status, _, body) = server.request("GET", &format!("{path}{query}"), "");
        assert_eq!(status, 200, "{path}: {body}");
    }
    // A stored document comes back as its input line; hits carry theirs with "docs".
    let line = r#"{"id": "doc1", "contents": "a fox and a dog"}"#;
    let (status, v) = server.json("GET", "/doc/doc1", "");
    assert_eq!((status, &v), (200, &json!({"docid": "doc1", "doc": line})));
    let (status, v) = server.json("GET", "/search?q=dog&docs=true", "");
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["hits"][0]["doc"], line, "{v}");
    let (status, v) = server.json("GET", "/nowhere", "");
    assert_eq!(status, 404, "{v}");
    server.assert_metrics(&["warpsearch_bad_requests_total 1"]);
}

#[test]
fn sigterm_stops_the_server_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = Server::start(&small_index(dir.path()), &["--backend", "cpu"]);
    assert_eq!(server.request("GET", "/search?q=fox", "").0, 200);
    let (status, _, log) = server.terminate();
    assert!(status.success(), "{status}: {log}");
    assert!(log.contains("shutting down") && log.contains("stopped"), "{log}");
}

/// Case 1 of the reliability round: a client that never reads its 50 MB response held it in memory
/// for good, its queries no longer counted. Now they count against --max-in-flight until the response
/// is written (another such request is refused 429 meanwhile), and the write timeout closes the
/// connection and lets them go.
#[test]
fn memory_exhaustion_by_clients_that_never_read() {
    let dir = tempfile::tempdir().unwrap();
    let index = heavy_index(dir.path());
    let server = Server::start(
        &index,
        &[
            "--backend",
            "cpu",
            "--max-in-flight",
            "1500",
            "--write-timeout",
            "2s",
        ],
    );
    let body = heavy_body(1024, 1000);
    let silent = post_raw(&server.addr, &body);
    // Answered (nothing running) but not written: its 1,024 queries still hold their places (one
    // or more a query, by its postings; at most the limit).
    wait_for_metric(&server, "warpsearch_queries_held", |v| v >= 1024);
    wait_for_metric(&server, "warpsearch_queries_in_flight", |v| v == 0);
    let held = server.metric("warpsearch_queries_held");
    assert!((1024..=1500).contains(&held), "{held} places held");
    let (status, _, reply) = server.request("POST", "/search", &body);
    assert_eq!(status, 429, "{reply}");
    // The write timeout closes the silent connection; its places are given back.
    wait_for_metric(&server, "warpsearch_connections_timed_out_total", |v| v == 1);
    wait_for_metric(&server, "warpsearch_queries_held", |v| v == 0);
    drop(silent);
    let (status, _, reply) = server.request("POST", "/search", &heavy_body(4, 10));
    assert_eq!(status, 200, "{reply}");
}

/// Case 3: a client that hung up left its request computing, uncounted. Now the queries not yet
/// started are dropped (counted as cancelled), those running count in flight until they end, and
/// nothing stays held.
#[test]
fn abandoned_requests_are_cancelled() {
    let dir = tempfile::tempdir().unwrap();
    let index = heavy_index(dir.path());
    let server = Server::start(&index, &["--backend", "cpu", "--threads", "1"]);
    let s = post_raw(&server.addr, &heavy_body(1024, 1000));
    wait_for_metric(&server, "warpsearch_queries_in_flight", |v| v > 0);
    drop(s);
    let cancelled = wait_for_metric(&server, "warpsearch_queries_cancelled_total", |v| v > 0);
    wait_for_metric(&server, "warpsearch_queries_in_flight", |v| v == 0);
    wait_for_metric(&server, "warpsearch_queries_held", |v| v == 0);
    let answered = server.metric("warpsearch_queries_total");
    assert!(
        cancelled + answered <= 1024 && cancelled > 512,
        "{cancelled} cancelled, {answered} answered of 1024"
    );
}

/// Case 4: a connection that sends nothing, half a header, or half a body stayed open for good. Now
/// the idle and read timeouts close each (the half body answered 408 first).
#[test]
fn stalled_headers_bodies_and_idle_connections_are_closed() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(
        &small_index(dir.path()),
        &["--backend", "cpu", "--idle-timeout", "1s", "--read-timeout", "1s"],
    );
    let idle = TcpStream::connect(&server.addr).unwrap();
    let mut header = TcpStream::connect(&server.addr).unwrap();
    header
        .write_all(b"POST /search HTTP/1.1\r\nHost: x\r\nContent-Le")
        .unwrap();
    let mut body = TcpStream::connect(&server.addr).unwrap();
    body.write_all(b"POST /search HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"queries\"")
        .unwrap();
    for mut s in [idle, header] {
        let got = read_to_close(&mut s);
        assert!(!got.starts_with("HTTP/1.1 2"), "{got}");
    }
    let got = read_to_close(&mut body);
    assert_eq!(final_response(&got).map(|r| r.0), Some(408), "{got}");
    assert_eq!(server.request("GET", "/health", "").0, 200);
}

/// Case 4: SIGTERM waited for ever on clients holding half a body or not reading. Now connections
/// still open after --shutdown-grace are closed and the server stops.
#[test]
fn sigterm_ends_within_the_shutdown_grace() {
    let dir = tempfile::tempdir().unwrap();
    let index = heavy_index(dir.path());
    let mut server = Server::start(
        &index,
        &["--backend", "cpu", "--shutdown-grace", "1s", "--threads", "1"],
    );
    let mut half = TcpStream::connect(&server.addr).unwrap();
    half.write_all(b"POST /search HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{")
        .unwrap();
    let _silent = post_raw(&server.addr, &heavy_body(256, 1000));
    let _computing = post_raw(&server.addr, &heavy_body(1024, 1000));
    wait_for_metric(&server, "warpsearch_queries_in_flight", |v| v > 0);
    let (status, _, log) = server.terminate();
    assert!(status.success(), "{status}: {log}");
    assert!(log.contains("closing the connections still open"), "{log}");
    let _ = half.read(&mut [0u8; 64]);
}

/// Case 16: a client that shut its side after its request often got no response. Now it gets it
/// (after an interim 100 Continue, which tells it from a client that closed).
#[test]
fn a_client_that_half_closes_after_its_request_gets_its_response() {
    let dir = tempfile::tempdir().unwrap();
    let index = heavy_index(dir.path());
    let server = Server::start(&index, &["--backend", "cpu"]);
    for round in 0..10 {
        let mut s = post_raw(&server.addr, &heavy_body(64, 100));
        s.shutdown(std::net::Shutdown::Write).unwrap();
        let got = read_to_close(&mut s);
        let (status, body) = final_response(&got).unwrap_or_else(|| panic!("round {round}: {got:.200}"));
        assert_eq!(status, 200, "round {round}: {body:.200}");
        let v: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(v["results"].as_array().unwrap().len(), 64);
    }
    assert_eq!(server.metric("warpsearch_queries_cancelled_total"), 0);
}

/// Case 17: a Content-Length above --max-body got `100 Continue` or a wait for the body. Now it is
/// refused with 413 at once, the body never read.
#[test]
fn a_content_length_above_max_body_is_refused_up_front() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(
        &small_index(dir.path()),
        &["--backend", "cpu", "--max-body", "1K"],
    );
    for expect in ["Expect: 100-continue\r\n", ""] {
        let mut s = TcpStream::connect(&server.addr).unwrap();
        write!(
            s,
            "POST /search HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n{expect}Content-Length: 10000000\r\n\r\n"
        )
        .unwrap();
        let got = read_to_close(&mut s);
        assert!(got.starts_with("HTTP/1.1 413"), "{expect:?}: {got}");
        let v: Value = serde_json::from_str(got.split_once("\r\n\r\n").unwrap().1).unwrap();
        assert_eq!(v["field"], "body", "{v}");
        assert!(v["error"].as_str().unwrap().contains("10000000 bytes"), "{v}");
    }
}

/// Case 18: a key given twice in a POST body was resolved silently, the last one winning. Now the
/// request is refused with 400 naming the key.
#[test]
fn duplicate_keys_in_a_post_body_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&small_index(dir.path()), &["--backend", "cpu"]);
    for (body, field) in [
        (r#"{"queries": [{"text": "fox"}], "k": 3, "k": 4}"#, "k"),
        (
            r#"{"queries": [{"id": "1", "text": "fox", "text": "dog"}]}"#,
            "queries[0].text",
        ),
        (
            r#"{"mode": "or", "queries": [{"text": "fox"}], "mode": "and"}"#,
            "mode",
        ),
    ] {
        let (status, v) = server.json("POST", "/search", body);
        assert_eq!((status, v["field"].as_str()), (400, Some(field)), "{body}: {v}");
        assert!(v["error"].as_str().unwrap().contains("twice"), "{v}");
    }
}

/// Case 2: one request of a query with tens of thousands of distinct terms held a worker for
/// minutes. Now a query beyond --max-query-terms is refused with 400, naming it and the limit.
#[test]
fn a_query_beyond_the_term_limit_is_refused_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let index = heavy_index(dir.path());
    let server = Server::start(&index, &["--backend", "cpu", "--max-query-terms", "100"]);
    let long: Vec<String> = (0..150).map(|j| format!("w{j}")).collect();
    let body = json!({"queries": [{"id": "a", "text": "w1 w2"}, {"id": "b", "text": long.join(" ")}]});
    let (status, v) = server.json("POST", "/search", &body.to_string());
    assert_eq!(
        (status, v["field"].as_str()),
        (400, Some("queries[1].text")),
        "{v}"
    );
    let e = v["error"].as_str().unwrap();
    assert!(
        e.contains("query b") && e.contains("150 distinct terms") && e.contains("limit of 100"),
        "{e}"
    );
    let (status, v) = server.json("GET", &format!("/search?q={}", long.join("+")), "");
    assert_eq!((status, v["field"].as_str()), (400, Some("q")), "{v}");
    assert_eq!(server.metric("warpsearch_queries_held"), 0);
}

/// Case 6 for the server: a postings file rewritten in place under a running server gave 500s or
/// wrong hits. Now a request whose answers may have read it is an error naming the file.
#[test]
fn an_index_changed_on_disk_under_the_server_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let index = small_index(dir.path());
    let server = Server::start(&index, &["--backend", "cpu"]);
    assert_eq!(server.request("GET", "/search?q=fox", "").0, 200);
    // Past the file system's timestamp granularity, so that the write shows in the modification time.
    std::thread::sleep(Duration::from_millis(50));
    let postings = index.join("postings.bin");
    let same = std::fs::read(&postings).unwrap();
    warpsearch_index::testdata::write_in_place(&postings, &same);
    let (status, v) = server.json("GET", "/search?q=fox", "");
    assert_eq!(status, 500, "{v}");
    let e = v["error"].as_str().unwrap();
    assert!(e.contains("postings.bin") && e.contains("changed on disk"), "{e}");
}
