//! Fitting the synthetic collection to its targets: the number of templates per document (for the
//! distinct terms per document) and the variant threshold (for Heaps' law).

use rand::{Rng, SeedableRng};
use rand_distr::StandardNormal;
use rand_pcg::Pcg64Mcg;
use rayon::prelude::*;

use super::sample::{Forward, Sample};
use super::SynthOptions;

/// Runs of templates in the pilot that fits the document length.
pub(super) const PILOT_RUNS: usize = 20_000;

/// Templates per document: max(1, round(exp(mu + sigma·z))).
pub(super) fn run_length(mu: f64, sigma: f64, z: f64) -> u32 {
    (mu + sigma * z).exp().round().clamp(1.0, 1e6) as u32
}

/// Fits mu so that runs of templates have `target` distinct terms on average; returns (mu, estimate).
pub(super) fn fit_length(sample: &Sample, opts: &SynthOptions) -> (f64, f64) {
    let Forward { start, terms, .. } = sample.forward();
    let m = sample.lens.len();
    let mut rng = Pcg64Mcg::seed_from_u64(opts.seed ^ 0x5eed_1e57);
    let draws: Vec<(usize, f64)> = (0..PILOT_RUNS)
        .map(|_| (rng.random_range(0..m), rng.sample(StandardNormal)))
        .collect();
    let mut seen = vec![u32::MAX; sample.names.len()];
    let mut mean_distinct = |mu: f64| {
        let mut total = 0u64;
        for (run, &(s, z)) in draws.iter().enumerate() {
            for i in 0..run_length(mu, opts.length_sigma, z) as usize {
                let d = (s + i) % m;
                for &t in &terms[start[d] as usize..start[d + 1] as usize] {
                    if seen[t as usize] != run as u32 {
                        seen[t as usize] = run as u32;
                        total += 1;
                    }
                }
            }
            // Stamps are run numbers: reset between evaluations.
        }
        seen.fill(u32::MAX);
        total as f64 / draws.len() as f64
    };
    let (mut lo, mut hi) = (-4.0f64, 8.0f64);
    if mean_distinct(lo) >= opts.terms_per_doc {
        return (lo, mean_distinct(lo));
    }
    for _ in 0..30 {
        let mid = 0.5 * (lo + hi);
        if mean_distinct(mid) < opts.terms_per_doc {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    (hi, mean_distinct(hi))
}

/// Variants of a term seen in `df` templates when the threshold is c.
pub(super) fn variants(c: f64, df: u64) -> u32 {
    ((c / df as f64).floor() as u32).max(1)
}

/// The threshold c whose expected vocabulary (distinct variants realised over `occurrences` per term)
/// meets `target`; 0 when the sample's own vocabulary already does.
pub(super) fn fit_variants(sample: &Sample, passes: f64, target: f64) -> f64 {
    let dfs: Vec<u64> = (0..sample.names.len()).map(|t| sample.df(t)).collect();
    let expected = |c: f64| -> f64 {
        dfs.par_iter()
            .map(|&df| {
                let v = variants(c, df) as f64;
                let occ = df as f64 * passes;
                v * (1.0 - (1.0 - 1.0 / v).powf(occ))
            })
            .sum()
    };
    if expected(0.0) >= target {
        return 0.0;
    }
    let (mut lo, mut hi) = (0.0f64, 1.0f64);
    while expected(hi) < target && hi < 1e12 {
        hi *= 2.0;
    }
    for _ in 0..50 {
        let mid = 0.5 * (lo + hi);
        if expected(mid) < target {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    hi
}
