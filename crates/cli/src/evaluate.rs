//! `warpsearch evaluate`: trec_eval's nDCG@10 (ndcg_cut_10), MAP (map), P@10 (P_10) and recall@1000
//! (recall_1000) from a TREC run and TREC qrels.
//!
//! As trec_eval: documents of a query are ranked by descending score, ties by descending docid (the
//! rank column is ignored); a document is relevant when its judgment is ≥ 1; nDCG uses the judgment as
//! the gain with log2(rank + 1) discounts; a query with no relevant document scores 0; averages run over
//! the queries in both files (or, with `all_queries`, over every query of the qrels, as `trec_eval -c`).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;

use anyhow::{bail, Context, Result};

use crate::args::EvaluateArgs;

/// Judgments: query → document → relevance.
pub type Qrels = BTreeMap<String, HashMap<String, i32>>;
/// A run: query → (document, score) in file order.
pub type Run = BTreeMap<String, Vec<(String, f64)>>;

/// The four measures of one query (or their means).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Measures {
    /// nDCG at 10.
    pub ndcg10: f64,
    /// Average precision over the whole ranking.
    pub map: f64,
    /// Precision at 10.
    pub p10: f64,
    /// Recall at 1000.
    pub recall1000: f64,
}

fn fields<'a>(path: &Path, line: usize, text: &'a str, n: usize, what: &str) -> Result<Vec<&'a str>> {
    let f: Vec<&str> = text.split_whitespace().collect();
    if f.len() != n {
        bail!(
            "{}:{line}: expected {n} fields ({what}), found {}",
            path.display(),
            f.len()
        );
    }
    Ok(f)
}

/// Reads TREC qrels: `qid iter docid relevance`.
pub fn read_qrels(path: &Path) -> Result<Qrels> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading qrels {}", path.display()))?;
    let mut qrels = Qrels::new();
    for (i, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let f = fields(path, i + 1, line, 4, "qid iter docid relevance")?;
        let rel: i32 = f[3].parse().with_context(|| {
            format!(
                "{}:{}: relevance '{}' is not an integer",
                path.display(),
                i + 1,
                f[3]
            )
        })?;
        qrels
            .entry(f[0].to_owned())
            .or_default()
            .insert(f[2].to_owned(), rel);
    }
    Ok(qrels)
}

/// Reads a TREC run: `qid Q0 docid rank score tag`; a document twice in one query is an error.
pub fn read_run(path: &Path) -> Result<Run> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading run {}", path.display()))?;
    let mut run = Run::new();
    let mut seen = HashSet::new();
    for (i, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let f = fields(path, i + 1, line, 6, "qid Q0 docid rank score tag")?;
        let score: f64 = f[4]
            .parse()
            .with_context(|| format!("{}:{}: score '{}' is not a number", path.display(), i + 1, f[4]))?;
        if !seen.insert((f[0].to_owned(), f[2].to_owned())) {
            bail!(
                "{}:{}: document {} appears twice for query {}",
                path.display(),
                i + 1,
                f[2],
                f[0]
            );
        }
        run.entry(f[0].to_owned())
            .or_default()
            .push((f[2].to_owned(), score));
    }
    Ok(run)
}

/// The measures of one query.
pub fn measure(ranked: &[(String, f64)], judged: &HashMap<String, i32>) -> Measures {
    let mut ranked: Vec<&(String, f64)> = ranked.iter().collect();
    ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| b.0.cmp(&a.0)));
    let rel = |doc: &str| judged.get(doc).copied().unwrap_or(0);
    let num_rel = judged.values().filter(|&&r| r >= 1).count();
    if num_rel == 0 {
        return Measures::default();
    }
    let (mut found, mut ap, mut dcg, mut p10, mut r1000) = (0usize, 0.0, 0.0, 0usize, 0usize);
    for (i, (doc, _)) in ranked.iter().enumerate() {
        let r = rel(doc);
        if r >= 1 {
            found += 1;
            ap += found as f64 / (i + 1) as f64;
            if i < 10 {
                p10 += 1;
                dcg += r as f64 / ((i + 2) as f64).log2();
            }
            if i < 1000 {
                r1000 += 1;
            }
        }
    }
    let mut gains: Vec<i32> = judged.values().copied().filter(|&r| r >= 1).collect();
    gains.sort_unstable_by(|a, b| b.cmp(a));
    let idcg: f64 = gains
        .iter()
        .take(10)
        .enumerate()
        .map(|(i, &g)| g as f64 / ((i + 2) as f64).log2())
        .sum();
    Measures {
        ndcg10: dcg / idcg,
        map: ap / num_rel as f64,
        p10: p10 as f64 / 10.0,
        recall1000: r1000 as f64 / num_rel as f64,
    }
}

