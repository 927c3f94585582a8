//! The engine over HTTP (axum on tokio), for `warpsearch serve`. `POST /search` and `GET /search` answer
//! queries through the engine's front door (`searcher.rs`) (with `docs`, each hit carries its stored
//! document), `GET /doc/{docid}` answers one stored document (an index built with `index --store`),
//! `GET /health` says it is ready, `GET /metrics` exposes the counters (`metrics.rs`);
//! `docs/openapi.yaml` describes every endpoint. Requests are
//! checked field by field (`request.rs`); beyond the queries in flight the configuration allows, or when
//! those in flight would take longer than its shedding window to answer (`pace.rs`), a request is refused
//! with 429 and `Retry-After: 1`. A request's queries count against `--max-in-flight` until its
//! response is written (`respond.rs`), and a request whose client went away has its queries not yet
//! started dropped (`conn.rs`, `searcher.rs`). [`serve`] runs the connections (`listen.rs`): capped,
//! timed, and closed within a grace period when told to stop. [`JsonHits`] is the JSON a ranked list
//! is written as (the CLI's `--format json` too).

#![warn(missing_docs)]

mod conn;
mod gather;
mod hits;
mod listen;
mod metrics;
mod pace;
mod request;
mod respond;
mod searcher;

pub use hits::{JsonHits, JsonHitsWithDocs};
pub use listen::serve;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{DefaultBodyLimit, FromRequest, Path, Query as UrlQuery, State};
use axum::http::{header, Method, StatusCode, Uri, Version};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Extension, Json, Router};
use serde::Serialize;
use serde_json::json;
use tokio::sync::Semaphore;
use tracing::{debug, error, info};
use warpsearch_engine::Engine;
use warpsearch_index::Index;
use warpsearch_query::{Query, Request, Scored, MAX_K};

use conn::Watch;
use metrics::{Load, Metrics, Tally};
use pace::Pace;

/// Locks `m`: the server's threads never panic while holding one of its locks.
fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().expect("no thread panics under this lock")
}
use request::{ApiError, Limits, Search};
use searcher::{Held, Searcher};

/// What every handler shares.
struct Server {
    searcher: Searcher,
    limits: Limits,
    metrics: Metrics,
    /// The places queries in flight may hold (a query holds [`query_weight`]): held from its
    /// request's admission until the engine is done with it and its response is written (or its
    /// client gone).
    slots: Arc<Semaphore>,
    max_in_flight: usize,
    /// Refuses requests that would wait past the deadline behind the queries in flight ([`pace`]).
    pace: Pace,
    max_body: usize,
    read_timeout: Duration,
}

/// A ranked list, with each hit's stored document where the request asked for them (`docs`).
#[derive(Serialize)]
#[serde(untagged)]
enum Hits<'a> {
    Plain(JsonHits<'a>),
    WithDocs(JsonHitsWithDocs<'a>),
}

#[derive(Serialize)]
struct QueryResult<'a> {
    id: &'a str,
    hits: Hits<'a>,
}

/// Typed responses (never through `serde_json::Value`, which would widen the scores to `f64`).
#[derive(Serialize)]
struct PostResponse<'a> {
    results: Vec<QueryResult<'a>>,
    took_ms: f64,
}

#[derive(Serialize)]
struct GetResponse<'a> {
    hits: Hits<'a>,
    took_ms: f64,
}

/// `GET /doc/{docid}`: the stored input line as the string it is (as `warpsearch doc`, `search --docs`
/// and Python's `Index.doc` give it).
#[derive(Serialize)]
struct DocResponse {
    docid: String,
    doc: String,
}

/// How a server answers: its limits, the deadline its queries are given, and when it sheds by time.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Places held by queries accepted and not yet answered (or their response not yet written)
    /// beyond which a request is refused with 429: one a query, and one more for each collection's
    /// worth of postings its terms have.
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
    /// Most connections open at once; one more is answered 503 and closed.
    pub max_connections: usize,
    /// A connection waiting longer than this for a request's header in full (idle between requests,
    /// or sending it slowly) is closed.
    pub idle_timeout: Duration,
    /// A request body not in full within this of its header is refused (408), its connection closed.
    pub read_timeout: Duration,
    /// A response not written within this of its first bytes, or a write the client leaves waiting
    /// this long, closes the connection.
    pub write_timeout: Duration,
    /// On shutdown, connections still open this long after are closed.
    pub shutdown_grace: Duration,
}

