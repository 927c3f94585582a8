//! Evaluation of a TREC run against TREC qrels with trec_eval's measures and definitions, for
//! `warpsearch evaluate` and Python's `warpsearch.evaluate`.
//!
//! As trec_eval: documents of a query are ranked by descending score, ties by descending docid (the
//! rank column is ignored); a document is relevant when its judgment is ≥ 1; nDCG uses the judgment as
//! the gain with log2(rank + 1) discounts and the ideal ranking of every judged document; a query with no
//! relevant document scores 0; averages run over the queries in both files (or, with `all_queries`,
//! over every query of the qrels, as `trec_eval -c`).
//!
//! Measures are named as trec_eval's `-m` names them (`map`, `ndcg_cut.10`, `P.5,10`, `recall.1000`,
//! `recip_rank`, `map_cut.100`, `ndcg`) or as ir_measures does (`AP`, `nDCG@10`, `P@10`, `R@1000`,
//! `RR`, `RR@10`, also `MRR@10`).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::{BufRead, BufReader, Read};

use crate::error::{IndexError, IoContext, Result};

/// Judgments: query → document → relevance.
pub type Qrels = BTreeMap<String, HashMap<String, i32>>;
/// A run: query → (document, score) in file order.
pub type Run = BTreeMap<String, Vec<(String, f64)>>;

/// trec_eval's cutoffs for a measure named without any (`P`, `recall`, `ndcg_cut`, `map_cut`).
pub const STANDARD_CUTOFFS: [usize; 9] = [5, 10, 15, 20, 30, 100, 200, 500, 1000];

/// The measures `evaluate` reports unless told otherwise.
pub const DEFAULT_MEASURES: [&str; 4] = ["ndcg_cut.10", "map", "P.10", "recall.1000"];

/// One measure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Measure {
    /// Average precision over the whole ranking (`map`).
    Map,
    /// Average precision over the first k (`map_cut.k`).
    MapCut(usize),
    /// nDCG over the whole ranking (`ndcg`).
    Ndcg,
    /// nDCG at k (`ndcg_cut.k`).
    NdcgCut(usize),
    /// Precision at k (`P.k`).
    P(usize),
    /// Recall at k (`recall.k`).
    Recall(usize),
    /// Reciprocal rank of the first relevant document (`recip_rank`), within the first k if given
    /// (`RR@k`, MRR@k averaged).
    RecipRank(Option<usize>),
}

