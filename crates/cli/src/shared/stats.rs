//! Numbers of a run: latency percentiles, Poisson arrival times, a small seeded generator.

use std::time::Duration;

use serde_json::{json, Value};

/// The nearest-rank quantile `q` (in [0, 1]) of `sorted`; `None` when it is empty.
pub fn nearest_rank<T: Copy>(sorted: &[T], q: f64) -> Option<T> {
    let n = sorted.len();
    (n > 0).then(|| sorted[((q * n as f64).ceil() as usize).clamp(1, n) - 1])
}

/// Nearest-rank percentile of sorted durations, in milliseconds (0 for none).
pub fn percentile_ms(sorted: &[Duration], p: f64) -> f64 {
    nearest_rank(sorted, p / 100.0).map_or(0.0, |d| d.as_secs_f64() * 1e3)
}

/// Latency percentiles of one run, in ms.
pub struct Latency {
    pub mean: f64,
    pub p50: f64,
    pub p90: f64,
    pub p95: f64,
    pub p99: f64,
    pub p999: f64,
    pub max: f64,
}

impl Latency {
    /// The percentiles of `v` (nearest rank).
    pub fn of(mut v: Vec<Duration>) -> Latency {
        v.sort_unstable();
        let n = v.len().max(1) as f64;
        Latency {
            mean: v.iter().map(Duration::as_secs_f64).sum::<f64>() / n * 1e3,
            p50: percentile_ms(&v, 50.0),
            p90: percentile_ms(&v, 90.0),
            p95: percentile_ms(&v, 95.0),
            p99: percentile_ms(&v, 99.0),
            p999: percentile_ms(&v, 99.9),
            max: v.last().map_or(0.0, |d| d.as_secs_f64() * 1e3),
        }
    }

    /// As a JSON object (keys mean, p50, p90, p95, p99, p99.9, max).
    pub fn json(&self) -> Value {
        json!({"mean": self.mean, "p50": self.p50, "p90": self.p90, "p95": self.p95, "p99": self.p99,
               "p99.9": self.p999, "max": self.max})
    }
}

/// Arrival times of `n` queries at `rate` per second (exponential gaps), deterministic by `seed`.
pub fn poisson_arrivals(n: usize, rate: f64, seed: u64) -> Vec<Duration> {
    let mut rng = Rng::new(seed);
    let mut t = 0.0f64;
    (0..n)
        .map(|_| {
            // 1 - u is in (0, 1], so the logarithm is finite.
            let u = 1.0 - (rng.next() >> 11) as f64 / (1u64 << 53) as f64;
            t += -u.ln() / rate;
            Duration::from_secs_f64(t)
        })
        .collect()
}

/// Arrival times of `n` queries at `rate` per second that come in requests of `batch` (the last may
/// hold fewer): the requests arrive as [`poisson_arrivals`] at `rate / batch`, each query with its
/// request.
pub fn request_arrivals(n: usize, batch: usize, rate: f64, seed: u64) -> Vec<Duration> {
    let batch = batch.max(1);
    let requests = poisson_arrivals(n.div_ceil(batch), rate / batch as f64, seed);
    (0..n).map(|i| requests[i / batch]).collect()
}

/// Each request's latency from its queries' (requests of `batch` in order, the last may hold fewer):
/// its slowest query's, since a request is answered with its last query.
pub fn request_latencies(queries: &[Duration], batch: usize) -> Vec<Duration> {
    queries
        .chunks(batch.max(1))
        .map(|c| c.iter().copied().max().unwrap_or_default())
        .collect()
}

/// SplitMix64: small, fast, good enough for test data, and stable across platforms.
pub struct Rng(pub u64);

impl Rng {
    /// A generator started from `seed`.
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    /// Next 64 random bits.
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        ((self.next() as u128 * n as u128) >> 64) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let d: Vec<Duration> = (1..=100).map(Duration::from_millis).collect();
        assert_eq!(percentile_ms(&d, 50.0), 50.0);
        assert_eq!(percentile_ms(&d, 99.0), 99.0);
        assert_eq!(percentile_ms(&d, 99.9), 100.0);
        assert_eq!(percentile_ms(&[], 50.0), 0.0);
    }

    #[test]
    fn requests_arrive_whole_at_their_rate_and_take_their_slowest_query() {
        let single = poisson_arrivals(250, 1000.0, 7);
        assert_eq!(request_arrivals(250, 1, 1000.0, 7), single);
        let a = request_arrivals(1003, 4, 4000.0, 7);
        assert_eq!(a.len(), 1003);
        // Requests of four queries, the last of three, at the single queries' times.
        for (r, chunk) in a.chunks(4).enumerate() {
            assert_eq!(chunk.len(), if r == 250 { 3 } else { 4 });
            assert!(chunk.iter().all(|&t| t == single.get(r).copied().unwrap_or(t)));
            assert!(chunk.iter().all(|&t| t == chunk[0]));
        }
        assert_eq!(a[1000], a[1002]);
        assert!(a[996] < a[1000]);
        let ms = Duration::from_millis;
        let q = [ms(3), ms(1), ms(2), ms(9), ms(4)];
        assert_eq!(request_latencies(&q, 2), vec![ms(3), ms(9), ms(4)]);
        assert_eq!(request_latencies(&q, 1), q.to_vec());
        assert_eq!(request_latencies(&q, 8), vec![ms(9)]);
    }
}
