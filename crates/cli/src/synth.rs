//! `warpsearch synth` (a synthetic collection calibrated on a real sample) and `warpsearch synth-check`
//! (how close a synthetic index is to a real one).

use std::collections::{BTreeSet, HashMap};
use std::io::Write;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use rayon::prelude::*;
use warpsearch_index::synth::{generate, SynthOptions};
use warpsearch_index::{inspect, Bm25Params, DocOrder, Index, WriterOptions};

use crate::args::{SynthArgs, SynthCheckArgs};
use crate::open;
use crate::shared::queries::read_query_file;

pub fn run(a: SynthArgs) -> Result<()> {
    if !(a.k1 > 0.0 && a.k1.is_finite() && (0.0..=1.0).contains(&a.b)) {
        bail!("BM25 needs k1 > 0 and 0 <= b <= 1 (got k1 {}, b {})", a.k1, a.b);
    }
    if !(a.terms_per_doc > 0.0 && a.length_sigma >= 0.0) {
        bail!("--terms-per-doc must be above 0 and --length-sigma at least 0");
    }
    a.order.note();
    let sample = open(&a.like)?;
    if sample.is_sharded() {
        anyhow::bail!(
            "--like {}: a sharded index; the sample must be one index (build it without --shards)",
            a.like.display()
        );
    }
    let opts = SynthOptions {
        docs: a.docs,
        terms_per_doc: a.terms_per_doc,
        templates: a.templates,
        length_sigma: a.length_sigma,
        seed: a.seed,
        writer: WriterOptions {
            codec: a.codec,
            analyzer: sample.meta().analyzer,
            bm25: Bm25Params { k1: a.k1, b: a.b },
            doc_order: DocOrder::Input,
            force: a.force,
        },
        static_scores: a.order.static_scores.clone(),
        reorder_alpha: a.order.reorder_alpha()?,
        shards: a.shards.map(|n| n as usize),
    };
    let (_, r) = generate(&sample, &a.output, &opts, true)
        .with_context(|| format!("generating {}", a.output.display()))?;
    eprintln!(
        "synthetic collection {}{}: {} documents, {} terms, {} postings ({:.1} per document), {} tokens, in {:.1} s",
        a.output.display(),
        a.shards.map_or(String::new(), |n| format!(" ({n} shards)")),
        r.docs,
        r.terms,
        r.postings,
        r.postings as f64 / r.docs.max(1) as f64,
        r.tokens,
        r.seconds
    );
    eprintln!(
        "calibration: {} template documents, {:.2} per document (pilot: {:.1} distinct terms), {:.1} passes; \
         Heaps V = {:.2} n^{:.3} -> {} terms; terms in fewer than {:.1} templates split into variants",
        r.templates,
        r.templates_per_doc,
        r.pilot_terms_per_doc,
        r.passes,
        r.heaps_k,
        r.heaps_beta,
        r.vocabulary_target,
        r.variant_threshold
    );
    if opts.static_scores.is_some() {
        eprintln!(
            "static scores: {} template documents had none (0 for documents starting with one)",
            r.static_missing
        );
    }
    if let Some(alpha) = opts.reorder_alpha {
        eprintln!(
            "global-score order (α {alpha}): {:.1} s, besides sorting the lists again",
            r.order_seconds
        );
    }
    if let Some(path) = &a.report {
        std::fs::write(path, serde_json::to_vec_pretty(&r)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

/// Nearest-rank quantiles of `v` at `qs`.
fn quantiles(mut v: Vec<f64>, qs: &[f64]) -> Vec<f64> {
    v.sort_by(f64::total_cmp);
    qs.iter()
        .map(|&q| crate::shared::stats::nearest_rank(&v, q).unwrap_or(f64::NAN))
        .collect()
}

fn intersection(a: &[u32], b: &[u32]) -> u64 {
    let (mut i, mut j, mut n) = (0, 0, 0u64);
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                n += 1;
                i += 1;
                j += 1;
            }
        }
    }
    n
}

/// Decoded docIDs of `terms` in `index` (absent terms are left out).
fn lists(index: &Index, terms: &[String]) -> Result<HashMap<String, Vec<u32>>> {
    terms
        .par_iter()
        .filter_map(|t| index.term_id(t).map(|id| (t, id)))
        .map(|(t, id)| Ok((t.clone(), index.postings(id).decode_all()?.0)))
        .collect()
}

