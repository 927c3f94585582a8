//! A synthetic collection of any size, generated directly as posting lists from a real sample index, so
//! that GOV2-scale workloads (25M documents, billions of postings) can be rebuilt on any machine in
//! minutes, deterministically from a seed.
//!
//! How the sample's statistics carry over (docs/synth.md has the reasoning and the validation):
//! - **Documents** are runs of consecutive sample documents ("templates"), taken in sample order and
//!   wrapping around: a synthetic document's terms are the union of its templates' terms, its term
//!   frequencies and length the sums. The number of templates per document is log-normal; its mean is
//!   fitted (on a pilot of 20,000 runs) so that documents have `terms_per_doc` distinct terms on average
//!   (GOV2: 5.7 billion postings over 25.2 million documents, 226). Term co-occurrence is thus the
//!   sample's own, and as the sample keeps the passages of one article together, so do the runs: docIDs
//!   are clustered as in the sample and compress alike.
//! - **Vocabulary** grows by Heaps' law V = K·n^β, fitted on prefixes of the sample: a term seen in fewer
//!   than c sample documents is split into ⌊c / df⌋ variants (the term itself and `term\x01i`), each
//!   occurrence taking one by a hash of (term, document), with c chosen so that the expected number of
//!   distinct terms meets the law at the synthetic collection's token count. Frequent terms are not
//!   split, and rare terms stay rare as the collection grows, as in real text.
//! - **Queries** need no mapping: every sample term keeps its name (variants add names), so a query log
//!   for the sample runs unchanged on the synthetic collection.

mod scores;

use std::path::{Path, PathBuf};
use std::time::Instant;

use indicatif::{ProgressBar, ProgressStyle};
use rand::{Rng, SeedableRng};
use rand_distr::StandardNormal;
use rand_pcg::Pcg64Mcg;
use rayon::prelude::*;

use crate::build::read_static_scores;
use crate::error::{IndexError, Result};
use crate::format::{DocOrder, IndexMeta};
use crate::order::{global_order, permuted};
use crate::reader::Index;
use crate::writer::{DocIds, DocTable, EncodedList, IndexWriter, ListEncoder, WriterOptions};

/// Parameters of a synthetic collection.
#[derive(Debug, Clone)]
pub struct SynthOptions {
    /// Documents to generate.
    pub docs: u32,
    /// Mean distinct terms per document to aim for (GOV2: 226).
    pub terms_per_doc: f64,
    /// Fraction of the sample's documents (its first ones) used as templates; below 1 for a hold-out
    /// validation against the whole sample.
    pub templates: f64,
    /// Spread (σ of the logarithm) of the number of templates per document.
    pub length_sigma: f64,
    /// Seed of every random choice.
    pub seed: u64,
    /// Codec and BM25 parameters of the output; its analyzer is the sample's.
    pub writer: WriterOptions,
    /// A `docid<TAB>score` file of static scores for the sample's documents: a synthetic document
    /// takes its first template's.
    pub static_scores: Option<PathBuf>,
    /// Renumber documents by descending global score with this α (papers/000 eq. 4).
    pub reorder_alpha: Option<f32>,
}

/// What a generation did, for the report.
#[derive(Debug, Clone, serde::Serialize)]
pub struct SynthReport {
    /// Sample documents used as templates.
    pub templates: u64,
    /// Mean templates per synthetic document (fitted).
    pub templates_per_doc: f64,
    /// Pilot estimate of the mean distinct terms per document.
    pub pilot_terms_per_doc: f64,
    /// Passes over the templates.
    pub passes: f64,
    /// Heaps' law fitted on the sample: V = k · tokens^beta.
    pub heaps_k: f64,
    /// Heaps' exponent.
    pub heaps_beta: f64,
    /// Vocabulary Heaps' law predicts for the synthetic collection's tokens.
    pub vocabulary_target: u64,
    /// Sample terms seen in fewer documents than this are split into variants.
    pub variant_threshold: f64,
    /// Documents, terms, postings and tokens generated.
    pub docs: u64,
    /// Distinct terms generated.
    pub terms: u64,
    /// Postings generated.
    pub postings: u64,
    /// Tokens (sum of document lengths).
    pub tokens: u64,
    /// Template documents without a line in the static-score file (their documents score 0).
    pub static_missing: u64,
    /// Seconds spent on static scores and the global-score order (part of `seconds`).
    pub order_seconds: f64,
    /// Wall time in seconds.
    pub seconds: f64,
}

