//! Per-query cost prediction for the CPU and the GPU, learned online from measured times (docs/references.md#ding-gpu-query-processing
//! section 9 predicts from the shortest and second shortest list, the sum of lengths and the number of
//! terms; it trains M5 rules offline and reports 20–22% mean relative error).
//!
//! Both models are recursive least squares with a forgetting factor, so they follow drift in the query
//! stream and need no training log:
//! - CPU: `ln(time) = w · x` per mode, fitted on each query's measured time (log space: errors are
//!   relative, and costs span five orders of magnitude), where `x` holds 1, the logs `a, b, c` of the
//!   shortest list, the second and the sum (each `ln(1 + postings)`), their squares and products (a
//!   query's time bends with its lists' lengths: MaxScore prunes long lists harder), the terms, one
//!   indicator each for 2, 3, 4 and 5 or more terms, the logs of the longest list and of the others,
//!   and the log `w` of the postings weighted by each list's share of the query's score bound, with
//!   `w²`, `w·a` and `w·c` (a long list of a term that scores little is soon skipped) (`CPU_FEATURES`);
//! - GPU: `batch time = a + b · Σ work(q)` per mode, fitted on each batch's measured time, where
//!   `work(q)` is the postings the kernel touches (the shortest list's for AND, every list's for OR);
//!   a query's marginal GPU cost is `b · work(q)`.

use warpsearch_index::Index;
use warpsearch_query::{Mode, Query};

/// What a query's cost is predicted from.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Features {
    /// Postings of the shortest list.
    pub shortest: u64,
    /// Postings of the second shortest list (0 for one term).
    pub second: u64,
    /// Postings of all lists.
    pub sum: u64,
    /// Distinct known terms.
    pub terms: u32,
    /// Postings of the longest list.
    pub longest: u64,
    /// Postings weighted by each list's share of the query's score bound (Σ df · max / Σ max): a long
    /// list whose terms score little soon stops being read by MaxScore.
    pub weighted: f64,
}

impl Features {
    /// The features of `query` on `index`.
    pub fn of(index: &Index, query: &Query) -> Features {
        let records = index.term_records();
        // One look at each term's record: its list length, and its score bound and its postings
        // weighted by that bound, summed in the query's order.
        let (mut dfs, mut bound, mut weighted) = (Vec::with_capacity(query.terms.len()), 0.0, 0.0);
        for &(t, _) in &query.terms {
            let r = &records[t as usize];
            dfs.push(r.df as u64);
            bound += r.max_score as f64;
            weighted += r.df as f64 * r.max_score as f64;
        }
        dfs.sort_unstable();
        let weighted = weighted / f64::max(bound, 1e-9);
        Features {
            shortest: dfs.first().copied().unwrap_or(0),
            second: dfs.get(1).copied().unwrap_or(0),
            sum: dfs.iter().sum(),
            terms: dfs.len() as u32,
            longest: dfs.last().copied().unwrap_or(0),
            weighted,
        }
    }

    /// Postings the GPU kernel touches under `mode`: the shortest list drives AND, OR reads them all.
    pub fn gpu_work(&self, mode: Mode) -> f64 {
        match mode {
            Mode::And => (self.shortest * self.terms as u64) as f64,
            _ => self.sum as f64,
        }
    }

    fn cpu_vector(&self) -> [f64; CPU_FEATURES] {
        let l = |x: u64| (1.0 + x as f64).ln();
        let (a, b, c) = (l(self.shortest), l(self.second), l(self.sum));
        let (d, e) = (l(self.longest), l(self.sum - self.longest));
        let w = (1.0 + self.weighted).ln();
        let is = |t: bool| f64::from(u8::from(t));
        let n = self.terms;
        [
            1.0,
            a,
            b,
            c,
            n as f64,
            a * a,
            b * b,
            c * c,
            a * b,
            a * c,
            b * c,
            is(n == 2),
            is(n == 3),
            is(n == 4),
            is(n >= 5),
            d,
            e,
            w,
            w * w,
            w * a,
            w * c,
        ]
    }
}

/// Recursive least squares over `N` features with forgetting factor `lambda`.
#[derive(Debug, Clone)]
struct Rls<const N: usize> {
    w: [f64; N],
    p: [[f64; N]; N],
    lambda: f64,
    updates: u64,
}