pub fn check(a: SynthCheckArgs) -> Result<()> {
    let real = open(&a.real)?;
    let synth = open(&a.synth)?;
    if real.is_sharded() || synth.is_sharded() {
        anyhow::bail!("synth-check compares two indexes of one directory each: build them without --shards");
    }
    let mut warnings = Vec::new();
    let lines = read_query_file(&a.queries, &mut warnings)?;
    let analyzer = real.meta().analyzer;
    let mut pairs = BTreeSet::new();
    let mut order = Vec::new();
    'lines: for l in &lines {
        let mut terms = BTreeSet::new();
        analyzer.for_each_term(&l.text, |t| {
            if real.term_id(t).is_some() {
                terms.insert(t.to_owned());
            }
        });
        let terms: Vec<String> = terms.into_iter().collect();
        for i in 0..terms.len() {
            for j in i + 1..terms.len() {
                let p = (terms[i].clone(), terms[j].clone());
                if pairs.insert(p.clone()) {
                    order.push(p);
                    if order.len() == a.pairs {
                        break 'lines;
                    }
                }
            }
        }
    }
    if order.is_empty() {
        bail!(
            "{}: no query has two terms known to {}",
            a.queries.display(),
            a.real.display()
        );
    }
    let started = Instant::now();
    let terms: Vec<String> = order
        .iter()
        .flat_map(|(x, y)| [x.clone(), y.clone()])
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let (rl, sl) = (lists(&real, &terms)?, lists(&synth, &terms)?);
    let empty = Vec::new();
    let sizes: Vec<(u64, u64)> = order
        .par_iter()
        .map(|(x, y)| {
            let get = |m: &HashMap<String, Vec<u32>>, t: &String| m.get(t).unwrap_or(&empty).clone();
            (
                intersection(&get(&rl, x), &get(&rl, y)),
                intersection(&get(&sl, x), &get(&sl, y)),
            )
        })
        .collect();
    let ratio = |s: u64, r: u64| (s as f64 + 1.0) / (r as f64 + 1.0);
    let ratios: Vec<f64> = sizes.iter().map(|&(r, s)| ratio(s, r)).collect();
    let big: Vec<f64> = sizes
        .iter()
        .filter(|&&(r, _)| r >= 100)
        .map(|&(r, s)| ratio(s, r))
        .collect();
    let within =
        |v: &[f64]| v.iter().filter(|&&x| (0.5..=2.0).contains(&x)).count() as f64 / v.len().max(1) as f64;
    let df_ratios: Vec<f64> = terms
        .iter()
        .map(|t| {
            let n = |m: &HashMap<String, Vec<u32>>| m.get(t).map_or(0, |l| l.len()) as u64;
            ratio(n(&sl), n(&rl))
        })
        .collect();
    let (rs, ss) = (inspect::stats(&real, 0)?, inspect::stats(&synth, 0)?);
    let qs = [0.05, 0.25, 0.5, 0.75, 0.95];
    let report = serde_json::json!({
        "real": { "index": a.real, "docs": rs.docs, "terms": rs.terms, "postings": rs.postings,
                  "doc_bits_per_posting": rs.doc_bits_per_posting, "freq_bits_per_posting": rs.freq_bits_per_posting },
        "synth": { "index": a.synth, "docs": ss.docs, "terms": ss.terms, "postings": ss.postings,
                   "doc_bits_per_posting": ss.doc_bits_per_posting, "freq_bits_per_posting": ss.freq_bits_per_posting },
        "pairs": order.len(),
        "intersection_ratio_quantiles": { "q": qs, "all": quantiles(ratios.clone(), &qs), "real_at_least_100": quantiles(big.clone(), &qs) },
        "within_2x": { "all": within(&ratios), "real_at_least_100": within(&big), "pairs_real_at_least_100": big.len() },
        "query_term_df_ratio_quantiles": quantiles(df_ratios, &qs),
        "seconds": started.elapsed().as_secs_f64(),
    });
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "real  {}: {} docs, {} terms, {} postings, {:.2} bits/docID, {:.2} bits/freq",
        a.real.display(),
        rs.docs,
        rs.terms,
        rs.postings,
        rs.doc_bits_per_posting,
        rs.freq_bits_per_posting
    )?;
    writeln!(
        out,
        "synth {}: {} docs, {} terms, {} postings, {:.2} bits/docID, {:.2} bits/freq",
        a.synth.display(),
        ss.docs,
        ss.terms,
        ss.postings,
        ss.doc_bits_per_posting,
        ss.freq_bits_per_posting
    )?;
    let show = |v: Vec<f64>| v.iter().map(|x| format!("{x:.2}")).collect::<Vec<_>>().join(" ");
    writeln!(
        out,
        "{} query term pairs: synthetic / real intersection size (+1 each), quantiles 5/25/50/75/95%: {}; within 2x: {:.1}%",
        order.len(),
        show(quantiles(ratios.clone(), &qs)),
        100.0 * within(&ratios)
    )?;
    writeln!(
        out,
        "{} pairs with a real intersection of 100 or more: quantiles {}; within 2x: {:.1}%",
        big.len(),
        show(quantiles(big.clone(), &qs)),
        100.0 * within(&big)
    )?;
    writeln!(
        out,
        "query terms' df, synthetic / real, quantiles: {}",
        show(
            report["query_term_df_ratio_quantiles"]
                .as_array()
                .expect("an array")
                .iter()
                .filter_map(|v| v.as_f64())
                .collect()
        )
    )?;
    if rs.docs != ss.docs {
        writeln!(
            out,
            "note: the collections differ in size ({} vs {} documents): intersection sizes scale with it",
            rs.docs, ss.docs
        )?;
    }
    if let Some(path) = &a.json {
        std::fs::write(path, serde_json::to_vec_pretty(&report)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}