/// Per-query measures and their mean.
pub fn evaluate(qrels: &Qrels, run: &Run, all_queries: bool) -> (Vec<(String, Measures)>, Measures) {
    let empty = Vec::new();
    let per: Vec<(String, Measures)> = qrels
        .iter()
        .filter(|(q, _)| all_queries || run.contains_key(*q))
        .map(|(q, judged)| (q.clone(), measure(run.get(q).unwrap_or(&empty), judged)))
        .collect();
    let n = per.len().max(1) as f64;
    let mean = per.iter().fold(Measures::default(), |m, (_, x)| Measures {
        ndcg10: m.ndcg10 + x.ndcg10 / n,
        map: m.map + x.map / n,
        p10: m.p10 + x.p10 / n,
        recall1000: m.recall1000 + x.recall1000 / n,
    });
    (per, mean)
}

pub fn run(a: EvaluateArgs) -> Result<()> {
    let qrels = read_qrels(&a.qrels)?;
    let run = read_run(&a.run)?;
    let (per, mean) = evaluate(&qrels, &run, a.all_queries);
    let unjudged = run.keys().filter(|q| !qrels.contains_key(*q)).count();
    if unjudged > 0 {
        eprintln!("note: {unjudged} queries of the run have no judgments and are not counted");
    }
    let mut missing: Vec<&String> = qrels.keys().filter(|q| !run.contains_key(*q)).collect();
    if !missing.is_empty() {
        missing.sort();
        let shown: Vec<&str> = missing.iter().take(5).map(|q| q.as_str()).collect();
        let effect = if a.all_queries {
            "they count as 0 (--all-queries)"
        } else {
            "they are left out of the averages; --all-queries counts them as 0, as trec_eval -c does"
        };
        eprintln!(
            "warning: {} judged queries have no results in the run (e.g. {}): {effect}",
            missing.len(),
            shown.join(", ")
        );
    }
    let print = |q: &str, m: &Measures| {
        println!("ndcg_cut_10\t{q}\t{:.4}", m.ndcg10);
        println!("map\t{q}\t{:.4}", m.map);
        println!("P_10\t{q}\t{:.4}", m.p10);
        println!("recall_1000\t{q}\t{:.4}", m.recall1000);
    };
    if a.per_query {
        for (q, m) in &per {
            print(q, m);
        }
    }
    println!("num_q\tall\t{}", per.len());
    print("all", &mean);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ranked(docs: &[&str]) -> Vec<(String, f64)> {
        docs.iter()
            .enumerate()
            .map(|(i, d)| (d.to_string(), 100.0 - i as f64))
            .collect()
    }

    #[test]
    fn measures_by_hand() {
        let judged: HashMap<String, i32> = [("a", 1), ("b", 2), ("c", 0), ("z", 1)]
            .iter()
            .map(|(d, r)| (d.to_string(), *r))
            .collect();
        // Ranking: a (rel 1), c (0), b (2), x (unjudged); z is never retrieved. 3 relevant.
        let m = measure(&ranked(&["a", "c", "b", "x"]), &judged);
        assert!((m.map - (1.0 + 2.0 / 3.0) / 3.0).abs() < 1e-12);
        assert!((m.p10 - 0.2).abs() < 1e-12);
        assert!((m.recall1000 - 2.0 / 3.0).abs() < 1e-12);
        let dcg = 1.0 + 2.0 / 4f64.log2();
        let idcg = 2.0 + 1.0 / 3f64.log2() + 1.0 / 4f64.log2();
        assert!((m.ndcg10 - dcg / idcg).abs() < 1e-12);
        // Equal scores rank by descending docid, whatever the file order.
        let tied = vec![("a".to_string(), 1.0), ("b".to_string(), 1.0)];
        let m = measure(&tied, &judged);
        assert!((m.map - (1.0 / 1.0 + 2.0 / 2.0) / 3.0).abs() < 1e-12);
        let only_a = [("a".to_string(), 1)].into_iter().collect();
        assert_eq!(measure(&tied, &only_a).map, 0.5);
        assert_eq!(measure(&tied, &HashMap::new()), Measures::default());
    }

    #[test]
    fn averages_over_the_intersection_or_all_judged_queries() {
        let qrels: Qrels = [("1", "a"), ("2", "b")]
            .iter()
            .map(|(q, d)| (q.to_string(), [(d.to_string(), 1)].into_iter().collect()))
            .collect();
        let run: Run = [
            ("1".to_string(), ranked(&["a"])),
            ("9".to_string(), ranked(&["b"])),
        ]
        .into();
        assert_eq!(evaluate(&qrels, &run, false).1.map, 1.0);
        assert_eq!(evaluate(&qrels, &run, true).1.map, 0.5);
    }
}