/// Synthetic postings generated per parallel round (bounds the memory in flight).
const ROUND_POSTINGS: u64 = 400_000_000;
/// Runs of templates in the pilot that fits the document length.
const PILOT_RUNS: usize = 20_000;

/// The sample's template postings, term-major, restricted to the first `templates` documents.
struct Sample {
    names: Vec<Vec<u8>>,
    offsets: Vec<u64>,
    docs: Vec<u32>,
    tfs: Vec<u32>,
    lens: Vec<u32>,
}

impl Sample {
    fn load(index: &Index, templates: u32) -> Result<Sample> {
        let terms: Vec<(Vec<u8>, u32)> = index.terms().collect();
        let lists: Vec<(Vec<u32>, Vec<u32>)> = terms
            .par_iter()
            .map(|(_, id)| {
                let (mut d, mut f) = index.postings(*id).decode_all()?;
                let keep = d.partition_point(|&x| x < templates);
                d.truncate(keep);
                f.truncate(keep);
                Ok((d, f))
            })
            .collect::<Result<_>>()?;
        let mut offsets = Vec::with_capacity(terms.len() + 1);
        offsets.push(0u64);
        let (mut docs, mut tfs) = (Vec::new(), Vec::new());
        let mut names = Vec::new();
        for ((name, _), (d, f)) in terms.into_iter().zip(lists) {
            if d.is_empty() {
                continue;
            }
            names.push(name);
            docs.extend_from_slice(&d);
            tfs.extend_from_slice(&f);
            offsets.push(docs.len() as u64);
        }
        Ok(Sample {
            names,
            offsets,
            docs,
            tfs,
            lens: index.doc_lens()[..templates as usize].to_vec(),
        })
    }

    fn list(&self, t: usize) -> (&[u32], &[u32]) {
        let (a, b) = (self.offsets[t] as usize, self.offsets[t + 1] as usize);
        (&self.docs[a..b], &self.tfs[a..b])
    }

    fn df(&self, t: usize) -> u64 {
        self.offsets[t + 1] - self.offsets[t]
    }

    /// Per template document, its term indexes and frequencies (compressed sparse rows).
    fn forward(&self) -> Forward {
        let m = self.lens.len();
        let mut start = vec![0u64; m + 1];
        for &d in &self.docs {
            start[d as usize + 1] += 1;
        }
        for i in 0..m {
            start[i + 1] += start[i];
        }
        let mut fill = start.clone();
        let mut terms = vec![0u32; self.docs.len()];
        let mut tfs = vec![0u32; self.docs.len()];
        for t in 0..self.names.len() {
            let (docs, freqs) = self.list(t);
            for (&d, &f) in docs.iter().zip(freqs) {
                let i = fill[d as usize] as usize;
                (terms[i], tfs[i]) = (t as u32, f);
                fill[d as usize] += 1;
            }
        }
        Forward { start, terms, tfs }
    }

    /// Heaps' law V = k · n^β fitted by least squares on the log of prefixes of the templates (1/64 of
    /// them up to all): n tokens, V terms first seen in the prefix.
    fn heaps(&self) -> (f64, f64) {
        let m = self.lens.len();
        let mut first: Vec<u32> = (0..self.names.len()).map(|t| self.list(t).0[0]).collect();
        first.sort_unstable();
        let mut tokens = vec![0u64; m + 1];
        for i in 0..m {
            tokens[i + 1] = tokens[i] + self.lens[i] as u64;
        }
        let points: Vec<(f64, f64)> = (0..7)
            .map(|i| (m >> i).max(1))
            .filter(|&p| tokens[p] > 0)
            .map(|p| {
                let v = first.partition_point(|&d| (d as usize) < p);
                ((tokens[p] as f64).ln(), (v.max(1) as f64).ln())
            })
            .collect();
        let n = points.len() as f64;
        let (sx, sy) = points.iter().fold((0.0, 0.0), |a, p| (a.0 + p.0, a.1 + p.1));
        let (mx, my) = (sx / n, sy / n);
        let sxx: f64 = points.iter().map(|p| (p.0 - mx).powi(2)).sum();
        let sxy: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
        let beta = if sxx > 0.0 { sxy / sxx } else { 1.0 };
        ((my - beta * mx).exp(), beta)
    }
}

/// The sample's forward index: template d's terms and frequencies are at `start[d]..start[d + 1]`.
struct Forward {
    start: Vec<u64>,
    terms: Vec<u32>,
    tfs: Vec<u32>,
}