impl Measure {
    /// The measures one `-m` argument names: a trec_eval name with optional comma-separated cutoffs
    /// (`P.5,10`), or an ir_measures name (`nDCG@10`). The error lists the names known.
    pub fn parse(arg: &str) -> std::result::Result<Vec<Measure>, String> {
        let unknown = || {
            format!(
                "unknown measure '{arg}': use trec_eval's names (map, map_cut.K, ndcg, ndcg_cut.K, P.K, \
                 recall.K, recip_rank; several cutoffs as P.5,10) or ir_measures' (AP, AP@K, nDCG, nDCG@K, \
                 P@K, R@K, RR, RR@K, MRR@K)"
            )
        };
        let cutoffs = |list: Option<&str>| -> std::result::Result<Vec<usize>, String> {
            match list {
                None => Ok(STANDARD_CUTOFFS.to_vec()),
                Some(list) => list
                    .split(',')
                    .map(|c| match c.trim().parse::<usize>() {
                        Ok(k) if k > 0 => Ok(k),
                        _ => Err(format!(
                            "measure '{arg}': the cutoff '{c}' is not a positive whole number"
                        )),
                    })
                    .collect(),
            }
        };
        let one = |list: Option<&str>| -> std::result::Result<usize, String> {
            let c = cutoffs(Some(list.ok_or_else(unknown)?))?;
            match c[..] {
                [k] => Ok(k),
                _ => Err(format!("measure '{arg}': give one cutoff after @")),
            }
        };
        if let Some((name, k)) = arg.split_once('@') {
            let k = one(Some(k))?;
            return Ok(vec![match name.to_ascii_lowercase().as_str() {
                "ap" | "map" => Measure::MapCut(k),
                "ndcg" => Measure::NdcgCut(k),
                "p" => Measure::P(k),
                "r" | "recall" => Measure::Recall(k),
                "rr" | "mrr" => Measure::RecipRank(Some(k)),
                _ => return Err(unknown()),
            }]);
        }
        let (name, list) = match arg.split_once('.') {
            Some((n, l)) => (n, Some(l)),
            None => match arg.split_once('_') {
                // trec_eval's output names (ndcg_cut_10, P_10) read back as its -m names.
                Some((n, l)) if l.chars().all(|c| c.is_ascii_digit()) && !l.is_empty() => (n, Some(l)),
                Some((n, l)) if n == "ndcg" || n == "map" => match l.rsplit_once('_') {
                    Some(("cut", k)) => (if n == "ndcg" { "ndcg_cut" } else { "map_cut" }, Some(k)),
                    _ => (arg, None),
                },
                _ => (arg, None),
            },
        };
        let with = |f: fn(usize) -> Measure| cutoffs(list).map(|c| c.into_iter().map(f).collect());
        match (name, list) {
            ("map" | "AP" | "MAP", None) => Ok(vec![Measure::Map]),
            ("ndcg" | "nDCG", None) => Ok(vec![Measure::Ndcg]),
            ("recip_rank" | "RR" | "MRR", None) => Ok(vec![Measure::RecipRank(None)]),
            ("map_cut", _) => with(Measure::MapCut),
            ("ndcg_cut", _) => with(Measure::NdcgCut),
            ("P", _) => with(Measure::P),
            ("recall", _) => with(Measure::Recall),
            _ => Err(unknown()),
        }
    }

    /// The measures of several `-m` arguments (none: [`DEFAULT_MEASURES`]), each once, in order.
    pub fn parse_all<S: AsRef<str>>(args: &[S]) -> std::result::Result<Vec<Measure>, String> {
        let mut out: Vec<Measure> = Vec::new();
        let defaults: Vec<&str> = DEFAULT_MEASURES.to_vec();
        let names: Vec<&str> = match args.len() {
            0 => defaults,
            _ => args.iter().map(|a| a.as_ref()).collect(),
        };
        for name in names {
            for m in Measure::parse(name)? {
                if !out.contains(&m) {
                    out.push(m);
                }
            }
        }
        Ok(out)
    }

    /// The name trec_eval prints (`ndcg_cut_10`, `P_10`); `RR@k`, which trec_eval lacks, as
    /// ir_measures names it.
    pub fn name(&self) -> String {
        match self {
            Measure::Map => "map".into(),
            Measure::MapCut(k) => format!("map_cut_{k}"),
            Measure::Ndcg => "ndcg".into(),
            Measure::NdcgCut(k) => format!("ndcg_cut_{k}"),
            Measure::P(k) => format!("P_{k}"),
            Measure::Recall(k) => format!("recall_{k}"),
            Measure::RecipRank(None) => "recip_rank".into(),
            Measure::RecipRank(Some(k)) => format!("RR@{k}"),
        }
    }

    /// How many hits a query needs for the measure to see all it scores: its cutoff, or `None` for
    /// the whole ranking.
    pub fn depth(&self) -> Option<usize> {
        match *self {
            Measure::Map | Measure::Ndcg | Measure::RecipRank(None) => None,
            Measure::MapCut(k) | Measure::NdcgCut(k) | Measure::P(k) | Measure::Recall(k) => Some(k),
            Measure::RecipRank(Some(k)) => Some(k),
        }
    }
}

/// `text` split at white space into exactly `n` fields, or an error naming the line.
fn fields<'a>(name: &str, line: usize, text: &'a str, n: usize, what: &str) -> Result<Vec<&'a str>> {
    let f: Vec<&str> = text.split_whitespace().collect();
    if f.len() != n {
        return Err(input_error(
            name,
            line,
            format!("expected {n} fields ({what}), found {}", f.len()),
        ));
    }
    Ok(f)
}

