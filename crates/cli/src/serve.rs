//! `warpsearch serve`: the engine over HTTP (axum on tokio). `POST /search` and `GET /search` answer
//! queries through one shared engine ([`searcher`]), `GET /health` says it is ready, `GET /metrics`
//! exposes the counters ([`metrics()`]); `docs/openapi.yaml` describes every endpoint. Requests are checked
//! field by field ([`request`]); beyond `--max-in-flight` queries, or when the queries in flight would
//! take longer than `--shed-ms` to answer ([`pace`]), a request is refused with 429 and
//! `Retry-After: 1`. SIGTERM or Ctrl-C stops accepting connections and answers what is in flight.

mod gather;
mod metrics;
mod pace;
mod request;
mod searcher;

use std::collections::HashMap;
use std::io::{IsTerminal, Write};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, QueryRejection};
use axum::extract::{DefaultBodyLimit, Query as UrlQuery, State};
use axum::http::{header, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde::Serialize;
use serde_json::json;
use tokio::sync::Semaphore;
use tracing::{debug, error, info};
use warpsearch_engine::BackendChoice;
use warpsearch_query::{Mode, Query, Request, Scored, MAX_K};

use crate::args::ServeArgs;
use crate::search::JsonHits;
use metrics::{Metrics, Tally};
use pace::Pace;
use request::{ApiError, Limits, Search};
use searcher::Searcher;

/// What every handler shares.
struct Server {
    searcher: Searcher,
    limits: Limits,
    metrics: Metrics,
    /// One permit per query that may be in flight.
    slots: Arc<Semaphore>,
    max_in_flight: usize,
    /// Refuses requests that would wait past the deadline behind the queries in flight ([`pace`]).
    pace: Pace,
}

#[derive(Serialize)]
struct QueryResult<'a> {
    id: &'a str,
    hits: JsonHits<'a>,
}

/// Typed responses (never through `serde_json::Value`, which would widen the scores to `f64`).
#[derive(Serialize)]
struct PostResponse<'a> {
    results: Vec<QueryResult<'a>>,
    took_ms: f64,
}

#[derive(Serialize)]
struct GetResponse<'a> {
    hits: JsonHits<'a>,
    took_ms: f64,
}

