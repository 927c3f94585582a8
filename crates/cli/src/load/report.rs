//! What a run of requests came to: queries sent, answered, refused with 429 and failed (by kind), the
//! throughput of answered queries, the latency of answered requests (each of a request's queries waits
//! as long), deadline misses, the server's own `took_ms`, the generator's send lag; a per-second
//! timeline; the table rows and JSON of `warpsearch load`, in `bench`'s style.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{json, Value};

use super::client::{Outcome, Status};
use crate::shared::stats::Latency;

/// The counts and latencies of one run (the closed loop, or one open-loop rate).
pub struct Summary {
    pub requests: usize,
    /// Queries sent, answered, and refused with 429.
    pub queries: usize,
    pub answered: usize,
    pub refused: usize,
    /// Requests refused with 429 (the server counts requests).
    pub refused_requests: usize,
    /// Failed queries by kind, with the first failure's detail.
    pub errors: BTreeMap<String, (usize, String)>,
    /// Answered requests, from their due time to the whole reply.
    pub latency: Latency,
    /// The server's `took_ms` of answered requests.
    pub server: Latency,
    /// Open loop: how late requests left (p99 and max, ms).
    pub lag_p99: f64,
    pub lag_max: f64,
    /// Open loop: requests that waited for a free connection.
    pub waited: usize,
    /// Answered queries later than the deadline.
    pub missed: usize,
    /// From the first request's due time to the last reply.
    pub span: Duration,
}

impl Summary {
    pub fn of<'a>(outcomes: impl IntoIterator<Item = &'a Outcome>, deadline: Duration) -> Summary {
        let mut s = Summary {
            requests: 0,
            queries: 0,
            answered: 0,
            refused: 0,
            refused_requests: 0,
            errors: BTreeMap::new(),
            latency: Latency::of(Vec::new()),
            server: Latency::of(Vec::new()),
            lag_p99: 0.0,
            lag_max: 0.0,
            waited: 0,
            missed: 0,
            span: Duration::ZERO,
        };
        let (mut latencies, mut server, mut lags) = (Vec::new(), Vec::new(), Vec::new());
        let (mut first, mut last) = (Duration::MAX, Duration::ZERO);
        for o in outcomes {
            s.requests += 1;
            s.queries += o.queries;
            first = first.min(o.due);
            last = last.max(o.due + o.latency);
            lags.push(o.lag);
            s.waited += usize::from(o.waited);
            match &o.status {
                Status::Answered => {
                    s.answered += o.queries;
                    latencies.push(o.latency);
                    server.push(Duration::from_secs_f64(o.server_ms.max(0.0) / 1e3));
                    if o.latency > deadline {
                        s.missed += o.queries;
                    }
                }
                Status::Refused => {
                    s.refused += o.queries;
                    s.refused_requests += 1;
                }
                Status::Failed { kind, detail } => {
                    s.errors.entry(kind.clone()).or_insert((0, detail.clone())).0 += o.queries;
                }
            }
        }
        s.span = last.saturating_sub(first.min(last));
        s.latency = Latency::of(latencies);
        s.server = Latency::of(server);
        let lag = Latency::of(lags);
        (s.lag_p99, s.lag_max) = (lag.p99, lag.max);
        s
    }

    /// Whether the p99 latency of answered requests is within `deadline` (true without any).
    fn p99_within(&self, deadline: Duration) -> bool {
        self.answered == 0 || self.latency.p99 <= deadline.as_secs_f64() * 1e3
    }

    /// Failed queries, all kinds.
    pub fn failed(&self) -> usize {
        self.errors.values().map(|e| e.0).sum()
    }

    /// Answered queries per second.
    pub fn qps(&self) -> f64 {
        self.answered as f64 / self.span.as_secs_f64().max(1e-9)
    }

    /// One line of failures by kind, with the first one's words: "HTTP 500 ×3 (…); timeout ×1 (…)".
    pub fn errors_line(&self) -> String {
        let kinds: Vec<String> = self
            .errors
            .iter()
            .map(|(kind, (n, detail))| format!("{kind} ×{n} (first: {})", detail.trim()))
            .collect();
        kinds.join("; ")
    }

    pub fn json(&self, deadline_ms: f64) -> Value {
        let errors: serde_json::Map<String, Value> = self
            .errors
            .iter()
            .map(|(k, (n, _))| (k.clone(), json!(n)))
            .collect();
        // No latency (null) without an answered request.
        let answered = self.answered > 0;
        json!({
            "queries": self.queries, "requests": self.requests, "answered": self.answered,
            "refused": self.refused, "refused_requests": self.refused_requests,
            "refused_share": self.refused as f64 / self.queries.max(1) as f64,
            "errors": errors, "qps": self.qps(), "seconds": self.span.as_secs_f64(),
            "latency_ms": answered.then(|| self.latency.json()),
            "server_took_ms": answered.then(|| self.server.json()),
            "deadline_ms": deadline_ms, "missed": self.missed,
            "send_lag_ms": {"p99": self.lag_p99, "max": self.lag_max},
            "waited_for_connection": self.waited,
        })
    }
}

/// The table's header: `bench`'s columns, then 429s and errors.
pub fn header() -> String {
    format!(
        "{:<14} {:>12} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>8} {:>16} {:>8}",
        "load",
        "queries/s",
        "mean_ms",
        "p50_ms",
        "p95_ms",
        "p99_ms",
        "p99.9_ms",
        "max_ms",
        "missed",
        "429",
        "errors"
    )
}