impl Default for ServerConfig {
    /// `warpsearch serve`'s defaults.
    fn default() -> ServerConfig {
        ServerConfig {
            max_in_flight: 4096,
            max_queries: 1024,
            max_k: 1000,
            max_body: 1 << 20,
            deadline: Duration::from_millis(100),
            shed: Duration::from_millis(100),
            max_connections: 1024,
            idle_timeout: Duration::from_secs(30),
            read_timeout: Duration::from_secs(30),
            write_timeout: Duration::from_secs(30),
            shutdown_grace: Duration::from_secs(10),
        }
    }
}

impl ServerConfig {
    /// Why these limits cannot serve, if they cannot (named as `warpsearch serve`'s options).
    pub fn check(&self) -> Result<(), String> {
        if self.max_connections == 0 || self.max_connections > Semaphore::MAX_PERMITS {
            return Err(format!(
                "--max-connections must be 1 to {}",
                Semaphore::MAX_PERMITS
            ));
        }
        for (name, t) in [
            ("--idle-timeout", self.idle_timeout),
            ("--read-timeout", self.read_timeout),
            ("--write-timeout", self.write_timeout),
        ] {
            if t.is_zero() {
                return Err(format!("{name} must be a positive time"));
            }
        }
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
        max_body: config.max_body,
        read_timeout: config.read_timeout,
    });
    Router::new()
        .route("/search", get(get_search).post(post_search))
        .route("/doc/{docid}", get(get_doc))
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
    /// Places held among those allowed in flight, by queries in the engine or answered and waiting
    /// for their response to be written ([`query_weight`]: one a query, more for a heavy one).
    fn held(&self) -> usize {
        self.max_in_flight - self.slots.available_permits().min(self.max_in_flight)
    }

    /// Queries the engine has and has not finished (a request whose client is gone included).
    fn running(&self) -> usize {
        self.searcher
            .account()
            .running
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Answers every query of `search`, in order, or refuses the whole request; `field(i)` names query
    /// `i`'s text in a refusal. With `watch` (a connection), a client gone before the answers come
    /// abandons them (`may_probe`: the request is HTTP/1.1).
    async fn answer(
        &self,
        search: Search,
        field: impl Fn(usize) -> String,
        watch: Option<&Watch>,
        may_probe: bool,
    ) -> Result<(Vec<(String, Vec<Scored>)>, Held), ApiError> {
        let scorer = self.searcher.scorer().clone();
        if search.docs && scorer.index().store().is_none() {
            return Err(ApiError::field("docs", NO_STORE_SEARCH));
        }
        scorer
            .check(&Request::new(Query::default(), search.mode, search.k))
            .map_err(|e| ApiError::field("mode", e.to_string()))?;
        let running = self.running();
        if !self.pace.admits(running, search.queries.len()) {
            return Err(ApiError::late(running, self.pace.window()));
        }
        let n = search.queries.len();
        let mut ids = Vec::with_capacity(n);
        let mut requests = Vec::with_capacity(n);
        let mut weight = 0usize;
        for (i, (id, text)) in search.queries.into_iter().enumerate() {
            let request = Request::new(scorer.parse(&text), search.mode, search.k);
            scorer
                .check(&request)
                .map_err(|e| ApiError::field(field(i), format!("query {id}: {e}")))?;
            weight = weight.saturating_add(query_weight(scorer.index(), &request.query));
            ids.push(id);
            requests.push(request);
        }
        // The places are held until the engine is done with every query and the response is
        // written, or until the client is gone and the engine has dropped or finished its queries.
        // A request's weight is capped at the limit (at least one place a query), so that one that
        // an idle server admits by its count of queries is still admitted there.
        let places = weight.min(self.max_in_flight).max(n);
        let places = self
            .slots
            .clone()
            .try_acquire_many_owned(u32::try_from(places).unwrap_or(u32::MAX))
            .map_err(|_| ApiError::overloaded(self.max_in_flight))?;
        self.pace.started(running, Instant::now());
        let pending = self.searcher.start(requests, places);
        let (answers, held) = match watch {
            Some(w) => tokio::select! {
                answers = pending.finish() => answers,
                _ = w.gone(may_probe) => return Err(ApiError::gone()),
            },
            None => pending.finish().await,
        };
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
        // A postings file truncated or rewritten under the open index while these were answered
        // gives an error, never a wrong hit (one look a request, off the per-query path).
        if let Err(e) = self.searcher.check_unchanged() {
            error!(error = %e, "the index changed on disk");
            failure = Some(ApiError::internal(format!("the index changed on disk: {e}")));
        }
        let capacity = self.searcher.capacity();
        self.pace
            .answered(out.len(), self.running(), Instant::now(), capacity);
        match failure {
            Some(e) => Err(e),
            None => Ok((out, held)),
        }
    }

    /// Query `i`'s hits as JSON, with their documents where `docs` holds them ([`Server::documents`]).
    fn hits<'a>(
        &'a self,
        results: &'a [(String, Vec<Scored>)],
        docs: &'a Option<Vec<String>>,
        i: usize,
    ) -> Hits<'a> {
        let index = self.searcher.scorer().index();
        let hits = results.get(i).map_or(&[][..], |(_, h)| h.as_slice());
        match docs {
            None => Hits::Plain(JsonHits { index, hits }),
            Some(docs) => {
                let start: usize = results[..i].iter().map(|(_, h)| h.len()).sum();
                Hits::WithDocs(JsonHitsWithDocs {
                    index,
                    hits,
                    docs: &docs[start..start + hits.len()],
                })
            }
        }
    }

    /// [`Server::answer`], then each hit's stored document where the request asks for them
    /// ([`Server::documents`]).
    async fn answer_with_docs(
        &self,
        search: Search,
        field: impl Fn(usize) -> String,
        watch: Option<&Watch>,
        may_probe: bool,
    ) -> Result<(Vec<(String, Vec<Scored>)>, Option<Vec<String>>, Held), ApiError> {
        let wanted = search.docs;
        let (results, held) = self.answer(search, field, watch, may_probe).await?;
        let docs = self.documents(&results, wanted).await?;
        Ok((results, docs, held))
    }

    /// The stored documents of every hit of `results`, in order (all queries' hits one after the
    /// other), where `wanted`; read on a blocking thread (a block decompressed per few documents), while
    /// the request still holds its places.
    async fn documents(
        &self,
        results: &[(String, Vec<Scored>)],
        wanted: bool,
    ) -> Result<Option<Vec<String>>, ApiError> {
        if !wanted {
            return Ok(None);
        }
        let index = self.searcher.scorer().index().clone();
        let numbers: Vec<u32> = results
            .iter()
            .flat_map(|(_, hits)| hits.iter().map(|h| h.doc))
            .collect();
        let read = tokio::task::spawn_blocking(move || match index.store() {
            Some(store) => store.get_many(&numbers).map_err(|e| e.to_string()),
            None => Err(NO_STORE_SEARCH.to_string()),
        });
        match read.await {
            Ok(Ok(docs)) => Ok(Some(docs)),
            Ok(Err(e)) => {
                error!(error = %e, "reading stored documents failed");
                Err(ApiError::internal(format!("reading the stored documents: {e}")))
            }
            Err(e) => Err(ApiError::internal(format!("reading the stored documents: {e}"))),
        }
    }

    /// `GET /doc/{docid}`'s answer and the place it holds among `--max-in-flight` until written.
    async fn document(
        &self,
        docid: Result<Path<String>, PathRejection>,
    ) -> Result<(DocResponse, tokio::sync::OwnedSemaphorePermit), ApiError> {
        let Path(docid) = docid.map_err(|e| ApiError::field("docid", e.body_text()))?;
        let index = self.searcher.scorer().index().clone();
        if index.store().is_none() {
            return Err(ApiError {
                status: StatusCode::CONFLICT,
                message: "this server's index stores no documents: rebuild it with \
                          `warpsearch index --store` to serve them"
                    .into(),
                field: None,
            });
        }
        let place = self
            .slots
            .clone()
            .try_acquire_owned()
            .map_err(|_| ApiError::overloaded(self.max_in_flight))?;
        let id = docid.clone();
        // The first lookup sorts the ids on all cores ([`Index::find_doc`]): off the async threads.
        let read = tokio::task::spawn_blocking(move || {
            index
                .find_doc(&id)
                .map(|n| {
                    index
                        .doc(n)
                        .map(|d| d.expect("checked: the index stores documents"))
                })
                .transpose()
        });
        match read.await {
            Ok(Ok(Some(doc))) => Ok((DocResponse { docid, doc }, place)),
            Ok(Ok(None)) => Err(ApiError {
                status: StatusCode::NOT_FOUND,
                message: format!("no document has the id '{docid}' in this server's index"),
                field: Some("docid".into()),
            }),
            Ok(Err(e)) => {
                error!(error = %e, docid = %docid, "reading a stored document failed");
                Err(ApiError::internal(format!("reading document '{docid}': {e}")))
            }
            Err(e) => Err(ApiError::internal(format!("reading document '{docid}': {e}"))),
        }
    }

    /// The response to a refused request, counted.
    fn refuse(&self, e: ApiError) -> Response {
        if e.status.is_client_error() && !e.is_gone() {
            self.metrics.refused(e.status == StatusCode::TOO_MANY_REQUESTS);
        }
        debug!(status = %e.status, error = %e.message, "request refused");
        e.into_response()
    }
}