pub fn run(a: ServeArgs) -> Result<()> {
    init_logging();
    if !(1..=MAX_K).contains(&a.max_k) {
        bail!("--max-k {} is out of range: use 1 to {MAX_K}", a.max_k);
    }
    if a.max_in_flight > Semaphore::MAX_PERMITS || a.max_queries == 0 {
        bail!(
            "--max-in-flight must be at most {} and --max-queries at least 1",
            Semaphore::MAX_PERMITS
        );
    }
    if !(a.deadline_ms.is_finite() && a.deadline_ms > 0.0) {
        bail!("--deadline-ms must be a positive number of milliseconds");
    }
    if a.shed_ms.is_some_and(|ms| !(ms.is_finite() && ms >= 0.0)) {
        bail!("--shed-ms must be 0 (never shed by time) or a positive number of milliseconds");
    }
    let index = Arc::new(crate::open(&a.scorer.index)?);
    // The GPU alone answers batches of a query file; a server's stream of single queries goes through
    // the hybrid scheduler instead, which batches them for the GPU (and must have the GPU).
    let mut scorer = a.scorer;
    // The handlers need cores for HTTP, JSON and query analysis: on a machine of 8 cores or more the
    // hybrid's CPU workers take a quarter of them with the whole index on the GPU, and half with a list
    // cache (whose queries the CPU completes), unless told otherwise; without a GPU, every core. On
    // the H100's 16 cores, passages on the GPU (37b9b32): 4 workers made 0.85-1.03 of in process for
    // AND (about a million queries a second) and 0.93-1.09 for OR, 8 workers 0.72-0.83 and 0.66-0.70.
    // On the H200's 25M collection, at their best loads, 8 made 0.92-0.94 and 4 0.95-1.00; with a cache half
    // the cores came within 4% of 15 workers (bench/RESULTS.md, issue 15).
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    if scorer.gpu.hybrid_workers.is_none() && cores >= 8 {
        let share = if scorer.gpu.gpu_cache.is_some() { 2 } else { 4 };
        scorer.gpu.hybrid_gpu_workers = Some(cores / share);
    }
    let gpu_required = scorer.backend == BackendChoice::Gpu;
    if gpu_required {
        scorer.backend = BackendChoice::Hybrid;
    }
    // and-or: a mode every algorithm takes; each request's mode is checked when it comes.
    let engine = crate::search::open_scorer_engine(&scorer, index.clone(), Mode::AndOr, a.max_k)?;
    if gpu_required && !engine.has_gpu() {
        bail!(
            "--backend gpu: no GPU serves these options ({})",
            engine.choice().unwrap_or("?")
        );
    }
    let backend = engine.describe();
    let searcher = Searcher::new(engine, Duration::from_secs_f64(a.deadline_ms / 1e3));
    let server = Arc::new(Server {
        metrics: Metrics::new(searcher.has_gpu()),
        searcher,
        limits: Limits {
            max_k: a.max_k,
            max_queries: a.max_queries,
            ranking: scorer.ranking.clone(),
        },
        slots: Arc::new(Semaphore::new(a.max_in_flight)),
        max_in_flight: a.max_in_flight,
        pace: Pace::new(
            // The deadline by default: half of it keeps p99 within the deadline at 2x overload, but
            // refuses two clients' 128-query batches at capacity (bench/RESULTS.md, issue 15).
            Duration::from_secs_f64(a.shed_ms.unwrap_or(a.deadline_ms) / 1e3),
        ),
    });
    let app = Router::new()
        .route("/search", get(get_search).post(post_search))
        .route("/health", get(health))
        .route("/metrics", get(metrics))
        .fallback(|State(s): State<Arc<Server>>| async move {
            s.metrics.refused(false);
            ApiError {
                status: StatusCode::NOT_FOUND,
                message: "no such endpoint: see docs/openapi.yaml".into(),
                field: None,
            }
        })
        // A JSON error as every other refusal (axum adds the `Allow` header).
        .method_not_allowed_fallback(
            |State(s): State<Arc<Server>>, method: Method, uri: Uri| async move {
                s.metrics.refused(false);
                ApiError {
                    status: StatusCode::METHOD_NOT_ALLOWED,
                    message: format!("{method} is not served at {}: see docs/openapi.yaml", uri.path()),
                    field: None,
                }
            },
        )
        .layer(DefaultBodyLimit::max(a.max_body))
        .with_state(server);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(&a.addr)
            .await
            .with_context(|| format!("listening on {}", a.addr))?;
        let addr = listener.local_addr()?;
        info!(%addr, backend, documents = index.num_docs(), "warpsearch serve: ready");
        // The one line a script (or a test) reads to find a port chosen by the system.
        println!("listening on http://{addr}");
        std::io::stdout().flush()?;
        axum::serve(listener, app)
            .with_graceful_shutdown(shutdown_signal())
            .await
            .context("serving")?;
        info!("warpsearch serve: stopped, every accepted request answered");
        Ok(())
    })
}

/// Logs on standard error: RUST_LOG's filter, else `info` (start-up, shutdown, errors; `debug` adds a
/// line per request).
fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .try_init();
}

/// Resolves on SIGTERM or Ctrl-C (SIGINT).
async fn shutdown_signal() {
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {},
        _ = term => {},
    }
    info!("warpsearch serve: shutting down; answering the requests in flight");
}

impl Server {
    /// Queries accepted and not yet answered (permits taken).
    fn in_flight(&self) -> usize {
        self.max_in_flight - self.slots.available_permits().min(self.max_in_flight)
    }

    /// Answers every query of `search`, in order, or refuses the whole request.
    async fn answer(&self, search: Search) -> Result<Vec<(String, Vec<Scored>)>, ApiError> {
        let scorer = self.searcher.scorer().clone();
        scorer
            .check(&Request::new(Query::default(), search.mode, search.k))
            .map_err(|e| ApiError::field("mode", e.to_string()))?;
        let in_flight = self.in_flight();
        if !self.pace.admits(in_flight, search.queries.len()) {
            return Err(ApiError::late(in_flight, self.pace.window()));
        }
        // The permits are held until every answer is in (or until the client goes away: its queries
        // then still finish in the engine, uncounted, a slack bounded by the requests dropped).
        let n = u32::try_from(search.queries.len()).unwrap_or(u32::MAX);
        let permits = self
            .slots
            .clone()
            .try_acquire_many_owned(n)
            .map_err(|_| ApiError::overloaded(self.max_in_flight))?;
        self.pace.started(in_flight, Instant::now());
        let (ids, requests): (Vec<String>, Vec<Request>) = search
            .queries
            .into_iter()
            .map(|(id, text)| (id, Request::new(scorer.parse(&text), search.mode, search.k)))
            .unzip();
        let answers = self.searcher.start(requests).finish().await;
        let mut out = Vec::with_capacity(answers.len());
        let mut tally = Tally::default();
        let mut failure = None;
        for (id, answered) in ids.into_iter().zip(answers) {
            match answered.result {
                Ok(answer) => {
                    tally.answered(answered.latency, answered.served_by, answered.missed_deadline);
                    out.push((id, answer.hits));
                }
                Err(e) => {
                    self.metrics.failed();
                    error!(query = %id, error = %e, "a query failed");
                    failure = Some(ApiError::internal(format!("query {id}: {e}")));
                }
            }
        }
        self.metrics.add(&tally);
        drop(permits);
        let capacity = self.searcher.capacity();
        self.pace
            .answered(out.len(), self.in_flight(), Instant::now(), capacity);
        failure.map_or(Ok(out), Err)
    }