/// One row: answered queries/s, latency of answered requests, misses, 429s (share of queries), failures.
pub fn row(load: &str, s: &Summary) -> String {
    let l = &s.latency;
    let refused = format!(
        "{} ({:.1}%)",
        s.refused,
        100.0 * s.refused as f64 / s.queries.max(1) as f64
    );
    // No latency without an answered request.
    let ms: Vec<String> = [l.mean, l.p50, l.p95, l.p99, l.p999, l.max]
        .iter()
        .map(|v| {
            if s.answered > 0 {
                format!("{v:.3}")
            } else {
                "-".into()
            }
        })
        .collect();
    format!(
        "{load:<14} {:>12.0} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>8} {refused:>16} {:>8}",
        s.qps(),
        ms[0],
        ms[1],
        ms[2],
        ms[3],
        ms[4],
        ms[5],
        s.missed,
        s.failed()
    )
}

/// Per second of arrival (from the load test's start): queries sent, answered, refused and failed, and
/// the p50 and p99 latency of those answered, so that a change of rate shows how fast the server follows.
pub fn timeline(outcomes: &[&Outcome]) -> Vec<Value> {
    let mut seconds: BTreeMap<u64, Vec<&Outcome>> = BTreeMap::new();
    for &o in outcomes {
        seconds.entry(o.due.as_secs()).or_default().push(o);
    }
    seconds
        .into_iter()
        .map(|(t, os)| {
            let s = Summary::of(os, Duration::MAX);
            json!({"t": t, "queries": s.queries, "answered": s.answered, "refused": s.refused,
                   "errors": s.failed(), "p50_ms": s.latency.p50, "p99_ms": s.latency.p99})
        })
        .collect()
}

/// How many whole seconds after the first of `outcomes` (one run) every later second had no 429, no
/// failure and its answered requests' p99 within `deadline`: how long the server took to settle at this
/// rate (0: at once), e.g. after an overload stopped. None if the run's last second was still not so.
pub fn settled_after(outcomes: &[&Outcome], deadline: Duration) -> Option<u64> {
    let start = outcomes.iter().map(|o| o.due).min()?;
    let mut seconds: BTreeMap<u64, Vec<&Outcome>> = BTreeMap::new();
    for &o in outcomes {
        seconds.entry((o.due - start).as_secs()).or_default().push(o);
    }
    let mut settled = None;
    for (t, os) in seconds.into_iter().rev() {
        let s = Summary::of(os, deadline);
        if s.refused > 0 || s.failed() > 0 || !s.p99_within(deadline) {
            break;
        }
        settled = Some(t);
    }
    settled
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(due_ms: u64, latency_ms: u64, queries: usize, status: Status) -> Outcome {
        Outcome {
            due: Duration::from_millis(due_ms),
            latency: Duration::from_millis(latency_ms),
            lag: Duration::ZERO,
            waited: false,
            queries,
            status,
            server_ms: latency_ms as f64 / 2.0,
        }
    }

    #[test]
    fn counts_by_status_and_latency_of_answered_only() {
        let fail = |kind: &str| Status::Failed {
            kind: kind.into(),
            detail: "why".into(),
        };
        let outcomes = [
            outcome(0, 10, 2, Status::Answered),
            outcome(500, 300, 2, Status::Answered),
            outcome(900, 1, 2, Status::Refused),
            outcome(1200, 5000, 1, fail("timeout")),
            outcome(1300, 2, 2, fail("HTTP 500")),
            outcome(1400, 2, 2, fail("HTTP 500")),
        ];
        let s = Summary::of(&outcomes, Duration::from_millis(100));
        assert_eq!((s.requests, s.queries, s.answered), (6, 11, 4));
        assert_eq!(
            (s.refused, s.refused_requests, s.failed(), s.missed),
            (2, 1, 5, 2)
        );
        assert_eq!(s.errors["HTTP 500"].0, 4);
        assert_eq!((s.latency.p50, s.latency.max, s.server.max), (10.0, 300.0, 150.0));
        assert_eq!(s.span, Duration::from_millis(6200));
        assert!(s
            .errors_line()
            .starts_with("HTTP 500 ×4 (first: why); timeout ×1"));
        let t = timeline(&outcomes.iter().collect::<Vec<_>>());
        assert_eq!(t.len(), 2);
        assert_eq!((t[0]["t"].as_u64(), t[0]["queries"].as_u64()), (Some(0), Some(6)));
        assert_eq!(
            (t[1]["answered"].as_u64(), t[1]["errors"].as_u64()),
            (Some(0), Some(5))
        );
    }

    #[test]
    fn settled_after_the_last_second_with_429s_or_a_late_p99() {
        let deadline = Duration::from_millis(100);
        let run = |os: &[Outcome]| settled_after(&os.iter().collect::<Vec<_>>(), deadline);
        let calm = |due| outcome(due, 5, 1, Status::Answered);
        assert_eq!(run(&[calm(1000), calm(1500), calm(2100)]), Some(0));
        let late = outcome(1200, 500, 1, Status::Answered);
        let refused = outcome(2300, 1, 1, Status::Refused);
        assert_eq!(run(&[calm(1000), late.clone(), calm(2100), calm(3100)]), Some(1));
        assert_eq!(
            run(&[calm(1000), late, refused.clone(), calm(3100), calm(4000)]),
            Some(2)
        );
        assert_eq!(run(&[calm(1000), refused]), None);
        assert_eq!(run(&[]), None);
    }
}
