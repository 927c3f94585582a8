//! Shedding by time: a request is refused (429) when the queries already in flight, at the rate the
//! engine answers while it has work, would take longer than the deadline to drain, since its own
//! queries would then wait past it. `--max-in-flight` bounds memory; this bounds the backlog to about
//! one deadline of work, whatever the engine's speed, as a `--max-in-flight` sized to the deadline
//! would, without measuring the capacity first.
//!
//! The rate is the queries answered per second of busy time: time with at least one query in flight.
//! Idle time does not count, so a light load does not pass for a slow engine. Under a limit set by
//! that rate the rate rises with the load it admits (a GPU's batches grow with the queries waiting,
//! so it answers faster with more in flight), and a low estimate corrects itself: by Little's law the
//! limit settles where a query's latency is about the window. A request is admitted whatever its
//! size when nothing is in flight, so that a limit below one request's queries cannot refuse every
//! request for good.
//!
//! Where the engine knows its capacity (the hybrid scheduler's measured rates at full load), the limit
//! is at least that capacity's worth of a window: on a large collection a request's latency is near a
//! short window at any load (its slowest query decides), and the busy rate alone settled at a small
//! fraction of the capacity (882 of 7,700 queries/s answered at 2x on the 25M collection).

use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::lock;

/// The busy time over which answers are counted for one rate sample.
const INTERVAL: Duration = Duration::from_millis(100);
/// Queries always admitted (a light load never waits on an estimate).
const FLOOR: usize = 64;

/// The engine's recent answering rate while busy.
pub struct Pace {
    /// The time the backlog must drain in; zero: no shedding by time.
    window: Duration,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Queries answered in this sample's busy time.
    answered: u64,
    /// This sample's busy time so far.
    busy: Duration,
    /// Since when queries have been in flight (None: none are).
    busy_since: Option<Instant>,
    /// Queries answered per second of busy time (exponentially weighted); 0: not known yet.
    rate: f64,
    /// The engine's own estimate of its queries per second at full load; 0: none.
    capacity: f64,
}

impl Pace {
    /// Sheds so that the backlog drains within `window` (zero: never).
    pub fn new(window: Duration) -> Pace {
        Pace {
            window,
            state: Mutex::default(),
        }
    }

    /// The time the backlog must drain in (zero: no shedding by time).
    pub fn window(&self) -> Duration {
        self.window
    }

    /// The queries that may be in flight now (`None`: no limit by time, or the rate is not known yet).
    pub fn backlog_limit(&self) -> Option<usize> {
        if self.window.is_zero() {
            return None;
        }
        let s = lock(&self.state);
        let rate = s.rate.max(s.capacity);
        (s.rate > 0.0).then(|| ((rate * self.window.as_secs_f64()) as usize).max(FLOOR))
    }

    /// Whether `n` more queries may start with `in_flight` under way (always, with none).
    pub fn admits(&self, in_flight: usize, n: usize) -> bool {
        in_flight == 0 || self.backlog_limit().is_none_or(|limit| in_flight + n <= limit)
    }

    /// A request's queries started at `now`, with `in_flight` (others) under way before them.
    pub fn started(&self, in_flight: usize, now: Instant) {
        if self.window.is_zero() {
            return;
        }
        if in_flight == 0 {
            // Idle until now (a busy time left open by a request whose client went away ends here).
            lock(&self.state).busy_since = Some(now);
        }
    }