fn input_error(name: &str, line: usize, what: String) -> IndexError {
    IndexError::Input {
        path: name.into(),
        line: line as u64,
        what,
    }
}

/// The non-blank lines of `reader` with their 1-based numbers; bytes that are not UTF-8 are an error
/// naming the line.
fn lines(reader: impl Read, name: &str) -> Result<Vec<(usize, String)>> {
    let mut out = Vec::new();
    for (i, line) in BufReader::new(reader).split(b'\n').enumerate() {
        let bytes = line.at(name)?;
        let text = String::from_utf8(bytes)
            .map_err(|_| input_error(name, i + 1, "not valid UTF-8: re-encode the file as UTF-8".into()))?;
        if !text.trim().is_empty() {
            out.push((i + 1, text));
        }
    }
    Ok(out)
}

/// Reads qrels: TREC's `qid iter docid relevance` lines, or BEIR's `query-id<TAB>corpus-id<TAB>score`
/// (with or without its header line); `name` names the input in errors. A document judged twice for
/// one query, or a file mixing the two shapes, is an error naming the line.
pub fn read_qrels(reader: impl Read, name: &str) -> Result<Qrels> {
    let mut qrels = Qrels::new();
    let mut width: Option<usize> = None;
    for (line, text) in lines(reader, name)? {
        let n = *width.get_or_insert_with(|| match text.split_whitespace().count() {
            3 => 3,
            _ => 4,
        });
        if n == 3 && qrels.is_empty() && text.split_whitespace().next() == Some("query-id") {
            continue;
        }
        let what = if n == 3 {
            "query-id corpus-id score, as the file's first line (BEIR)"
        } else {
            "qid iter docid relevance"
        };
        let f = fields(name, line, &text, n, what)?;
        let (q, d, r) = (f[0], f[n - 2], f[n - 1]);
        let rel: i32 = r
            .parse()
            .map_err(|_| input_error(name, line, format!("the relevance '{r}' is not a whole number")))?;
        let judged = qrels.entry(q.to_owned()).or_default();
        if judged.insert(d.to_owned(), rel).is_some() {
            return Err(input_error(
                name,
                line,
                format!("document {d} is judged twice for query {q}"),
            ));
        }
    }
    Ok(qrels)
}

/// Reads a TREC run (`qid Q0 docid rank score tag`); a document twice in one query, or a score that is
/// not a number, is an error naming the line.
pub fn read_run(reader: impl Read, name: &str) -> Result<Run> {
    let mut run = Run::new();
    let mut seen = HashSet::new();
    for (line, text) in lines(reader, name)? {
        let f = fields(name, line, &text, 6, "qid Q0 docid rank score tag")?;
        let score: f64 = f[4]
            .parse()
            .ok()
            .filter(|s: &f64| !s.is_nan())
            .ok_or_else(|| input_error(name, line, format!("the score '{}' is not a number", f[4])))?;
        if !seen.insert((f[0].to_owned(), f[2].to_owned())) {
            return Err(input_error(
                name,
                line,
                format!("document {} appears twice for query {}", f[2], f[0]),
            ));
        }
        run.entry(f[0].to_owned())
            .or_default()
            .push((f[2].to_owned(), score));
    }
    Ok(run)
}

