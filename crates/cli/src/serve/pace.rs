//! Shedding by time: a request is refused (429) when the queries already in flight, at the rate the
//! engine has been answering them while busy, would take longer than the deadline to drain, since its
//! own queries would then wait past it. `--max-in-flight` bounds memory; this bounds the backlog to
//! about one deadline of work, whatever the engine's speed, as a `--max-in-flight` sized to the deadline
//! would, without measuring the capacity first.
//!
//! A request is admitted whatever its size when nothing is in flight, so that a limit below one
//! request's queries cannot refuse every request for good.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The interval over which answers are counted.
const INTERVAL: Duration = Duration::from_millis(100);
/// Queries always admitted (a light load never waits on an estimate).
const FLOOR: usize = 64;
/// An interval is a busy one if at least this many queries were in flight at each of its answers.
const BUSY: usize = 32;

/// The engine's recent answering rate while busy.
pub struct Pace {
    /// The time the backlog must drain in; zero: no shedding by time.
    window: Duration,
    state: Mutex<State>,
}

struct State {
    start: Instant,
    answered: u64,
    /// The fewest queries in flight at an answer of this interval.
    least_in_flight: usize,
    /// Queries answered per second in busy intervals (exponentially weighted); 0: not known yet.
    rate: f64,
}

impl Pace {
    /// Sheds so that the backlog drains within `window` (zero: never).
    pub fn new(window: Duration, now: Instant) -> Pace {
        Pace {
            window,
            state: Mutex::new(State {
                start: now,
                answered: 0,
                least_in_flight: usize::MAX,
                rate: 0.0,
            }),
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
        let rate = self.state.lock().expect("no thread panics under this lock").rate;
        (rate > 0.0).then(|| ((rate * self.window.as_secs_f64()) as usize).max(FLOOR))
    }

    /// `n` queries (a request's) were answered, leaving `in_flight` queries under way. An interval
    /// counts towards the rate only if the engine was busy all along: at least `BUSY` queries left in
    /// flight at each of its answers and at the one before it, so that a light load does not pass for
    /// a slow engine. A pause between answers with queries waiting throughout is the engine's time (a
    /// GPU batch of a large collection can take longer than the interval), and counts.
    pub fn answered(&self, n: usize, in_flight: usize, now: Instant) {
        if self.window.is_zero() {
            return;
        }
        let mut s = self.state.lock().expect("no thread panics under this lock");
        s.answered += n as u64;
        s.least_in_flight = s.least_in_flight.min(in_flight);
        let elapsed = now.duration_since(s.start);
        if elapsed >= INTERVAL {
            if s.least_in_flight >= BUSY {
                let rate = s.answered as f64 / elapsed.as_secs_f64();
                s.rate = if s.rate == 0.0 {
                    rate
                } else {
                    0.7 * s.rate + 0.3 * rate
                };
            }
            s.start = now;
            s.answered = 0;
            // The next interval's pause before its first answer is busy only if this answer left
            // queries waiting.
            s.least_in_flight = in_flight;
        }
    }

    /// Whether `n` more queries may start with `in_flight` under way (always, with none).
    pub fn admits(&self, in_flight: usize, n: usize) -> bool {
        in_flight == 0 || self.backlog_limit().is_none_or(|limit| in_flight + n <= limit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn the_backlog_is_bounded_to_a_deadline_at_the_busy_rate() {
        let t0 = Instant::now();
        let pace = Pace::new(100 * MS, t0);
        assert!(pace.admits(100_000, 1), "the rate is not known yet");
        // A light load (few queries waiting): no rate, everything admitted.
        for i in 0..300u32 {
            pace.answered(1, 1, t0 + i * MS);
        }
        assert_eq!(pace.backlog_limit(), None);
        // Busy: 1,000 answers in 100 ms with 5,000 waiting: 10,000/s, so 1,000 queries a deadline.
        let t1 = t0 + 1000 * MS;
        pace.answered(1, 5000, t1);
        for i in 1..=1000u32 {
            pace.answered(1, 5000, t1 + i * 100 * MS / 1000);
        }
        let limit = pace.backlog_limit().expect("a busy interval gives the rate");
        assert!((990..=1010).contains(&limit), "{limit}");
        assert!(pace.admits(limit - 10, 10));
        assert!(!pace.admits(limit, 1));
        // At least FLOOR queries are always admitted.
        assert!(pace.admits(0, FLOOR));
    }

    #[test]
    fn long_batches_measure_their_rate_and_an_idle_server_admits_any_request() {
        let t0 = Instant::now();
        let pace = Pace::new(100 * MS, t0);
        // A large collection's GPU: 1,000 queries answered at once every 300 ms, 5,000 left waiting:
        // 3,333/s, so 333 queries a deadline (the pauses between answers are the engine's time).
        for i in 0..20u32 {
            pace.answered(1000, 5000, t0 + i * 300 * MS);
        }
        let limit = pace.backlog_limit().expect("busy intervals give the rate");
        assert!((330..=336).contains(&limit), "{limit}");
        // A request of more queries than the limit is refused while others are in flight, and
        // admitted once none are (else it would be refused for good).
        assert!(!pace.admits(1, 400));
        assert!(pace.admits(0, 400));
        // A pause that began with nothing left in flight is idle time, not the engine's.
        let t1 = t0 + 6000 * MS;
        pace.answered(1000, 0, t1);
        pace.answered(10, 5000, t1 + 10_000 * MS);
        let after = pace.backlog_limit().expect("still known");
        assert_eq!(after, limit, "an idle pause does not lower the rate");
    }

    #[test]
    fn no_deadline_never_sheds() {
        let t0 = Instant::now();
        let pace = Pace::new(Duration::ZERO, t0);
        for i in 0..1000u32 {
            pace.answered(1, 5000, t0 + i * MS);
        }
        assert!(pace.admits(1 << 30, 1));
        assert_eq!(pace.backlog_limit(), None);
    }
}
