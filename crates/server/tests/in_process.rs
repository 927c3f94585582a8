//! The server's application answered in process (the router as a tower service, no socket): hits equal
//! the engine's own answers, refusals name their field, a request beyond the queries allowed in flight
//! is refused with 429 (a query weighed by its postings), unknown paths and methods get JSON errors, and /metrics counts what happened.
//! Stored documents come back by docid (`GET /doc/{docid}`) and with each hit (`"docs": true`) as the
//! index gives them, and are refused clearly where the index stores none.
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
    build(dir, "", false)
}

/// [`index`]'s documents stored (`index --store`), and one more whose id needs escaping in a URL.
fn stored_index(dir: &Path) -> Arc<Index> {
    build(
        dir,
        "{\"id\": \"odd/é?#\", \"contents\": \"w1 w2 filler\", \"n\": 1.50}\n",
        true,
    )
}

fn build(dir: &Path, extra: &str, store: bool) -> Arc<Index> {
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
    lines.push_str(extra);
    std::fs::write(dir.join("in.jsonl"), lines).unwrap();
    let mut opts = BuildOptions::new(WriterOptions {
        codec: Codec::SimdBp,
        analyzer: AnalyzerConfig::whitespace(),
        bm25: Bm25Params::default(),
        doc_order: DocOrder::Input,
        force: true,
    });
    opts.store = store;
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

/// The status and body bytes of one request.
async fn call_raw(app: &Router, method: &str, uri: &str, body: Option<Value>) -> (StatusCode, Vec<u8>) {
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
    (status, bytes.to_vec())
}

/// The status and JSON body (or the text of a non-JSON one, as a string) of one request.
async fn call(app: &Router, method: &str, uri: &str, body: Option<Value>) -> (StatusCode, Value) {
    let (status, bytes) = call_raw(app, method, uri, body).await;
    let text = String::from_utf8(bytes).unwrap();
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

/// The stored line of the document whose id is `docid`, as the index gives it.
fn stored(index: &Index, docid: &str) -> String {
    let n = index.find_doc(docid).unwrap_or_else(|| panic!("no {docid}"));
    index.doc(n).unwrap().expect("a stored index")
}

#[tokio::test]
async fn a_stored_document_is_served_by_its_docid() {
    let dir = tempfile::tempdir().unwrap();
    let index = stored_index(dir.path());
    let app = warpsearch_server::router(engine(&index), "bm25", &config(4096));
    for (uri, docid) in [("/doc/doc7", "doc7"), ("/doc/odd%2F%C3%A9%3F%23", "odd/é?#")] {
        let (status, got) = call(&app, "GET", uri, None).await;
        assert_eq!(status, StatusCode::OK, "{uri}: {got}");
        assert_eq!(
            got,
            json!({"docid": docid, "doc": stored(&index, docid)}),
            "{uri}"
        );
    }
    // The stored line comes back as it was given (the number keeps its "1.50").
    let (_, got) = call(&app, "GET", "/doc/odd%2F%C3%A9%3F%23", None).await;
    assert_eq!(
        got["doc"],
        "{\"id\": \"odd/é?#\", \"contents\": \"w1 w2 filler\", \"n\": 1.50}"
    );
    let (status, got) = call(&app, "GET", "/doc/doc300", None).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{got}");
    assert_eq!(got["field"], "docid");
    assert!(got["error"].as_str().unwrap().contains("'doc300'"), "{got}");
    let (status, got) = call(&app, "POST", "/doc/doc7", None).await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED, "{got}");
    let (_, text) = call(&app, "GET", "/metrics", None).await;
    let text = text.as_str().unwrap();
    assert!(text.contains("warpsearch_bad_requests_total 2"), "{text}");
}

#[tokio::test]
async fn documents_of_an_index_without_store_are_refused_with_how_to_store_them() {
    let dir = tempfile::tempdir().unwrap();
    let index = index(dir.path());
    let app = warpsearch_server::router(engine(&index), "bm25", &config(4096));
    let (status, got) = call(&app, "GET", "/doc/doc7", None).await;
    assert_eq!(status, StatusCode::CONFLICT, "{got}");
    assert!(
        got["error"]
            .as_str()
            .unwrap()
            .contains("warpsearch index --store"),
        "{got}"
    );
    let body = json!({"queries": [{"text": "w1"}], "docs": true});
    let (status, got) = call(&app, "POST", "/search", Some(body)).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{got}");
    assert_eq!(got["field"], "docs");
    assert!(got["error"].as_str().unwrap().contains("--store"), "{got}");
    let (status, got) = call(&app, "GET", "/search?q=w1&docs=true", None).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{got}");
    assert_eq!(got["field"], "docs");
    // Without "docs" (or with it false) the same index answers.
    let body = json!({"queries": [{"text": "w1"}], "docs": false});
    let (status, got) = call(&app, "POST", "/search", Some(body)).await;
    assert_eq!(status, StatusCode::OK, "{got}");
    let (_, text) = call(&app, "GET", "/metrics", None).await;
    let text = text.as_str().unwrap();
    assert!(text.contains("warpsearch_bad_requests_total 3"), "{text}");
    assert!(text.contains("warpsearch_queries_total 1"), "{text}");
}

#[tokio::test]
async fn hits_carry_the_stored_documents_when_asked_and_are_unchanged_otherwise() {
    let dir = tempfile::tempdir().unwrap();
    let index = stored_index(dir.path());
    let reference = engine(&index);
    let app = warpsearch_server::router(engine(&index), "bm25", &config(4096));
    let texts = ["w1 w2", "w0", "nosuchword", "w3 w5 w7"];
    let queries: Vec<Value> = texts.iter().map(|t| json!({"text": t})).collect();
    let want: Vec<Vec<_>> = reference
        .search_batch(
            &texts
                .iter()
                .map(|t| Request::new(Query::parse(&index, t), Mode::Or, 20))
                .collect::<Vec<_>>(),
        )
        .into_iter()
        .map(|a| a.unwrap().hits)
        .collect();
    // Without "docs": the hits written byte for byte as the CLI's JSON writes them.
    for docs in [None, Some(false)] {
        let mut body = json!({"queries": queries, "k": 20});
        if let Some(d) = docs {
            body["docs"] = json!(d);
        }
        let (status, bytes) = call_raw(&app, "POST", "/search", Some(body)).await;
        assert_eq!(status, StatusCode::OK);
        let text = String::from_utf8(bytes).unwrap();
        let results: Vec<String> = want
            .iter()
            .enumerate()
            .map(|(i, hits)| {
                let hits = warpsearch_server::JsonHits { index: &index, hits };
                format!(
                    r#"{{"id":"{}","hits":{}}}"#,
                    i + 1,
                    serde_json::to_string(&hits).unwrap()
                )
            })
            .collect();
        let prefix = format!(r#"{{"results":[{}],"took_ms":"#, results.join(","));
        assert!(text.starts_with(&prefix), "{docs:?}:\n{text}\n{prefix}");
    }
    let (status, bytes) = call_raw(&app, "GET", "/search?q=w1%20w2&k=20", None).await;
    assert_eq!(status, StatusCode::OK);
    let hits = warpsearch_server::JsonHits {
        index: &index,
        hits: &want[0],
    };
    let prefix = format!(r#"{{"hits":{},"took_ms":"#, serde_json::to_string(&hits).unwrap());
    assert!(String::from_utf8(bytes).unwrap().starts_with(&prefix));
    // With "docs": the same hits, each with the document the index stores for it.
    let body = json!({"queries": queries, "k": 20, "docs": true});
    let (status, got) = call(&app, "POST", "/search", Some(body)).await;
    assert_eq!(status, StatusCode::OK, "{got}");
    let results = got["results"].as_array().unwrap();
    let mut documents = 0;
    for (r, w) in results.iter().zip(&want) {
        let expected: Vec<(String, f32)> = w
            .iter()
            .map(|h| (index.doc_id(h.doc).to_owned(), h.score))
            .collect();
        assert_eq!(pairs(&r["hits"]), expected);
        for (rank, hit) in r["hits"].as_array().unwrap().iter().enumerate() {
            let docid = hit["docid"].as_str().unwrap();
            assert_eq!(hit["doc"], stored(&index, docid), "{hit}");
            assert_eq!(hit["rank"], rank + 1);
            assert_eq!(hit.as_object().unwrap().len(), 4, "{hit}");
            documents += 1;
        }
    }
    assert!(documents > 20, "only {documents} hits");
    assert!(results[2]["hits"].as_array().unwrap().is_empty());
    let (status, got) = call(&app, "GET", "/search?q=w1%20w2&k=20&docs=true", None).await;
    assert_eq!(status, StatusCode::OK, "{got}");
    assert_eq!(got["hits"], results[0]["hits"]);
    assert!(got["hits"]
        .as_array()
        .unwrap()
        .iter()
        .any(|h| h["docid"] == "odd/é?#"));
    // A bad "docs" is refused by name.
    for bad in [json!("true"), json!(1)] {
        let body = json!({"queries": queries, "docs": bad});
        let (status, got) = call(&app, "POST", "/search", Some(body)).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{got}");
        assert_eq!(got["field"], "docs", "{got}");
    }
    let (status, got) = call(&app, "GET", "/search?q=w1&docs=yes", None).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{got}");
    assert_eq!(got["field"], "docs", "{got}");
    let body = r#"{"queries": [{"text": "w1"}], "docs": true, "docs": false}"#;
    let request = HttpRequest::builder()
        .method("POST")
        .uri("/search")
        .header("content-type", "application/json")
        .body(Body::from(body))
        .unwrap();
    let response = app.clone().oneshot(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    let got: Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(got["field"], "docs", "{got}");
}

/// A document's response holds a place among --max-in-flight until it is read, as a search's does;
/// at the limit a document is refused with 429.
#[tokio::test]
async fn a_document_response_holds_a_place_until_read() {
    let dir = tempfile::tempdir().unwrap();
    let index = stored_index(dir.path());
    let app = warpsearch_server::router(engine(&index), "bm25", &config(1));
    let request = HttpRequest::builder()
        .uri("/doc/doc3")
        .body(Body::empty())
        .unwrap();
    let unread = app.clone().oneshot(request).await.unwrap();
    assert_eq!(unread.status(), StatusCode::OK);
    assert_eq!(held(&app).await, 1);
    let (status, got) = call(&app, "GET", "/doc/doc4", None).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{got}");
    let bytes = unread.into_body().collect().await.unwrap().to_bytes();
    let got: Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(got["doc"], stored(&index, "doc3"));
    assert_eq!(settled(&app).await, 0);
    let (status, got) = call(&app, "GET", "/doc/doc4", None).await;
    assert_eq!(status, StatusCode::OK, "{got}");
}