impl<const N: usize> Rls<N> {
    fn new(lambda: f64, prior: [f64; N]) -> Self {
        let mut p = [[0.0; N]; N];
        for (i, row) in p.iter_mut().enumerate() {
            row[i] = 1e3;
        }
        Rls {
            w: prior,
            p,
            lambda,
            updates: 0,
        }
    }

    fn predict(&self, x: &[f64; N]) -> f64 {
        self.w.iter().zip(x).map(|(w, x)| w * x).sum()
    }

    fn update(&mut self, x: &[f64; N], y: f64) {
        if !y.is_finite() || x.iter().any(|v| !v.is_finite()) {
            return;
        }
        // Bound the covariance (a forgetting model that sees the same x for long would wind up).
        if self.p.iter().enumerate().map(|(i, r)| r[i]).sum::<f64>() > 1e8 {
            for (i, row) in self.p.iter_mut().enumerate() {
                row.iter_mut().for_each(|p| *p = 0.0);
                row[i] = 1e3;
            }
        }
        let mut px = [0.0; N];
        for (i, row) in self.p.iter().enumerate() {
            px[i] = row.iter().zip(x).map(|(p, x)| p * x).sum();
        }
        let denom = self.lambda + x.iter().zip(&px).map(|(x, p)| x * p).sum::<f64>();
        if denom.abs() < 1e-12 {
            return;
        }
        let gain: Vec<f64> = px.iter().map(|p| p / denom).collect();
        let err = y - self.predict(x);
        for (w, g) in self.w.iter_mut().zip(&gain) {
            *w += g * err;
        }
        // P = (P − g xᵀP) / λ; P is symmetric, so xᵀP = (Px)ᵀ.
        for (row, g) in self.p.iter_mut().zip(&gain) {
            for (p, x) in row.iter_mut().zip(&px) {
                *p = (*p - g * x) / self.lambda;
            }
        }
        self.updates += 1;
    }
}

/// Mean relative error of predictions against measurements, |predicted − measured| / measured.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ErrorStat {
    /// Predictions compared.
    pub count: u64,
    /// Sum of relative errors.
    pub sum: f64,
}

impl ErrorStat {
    fn add(&mut self, predicted: f64, measured: f64) {
        if measured > 0.0 && predicted.is_finite() {
            self.count += 1;
            self.sum += (predicted - measured).abs() / measured;
        }
    }

    /// The mean relative error (0 with no predictions).
    pub fn mean(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.sum / self.count as f64
        }
    }
}

/// Features of the CPU model ([`Features::cpu_vector`]; docs/decisions/037-cpu-cost-features.md has
/// what each group bought).
const CPU_FEATURES: usize = 21;

/// Postings in the GPU model's unit of work.
const MEGA: f64 = 1e6;

/// Updates before a model's predictions count in its error (the first ones are the model learning).
const WARM_UP: u64 = 200;

/// The CPU and GPU cost models, one pair per mode (AND; OR and and-or).
#[derive(Debug, Clone)]
pub struct CostModel {
    cpu: [Rls<CPU_FEATURES>; 2],
    gpu: [Rls<2>; 2],
    /// Mean relative error of CPU predictions (per query, after warm-up).
    pub cpu_error: ErrorStat,
    /// Mean relative error of GPU predictions (per batch, after warm-up).
    pub gpu_error: ErrorStat,
}

fn slot(mode: Mode) -> usize {
    usize::from(mode != Mode::And)
}

impl Default for CostModel {
    fn default() -> Self {
        // Priors: time proportional to the postings on the CPU; 1 ms a batch plus 0.2 ms per million
        // postings on the GPU. Both are forgotten within a few hundred measurements.
        // The CPU features are nearly collinear (the three list lengths), so the CPU model forgets
        // nothing: with forgetting, the covariance of a direction the data never excites grows without
        // bound ("wind-up") and predictions explode. The GPU model's two features both vary from batch
        // to batch; it forgets slowly to follow the batch mix.
        let mut prior = [0.0; CPU_FEATURES];
        (prior[0], prior[3]) = ((2e-6f64).ln(), 1.0);
        let cpu = Rls::new(1.0, prior);
        let gpu = Rls::new(0.995, [1e-3, 2e-4]);
        CostModel {
            cpu: [cpu.clone(), cpu],
            gpu: [gpu.clone(), gpu],
            cpu_error: ErrorStat::default(),
            gpu_error: ErrorStat::default(),
        }
    }
}