/// Templates per document: max(1, round(exp(mu + sigma·z))).
fn run_length(mu: f64, sigma: f64, z: f64) -> u32 {
    (mu + sigma * z).exp().round().clamp(1.0, 1e6) as u32
}

/// Fits mu so that runs of templates have `target` distinct terms on average; returns (mu, estimate).
fn fit_length(sample: &Sample, opts: &SynthOptions) -> (f64, f64) {
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
fn variants(c: f64, df: u64) -> u32 {
    ((c / df as f64).floor() as u32).max(1)
}

/// The threshold c whose expected vocabulary (distinct variants realised over `occurrences` per term)
/// meets `target`; 0 when the sample's own vocabulary already does.
fn fit_variants(sample: &Sample, passes: f64, target: f64) -> f64 {
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

/// A stable 64-bit mix (splitmix64's finaliser) for per-(term, document) variant choices.
fn mix(mut x: u64) -> u64 {
    x ^= x >> 30;
    x = x.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x ^= x >> 27;
    x = x.wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// The synthetic documents: for each position g of the template stream (template g mod M of pass
/// g / M), the document it belongs to.
struct Layout {
    doc_of: Vec<u32>,
    lens: Vec<u32>,
}

fn layout(sample: &Sample, opts: &SynthOptions, mu: f64) -> Layout {
    let m = sample.lens.len();
    let mut rng = Pcg64Mcg::seed_from_u64(opts.seed);
    let mut doc_of = Vec::new();
    let mut lens = Vec::with_capacity(opts.docs as usize);
    let mut g = 0usize;
    for d in 0..opts.docs {
        let r = run_length(mu, opts.length_sigma, rng.sample(StandardNormal));
        let mut len = 0u64;
        for _ in 0..r {
            len += sample.lens[g % m] as u64;
            doc_of.push(d);
            g += 1;
        }
        lens.push(len.min(u32::MAX as u64) as u32);
    }
    Layout { doc_of, lens }
}

/// One base term's lists: the term itself, then its variants in name order; docIDs renumbered by
/// `new_id` when given.
fn generate_term(
    sample: &Sample,
    layout: &Layout,
    t: usize,
    nvar: u32,
    seed: u64,
    new_id: Option<&[u32]>,
    enc: &ListEncoder<'_>,
) -> Result<Vec<EncodedList>> {
    let m = sample.lens.len();
    let (docs, tfs) = sample.list(t);
    let mut lists: Vec<(Vec<u32>, Vec<u32>)> = vec![(Vec::new(), Vec::new()); nvar as usize];
    let salt = mix(seed ^ (t as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15));
    for base in (0..layout.doc_of.len()).step_by(m) {
        for (&p, &tf) in docs.iter().zip(tfs) {
            let Some(&d) = layout.doc_of.get(base + p as usize) else {
                break;
            };
            let v = if nvar == 1 {
                0
            } else {
                (mix(salt ^ d as u64) % nvar as u64) as usize
            };
            let (ld, lf) = &mut lists[v];
            if ld.last() == Some(&d) {
                let last = lf.last_mut().expect("parallel to docs");
                *last = last.saturating_add(tf);
            } else {
                ld.push(d);
                lf.push(tf);
            }
        }
    }
    if let Some(new_id) = new_id {
        scores::renumber(&mut lists, new_id);
    }
    let name = &sample.names[t];
    let mut order: Vec<(Vec<u8>, usize)> = (0..nvar as usize)
        .map(|v| {
            let mut n = name.clone();
            if v > 0 {
                n.push(1);
                n.extend_from_slice(v.to_string().as_bytes());
            }
            (n, v)
        })
        .collect();
    order.sort_unstable();
    let mut out = Vec::new();
    for (n, v) in order {
        let (d, f) = &lists[v];
        if let Some(list) = enc.encode(&n, d, f)? {
            out.push(list);
        }
    }
    Ok(out)
}

/// Generates a synthetic collection like `sample` into `out` (written atomically, as every index).
pub fn generate(
    sample_index: &Index,
    out: &Path,
    opts: &SynthOptions,
    progress: bool,
) -> Result<(IndexMeta, SynthReport)> {
    let clock = Instant::now();
    let n0 = sample_index.num_docs();
    if n0 == 0 {
        return Err(IndexError::Invalid(format!(
            "{}: the sample index has no documents",
            sample_index.dir().display()
        )));
    }
    if !(opts.templates > 0.0 && opts.templates <= 1.0) {
        return Err(IndexError::Invalid(format!(
            "templates {}: a fraction of the sample's documents in (0, 1] is needed",
            opts.templates
        )));
    }
    if opts.docs == 0 {
        return Err(IndexError::Invalid("0 documents: ask for at least 1".into()));
    }
    if let Some(alpha) = opts.reorder_alpha.filter(|a| !(0.0..=1.0).contains(a)) {
        return Err(IndexError::Invalid(format!(
            "alpha, the static score's weight in the global-score order, must lie in [0, 1] (got {alpha})"
        )));
    }
    let static_map = opts
        .static_scores
        .as_deref()
        .map(read_static_scores)
        .transpose()?;
    let m = ((n0 as f64 * opts.templates).round() as u32).clamp(1, n0);
    let sample = Sample::load(sample_index, m)?;
    let (mu, pilot) = fit_length(&sample, opts);
    let layout = layout(&sample, opts, mu);
    let g = layout.doc_of.len();
    let passes = g as f64 / m as f64;
    let tokens: u64 = layout.lens.iter().map(|&l| l as u64).sum();
    let (heaps_k, heaps_beta) = sample.heaps();
    let target = heaps_k * (tokens as f64).powf(heaps_beta);
    let c = fit_variants(&sample, passes, target);

    let mut ids = DocIds::default();
    for d in 0..opts.docs {
        ids.push(&format!("synth-{d}"));
    }
    let ordering = Instant::now();
    let starts = scores::run_starts(&layout);
    let (static_scores, static_missing) = match &static_map {
        Some(map) => {
            let (s, missing) = scores::static_scores(sample_index, m as usize, &starts, map);
            (Some(s), missing)
        }
        None => (None, 0),
    };
    let (docs, new_id, doc_order) = match opts.reorder_alpha {
        None => (
            DocTable {
                ids,
                lens: layout.lens.clone(),
                static_scores,
                global_scores: None,
            },
            None,
            DocOrder::Input,
        ),
        Some(alpha) => {
            let max_tfs = scores::max_tfs(&sample, &starts);
            let g = global_order(
                alpha,
                opts.writer.bm25,
                &layout.lens,
                &max_tfs,
                static_scores.as_deref(),
            );
            let table = DocTable {
                ids: ids.permuted(&g.order),
                lens: permuted(&layout.lens, &g.order),
                static_scores: static_scores.as_deref().map(|s| permuted(s, &g.order)),
                global_scores: Some(g.scores),
            };
            (table, Some(g.new_id), DocOrder::GlobalScore { alpha })
        }
    };
    drop(starts);
    let order_seconds = ordering.elapsed().as_secs_f64();
    let wopts = WriterOptions {
        analyzer: sample_index.meta().analyzer,
        doc_order,
        ..opts.writer
    };
    let mut writer = IndexWriter::create(out, wopts, docs)?;
    let nterms = sample.names.len();
    let work: Vec<u64> = (0..nterms)
        .map(|t| (sample.df(t) as f64 * passes).ceil() as u64)
        .collect();
    let bar = if progress {
        let b = ProgressBar::new(work.iter().sum());
        b.set_style(
            ProgressStyle::with_template("synth {bar:40} {percent}% of postings, {eta} left")
                .expect("valid template"),
        );
        b
    } else {
        ProgressBar::hidden()
    };
    let mut t = 0;
    while t < nterms {
        let mut end = t;
        let mut round = 0u64;
        while end < nterms && (end == t || round + work[end] <= ROUND_POSTINGS) {
            round += work[end];
            end += 1;
        }
        let lists: Vec<Vec<EncodedList>> = {
            let enc = writer.encoder();
            (t..end)
                .into_par_iter()
                .map(|i| {
                    let nvar = variants(c, sample.df(i));
                    generate_term(&sample, &layout, i, nvar, opts.seed, new_id.as_deref(), &enc)
                })
                .collect::<Result<_>>()?
        };
        for list in lists.into_iter().flatten() {
            writer.push(list)?;
        }
        bar.inc(round);
        t = end;
    }
    bar.finish_and_clear();
    let meta = writer.finish()?;
    let report = SynthReport {
        templates: m as u64,
        templates_per_doc: passes * m as f64 / opts.docs as f64,
        pilot_terms_per_doc: pilot,
        passes,
        heaps_k,
        heaps_beta,
        vocabulary_target: target.round() as u64,
        variant_threshold: c,
        docs: meta.num_docs,
        terms: meta.num_terms,
        postings: meta.num_postings,
        tokens,
        static_missing,
        order_seconds,
        seconds: clock.elapsed().as_secs_f64(),
    };
    Ok((meta, report))
}