    fn hits<'a>(&'a self, hits: &'a [Scored]) -> JsonHits<'a> {
        JsonHits {
            index: self.searcher.scorer().index(),
            hits,
        }
    }

    /// The response to a refused request, counted.
    fn refuse(&self, e: ApiError) -> Response {
        if e.status.is_client_error() {
            self.metrics.refused(e.status == StatusCode::TOO_MANY_REQUESTS);
        }
        debug!(status = %e.status, error = %e.message, "request refused");
        e.into_response()
    }
}

/// About how many bytes the JSON of `results` takes (ids of passages and web pages are short).
fn response_size(results: &[(String, Vec<Scored>)]) -> usize {
    let hits: usize = results.iter().map(|(_, h)| h.len()).sum();
    64 + 32 * results.len() + 64 * hits
}

/// `value` as a JSON response, written into one buffer of about `size` bytes (axum's `Json` grows its
/// buffer from 128 bytes, copying a 1,000-query response a dozen times over).
fn json_response(value: &impl Serialize, size: usize) -> Response {
    let mut body = Vec::with_capacity(size);
    match serde_json::to_writer(&mut body, value) {
        Ok(()) => ([(header::CONTENT_TYPE, "application/json")], body).into_response(),
        Err(e) => ApiError::internal(format!("writing the response: {e}")).into_response(),
    }
}

fn took_ms(started: Instant) -> f64 {
    millis(started.elapsed())
}

/// `d` in milliseconds to the microsecond, so that the JSON shows `0.572`, not `0.5716570000000001`.
fn millis(d: Duration) -> f64 {
    d.as_micros() as f64 / 1e3
}

async fn post_search(State(s): State<Arc<Server>>, body: Result<Bytes, BytesRejection>) -> Response {
    let started = Instant::now();
    let search = body
        .map_err(|e| ApiError {
            status: e.status(),
            message: e.body_text(),
            field: Some("body".into()),
        })
        .and_then(|b| request::parse_post(&b, &s.limits));
    match async { s.answer(search?).await }.await {
        Ok(results) => {
            let size = response_size(&results);
            let results: Vec<QueryResult> = results
                .iter()
                .map(|(id, hits)| QueryResult {
                    id,
                    hits: s.hits(hits),
                })
                .collect();
            debug!(queries = results.len(), "POST /search");
            let took_ms = took_ms(started);
            json_response(&PostResponse { results, took_ms }, size)
        }
        Err(e) => s.refuse(e),
    }
}

async fn get_search(
    State(s): State<Arc<Server>>,
    params: Result<UrlQuery<HashMap<String, String>>, QueryRejection>,
) -> Response {
    let started = Instant::now();
    let search = params
        .map_err(|e| ApiError::field("query string", e.body_text()))
        .and_then(|UrlQuery(p)| request::parse_get(&p, &s.limits));
    match async { s.answer(search?).await }.await {
        Ok(results) => {
            let size = response_size(&results);
            let hits = s.hits(results.first().map_or(&[], |(_, h)| h));
            let took_ms = took_ms(started);
            json_response(&GetResponse { hits, took_ms }, size)
        }
        Err(e) => s.refuse(e),
    }
}

async fn health(State(s): State<Arc<Server>>) -> Response {
    Json(json!({
        "status": "ready",
        "backend": s.searcher.describe(),
        "documents": s.searcher.scorer().index().num_docs(),
        "ranking": s.limits.ranking,
        "max_k": s.limits.max_k,
    }))
    .into_response()
}

async fn metrics(State(s): State<Arc<Server>>) -> Response {
    let in_flight = s.in_flight();
    let hybrid = s.searcher.take_hybrid_stats();
    let text = s
        .metrics
        .render(in_flight, s.max_in_flight, hybrid, s.searcher.gpu_memory());
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], text).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn took_ms_is_written_to_the_microsecond() {
        for (nanos, json) in [
            (571_657, "0.571"),
            (1_999, "0.001"),
            (999, "0.0"),
            (12_345_678_901, "12345.678"),
        ] {
            let ms = millis(Duration::from_nanos(nanos));
            assert_eq!(serde_json::to_string(&ms).unwrap(), json, "{nanos} ns");
        }
    }
}
