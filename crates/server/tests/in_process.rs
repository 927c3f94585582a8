//! The server's application answered in process (the router as a tower service, no socket): hits equal
//! the engine's own answers, refusals name their field, a request beyond the queries allowed in flight
//! is refused with 429 (a query weighed by its postings), unknown paths and methods get JSON errors, and /metrics counts what happened.
//! The loopback tests of the binary (crates/cli/tests/serve.rs) cover the same over real HTTP.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{Request as HttpRequest, StatusCode};
use axum::Router;
use http_body_util::BodyExt;
use serde_json::{json, Value};
use tower::ServiceExt;
use warpsearch_engine::{BackendChoice, Engine, EngineOptions};
use warpsearch_index::build::{build_from_jsonl, BuildOptions};
use warpsearch_index::{AnalyzerConfig, Bm25Params, Codec, DocOrder, Index, WriterOptions};
use warpsearch_query::{Mode, Query, Request, Scorer, SearchOptions};
use warpsearch_server::ServerConfig;

/// 300 documents over 9 words (white-space analysis), some frequent, some rare.
fn index(dir: &Path) -> Arc<Index> {
    let mut lines = String::new();
    for d in 0..300u32 {
        let words: Vec<String> = (0..9u32)
            .filter(|w| (d * 5 + w * 11) % (w + 2) == 0)
            .map(|w| format!("w{w}"))
            .collect();
        lines.push_str(&format!(
            "{{\"id\": \"doc{d}\", \"contents\": \"{} filler\"}}\n",
            words.join(" ")
        ));
    }
    std::fs::write(dir.join("in.jsonl"), lines).unwrap();
    let opts = BuildOptions::new(WriterOptions {
        codec: Codec::SimdBp,
        analyzer: AnalyzerConfig::whitespace(),
        bm25: Bm25Params::default(),
        doc_order: DocOrder::Input,
        force: true,
    });
    build_from_jsonl(&dir.join("in.jsonl"), &dir.join("idx"), &opts).unwrap();
    Arc::new(Index::open(dir.join("idx")).unwrap())
}

fn engine(index: &Arc<Index>) -> Engine {
    let scorer = Arc::new(Scorer::new(index.clone(), SearchOptions::new(index)).unwrap());
    let options = EngineOptions {
        backend: BackendChoice::Cpu,
        cpu_threads: 2,
        ..EngineOptions::default()
    };
    Engine::new(scorer, options).unwrap()
}

fn config(max_in_flight: usize) -> ServerConfig {
    ServerConfig {
        max_in_flight,
        max_queries: 64,
        max_k: 100,
        max_body: 1 << 20,
        deadline: Duration::from_secs(10),
        shed: Duration::ZERO,
        ..ServerConfig::default()
    }
}

/// The status and JSON body (or the text of a non-JSON one, as a string) of one request.
async fn call(app: &Router, method: &str, uri: &str, body: Option<Value>) -> (StatusCode, Value) {
    let request = HttpRequest::builder().method(method).uri(uri);
    let request = match body {
        Some(b) => request
            .header("content-type", "application/json")
            .body(Body::from(b.to_string())),
        None => request.body(Body::empty()),
    }
    .unwrap();
    let response = app.clone().oneshot(request).await.unwrap();
    let status = response.status();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    let text = String::from_utf8(bytes.to_vec()).unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::String(text)))
}

/// The (docid, score) pairs of a JSON hit list.
fn pairs(hits: &Value) -> Vec<(String, f32)> {
    hits.as_array()
        .unwrap()
        .iter()
        .map(|h| {
            (
                h["docid"].as_str().unwrap().to_owned(),
                h["score"].as_f64().unwrap() as f32,
            )
        })
        .collect()
}