/// The values of `measures` for one query's `ranked` documents (any order: they are sorted as
/// trec_eval sorts them) against its judgments.
pub fn measure(ranked: &[(String, f64)], judged: &HashMap<String, i32>, measures: &[Measure]) -> Vec<f64> {
    let num_rel = judged.values().filter(|&&r| r >= 1).count();
    if num_rel == 0 {
        return vec![0.0; measures.len()];
    }
    let mut order: Vec<&(String, f64)> = ranked.iter().collect();
    order.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| b.0.cmp(&a.0)));
    // The relevance of each ranked document, in rank order.
    let rels: Vec<i32> = order
        .iter()
        .map(|(d, _)| judged.get(d).copied().unwrap_or(0))
        .collect();
    let mut ideal: Vec<i32> = judged.values().copied().filter(|&r| r >= 1).collect();
    ideal.sort_unstable_by(|a, b| b.cmp(a));
    let dcg = |gains: &[i32], k: usize| -> f64 {
        gains
            .iter()
            .take(k)
            .enumerate()
            .filter(|(_, &g)| g >= 1)
            .map(|(i, &g)| g as f64 / ((i + 2) as f64).log2())
            .sum()
    };
    let ap = |k: usize| -> f64 {
        let mut found = 0usize;
        let mut sum = 0.0;
        for (i, &r) in rels.iter().take(k).enumerate() {
            if r >= 1 {
                found += 1;
                sum += found as f64 / (i + 1) as f64;
            }
        }
        sum / num_rel as f64
    };
    let relevant_in = |k: usize| rels.iter().take(k).filter(|&&r| r >= 1).count() as f64;
    measures
        .iter()
        .map(|m| match *m {
            Measure::Map => ap(usize::MAX),
            Measure::MapCut(k) => ap(k),
            Measure::Ndcg => dcg(&rels, usize::MAX) / dcg(&ideal, usize::MAX),
            Measure::NdcgCut(k) => dcg(&rels, k) / dcg(&ideal, k),
            Measure::P(k) => relevant_in(k) / k as f64,
            Measure::Recall(k) => relevant_in(k) / num_rel as f64,
            Measure::RecipRank(k) => rels
                .iter()
                .take(k.unwrap_or(usize::MAX))
                .position(|&r| r >= 1)
                .map_or(0.0, |i| 1.0 / (i + 1) as f64),
        })
        .collect()
}

/// Every query's values and their means.
#[derive(Debug, Clone, PartialEq)]
pub struct Evaluation {
    /// The measures, in the order of the values.
    pub measures: Vec<Measure>,
    /// Each evaluated query with its values, in qid order.
    pub per_query: Vec<(String, Vec<f64>)>,
    /// The means over the evaluated queries (0 where none is).
    pub mean: Vec<f64>,
}

/// Evaluates `run` against `qrels`: over the queries in both (or, with `all_queries`, every judged one).
pub fn evaluate(qrels: &Qrels, run: &Run, measures: &[Measure], all_queries: bool) -> Evaluation {
    let empty = Vec::new();
    let per_query: Vec<(String, Vec<f64>)> = qrels
        .iter()
        .filter(|(q, _)| all_queries || run.contains_key(*q))
        .map(|(q, judged)| (q.clone(), measure(run.get(q).unwrap_or(&empty), judged, measures)))
        .collect();
    let n = per_query.len().max(1) as f64;
    let mut mean = vec![0.0; measures.len()];
    for (_, values) in &per_query {
        for (m, v) in mean.iter_mut().zip(values) {
            *m += v / n;
        }
    }
    Evaluation {
        measures: measures.to_vec(),
        per_query,
        mean,
    }
}

