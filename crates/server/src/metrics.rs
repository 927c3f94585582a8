//! `serve`'s counters and their Prometheus text exposition (`GET /metrics`): queries, their latency
//! histogram by the backend that answered them, refusals, errors, queries in flight, the hybrid
//! scheduler's counts (GPU batches and tasks, steals, splits), accumulated since the server started,
//! and the GPU's memory.

use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use warpsearch_engine::{GpuMemory, HybridStats, ServedBy};

use crate::conn::Connections;

/// The server's load at a scrape.
pub struct Load {
    /// Queries the engine has not finished (a gone client's included).
    pub running: usize,
    /// Queries holding places among those allowed in flight (running, or answered and not written).
    pub held: usize,
    /// `--max-in-flight`.
    pub max_in_flight: usize,
    /// Queries the engine dropped unanswered, their client gone, since the start.
    pub cancelled: u64,
    /// The connections' counts (None: served without connections, as in process).
    pub connections: Option<Arc<Connections>>,
}

/// Upper bounds of the latency histogram's buckets, in seconds: a millisecond apart up to 10 ms, where
/// a GPU-served query's tail lies, so that a p99 read from them is within a millisecond.
const BUCKETS: [f64; 25] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.002, 0.003, 0.004, 0.005, 0.006, 0.007, 0.008, 0.009, 0.01, 0.0125,
    0.015, 0.02, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// The `backend` labels of the latency histogram: who answered (the hybrid's [`ServedBy`]; the CPU
/// engine's queries count as "cpu").
const BACKENDS: [&str; 3] = ["cpu", "gpu", "both"];

/// Who answered, as an index of [`BACKENDS`].
fn backend(served_by: Option<ServedBy>) -> usize {
    match served_by {
        None | Some(ServedBy::Cpu) => 0,
        Some(ServedBy::Gpu) => 1,
        Some(ServedBy::Both) => 2,
    }
}

/// Every counter of the server (relaxed atomics: they count, they order nothing).
#[derive(Default)]
pub struct Metrics {
    /// Whether a GPU answers: the histogram then has "gpu" and "both" series too.
    gpu: bool,
    queries: AtomicU64,
    query_errors: AtomicU64,
    deadline_misses: AtomicU64,
    /// Requests refused with 429 (too many queries in flight).
    rejected: AtomicU64,
    /// Requests refused with another 4xx (a bad field, a body too large, an unknown path or method).
    bad_requests: AtomicU64,
    /// Per backend and bucket (not cumulative), the last one past every bound; a backend's sum is the
    /// queries it answered.
    latency_buckets: [[AtomicU64; BUCKETS.len() + 1]; BACKENDS.len()],
    latency_sum_us: [AtomicU64; BACKENDS.len()],
    /// The hybrid scheduler's counts since start ([`warpsearch_engine::Engine::take_hybrid_stats`] resets them).
    hybrid: Mutex<HybridStats>,
}

fn bump(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}

/// A request's answered queries, counted on its handler's thread and added to [`Metrics`] at once: a
/// shared counter bumped per query is a cache line every core fights over, several times a query.
#[derive(Default)]
pub struct Tally {
    queries: u64,
    deadline_misses: u64,
    latency_buckets: [[u64; BUCKETS.len() + 1]; BACKENDS.len()],
    latency_sum_us: [u64; BACKENDS.len()],
}

impl Tally {
    /// One query answered in `latency` (by `served_by` under the hybrid).
    pub fn answered(&mut self, latency: Duration, served_by: Option<ServedBy>, missed_deadline: bool) {
        self.queries += 1;
        let s = latency.as_secs_f64();
        let bucket = BUCKETS.iter().position(|&b| s <= b).unwrap_or(BUCKETS.len());
        let by = backend(served_by);
        self.latency_buckets[by][bucket] += 1;
        self.latency_sum_us[by] += latency.as_micros() as u64;
        self.deadline_misses += u64::from(missed_deadline);
    }
}

/// Adds `n` to `c` (nothing when 0: no write to the shared line).
fn add(c: &AtomicU64, n: u64) {
    if n > 0 {
        c.fetch_add(n, Ordering::Relaxed);
    }
}

