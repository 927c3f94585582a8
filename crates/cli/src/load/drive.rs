//! When requests leave. Closed loop: C clients, each sending its next request as soon as the last one is
//! answered (the server's throughput at that concurrency). Open loop: requests due at Poisson or evenly
//! spaced arrival times, each sent when due whatever is still in flight, on one of at most N connections
//! (HTTP/1.1 carries one request at a time on each), so that a slow server meets the load a production
//! one would (no coordinated omission): latency runs from the arrival, and a wait for a free connection
//! or the generator's own delay in sending counts too (both reported as the send lag). The bound keeps
//! the generator from opening a connection per request when the server falls behind, which would run it
//! out of file descriptors and CPU before the server.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use indicatif::ProgressBar;
use tokio::runtime::Runtime;
use tokio::sync::Semaphore;

use super::client::{Outcome, Target};
use super::proc::CpuMark;

/// When a closed loop stops.
#[derive(Clone, Copy)]
pub enum Limit {
    /// After this many queries (each query of the log once for its length).
    Queries(u64),
    /// When this long has passed (no new request then; those in flight are answered).
    Time(Duration),
}

/// `clients` concurrent clients sending `batch` consecutive queries per request until `limit`.
pub fn closed_loop(
    rt: &Runtime,
    target: &Arc<Target>,
    clients: usize,
    batch: usize,
    limit: Limit,
    origin: Instant,
    bar: &ProgressBar,
) -> Vec<Outcome> {
    let next = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    rt.block_on(async {
        let tasks: Vec<_> = (0..clients)
            .map(|_| {
                let (target, next, bar) = (target.clone(), next.clone(), bar.clone());
                tokio::spawn(async move {
                    let mut outcomes = Vec::new();
                    loop {
                        let first = next.fetch_add(batch as u64, Ordering::Relaxed);
                        let count = match limit {
                            Limit::Queries(n) if first >= n => break,
                            Limit::Queries(n) => (n - first).min(batch as u64) as usize,
                            Limit::Time(t) if started.elapsed() >= t => break,
                            Limit::Time(_) => batch,
                        };
                        outcomes.push(target.send(first, count, Instant::now(), origin).await);
                        bar.inc(count as u64);
                    }
                    outcomes
                })
            })
            .collect();
        let mut all = Vec::new();
        for t in tasks {
            all.extend(t.await.expect("a client task does not panic"));
        }
        all
    })
}

/// One open-loop rate: queries per second, and how many queries arrive at it.
pub struct Phase {
    pub rate: f64,
    pub queries: usize,
}

/// One request of an open-loop schedule.
struct Arrival {
    /// From the open loop's start.
    at: Duration,
    phase: usize,
    first: u64,
    count: usize,
}

/// The arrivals of `phases` one after another: requests of `batch` queries at `rate / batch` per second,
/// Poisson (exponential gaps, seeded) or evenly spaced; the query log continues across phases.
fn schedule(phases: &[Phase], batch: usize, poisson: bool, seed: u64) -> Vec<Arrival> {
    let mut out = Vec::new();
    let (mut start, mut next) = (Duration::ZERO, 0u64);
    for (p, phase) in phases.iter().enumerate() {
        let requests = phase.queries.div_ceil(batch);
        let per_second = phase.rate / batch as f64;
        let times = if poisson {
            crate::shared::stats::poisson_arrivals(requests, per_second, seed.wrapping_add(p as u64))
        } else {
            (1..=requests)
                .map(|i| Duration::from_secs_f64(i as f64 / per_second))
                .collect()
        };
        for (i, t) in times.into_iter().enumerate() {
            let count = (phase.queries - i * batch).min(batch);
            out.push(Arrival {
                at: start + t,
                phase: p,
                first: next,
                count,
            });
            next += count as u64;
        }
        // The next rate starts when this one's time is up, whatever is still in flight.
        start += Duration::from_secs_f64(requests as f64 / per_second);
    }
    out
}

/// How an open loop sends: `batch` queries per request, at most `connections` requests in flight,
/// Poisson arrivals (else even ones) seeded by `seed`.
pub struct Open {
    pub batch: usize,
    pub connections: usize,
    pub poisson: bool,
    pub seed: u64,
}

/// Sends the schedule of `phases` from this thread (sleeping until each arrival; the runtime's threads
/// do the rest) and waits for every reply. Returns each request's phase and outcome, and the CPU times at
/// each phase's start and after the last reply.
pub fn open_loop(
    rt: &Runtime,
    target: &Arc<Target>,
    phases: &[Phase],
    how: &Open,
    origin: Instant,
    server_pid: Option<u32>,
    bar: &ProgressBar,
) -> (Vec<(usize, Outcome)>, Vec<CpuMark>) {
    let arrivals = schedule(phases, how.batch, how.poisson, how.seed);
    let connections = Arc::new(Semaphore::new(how.connections));
    let (tx, rx) = std::sync::mpsc::channel();
    let mut marks = Vec::new();
    let start = Instant::now();
    for a in arrivals {
        let due = start + a.at;
        let now = Instant::now();
        if due > now {
            std::thread::sleep(due - now);
        }
        if a.phase == marks.len() {
            marks.push(CpuMark::now(server_pid));
        }
        let (target, tx, connections) = (target.clone(), tx.clone(), connections.clone());
        rt.spawn(async move {
            let (_connection, waited) = match connections.clone().try_acquire_owned() {
                Ok(permit) => (permit, false),
                Err(_) => (connections.acquire_owned().await.expect("never closed"), true),
            };
            let mut outcome = target.send(a.first, a.count, due, origin).await;
            outcome.waited = waited;
            let _ = tx.send((a.phase, outcome));
        });
        bar.inc(a.count as u64);
    }
    drop(tx);
    let outcomes = rx.iter().collect();
    marks.push(CpuMark::now(server_pid));
    (outcomes, marks)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phases_follow_one_another_and_cover_every_query_once() {
        let phases = [
            Phase {
                rate: 1000.0,
                queries: 10,
            },
            Phase {
                rate: 100.0,
                queries: 7,
            },
        ];
        for poisson in [false, true] {
            let s = schedule(&phases, 4, poisson, 1);
            // 3 requests (4, 4, 2 queries), then 2 (4, 3).
            let counts: Vec<(usize, usize)> = s.iter().map(|a| (a.phase, a.count)).collect();
            assert_eq!(counts, [(0, 4), (0, 4), (0, 2), (1, 4), (1, 3)]);
            let firsts: Vec<u64> = s.iter().map(|a| a.first).collect();
            assert_eq!(firsts, [0, 4, 8, 10, 14]);
            assert!(s.windows(2).all(|w| w[0].at <= w[1].at));
            // The second phase starts when the first one's 3 requests at 250/s are due.
            assert!(s[3].at >= Duration::from_millis(12), "{:?}", s[3].at);
        }
        let fixed = schedule(&phases, 4, false, 1);
        let near = |d: Duration, ms: u64| d.abs_diff(Duration::from_millis(ms)) < Duration::from_micros(1);
        assert!(
            near(fixed[0].at, 4) && near(fixed[3].at, 12 + 40),
            "{:?}",
            fixed[3].at
        );
    }
}
