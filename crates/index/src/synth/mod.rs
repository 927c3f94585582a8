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

mod fit;
mod lists;
mod sample;
mod scores;

use std::path::{Path, PathBuf};
use std::time::Instant;

use indicatif::{ProgressBar, ProgressStyle};
use rayon::prelude::*;

use crate::build::read_static_scores;
use crate::error::{IndexError, Result};
use crate::format::{DocOrder, IndexMeta};
use crate::order::{check_alpha, global_order, permuted};
use crate::reader::Index;
use crate::shards::{entries, ShardSplit, ShardWriters};
use crate::writer::{DocIds, DocTable, EncodedList, IndexWriter, WriterOptions};
use fit::{fit_length, fit_variants, variants};
use lists::{encode_parts, generate_term, layout};
use sample::Sample;

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
    /// Renumber documents by descending global score with this α (docs/references.md#pruned-list-caching eq. 4).
    pub reorder_alpha: Option<f32>,
    /// Write a sharded index of this many shards of contiguous docIDs (after any renumbering), with
    /// the collection's statistics, as `index --shards` does; `None`: one index.
    pub shards: Option<usize>,
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
    /// Template documents without a line in the static-score file (a document that starts with one
    /// scores 0).
    pub static_missing: u64,
    /// Seconds spent on static scores and the global-score order (part of `seconds`), not counting the
    /// lists sorted again after renumbering (that is part of generating them).
    pub order_seconds: f64,
    /// Wall time in seconds.
    pub seconds: f64,
}

/// Synthetic postings generated per parallel round (bounds the memory in flight).
const ROUND_POSTINGS: u64 = 400_000_000;

/// Base terms generated per parallel round: each list held until its round is written costs its
/// records besides its postings, and most terms are rare.
const ROUND_TERMS: usize = 1 << 16;

/// Where the generated lists go: one index, or a sharded index's head and shards.
enum Sink {
    One(IndexWriter),
    Sharded(ShardWriters),
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
    // Checked before the sample is read and fitted, which takes minutes at scale.
    if let Some(n) = opts.shards {
        ShardSplit::Count(n).starts(opts.docs as u64)?;
    }
    check_alpha(opts.reorder_alpha)?;
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
    let mut sink = match opts.shards {
        None => Sink::One(IndexWriter::create(out, wopts, docs)?),
        Some(n) => Sink::Sharded(ShardWriters::create(
            out,
            wopts,
            docs,
            &ShardSplit::Count(n),
            false,
        )?),
    };
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
        while end < nterms && (end == t || (round + work[end] <= ROUND_POSTINGS && end - t < ROUND_TERMS)) {
            round += work[end];
            end += 1;
        }
        let lists_of = |i: usize| {
            let nvar = variants(c, sample.df(i));
            generate_term(&sample, &layout, i, nvar, opts.seed, new_id.as_deref())
        };
        match &mut sink {
            Sink::One(writer) => {
                let lists: Vec<Vec<EncodedList<'static>>> = {
                    let enc = writer.encoder();
                    (t..end)
                        .into_par_iter()
                        .map(|i| {
                            lists_of(i)
                                .iter()
                                .filter_map(|(term, docs, freqs)| enc.encode(term, docs, freqs).transpose())
                                .collect()
                        })
                        .collect::<Result<_>>()?
                };
                for list in lists.into_iter().flatten() {
                    writer.push(list)?;
                }
            }
            Sink::Sharded(w) => {
                // Each list's document frequency and total frequency for the head, and its parts in
                // the shards that hold any of it (by shard), numbered from the shard's first
                // document and encoded with the collection's statistics.
                type Parts = (Vec<u8>, u32, u64, Vec<(usize, EncodedList<'static>)>);
                let lists: Vec<Vec<Parts>> = {
                    let encs: Vec<_> = w.writers.iter().map(IndexWriter::encoder).collect();
                    (t..end)
                        .into_par_iter()
                        .map(|i| {
                            lists_of(i)
                                .into_iter()
                                .map(|l| {
                                    let cf = l.2.iter().map(|&f| f as u64).sum();
                                    let parts = encode_parts(&encs, &w.ranges, &l)?;
                                    Ok((l.0, l.1.len() as u32, cf, parts))
                                })
                                .collect::<Result<_>>()
                        })
                        .collect::<Result<_>>()?
                };
                for (term, df, cf, parts) in lists.into_iter().flatten() {
                    w.head.push_head(&term, df, cf)?;
                    for (shard, list) in parts {
                        w.writers[shard].push(list)?;
                    }
                }
            }
        }
        bar.inc(round);
        t = end;
    }
    bar.finish_and_clear();
    let meta = match sink {
        Sink::One(writer) => writer.finish()?,
        Sink::Sharded(ShardWriters {
            mut head,
            ranges,
            writers,
        }) => {
            for w in writers {
                w.finish()?;
            }
            head.set_shards(entries(&ranges));
            head.finish()?
        }
    };
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
