//! The load generator's HTTP side: one pooled HTTP/1.1 client (keep-alive connections, no Nagle delay)
//! that sends `POST /search` requests of consecutive queries of the log and sorts each reply into
//! answered (200 with one result per query, ids in order), refused (429) or failed (of a named kind). It
//! knows nothing of schedules (`super::drive`) or reports (`super::report`).

use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::header::CONTENT_TYPE;
use hyper::{Method, Request, StatusCode, Uri};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// What became of one request.
#[derive(Debug, Clone, PartialEq)]
pub enum Status {
    /// 200, with one result per query in order.
    Answered,
    /// 429: the server shed it.
    Refused,
    /// Anything else: `kind` names it ("HTTP 500", "connection", "timeout", "bad response").
    Failed { kind: String, detail: String },
}

/// One request's fate.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// When it was due, from the load test's start: when it was sent in closed loop, its arrival time in
    /// open loop.
    pub due: Duration,
    /// From `due` to the whole reply.
    pub latency: Duration,
    /// How long after `due` it was sent (waiting for a free connection, or the generator's own delay).
    pub lag: Duration,
    /// Open loop: it found every connection busy and waited for one.
    pub waited: bool,
    /// Queries it carried.
    pub queries: usize,
    pub status: Status,
    /// The server's `took_ms` (answered requests only, else 0).
    pub server_ms: f64,
}

/// The server, the query log and what every request asks for.
pub struct Target {
    http: Client<HttpConnector, Full<Bytes>>,
    base: String,
    texts: Vec<String>,
    k: usize,
    mode: &'static str,
    timeout: Duration,
}

#[derive(Serialize)]
struct Body<'a> {
    queries: Vec<BodyQuery<'a>>,
    k: usize,
    mode: &'a str,
}

#[derive(Serialize)]
struct BodyQuery<'a> {
    id: u64,
    text: &'a str,
}

/// Only what the generator checks of a reply; the hits are skipped unread.
#[derive(Deserialize)]
struct Reply {
    results: Vec<ReplyResult>,
    took_ms: f64,
}

#[derive(Deserialize)]
struct ReplyResult {
    id: String,
}

impl Target {
    /// `url` is `http://HOST:PORT` (a trailing slash is allowed); `texts` the query log, cycled.
    pub fn new(
        url: &str,
        texts: Vec<String>,
        k: usize,
        mode: &'static str,
        timeout: Duration,
    ) -> Result<Target> {
        let base = url.trim_end_matches('/').to_owned();
        if !base.starts_with("http://") {
            bail!("--url {url}: give http://HOST:PORT (the server speaks plain HTTP)");
        }
        base.parse::<Uri>()
            .with_context(|| format!("--url {url} is not a URL"))?;
        let mut connector = HttpConnector::new();
        // A request is one small write: Nagle's algorithm would hold it back waiting for an ACK.
        connector.set_nodelay(true);
        let http = Client::builder(TokioExecutor::new()).build(connector);
        Ok(Target {
            http,
            base,
            texts,
            k,
            mode,
            timeout,
        })
    }

    /// `GET /health`: the server's description (backend, documents, ranking), or why none answers.
    pub async fn health(&self) -> Result<Value> {
        let request = Request::get(format!("{}/health", self.base)).body(Full::default())?;
        let reply = tokio::time::timeout(self.timeout, self.exchange(request));
        let (status, body) = reply
            .await
            .map_err(|_| anyhow::anyhow!("no answer in {:?}", self.timeout))
            .and_then(|r| r)
            .with_context(|| format!("no warpsearch server answers at {}", self.base))?;
        if status != StatusCode::OK {
            bail!(
                "{}/health answered {status}: is it a warpsearch server?",
                self.base
            );
        }
        serde_json::from_slice(&body).with_context(|| format!("{}/health did not answer JSON", self.base))
    }