impl CostModel {
    /// Predicted seconds of `f` on one CPU core under `mode`.
    pub fn cpu(&self, mode: Mode, f: &Features) -> f64 {
        if f.terms == 0 {
            return 1e-6;
        }
        self.cpu[slot(mode)]
            .predict(&f.cpu_vector())
            .clamp(-20.0, 5.0)
            .exp()
    }

    /// Predicted seconds a query of `f` adds to a GPU batch under `mode`.
    pub fn gpu_marginal(&self, mode: Mode, f: &Features) -> f64 {
        self.gpu[slot(mode)].w[1].max(1e-9) * f.gpu_work(mode) / MEGA
    }

    /// Predicted seconds of a GPU batch of `work` postings under `mode`.
    pub fn gpu_batch(&self, mode: Mode, work: f64) -> f64 {
        self.gpu[slot(mode)].predict(&[1.0, work / MEGA]).max(1e-5)
    }

    /// Learns from a query measured at `seconds` on one CPU core.
    pub fn observe_cpu(&mut self, mode: Mode, f: &Features, seconds: f64) {
        if f.terms == 0 || seconds <= 0.0 {
            return;
        }
        if self.cpu[slot(mode)].updates >= WARM_UP {
            self.cpu_error.add(self.cpu(mode, f), seconds);
        }
        self.cpu[slot(mode)].update(&f.cpu_vector(), seconds.ln());
    }

    /// Learns from a GPU batch of `work` postings measured at `seconds`.
    pub fn observe_gpu(&mut self, mode: Mode, work: f64, seconds: f64) {
        let m = &mut self.gpu[slot(mode)];
        // Work in millions of postings, so that both weights are of similar size.
        let x = [1.0, work / MEGA];
        if m.updates >= WARM_UP / 10 {
            self.gpu_error.add(m.predict(&x), seconds);
        }
        m.update(&x, seconds);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rls_recovers_a_linear_law() {
        let mut m = Rls::new(1.0, [0.0, 0.0]);
        for i in 0..200 {
            let x = i as f64;
            m.update(&[1.0, x], 3.0 + 0.5 * x);
        }
        assert!(
            (m.w[0] - 3.0).abs() < 1e-3 && (m.w[1] - 0.5).abs() < 1e-4,
            "{:?}",
            m.w
        );
    }

    #[test]
    fn collinear_features_do_not_blow_up() {
        let mut c = CostModel::default();
        for i in 0..20_000u64 {
            let s = 1 + i % 50;
            let f = Features {
                shortest: s,
                second: s,
                sum: 2 * s,
                terms: 2,
                ..Features::default()
            };
            c.observe_cpu(Mode::And, &f, 1e-6 * s as f64);
        }
        let f = Features {
            shortest: 25,
            second: 25,
            sum: 50,
            terms: 2,
            ..Features::default()
        };
        let p = c.cpu(Mode::And, &f);
        assert!((p / 25e-6 - 1.0).abs() < 0.1, "{p}");
        assert!(c.cpu_error.mean() < 0.1, "{}", c.cpu_error.mean());
    }

    #[test]
    fn cpu_model_learns_a_power_law_and_reports_its_error() {
        let mut c = CostModel::default();
        let f = |s: u64| Features {
            shortest: s,
            second: 2 * s,
            sum: 3 * s,
            terms: 2,
            ..Features::default()
        };
        for i in 0..2000u64 {
            let s = 10 + (i * 7919) % 100_000;
            c.observe_cpu(Mode::Or, &f(s), 1e-8 * (3 * s) as f64);
        }
        let p = c.cpu(Mode::Or, &f(50_000));
        assert!((p / 1.5e-3 - 1.0).abs() < 0.05, "{p}");
        assert!(c.cpu_error.count > 0 && c.cpu_error.mean() < 0.05);
        let empty = Features {
            shortest: 0,
            second: 0,
            sum: 0,
            terms: 0,
            ..Features::default()
        };
        assert!(c.cpu(Mode::And, &empty) > 0.0);
    }
}
