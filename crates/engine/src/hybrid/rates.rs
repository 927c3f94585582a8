//! The processors' measured speeds, which the queue policy and the split share read: the GPU's latency
//! floor and marginal rate, fitted from its batches' sizes and times as `time = floor + tasks / rate`,
//! and a CPU worker's mean seconds per task.

use super::ewma;

/// How much each batch's weight decays per later batch in the fit.
const DECAY: f64 = 0.9;

#[derive(Debug, Clone, Copy)]
pub(super) struct Rates {
    /// Tasks per second the GPU adds to a batch (its marginal rate).
    pub gpu_rate: f64,
    /// Seconds of a GPU batch beyond its tasks' (its latency floor).
    pub gpu_latency: f64,
    /// Mean seconds of a task on one CPU worker.
    pub cpu_task: f64,
    /// The fit's decayed sums over batches: weight, tasks, tasks², seconds, tasks × seconds.
    fit: [f64; 5],
}

impl Default for Rates {
    fn default() -> Self {
        Rates {
            gpu_rate: 5000.0,
            gpu_latency: 0.01,
            cpu_task: 0.001,
            fit: [0.0; 5],
        }
    }
}

impl Rates {
    /// Tasks per second `workers` CPU workers complete together.
    pub fn cpu_rate(&self, workers: usize) -> f64 {
        workers.max(1) as f64 / self.cpu_task.max(1e-9)
    }

    /// A GPU batch of `n` tasks took `seconds`.
    ///
    /// The floor and the rate are a least-squares line through recent batches, weighted towards the
    /// latest. While recent batches are too alike in size to fit a line (a queue that always fills the
    /// batch to the same target), the floor stays and the rate is what this batch took beyond it
    /// (taking at most half of its time as floor). Measuring the rate only from batches of 256 tasks or
    /// more, as before, trapped a server: batches sized from the default rate to the target time stayed
    /// below 256 tasks, so the rate was never measured and the batches never grew (about 150 tasks
    /// per batch on the passages, where a 20 ms batch holds thousands).
    pub fn observe_gpu_batch(&mut self, n: usize, seconds: f64) {
        if !(seconds.is_finite() && seconds > 0.0) || n == 0 {
            return;
        }
        let x = n as f64;
        for (sum, add) in self.fit.iter_mut().zip([1.0, x, x * x, seconds, x * seconds]) {
            *sum = DECAY * *sum + add;
        }
        let [w, sx, sxx, st, sxt] = self.fit;
        let (mx, mt) = (sx / w, st / w);
        let var = sxx / w - mx * mx;
        // A spread of sizes of at least a fifth of their mean fits a line.
        if var > (0.2 * mx).powi(2) {
            let slope = (sxt / w - mx * mt) / var;
            let floor = mt - slope * mx;
            if slope > 0.0 && floor >= 0.0 {
                self.gpu_rate = 1.0 / slope;
                self.gpu_latency = floor;
                return;
            }
        }
        let marginal = (seconds - self.gpu_latency).max(0.5 * seconds);
        ewma(&mut self.gpu_rate, x / marginal, 0.3);
        if n <= 64 {
            ewma(&mut self.gpu_latency, seconds, 0.3);
        }
    }
}

/// Queries a GPU call of the rates `r` takes at most: as many as its predicted time fits in `target`
/// seconds (at least twice the latency floor), at least one and at most `max`.
pub(super) fn call_size(r: &Rates, target: f64, max: usize) -> usize {
    let target = target.max(2.0 * r.gpu_latency);
    let n = ((target - r.gpu_latency).max(0.0) * r.gpu_rate) as usize;
    n.clamp(1, max.max(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The calls a full queue gets against a GPU of `floor` seconds and `rate` tasks per second,
    /// starting from the default rates.
    fn calls(floor: f64, rate: f64, target: f64, rounds: usize) -> Vec<usize> {
        let mut r = Rates::default();
        let mut sizes = Vec::new();
        for _ in 0..rounds {
            let n = call_size(&r, target, 8192);
            r.observe_gpu_batch(n, floor + n as f64 / rate);
            sizes.push(n);
        }
        sizes
    }

    #[test]
    fn calls_grow_to_the_target_from_the_default_rate() {
        // The passages' GPU: a 1 ms floor, 285,000 OR queries per second; a 20 ms target fits 5,415.
        let sizes = calls(0.001, 285_000.0, 0.020, 40);
        assert!(sizes[0] < 256, "{sizes:?}");
        let last = *sizes.last().unwrap();
        assert!((5300..=5415).contains(&last), "{sizes:?}");
        // The 25M collection's: 5 ms and 8,000 per second; 20 ms fits 120.
        let sizes = calls(0.005, 8_000.0, 0.020, 40);
        let last = *sizes.last().unwrap();
        assert!((110..=125).contains(&last), "{sizes:?}");
        // A long target on it: 400 ms fits 3,160.
        let sizes = calls(0.005, 8_000.0, 0.400, 40);
        let last = *sizes.last().unwrap();
        assert!((3000..=3200).contains(&last), "{sizes:?}");
    }
    #[test]
    fn batches_of_mixed_sizes_fit_the_floor_and_the_rate() {
        let mut r = Rates::default();
        for i in 0..200 {
            let n = 10 + (i * 37) % 2000;
            r.observe_gpu_batch(n, 0.002 + n as f64 / 100_000.0);
        }
        assert!((r.gpu_latency - 0.002).abs() < 1e-6, "{}", r.gpu_latency);
        assert!((r.gpu_rate / 100_000.0 - 1.0).abs() < 1e-3, "{}", r.gpu_rate);
        // Garbage is ignored.
        r.observe_gpu_batch(0, 1.0);
        r.observe_gpu_batch(10, f64::NAN);
        assert!((r.gpu_rate / 100_000.0 - 1.0).abs() < 1e-3, "{}", r.gpu_rate);
    }
}