    /// Sends queries `first..first + count` of the log (cycled; each one's id is its number) and waits
    /// for the reply or the timeout. `due` is when the request was due, `origin` the load test's start.
    pub async fn send(&self, first: u64, count: usize, due: Instant, origin: Instant) -> Outcome {
        let n = self.texts.len() as u64;
        let body = Body {
            queries: (first..first + count as u64)
                .map(|id| BodyQuery {
                    id,
                    text: &self.texts[(id % n) as usize],
                })
                .collect(),
            k: self.k,
            mode: self.mode,
        };
        let body = serde_json::to_vec(&body).expect("a body of strings and numbers serializes");
        let sent = Instant::now();
        let request = Request::builder()
            .method(Method::POST)
            .uri(format!("{}/search", self.base))
            .header(CONTENT_TYPE, "application/json")
            .body(Full::new(Bytes::from(body)))
            .expect("the URL was checked in Target::new");
        let reply = tokio::time::timeout(self.timeout, self.exchange(request)).await;
        let done = Instant::now();
        let (status, server_ms) = match reply {
            Err(_) => failed("timeout", format!("no answer in {:?}", self.timeout)),
            Ok(Err(e)) => failed("connection", format!("{e:#}")),
            Ok(Ok((code, bytes))) => classify(code, &bytes, first, count),
        };
        Outcome {
            due: due.saturating_duration_since(origin),
            latency: done.saturating_duration_since(due),
            lag: sent.saturating_duration_since(due),
            waited: false,
            queries: count,
            status,
            server_ms,
        }
    }

    /// One request and its whole reply.
    async fn exchange(&self, request: Request<Full<Bytes>>) -> Result<(StatusCode, Bytes)> {
        let reply = self.http.request(request).await?;
        let status = reply.status();
        let body = reply.into_body().collect().await?.to_bytes();
        Ok((status, body))
    }
}

fn failed(kind: impl Into<String>, detail: impl Into<String>) -> (Status, f64) {
    let (kind, detail) = (kind.into(), detail.into());
    (Status::Failed { kind, detail }, 0.0)
}

/// A reply to queries `first..first + count`: answered only if it holds their results, in order.
fn classify(code: StatusCode, body: &[u8], first: u64, count: usize) -> (Status, f64) {
    match code {
        StatusCode::OK => match serde_json::from_slice::<Reply>(body) {
            Ok(r)
                if r.results.len() == count
                    && r.results
                        .iter()
                        .zip(first..)
                        .all(|(q, id)| q.id.parse() == Ok(id)) =>
            {
                (Status::Answered, r.took_ms)
            }
            Ok(r) => failed(
                "bad response",
                format!(
                    "{} results for {count} queries, or their ids out of order",
                    r.results.len()
                ),
            ),
            Err(e) => failed("bad response", format!("not the JSON of POST /search: {e}")),
        },
        StatusCode::TOO_MANY_REQUESTS => (Status::Refused, 0.0),
        other => {
            let text = String::from_utf8_lossy(&body[..body.len().min(300)]);
            failed(format!("HTTP {}", other.as_u16()), text.into_owned())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_are_answered_only_with_every_id_in_order() {
        let ok = br#"{"results": [{"id": "7", "hits": []}, {"id": "8", "hits": [{"docid": "d", "score": 1.5, "rank": 1}]}], "took_ms": 0.25}"#;
        assert_eq!(classify(StatusCode::OK, ok, 7, 2), (Status::Answered, 0.25));
        for (first, count) in [(7, 3), (8, 2), (7, 1)] {
            let (status, _) = classify(StatusCode::OK, ok, first, count);
            assert!(matches!(status, Status::Failed { ref kind, .. } if kind == "bad response"));
        }
        let (status, _) = classify(StatusCode::OK, b"{", 0, 1);
        assert!(matches!(status, Status::Failed { ref kind, .. } if kind == "bad response"));
        assert_eq!(
            classify(StatusCode::TOO_MANY_REQUESTS, b"{}", 0, 1).0,
            Status::Refused
        );
        let (status, _) = classify(StatusCode::BAD_REQUEST, br#"{"error": "k", "field": "k"}"#, 0, 1);
        assert!(
            matches!(status, Status::Failed { ref kind, ref detail } if kind == "HTTP 400" && detail.contains("field"))
        );
    }

    #[test]
    fn only_plain_http_urls() {
        let target = |url: &str| Target::new(url, vec!["a".into()], 10, "or", Duration::from_secs(1));
        assert_eq!(
            target("http://127.0.0.1:8080/").unwrap().base,
            "http://127.0.0.1:8080"
        );
        assert!(target("https://example.com").is_err());
        assert!(target("127.0.0.1:8080").is_err());
    }
}