/// Warnings about a run cut too short for `measures`: a cutoff beyond the run's depth, or a measure
/// of the whole ranking (map, ndcg) over fewer than 1,000 hits a query, where the values are lower than a
/// deeper run's. A run counts as cut at its deepest query's number of hits when half its queries at
/// least have exactly that many (a run that holds every match of a small collection is not cut).
pub fn depth_warnings(run: &Run, measures: &[Measure]) -> Vec<String> {
    let deepest = run.values().map(Vec::len).max().unwrap_or(0);
    let at_depth = run.values().filter(|h| h.len() == deepest).count();
    if run.is_empty() || 2 * at_depth < run.len() {
        return Vec::new();
    }
    let mut out = Vec::new();
    let short: Vec<String> = measures
        .iter()
        .filter(|m| m.depth().is_some_and(|k| k > deepest))
        .map(Measure::name)
        .collect();
    if !short.is_empty() {
        out.push(format!(
            "the run holds at most {deepest} hits per query, fewer than {} look at: the missing hits \
             count as not relevant (search with --k 1000, its default, for a full run)",
            short.join(", ")
        ));
    }
    let whole: Vec<String> = measures
        .iter()
        .filter(|m| matches!(m, Measure::Map | Measure::Ndcg))
        .map(Measure::name)
        .collect();
    if !whole.is_empty() && deepest < 1000 {
        out.push(format!(
            "the run holds at most {deepest} hits per query, and {} scores the whole ranking: its \
             value is lower than over a run of 1,000 hits (search's default --k)",
            whole.join(", ")
        ));
    }
    out
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

    fn judged(pairs: &[(&str, i32)]) -> HashMap<String, i32> {
        pairs.iter().map(|(d, r)| (d.to_string(), *r)).collect()
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-12
    }

    #[test]
    fn measures_by_hand() {
        let judged = judged(&[("a", 1), ("b", 2), ("c", 0), ("z", 1)]);
        // Ranking: a (rel 1), c (0), b (2), x (unjudged); z is never retrieved. 3 relevant.
        let ms = Measure::parse_all(&[
            "map",
            "P.1,2,10",
            "recall.1,3",
            "ndcg_cut.2",
            "ndcg",
            "recip_rank",
            "map_cut.2",
            "RR@1",
        ])
        .unwrap();
        let v = measure(&ranked(&["c", "a", "b", "x"]), &judged, &ms);
        let want = [
            (1.0 / 2.0 + 2.0 / 3.0) / 3.0, // map
            0.0,                           // P.1
            0.5,                           // P.2
            0.2,                           // P.10
            0.0,                           // recall.1
            2.0 / 3.0,                     // recall.3
            // ndcg_cut.2: gain 1 at rank 2; ideal 2, 1.
            (1.0 / 3f64.log2()) / (2.0 + 1.0 / 3f64.log2()),
            // ndcg: gains 1 at rank 2 and 2 at rank 3; ideal 2, 1, 1.
            (1.0 / 3f64.log2() + 2.0 / 4f64.log2()) / (2.0 + 1.0 / 3f64.log2() + 1.0 / 4f64.log2()),
            0.5,       // recip_rank
            0.5 / 3.0, // map_cut.2
            0.0,       // RR@1
        ];
        assert_eq!(v.len(), want.len());
        for (i, (got, want)) in v.iter().zip(want).enumerate() {
            assert!(close(*got, want), "{}: {got} != {want}", ms[i].name());
        }
        // Equal scores rank by descending docid, whatever the file order.
        let tied = vec![("a".to_string(), 1.0), ("b".to_string(), 1.0)];
        let only_a = self::judged(&[("a", 1)]);
        assert_eq!(measure(&tied, &only_a, &[Measure::Map]), vec![0.5]);
        assert_eq!(measure(&tied, &only_a, &[Measure::RecipRank(None)]), vec![0.5]);
        // No relevant document: every measure is 0.
        assert_eq!(measure(&tied, &HashMap::new(), &ms), vec![0.0; ms.len()]);
    }

    #[test]
    fn measure_names_parse_as_trec_eval_and_ir_measures_write_them() {
        let p = |s: &str| Measure::parse(s).unwrap();
        assert_eq!(p("ndcg_cut.10"), p("nDCG@10"));
        assert_eq!(p("ndcg_cut_10"), vec![Measure::NdcgCut(10)]);
        assert_eq!(p("P.5,10"), vec![Measure::P(5), Measure::P(10)]);
        assert_eq!(p("P_10"), p("P@10"));
        assert_eq!(p("recall.1000"), p("R@1000"));
        assert_eq!(p("map"), p("AP"));
        assert_eq!(p("MRR@10"), vec![Measure::RecipRank(Some(10))]);
        assert_eq!(p("recip_rank"), p("RR"));
        assert_eq!(p("P").len(), STANDARD_CUTOFFS.len());
        assert_eq!(p("map_cut.100"), p("AP@100"));
        for bad in ["mapp", "P.x", "P.0", "nDCG@", "bpref", "P.10,"] {
            let e = Measure::parse(bad).unwrap_err();
            assert!(e.contains(bad), "{e}");
        }
        // Output names read back as the same measure.
        for m in Measure::parse_all(&[
            "map",
            "ndcg_cut.10",
            "P.5",
            "recall.100",
            "recip_rank",
            "RR@10",
            "ndcg",
            "map_cut.5",
        ])
        .unwrap()
        {
            assert_eq!(Measure::parse(&m.name()).unwrap(), vec![m]);
        }
        assert_eq!(
            Measure::parse_all::<&str>(&[]).unwrap(),
            vec![
                Measure::NdcgCut(10),
                Measure::Map,
                Measure::P(10),
                Measure::Recall(1000)
            ]
        );
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
        assert_eq!(evaluate(&qrels, &run, &[Measure::Map], false).mean, vec![1.0]);
        assert_eq!(evaluate(&qrels, &run, &[Measure::Map], true).mean, vec![0.5]);
    }

    #[test]
    fn bad_qrels_and_run_lines_are_named() {
        let e = read_qrels("1 0 a 1\n1 0 b x\n".as_bytes(), "q.txt")
            .unwrap_err()
            .to_string();
        assert!(e.contains("q.txt:2") && e.contains("relevance 'x'"), "{e}");
        let e = read_qrels("1 0 a 1\n1 0 a 2\n".as_bytes(), "q.txt")
            .unwrap_err()
            .to_string();
        assert!(e.contains("q.txt:2") && e.contains("judged twice"), "{e}");
        let e = read_qrels("1 0 a 1\n1 0 a\n".as_bytes(), "q.txt")
            .unwrap_err()
            .to_string();
        assert!(e.contains("q.txt:2") && e.contains("expected 4 fields"), "{e}");
        // BEIR's qrels: three columns under a header; a TREC line among them is named.
        let beir = read_qrels(
            "query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\td2\t0\n".as_bytes(),
            "b.tsv",
        )
        .unwrap();
        let trec = read_qrels("q1 0 d1 1\nq1 0 d2 0\n".as_bytes(), "t.txt").unwrap();
        assert_eq!(beir, trec);
        let e = read_qrels("q1\td1\t1\nq1 0 d2 1\n".as_bytes(), "b.tsv")
            .unwrap_err()
            .to_string();
        assert!(e.contains("b.tsv:2") && e.contains("expected 3 fields"), "{e}");
        let e = read_run("1 Q0 a 1 2.5 t\n\n1 Q0 a 2 1.5 t\n".as_bytes(), "r.txt")
            .unwrap_err()
            .to_string();
        assert!(e.contains("r.txt:3") && e.contains("appears twice"), "{e}");
        let e = read_run("1 Q0 a 1 NaN t\n".as_bytes(), "r.txt")
            .unwrap_err()
            .to_string();
        assert!(e.contains("r.txt:1") && e.contains("not a number"), "{e}");
        let e = read_run(&b"1 Q0 \xff 1 1 t\n"[..], "r.txt")
            .unwrap_err()
            .to_string();
        assert!(e.contains("r.txt:1") && e.contains("UTF-8"), "{e}");
    }

    #[test]
    fn shallow_runs_are_named_for_the_measures_they_cut() {
        let run: Run = [("1".to_string(), ranked(&["a", "b"]))].into();
        let ms = Measure::parse_all(&["P.2", "recall.1000", "map"]).unwrap();
        let w = depth_warnings(&run, &ms);
        assert_eq!(w.len(), 2, "{w:?}");
        assert!(w[0].contains("at most 2 hits") && w[0].contains("recall_1000") && !w[0].contains("P_2"));
        assert!(w[1].contains("map"));
        assert!(depth_warnings(&run, &[Measure::P(2)]).is_empty());
        // A run whose queries mostly hold fewer hits than the deepest one is not cut.
        let mut full = run.clone();
        full.insert("2".into(), ranked(&["a"]));
        full.insert("3".into(), ranked(&["b"]));
        assert!(depth_warnings(&full, &ms).is_empty());
    }
}