    /// `n` queries (a request's) were answered at `now`, leaving `in_flight` under way; `capacity`:
    /// the engine's queries per second at full load, if it knows.
    pub fn answered(&self, n: usize, in_flight: usize, now: Instant, capacity: Option<f64>) {
        if self.window.is_zero() {
            return;
        }
        let mut s = lock(&self.state);
        s.capacity = capacity.filter(|c| c.is_finite()).unwrap_or(0.0);
        s.answered += n as u64;
        if let Some(since) = s.busy_since {
            s.busy += now.saturating_duration_since(since);
            s.busy_since = (in_flight > 0).then_some(now);
        }
        if s.busy >= INTERVAL {
            let rate = s.answered as f64 / s.busy.as_secs_f64();
            s.rate = if s.rate == 0.0 {
                rate
            } else {
                0.7 * s.rate + 0.3 * rate
            };
            s.answered = 0;
            s.busy = Duration::ZERO;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn the_backlog_is_bounded_to_a_deadline_at_the_busy_rate() {
        let t0 = Instant::now();
        let pace = Pace::new(100 * MS);
        assert!(pace.admits(100_000, 1), "the rate is not known yet");
        // A light load: a query every 10 ms answered in 1 ms. Busy time only counts: 1,000/s.
        for i in 0..200u32 {
            pace.started(0, t0 + i * 10 * MS);
            pace.answered(1, 0, t0 + (i * 10 + 1) * MS, None);
        }
        let light = pace.backlog_limit().expect("busy time gives the rate");
        assert_eq!(light, 100, "1,000/s x 100 ms");
        // Busy: 1,000 answers in 100 ms with 5,000 waiting: 10,000/s, so 1,000 queries a deadline.
        let t1 = t0 + 3000 * MS;
        pace.started(0, t1);
        for _ in 0..20 {
            for i in 1..=1000u32 {
                pace.answered(1, 5000, t1 + i * 100 * MS / 1000, None);
            }
        }
        let limit = pace.backlog_limit().expect("busy intervals give the rate");
        assert!((990..=1010).contains(&limit), "{limit}");
        assert!(pace.admits(limit - 10, 10));
        assert!(!pace.admits(limit, 1));
    }

    #[test]
    fn long_batches_measure_their_rate_and_an_idle_server_admits_any_request() {
        let t0 = Instant::now();
        let pace = Pace::new(100 * MS);
        // A large collection's GPU: 1,000 queries answered at once every 300 ms, more left waiting:
        // 3,333/s, so 333 queries a deadline (the pauses between answers are the engine's time).
        pace.started(0, t0);
        for i in 1..=20u32 {
            pace.answered(1000, 5000, t0 + i * 300 * MS, None);
        }
        let limit = pace.backlog_limit().expect("busy time gives the rate");
        assert!((330..=336).contains(&limit), "{limit}");
        // A request of more queries than the limit is refused while others are in flight, and
        // admitted once none are (else it would be refused for good).
        assert!(!pace.admits(1, 400));
        assert!(pace.admits(0, 400));
        // Idle time (nothing in flight) does not lower the rate.
        let t1 = t0 + 6300 * MS;
        pace.answered(1000, 0, t1, None);
        pace.started(0, t1 + 10_000 * MS);
        pace.answered(1000, 5000, t1 + 10_300 * MS, None);
        let after = pace.backlog_limit().expect("still known");
        assert!(after.abs_diff(limit) <= 1, "{after} against {limit}");
    }

    #[test]
    fn a_low_estimate_rises_with_the_load_it_admits() {
        // An engine whose rate grows with the queries waiting (a GPU's batches): it answers all that
        // is in flight in 5 ms + 0.125 ms per query, as a large collection's GPU does, and the
        // clients send more than it admits, so the limit is full whenever a batch starts.
        let t0 = Instant::now();
        let pace = Pace::new(100 * MS);
        let mut now = t0;
        let mut in_flight = FLOOR;
        pace.started(0, now);
        for _ in 0..400 {
            now += Duration::from_secs_f64(0.005 + in_flight as f64 * 0.000_125);
            pace.answered(in_flight, 0, now, None);
            in_flight = pace.backlog_limit().unwrap_or(FLOOR);
            pace.started(0, now);
        }
        // At the limit a batch takes about the window: 5 ms + 0.125 ms x 760 = 100 ms.
        let limit = pace.backlog_limit().expect("measured");
        assert!((700..=800).contains(&limit), "{limit}");
    }

    #[test]
    fn the_engines_capacity_is_the_least_rate() {
        let t0 = Instant::now();
        let pace = Pace::new(100 * MS);
        pace.started(0, t0);
        // A busy rate of 1,000/s, an engine that says it completes 8,000/s at full load.
        for i in 1..=20u32 {
            pace.answered(100, 50, t0 + i * 100 * MS, Some(8000.0));
        }
        assert_eq!(pace.backlog_limit(), Some(800));
        // A faster busy rate wins.
        for i in 21..=60u32 {
            pace.answered(2000, 50, t0 + i * 100 * MS, Some(8000.0));
        }
        let limit = pace.backlog_limit().expect("measured");
        assert!((1990..=2000).contains(&limit), "{limit}");
    }

    #[test]
    fn no_deadline_never_sheds() {
        let t0 = Instant::now();
        let pace = Pace::new(Duration::ZERO);
        pace.started(0, t0);
        for i in 0..1000u32 {
            pace.answered(1, 5000, t0 + i * MS, None);
        }
        assert!(pace.admits(1 << 30, 1));
        assert_eq!(pace.backlog_limit(), None);
    }
}