/// The places among `--max-in-flight` that `query` holds: one, and one more for each `num_docs`
/// postings its terms' lists hold together, so that a query that scores the collection many times
/// over counts as the many short queries whose work it is (the work of every algorithm grows with
/// the postings it may read; the exhaustive one reads them all).
fn query_weight(index: &Index, query: &Query) -> usize {
    let records = index.term_records();
    let postings: u64 = query
        .terms
        .iter()
        .map(|&(id, _)| records.get(id as usize).map_or(0, |r| u64::from(r.df)))
        .sum();
    let per_place = u64::from(index.num_docs()).max(1);
    usize::try_from(1 + postings / per_place).unwrap_or(usize::MAX)
}

/// A search asking for documents of an index that stores none.
const NO_STORE_SEARCH: &str = "this server's index stores no documents, so \"docs\" cannot add them to \
     the hits: rebuild it with `warpsearch index --store`, or leave \"docs\" out";

fn took_ms(started: Instant) -> f64 {
    millis(started.elapsed())
}

/// `d` in milliseconds to the microsecond, so that the JSON shows `0.572`, not `0.5716570000000001`.
fn millis(d: Duration) -> f64 {
    d.as_micros() as f64 / 1e3
}

async fn post_search(
    State(s): State<Arc<Server>>,
    watch: Option<Extension<Arc<Watch>>>,
    request: axum::extract::Request,
) -> Response {
    let started = Instant::now();
    let watch = watch.map(|Extension(w)| w);
    let may_probe = request.version() >= Version::HTTP_11;
    let search = async {
        // Refused before a byte of the body is read (no `100 Continue`, no wait for the body).
        if let Some(length) = request::content_length(request.headers())? {
            if length > s.max_body as u64 {
                return Err(ApiError::too_large(length, s.max_body));
            }
        }
        let body = tokio::time::timeout(s.read_timeout, Bytes::from_request(request, &()))
            .await
            .map_err(|_| ApiError::slow_body(s.read_timeout))?
            .map_err(|e| ApiError {
                status: e.status(),
                message: e.body_text(),
                field: Some("body".into()),
            })?;
        request::parse_post(&body, &s.limits)
    };
    let answered = match search.await {
        Ok(search) => {
            let field = |i: usize| format!("queries[{i}].text");
            s.answer_with_docs(search, field, watch.as_deref(), may_probe)
                .await
        }
        Err(e) => Err(e),
    };
    match answered {
        Ok((results, docs, held)) => {
            let results: Vec<QueryResult> = results
                .iter()
                .enumerate()
                .map(|(i, (id, _))| QueryResult {
                    id,
                    hits: s.hits(&results, &docs, i),
                })
                .collect();
            debug!(queries = results.len(), "POST /search");
            let took_ms = took_ms(started);
            respond::json(&PostResponse { results, took_ms }, held, watch)
        }
        Err(e) => s.refuse(e),
    }
}