#[tokio::test]
async fn hits_equal_the_engines_answers() {
    let dir = tempfile::tempdir().unwrap();
    let index = index(dir.path());
    let reference = engine(&index);
    let app = warpsearch_server::router(engine(&index), "bm25", &config(4096));
    let texts = ["w1 w2", "w0", "w3 w5 w7", "nosuchword w4", "w8"];
    for (mode, k) in [(Mode::Or, 10), (Mode::And, 3), (Mode::AndOr, 50)] {
        let queries: Vec<Value> = texts
            .iter()
            .enumerate()
            .map(|(i, t)| json!({"id": format!("q{i}"), "text": t}))
            .collect();
        let body = json!({"queries": queries, "k": k, "mode": mode.name()});
        let (status, got) = call(&app, "POST", "/search", Some(body)).await;
        assert_eq!(status, StatusCode::OK, "{got}");
        let requests: Vec<Request> = texts
            .iter()
            .map(|t| Request::new(Query::parse(&index, t), mode, k))
            .collect();
        let want = reference.search_batch(&requests);
        let results = got["results"].as_array().unwrap();
        assert_eq!(results.len(), texts.len());
        for (i, (r, w)) in results.iter().zip(want).enumerate() {
            assert_eq!(r["id"], format!("q{i}"));
            let expected: Vec<(String, f32)> = w
                .unwrap()
                .hits
                .iter()
                .map(|h| (index.doc_id(h.doc).to_owned(), h.score))
                .collect();
            assert_eq!(pairs(&r["hits"]), expected, "{mode:?} query {i}");
        }
    }
    let (status, got) = call(&app, "GET", "/search?q=w1%20w2&k=4&mode=or", None).await;
    assert_eq!(status, StatusCode::OK, "{got}");
    assert_eq!(got["hits"].as_array().unwrap().len(), 4);
}

#[tokio::test]
async fn refusals_name_their_field_and_paths_and_methods_answer_in_json() {
    let dir = tempfile::tempdir().unwrap();
    let index = index(dir.path());
    let app = warpsearch_server::router(engine(&index), "bm25", &config(4096));
    for (body, field) in [
        (json!({"queries": [{"id": "a", "text": "w1"}], "k": 0}), "k"),
        (json!({"queries": [{"id": "a", "text": "w1"}], "k": 101}), "k"),
        (
            json!({"queries": [{"id": "a", "text": "w1"}], "mode": "xor"}),
            "mode",
        ),
        (
            json!({"queries": [{"id": "a", "text": "w1"}], "ranking": "tfidf"}),
            "ranking",
        ),
        (json!({"k": 3}), "queries"),
    ] {
        let (status, got) = call(&app, "POST", "/search", Some(body.clone())).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}: {got}");
        assert_eq!(got["field"], field, "{body}: {got}");
    }
    let (status, got) = call(&app, "GET", "/nowhere", None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(
        got["error"].as_str().unwrap().contains("no such endpoint"),
        "{got}"
    );
    let (status, got) = call(&app, "DELETE", "/search", None).await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
    assert!(got["error"].as_str().unwrap().contains("DELETE"), "{got}");
    let (status, got) = call(&app, "GET", "/health", None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(got["status"], "ready");
    assert_eq!(got["documents"], 300);
    let (status, text) = call(&app, "GET", "/metrics", None).await;
    assert_eq!(status, StatusCode::OK);
    let text = text.as_str().unwrap();
    assert!(text.contains("warpsearch_bad_requests_total 7"), "{text}");
}

#[tokio::test]
async fn a_request_beyond_the_queries_allowed_in_flight_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let index = index(dir.path());
    let app = warpsearch_server::router(engine(&index), "bm25", &config(3));
    let queries: Vec<Value> = (0..4).map(|i| json!({"id": i, "text": "w1"})).collect();
    let (status, got) = call(&app, "POST", "/search", Some(json!({"queries": queries}))).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{got}");
    let queries: Vec<Value> = (0..3).map(|i| json!({"id": i, "text": "w1"})).collect();
    let (status, got) = call(&app, "POST", "/search", Some(json!({"queries": queries}))).await;
    assert_eq!(status, StatusCode::OK, "{got}");
    let (_, text) = call(&app, "GET", "/metrics", None).await;
    let text = text.as_str().unwrap();
    assert!(text.contains("warpsearch_queries_total 3"), "{text}");
    assert!(text.contains("warpsearch_rejected_requests_total 1"), "{text}");
}

