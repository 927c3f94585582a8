//! The engine over HTTP (axum on tokio), for `warpsearch serve`. `POST /search` and `GET /search` answer
//! queries through the engine's front door ([`searcher`]), `GET /health` says it is ready, `GET /metrics`
//! exposes the counters ([`metrics()`]); `docs/openapi.yaml` describes every endpoint. Requests are
//! checked field by field ([`request`]); beyond the queries in flight the configuration allows, or when
//! those in flight would take longer than its shedding window to answer ([`pace`]), a request is refused
//! with 429 and `Retry-After: 1`. [`serve`] stops accepting connections when told to and answers what is
//! in flight. [`JsonHits`] is the JSON a ranked list is written as (the CLI's `--format json` too).

#![warn(missing_docs)]

mod gather;
mod hits;
mod metrics;
mod pace;
mod request;
mod searcher;

pub use hits::JsonHits;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

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
use warpsearch_engine::Engine;
use warpsearch_query::{Query, Request, Scored, MAX_K};

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

/// How a server answers: its limits, the deadline its queries are given, and when it sheds by time.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Queries accepted and not yet answered beyond which a request is refused with 429.
    pub max_in_flight: usize,
    /// Most queries in one `POST /search`.
    pub max_queries: usize,
    /// Largest k a request may ask for.
    pub max_k: usize,
    /// Largest request body, in bytes.
    pub max_body: usize,
    /// Each query's deadline from its arrival.
    pub deadline: Duration,
    /// A request is refused (429) when the queries in flight would take longer than this to answer
    /// (zero: never).
    pub shed: Duration,
}

impl ServerConfig {
    /// Why these limits cannot serve, if they cannot (named as `warpsearch serve`'s options).
    pub fn check(&self) -> Result<(), String> {
        if !(1..=MAX_K).contains(&self.max_k) {
            return Err(format!(
                "--max-k {} is out of range: use 1 to {MAX_K}",
                self.max_k
            ));
        }
        if self.max_in_flight > Semaphore::MAX_PERMITS || self.max_queries == 0 {
            return Err(format!(
                "--max-in-flight must be at most {} and --max-queries at least 1",
                Semaphore::MAX_PERMITS
            ));
        }
        if self.deadline.is_zero() {
            return Err("--deadline-ms must be a positive number of milliseconds".into());
        }
        Ok(())
    }
}

/// The HTTP application over `engine` (its routes, each request checked against `config`); the
/// engine's ranking is the one requests may name.
pub fn router(engine: Engine, ranking: &str, config: &ServerConfig) -> Router {
    let searcher = Searcher::new(engine, config.deadline);
    let server = Arc::new(Server {
        metrics: Metrics::new(searcher.has_gpu()),
        searcher,
        limits: Limits {
            max_k: config.max_k,
            max_queries: config.max_queries,
            ranking: ranking.to_string(),
        },
        slots: Arc::new(Semaphore::new(config.max_in_flight)),
        max_in_flight: config.max_in_flight,
        pace: Pace::new(config.shed),
    });
    Router::new()
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
        .layer(DefaultBodyLimit::max(config.max_body))
        .with_state(server)
}

/// Serves `app` on `listener` until `shutdown` resolves, then answers what was accepted and returns.
pub async fn serve(
    listener: tokio::net::TcpListener,
    app: Router,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown)
        .await?;
    info!("warpsearch serve: stopped, every accepted request answered");
    Ok(())
}

/// Resolves on SIGTERM or Ctrl-C (SIGINT).
pub async fn shutdown_signal() {
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