async fn get_search(
    State(s): State<Arc<Server>>,
    watch: Option<Extension<Arc<Watch>>>,
    version: Version,
    params: Result<UrlQuery<HashMap<String, String>>, QueryRejection>,
) -> Response {
    let started = Instant::now();
    let watch = watch.map(|Extension(w)| w);
    let search = params
        .map_err(|e| ApiError::field("query string", e.body_text()))
        .and_then(|UrlQuery(p)| request::parse_get(&p, &s.limits));
    let answered = match search {
        Ok(search) => {
            let may_probe = version >= Version::HTTP_11;
            s.answer_with_docs(search, |_| "q".into(), watch.as_deref(), may_probe)
                .await
        }
        Err(e) => Err(e),
    };
    match answered {
        Ok((results, docs, held)) => {
            let hits = s.hits(&results, &docs, 0);
            let took_ms = took_ms(started);
            respond::json(&GetResponse { hits, took_ms }, held, watch)
        }
        Err(e) => s.refuse(e),
    }
}

async fn get_doc(
    State(s): State<Arc<Server>>,
    watch: Option<Extension<Arc<Watch>>>,
    docid: Result<Path<String>, PathRejection>,
) -> Response {
    let watch = watch.map(|Extension(w)| w);
    match s.document(docid).await {
        Ok((answer, place)) => {
            debug!(docid = %answer.docid, "GET /doc");
            respond::json(&answer, place, watch)
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

async fn metrics(State(s): State<Arc<Server>>, watch: Option<Extension<Arc<Watch>>>) -> Response {
    let load = Load {
        running: s.running(),
        held: s.held(),
        max_in_flight: s.max_in_flight,
        cancelled: s
            .searcher
            .account()
            .cancelled
            .load(std::sync::atomic::Ordering::Relaxed),
        connections: watch.map(|Extension(w)| w.connections.clone()),
    };
    let hybrid = s.searcher.take_hybrid_stats();
    let text = s.metrics.render(&load, hybrid, s.searcher.gpu_memory());
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