#[test]
fn limits_out_of_range_are_refused_by_name() {
    let mut c = config(10);
    c.max_k = 0;
    assert!(c.check().unwrap_err().contains("--max-k"));
    let mut c = config(10);
    c.max_queries = 0;
    assert!(c.check().unwrap_err().contains("--max-queries"));
    let mut c = config(10);
    c.deadline = Duration::ZERO;
    assert!(c.check().unwrap_err().contains("--deadline-ms"));
    assert!(config(10).check().is_ok());
}

/// The places held against --max-in-flight, from /metrics.
async fn held(app: &Router) -> u64 {
    let (_, text) = call(app, "GET", "/metrics", None).await;
    let text = text.as_str().unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix("warpsearch_queries_held "))
        .unwrap_or_else(|| panic!("no warpsearch_queries_held in\n{text}"))
        .parse()
        .unwrap()
}

/// Waits (at most 10 s: a leak otherwise) until no places are held: the engine lets go of a request
/// just after answering it.
async fn settled(app: &Router) -> u64 {
    let started = std::time::Instant::now();
    loop {
        let n = held(app).await;
        if n == 0 || started.elapsed() > Duration::from_secs(10) {
            return n;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// A query counted one in flight whatever it cost: one that scores the collection many times over
/// weighed as little as one of a rare word. Now a query holds one place and one more per
/// collection's worth of postings its terms have; a response not yet read keeps its places; a
/// request heavier than the limit is still admitted alone.
#[tokio::test]
async fn in_flight_weight_reflects_a_querys_cost() {
    let dir = tempfile::tempdir().unwrap();
    let index = index(dir.path());
    let heavy = "filler w0 w1 w2 w3 w4 w5 w6 w7 w8";
    let postings: u64 = Query::parse(&index, heavy)
        .terms
        .iter()
        .map(|&(id, _)| u64::from(index.term_records()[id as usize].df))
        .sum();
    let weight = 1 + postings / u64::from(index.num_docs());
    assert_eq!(
        weight,
        3,
        "{postings} postings over {} documents",
        index.num_docs()
    );
    let app = warpsearch_server::router(engine(&index), "bm25", &config(4));
    // Two light queries whose response is not read: they keep their two places.
    let light = json!({"queries": [{"text": "w8"}, {"text": "w8"}]});
    let request = HttpRequest::builder()
        .method("POST")
        .uri("/search")
        .header("content-type", "application/json")
        .body(Body::from(light.to_string()))
        .unwrap();
    let unread = app.clone().oneshot(request).await.unwrap();
    assert_eq!(unread.status(), StatusCode::OK);
    assert_eq!(held(&app).await, 2);
    let heavy_body = json!({"queries": [{"text": heavy}]});
    let (status, got) = call(&app, "POST", "/search", Some(heavy_body.clone())).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{got}");
    let (status, got) = call(
        &app,
        "POST",
        "/search",
        Some(json!({"queries": [{"text": "w8"}]})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{got}");
    // Read, the response lets go of its places; the heavy query is admitted, and one heavier than
    // the whole limit too, alone.
    let bytes = unread.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(
        serde_json::from_slice::<Value>(&bytes).unwrap()["results"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    assert_eq!(settled(&app).await, 0);
    let (status, got) = call(&app, "POST", "/search", Some(heavy_body)).await;
    assert_eq!(status, StatusCode::OK, "{got}");
    assert_eq!(settled(&app).await, 0);
    let two_heavy = json!({"queries": [{"text": heavy}, {"text": heavy}]});
    let (status, got) = call(&app, "POST", "/search", Some(two_heavy)).await;
    assert_eq!(status, StatusCode::OK, "{got}");
    assert_eq!(settled(&app).await, 0);
}