impl Metrics {
    /// Counters at zero; `gpu`: whether a GPU answers queries.
    pub fn new(gpu: bool) -> Metrics {
        Metrics {
            gpu,
            ..Metrics::default()
        }
    }

    /// A request's answered queries.
    pub fn add(&self, t: &Tally) {
        add(&self.queries, t.queries);
        add(&self.deadline_misses, t.deadline_misses);
        for (cs, ns) in self.latency_buckets.iter().zip(&t.latency_buckets) {
            for (c, &n) in cs.iter().zip(ns) {
                add(c, n);
            }
        }
        for (c, &n) in self.latency_sum_us.iter().zip(&t.latency_sum_us) {
            add(c, n);
        }
    }

    /// One query the engine failed.
    pub fn failed(&self) {
        bump(&self.query_errors);
    }

    /// One request refused: 429 when `overloaded`, else another 4xx.
    pub fn refused(&self, overloaded: bool) {
        bump(if overloaded {
            &self.rejected
        } else {
            &self.bad_requests
        });
    }

    /// The Prometheus text exposition: these counters, the `load`, `hybrid` (the scheduler's counts
    /// since the last scrape, added to the totals) and the GPU's memory.
    pub fn render(&self, load: &Load, hybrid: Option<HybridStats>, gpu_memory: Option<GpuMemory>) -> String {
        let mut out = String::new();
        let mut metric = |name: &str, kind: &str, help: &str, value: f64| {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}");
        };
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed) as f64;
        metric(
            "warpsearch_queries_total",
            "counter",
            "Queries answered.",
            get(&self.queries),
        );
        metric(
            "warpsearch_query_errors_total",
            "counter",
            "Queries the engine failed (answered 500).",
            get(&self.query_errors),
        );
        metric(
            "warpsearch_rejected_requests_total",
            "counter",
            "Requests refused with 429: too many queries in flight, or more than the engine answers \
             within --shed-ms.",
            get(&self.rejected),
        );
        metric(
            "warpsearch_bad_requests_total",
            "counter",
            "Requests refused with another 4xx (a bad field, a body too large, an unknown path or method).",
            get(&self.bad_requests),
        );
        metric(
            "warpsearch_queries_in_flight",
            "gauge",
            "Queries the engine has and has not finished (the server's queue depth; those of a client \
             that went away count until they end or are dropped).",
            load.running as f64,
        );
        metric(
            "warpsearch_queries_held",
            "gauge",
            "Places held against --max-in-flight by queries in the engine or answered with their response \
             not yet written (one a query, one more per collection's worth of postings its terms have).",
            load.held as f64,
        );
        metric(
            "warpsearch_max_in_flight",
            "gauge",
            "Places held beyond which requests are refused (--max-in-flight).",
            load.max_in_flight as f64,
        );
        metric(
            "warpsearch_queries_cancelled_total",
            "counter",
            "Queries the engine dropped unanswered because their client went away before they started.",
            load.cancelled as f64,
        );
        if let Some(c) = &load.connections {
            let get = |c: &AtomicU64| c.load(Ordering::Relaxed) as f64;
            metric(
                "warpsearch_connections_open",
                "gauge",
                "Client connections open.",
                get(&c.open),
            );
            metric(
                "warpsearch_max_connections",
                "gauge",
                "Connections open beyond which one more is refused (--max-connections).",
                c.max as f64,
            );
            metric(
                "warpsearch_connections_refused_total",
                "counter",
                "Connections refused (503) at --max-connections.",
                get(&c.refused),
            );
            metric(
                "warpsearch_connections_timed_out_total",
                "counter",
                "Connections closed because a response was not read within --write-timeout.",
                get(&c.timed_out),
            );
        }
        // The hybrid scheduler's (the CPU engine has no deadlines and one processor).
        if let Some(new) = hybrid {
            metric(
                "warpsearch_deadline_misses_total",
                "counter",
                "Queries the hybrid scheduler answered after their deadline (--deadline-ms).",
                get(&self.deadline_misses),
            );
            // Every answer the hybrid gives says who gave it: its backend's latency count.
            for (by, name) in BACKENDS.iter().enumerate() {
                metric(
                    &format!("warpsearch_hybrid_served_{name}_total"),
                    "counter",
                    &format!("Queries the hybrid scheduler answered on: {name}."),
                    self.latency_buckets[by].iter().map(get).sum(),
                );
            }
            let mut guard = self.hybrid.lock().expect("no thread panics under this lock");
            let h = &mut *guard;
            let sums: [(&str, &mut u64, u64, &str); 9] = [
                (
                    "splits",
                    &mut h.splits,
                    new.splits,
                    "Queries split into docID ranges.",
                ),
                (
                    "steals_by_cpu",
                    &mut h.steals_by_cpu,
                    new.steals_by_cpu,
                    "Queries the CPU took from the GPU's queue.",
                ),
                (
                    "steals_by_gpu",
                    &mut h.steals_by_gpu,
                    new.steals_by_gpu,
                    "Queries the GPU took from the CPU's queue.",
                ),
                (
                    "hedges",
                    &mut h.hedges,
                    new.hedges,
                    "Queries the CPU had not answered when the GPU would have, sent to the GPU as well.",
                ),
                (
                    "hedges_won",
                    &mut h.hedges_won,
                    new.hedges_won,
                    "Hedged queries the GPU answered first.",
                ),
                (
                    "gpu_batches",
                    &mut h.gpu_batches,
                    new.gpu_batches,
                    "GPU calls (gpu_tasks / gpu_batches: the mean call size).",
                ),
                (
                    "gpu_tasks",
                    &mut h.gpu_tasks,
                    new.gpu_tasks,
                    "Tasks sent to the GPU.",
                ),
                (
                    "gpu_fallbacks",
                    &mut h.gpu_fallbacks,
                    new.gpu_fallbacks,
                    "Tasks the GPU failed that the CPU ran again.",
                ),
                (
                    "deadline_misses",
                    &mut h.deadline_misses,
                    new.deadline_misses,
                    "Tasks answered after their deadline.",
                ),
            ];
            for (name, total, add, help) in sums {
                *total += add;
                metric(
                    &format!("warpsearch_hybrid_{name}_total"),
                    "counter",
                    help,
                    *total as f64,
                );
            }
        }
        if let Some(m) = gpu_memory {
            for (name, help, bytes) in [
                (
                    "index",
                    "Device memory the index takes: the whole index, or its list cache and staging \
                     buffers.",
                    m.index,
                ),
                ("memory_used", "Device memory in use, by every process.", m.used),
                ("memory_total", "The device's memory.", m.total),
            ] {
                metric(
                    &format!("warpsearch_gpu_{name}_bytes"),
                    "gauge",
                    help,
                    bytes as f64,
                );
            }
        }
        let _ = writeln!(
            out,
            "# HELP warpsearch_query_latency_seconds Time from a query's acceptance to its answer, by \
             the backend that answered it.\n\
             # TYPE warpsearch_query_latency_seconds histogram"
        );
        let shown = if self.gpu { BACKENDS.len() } else { 1 };
        for (by, name) in BACKENDS.iter().enumerate().take(shown) {
            let mut cumulative = 0;
            for (i, c) in self.latency_buckets[by].iter().enumerate() {
                cumulative += c.load(Ordering::Relaxed);
                let le = BUCKETS.get(i).map_or("+Inf".to_string(), |b| b.to_string());
                let _ = writeln!(
                    out,
                    "warpsearch_query_latency_seconds_bucket{{backend=\"{name}\",le=\"{le}\"}} {cumulative}"
                );
            }
            let sum = self.latency_sum_us[by].load(Ordering::Relaxed) as f64 / 1e6;
            let _ = writeln!(
                out,
                "warpsearch_query_latency_seconds_sum{{backend=\"{name}\"}} {sum}"
            );
            let _ = writeln!(
                out,
                "warpsearch_query_latency_seconds_count{{backend=\"{name}\"}} {cumulative}"
            );
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_is_cumulative_by_backend_and_counts_every_query() {
        let m = Metrics::new(true);
        let mut tally = Tally::default();
        tally.answered(Duration::from_micros(300), None, false);
        tally.answered(Duration::from_millis(3), Some(ServedBy::Gpu), true);
        tally.answered(Duration::from_millis(2), Some(ServedBy::Cpu), false);
        m.add(&tally);
        let mut tally = Tally::default();
        tally.answered(Duration::from_secs(60), None, false);
        m.add(&tally);
        m.refused(true);
        let memory = GpuMemory {
            index: 7,
            used: 100,
            total: 1000,
        };
        let connections = Arc::new(Connections {
            max: 64,
            ..Connections::default()
        });
        connections.open.store(3, Ordering::Relaxed);
        connections.refused.store(5, Ordering::Relaxed);
        let load = Load {
            running: 2,
            held: 6,
            max_in_flight: 8,
            cancelled: 9,
            connections: Some(connections),
        };
        let text = m.render(
            &load,
            Some(HybridStats {
                gpu_batches: 1,
                ..Default::default()
            }),
            Some(memory),
        );
        for line in [
            "warpsearch_queries_total 4",
            "warpsearch_query_latency_seconds_bucket{backend=\"cpu\",le=\"0.0005\"} 1",
            "warpsearch_query_latency_seconds_bucket{backend=\"cpu\",le=\"0.002\"} 2",
            "warpsearch_query_latency_seconds_bucket{backend=\"cpu\",le=\"10\"} 2",
            "warpsearch_query_latency_seconds_bucket{backend=\"cpu\",le=\"+Inf\"} 3",
            "warpsearch_query_latency_seconds_count{backend=\"cpu\"} 3",
            "warpsearch_query_latency_seconds_bucket{backend=\"gpu\",le=\"0.002\"} 0",
            "warpsearch_query_latency_seconds_bucket{backend=\"gpu\",le=\"0.003\"} 1",
            "warpsearch_query_latency_seconds_sum{backend=\"gpu\"} 0.003",
            "warpsearch_query_latency_seconds_count{backend=\"gpu\"} 1",
            "warpsearch_query_latency_seconds_count{backend=\"both\"} 0",
            "warpsearch_rejected_requests_total 1",
            "warpsearch_queries_in_flight 2",
            "warpsearch_queries_held 6",
            "warpsearch_max_in_flight 8",
            "warpsearch_queries_cancelled_total 9",
            "warpsearch_connections_open 3",
            "warpsearch_max_connections 64",
            "warpsearch_connections_refused_total 5",
            "warpsearch_connections_timed_out_total 0",
            "warpsearch_deadline_misses_total 1",
            "warpsearch_hybrid_served_gpu_total 1",
            "warpsearch_hybrid_gpu_batches_total 1",
            "warpsearch_gpu_index_bytes 7",
            "warpsearch_gpu_memory_used_bytes 100",
            "warpsearch_gpu_memory_total_bytes 1000",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} missing from\n{text}");
        }
        let sum: f64 = text
            .lines()
            .filter(|l| l.starts_with("warpsearch_query_latency_seconds_sum{backend=\"cpu\"}"))
            .map(|l| l.rsplit(' ').next().unwrap().parse::<f64>().unwrap())
            .sum();
        assert!((sum - 60.0023).abs() < 1e-9, "{text}");
    }

    #[test]
    fn without_a_gpu_only_the_cpu_series_and_no_memory() {
        let m = Metrics::new(false);
        let mut tally = Tally::default();
        tally.answered(Duration::from_millis(1), None, false);
        m.add(&tally);
        let load = Load {
            running: 0,
            held: 0,
            max_in_flight: 8,
            cancelled: 0,
            connections: None,
        };
        let text = m.render(&load, None, None);
        assert!(text
            .lines()
            .any(|l| l == "warpsearch_query_latency_seconds_count{backend=\"cpu\"} 1"));
        for absent in [
            "backend=\"gpu\"",
            "backend=\"both\"",
            "warpsearch_gpu_",
            "warpsearch_hybrid_",
            "deadline_misses",
            "warpsearch_connections_",
        ] {
            assert!(!text.contains(absent), "{absent} in\n{text}");
        }
    }
}
