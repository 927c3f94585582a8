//! Every algorithm against the exhaustive oracle on random indexes, and the oracle against BM25
//! computed independently (in f64, from the raw documents).

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use proptest::prelude::*;
use warpsearch_cpu::CpuSearcher;
use warpsearch_index::build::{build_from_jsonl, BuildOptions};
use warpsearch_index::{AnalyzerConfig, Bm25Params, Codec, DocOrder, Index, WriterOptions};
use warpsearch_query::{
    merge_top_k, Algorithm, DocRange, Mode, Part, Query, Ranking, Request, Scorer, SearchOptions, MAX_K,
};

/// A random collection over terms t0..tV: document `d` holds term `j` `tfs[d][j]` times (0 = absent).
#[derive(Debug, Clone)]
struct Collection {
    tfs: Vec<Vec<u32>>,
    statics: Vec<f32>,
}

fn collection() -> impl Strategy<Value = Collection> {
    collection_of(1..7, 1..4000)
}

/// A collection of `terms` terms over `docs` documents.
fn collection_of(
    terms: std::ops::Range<usize>,
    docs: std::ops::Range<usize>,
) -> impl Strategy<Value = Collection> {
    // Densities from "in almost every document" to "in one or two", so lists span one posting to many
    // blocks, with lengths rarely a multiple of 128.
    let densities = prop::collection::vec(
        prop::sample::select(vec![0.95, 0.6, 0.3, 0.08, 0.01, 0.002]),
        terms,
    );
    (docs, densities, any::<u64>()).prop_map(|(n, densities, seed)| {
        let mut rng = seed | 1;
        let mut next = move || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        let tfs = (0..n)
            .map(|_| {
                densities
                    .iter()
                    .map(|&p| {
                        if (next() % 10_000) as f64 / 10_000.0 < p {
                            // Mostly small tfs, a few large, some equal scores.
                            [1, 1, 1, 2, 2, 3, 7, 40][(next() % 8) as usize]
                        } else {
                            0
                        }
                    })
                    .collect()
            })
            .collect();
        let statics = (0..n).map(|_| (next() % 1000) as f32 / 7.0).collect();
        Collection { tfs, statics }
    })
}

/// Writes the collection as JSONL (plus filler words so lengths vary) and builds an index.
fn build(c: &Collection, dir: &Path, codec: Codec, alpha: Option<f32>) -> Arc<Index> {
    let mut lines = String::new();
    let mut statics = String::new();
    for (d, tfs) in c.tfs.iter().enumerate() {
        let mut words = Vec::new();
        for (j, &tf) in tfs.iter().enumerate() {
            words.extend(std::iter::repeat_n(format!("t{j}"), tf as usize));
        }
        words.extend(std::iter::repeat_n("filler".to_string(), d % 5));
        lines.push_str(&format!(
            "{{\"id\": \"d{d}\", \"contents\": \"{}\"}}\n",
            words.join(" ")
        ));
        statics.push_str(&format!("d{d}\t{}\n", c.statics[d]));
    }
    std::fs::write(dir.join("in.jsonl"), lines).unwrap();
    std::fs::write(dir.join("static.tsv"), statics).unwrap();
    let writer = WriterOptions {
        codec,
        analyzer: AnalyzerConfig::whitespace(),
        bm25: Bm25Params::default(),
        doc_order: DocOrder::Input,
        force: true,
    };
    let mut opts = BuildOptions::new(writer);
    opts.static_scores = Some(dir.join("static.tsv"));
    opts.reorder_alpha = alpha;
    let out = dir.join("idx");
    build_from_jsonl(&dir.join("in.jsonl"), &out, &opts).unwrap();
    Arc::new(Index::open(out).unwrap())
}

fn queries(num_terms: usize, seed: u64) -> Vec<Vec<String>> {
    let mut rng = seed | 1;
    let mut next = move |m: u64| {
        rng = rng
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (rng >> 33) % m
    };
    (0..30)
        .map(|_| {
            (0..1 + next(5))
                .map(|_| match next(12) {
                    0 => "unknownterm".to_string(),
                    _ => format!("t{}", next(num_terms as u64)),
                })
                .collect()
        })
        .collect()
}

/// A CPU searcher with `algorithm`, or None where the options do not fit the index.
fn searcher(
    index: &Arc<Index>,
    ranking: Ranking,
    bm25: Bm25Params,
    algorithm: Algorithm,
) -> Option<CpuSearcher> {
    let options = SearchOptions {
        ranking,
        bm25,
        algorithm,
    };
    Scorer::new(index.clone(), options)
        .ok()
        .map(|s| CpuSearcher::new(Arc::new(s)))
}

/// Docs where a query is cut in two: block boundaries (127, 128, 129), the middle, the ends.
fn cuts(num_docs: u32) -> Vec<u32> {
    let mut v = vec![
        0,
        1,
        127,
        128,
        129,
        num_docs / 2,
        num_docs.saturating_sub(1),
        num_docs,
    ];
    v.retain(|&c| c <= num_docs);
    v.dedup();
    v
}

/// Every algorithm valid for the options gives exactly (docs and bit-identical scores) the oracle's answer,
/// for the whole query and for the query cut in two by docID range (the second part starting from the
/// first's k-th score as its floor) with the parts merged.
fn check_all(index: &Arc<Index>, texts: &[Vec<String>], ranking: Ranking, bm25: Bm25Params) {
    let parsed: Vec<Query> = texts.iter().map(|t| Query::parse(index, &t.join(" "))).collect();
    let oracle = searcher(index, ranking, bm25, Algorithm::Exhaustive).unwrap();
    let n = index.num_docs();
    for mode in [Mode::And, Mode::Or, Mode::AndOr] {
        for k in [1, 3, 10, 200, 5000] {
            let requests: Vec<Request> = parsed.iter().map(|q| Request::new(q.clone(), mode, k)).collect();
            let expected: Vec<_> = requests.iter().map(|r| oracle.search(r).unwrap()).collect();
            if mode == Mode::And {
                // The loop a CPU without AVX2 runs, beside the one this CPU runs (checked below).
                for (r, want) in requests.iter().zip(&expected) {
                    let plan = oracle
                        .scorer()
                        .plan(&r.query, Part::range(DocRange::ALL))
                        .unwrap();
                    let got = warpsearch_cpu::and::ranked_and_portable(&plan, k).unwrap();
                    assert_eq!(&got, want, "portable AND k {k} {ranking:?} {bm25:?}");
                }
            }
            for algorithm in Algorithm::ALL {
                let Some(searcher) = searcher(index, ranking, bm25, algorithm) else {
                    continue;
                };
                for ((r, text), want) in requests.iter().zip(texts).zip(&expected) {
                    // A mode the algorithm does not evaluate is refused where requests come in; a
                    // backend answers it all the same (AND by ranked AND, as and-or's steps), exactly.
                    if algorithm.refuses(mode).is_some() {
                        assert!(searcher.scorer().check(r).is_err());
                    }
                    let got = searcher.search(r).unwrap();
                    let what = format!(
                        "{} {mode:?} k {k} {ranking:?} {bm25:?} query {text:?}",
                        algorithm.name()
                    );
                    assert_eq!(&got, want, "{what}");
                    // and-or is cut pass by pass (the engine's job), not part by part.
                    if mode == Mode::AndOr || !matches!(k, 3 | 200) {
                        continue;
                    }
                    for cut in cuts(n) {
                        let first = searcher
                            .search_part(r, mode, Part::range(DocRange::half_open(0, cut)))
                            .unwrap();
                        let floor = if first.len() == k {
                            first[k - 1].score
                        } else {
                            f32::NEG_INFINITY
                        };
                        let rest = Part {
                            range: DocRange::half_open(cut, n),
                            floor,
                        };
                        let second = searcher.search_part(r, mode, rest).unwrap();
                        assert!(
                            second.iter().all(|s| s.score >= floor && s.doc >= cut),
                            "{what} cut {cut}"
                        );
                        assert_eq!(&merge_top_k([first, second], k), want, "{what} cut at {cut}");
                    }
                }
            }
        }
    }
}

/// Queries of `min..=max` terms drawn from `num_terms` (repeats and unknown terms among them).
fn long_queries(num_terms: usize, seed: u64, min: u64, max: u64) -> Vec<Vec<String>> {
    let mut rng = seed | 1;
    let mut next = move |m: u64| {
        rng = rng
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (rng >> 33) % m
    };
    (0..6)
        .map(|_| {
            (0..min + next(max - min + 1))
                .map(|_| match next(40) {
                    0 => "unknownterm".to_string(),
                    _ => format!("t{}", next(num_terms as u64)),
                })
                .collect()
        })
        .collect()
}

/// MaxScore's union by scan and through the heap, and block-max WAND, on long queries: each the
/// oracle's answer, whole and cut in two by docID range.
fn check_long(index: &Arc<Index>, texts: &[Vec<String>]) {
    use warpsearch_cpu::frontier::Union;
    let oracle = searcher(index, Ranking::Bm25, Bm25Params::default(), Algorithm::Exhaustive).unwrap();
    let n = index.num_docs();
    for text in texts {
        let query = Query::parse(index, &text.join(" "));
        for k in [1, 10, 200] {
            let plan = oracle.scorer().plan(&query, Part::WHOLE).unwrap();
            let want = warpsearch_cpu::exhaustive::exhaustive(&plan, Mode::Or, k).unwrap();
            let terms = query.terms.len();
            for union in [Union::Scan, Union::Heap] {
                let got = warpsearch_cpu::maxscore::maxscore_with(&plan, k, union).unwrap();
                assert_eq!(got, want, "maxscore {union:?} k {k}, {terms} terms");
                for cut in cuts(n) {
                    let first = oracle
                        .scorer()
                        .plan(&query, Part::range(DocRange::half_open(0, cut)));
                    let first = warpsearch_cpu::maxscore::maxscore_with(&first.unwrap(), k, union).unwrap();
                    let floor = if first.len() == k {
                        first[k - 1].score
                    } else {
                        f32::NEG_INFINITY
                    };
                    let rest = Part {
                        range: DocRange::half_open(cut, n),
                        floor,
                    };
                    let second = oracle.scorer().plan(&query, rest).unwrap();
                    let second = warpsearch_cpu::maxscore::maxscore_with(&second, k, union).unwrap();
                    assert_eq!(
                        merge_top_k([first, second], k),
                        want,
                        "{union:?} k {k} cut at {cut}"
                    );
                }
            }
            let got = warpsearch_cpu::bmw::block_max_wand(&plan, k).unwrap();
            assert_eq!(got, want, "block-max WAND k {k}, {terms} terms");
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 40, ..ProptestConfig::default() })]

    #[test]
    fn every_algorithm_equals_the_oracle(c in collection(), seed in any::<u64>(), codec in prop::sample::select(Codec::ALL.to_vec())) {
        let dir = tempfile::tempdir().unwrap();
        let index = build(&c, dir.path(), codec, None);
        let texts = queries(c.tfs[0].len(), seed);
        check_all(&index, &texts, Ranking::Bm25, Bm25Params::default());
        // Other k1/b than the index was built with: bounds recomputed per query.
        check_all(&index, &texts, Ranking::Bm25, Bm25Params { k1: 1.2, b: 0.75 });
        check_all(&index, &texts, Ranking::Bm25Static { alpha: 0.3 }, Bm25Params::default());
    }

    #[test]
    fn early_termination_equals_the_oracle(c in collection(), seed in any::<u64>(), alpha in prop::sample::select(vec![0.0f32, 0.2, 0.5, 0.9, 1.0])) {
        let dir = tempfile::tempdir().unwrap();
        let index = build(&c, dir.path(), Codec::PForDelta, Some(alpha));
        let texts = queries(c.tfs[0].len(), seed);
        // The index's own α (early termination applies) and another (it does not; other algorithms run).
        check_all(&index, &texts, Ranking::Bm25Static { alpha }, Bm25Params::default());
        check_all(&index, &texts, Ranking::Bm25Static { alpha: 0.45 }, Bm25Params::default());
        check_all(&index, &texts, Ranking::Bm25, Bm25Params::default());
    }

    #[test]
    fn the_order_of_a_querys_terms_changes_nothing(c in collection(), seed in any::<u64>()) {
        // Fixed-point sums are exact in any order (crates/query/src/fixed.rs): the same terms in another
        // order give the same documents and the same scores, to the last bit, under every algorithm.
        let dir = tempfile::tempdir().unwrap();
        let index = build(&c, dir.path(), Codec::PForDelta, None);
        for text in queries(c.tfs[0].len(), seed) {
            let mut reversed = text.clone();
            reversed.reverse();
            let (q, r) = (Query::parse(&index, &text.join(" ")), Query::parse(&index, &reversed.join(" ")));
            for algorithm in Algorithm::ALL {
                let Some(searcher) = searcher(&index, Ranking::Bm25, Bm25Params::default(), algorithm) else {
                    continue;
                };
                for mode in [Mode::And, Mode::Or] {
                    if algorithm.refuses(mode).is_some() {
                        continue;
                    }
                    let got = searcher.search(&Request::new(q.clone(), mode, 50)).unwrap();
                    let back = searcher.search(&Request::new(r.clone(), mode, 50)).unwrap();
                    prop_assert_eq!(got, back, "{} {:?} {:?}", algorithm.name(), mode, text);
                }
            }
        }
    }

    #[test]
    fn the_oracle_follows_the_formulas(c in collection(), seed in any::<u64>()) {
        let dir = tempfile::tempdir().unwrap();
        let index = build(&c, dir.path(), Codec::EliasFano, None);
        let ids: HashMap<String, usize> = (0..c.tfs.len()).map(|d| (format!("d{d}"), d)).collect();
        for text in queries(c.tfs[0].len(), seed) {
            for (mode, ranking) in [(Mode::Or, Ranking::Bm25), (Mode::And, Ranking::Bm25), (Mode::Or, Ranking::Bm25Static { alpha: 0.3 })] {
                let oracle = searcher(&index, ranking, Bm25Params::default(), Algorithm::Exhaustive).unwrap();
                let got = oracle.search(&Request::new(Query::parse(&index, &text.join(" ")), mode, MAX_K)).unwrap();
                let want = by_hand(&c, &text, mode, ranking);
                prop_assert_eq!(got.len(), want.len(), "{:?} {:?}", text, mode);
                for s in &got {
                    let d = ids[index.doc_id(s.doc)];
                    let w = want[&d];
                    prop_assert!((s.score as f64 - w).abs() <= 1e-4 * w.abs().max(1e-3), "doc {} {} vs {}", d, s.score, w);
                }
            }
        }
    }
}

/// Scores of every matching document, in f64, straight from the formulas.
fn by_hand(c: &Collection, text: &[String], mode: Mode, ranking: Ranking) -> HashMap<usize, f64> {
    let n = c.tfs.len() as f64;
    let lens: Vec<f64> = c
        .tfs
        .iter()
        .enumerate()
        .map(|(d, t)| (t.iter().sum::<u32>() as usize + d % 5) as f64)
        .collect();
    let avg = lens.iter().sum::<f64>() / n;
    let (k1, b) = (0.9, 0.4);
    let mut counts: Vec<(usize, f64)> = Vec::new();
    let mut unknown = false;
    for t in text {
        match t.strip_prefix('t').and_then(|j| j.parse::<usize>().ok()) {
            Some(j) if c.tfs.iter().any(|d| d[j] > 0) => match counts.iter_mut().find(|(x, _)| *x == j) {
                Some(e) => e.1 += 1.0,
                None => counts.push((j, 1.0)),
            },
            _ => unknown = true,
        }
    }
    let idf = |j: usize| {
        let df = c.tfs.iter().filter(|d| d[j] > 0).count() as f64;
        (1.0 + (n - df + 0.5) / (df + 0.5)).ln()
    };
    let tf_part = |tf: f64, dl: f64| tf * (k1 + 1.0) / (tf + k1 * (1.0 - b + b * dl / avg));
    let total: f64 = counts.iter().map(|&(j, w)| w * idf(j)).sum();
    let (smin, smax) = c.statics.iter().fold((f64::MAX, f64::MIN), |(a, z), &s| {
        (a.min(s as f64), z.max(s as f64))
    });
    let mut out = HashMap::new();
    if counts.is_empty() || (mode == Mode::And && unknown) {
        return out;
    }
    for (d, tfs) in c.tfs.iter().enumerate() {
        let present = counts.iter().filter(|&&(j, _)| tfs[j] > 0).count();
        if present == 0 || (mode == Mode::And && present < counts.len()) {
            continue;
        }
        let score = match ranking {
            Ranking::Bm25 => counts
                .iter()
                .map(|&(j, w)| w * idf(j) * tf_part(tfs[j] as f64, lens[d]))
                .sum(),
            Ranking::Bm25Static { alpha } => {
                let a = alpha as f64;
                let norm = if smax > smin {
                    (c.statics[d] as f64 - smin) / (smax - smin)
                } else {
                    0.0
                };
                let ir: f64 = counts
                    .iter()
                    .map(|&(j, w)| w * idf(j) / total * tf_part(tfs[j] as f64, lens[d]) / (k1 + 1.0))
                    .sum();
                a * norm + (1.0 - a) * ir
            }
        };
        out.insert(d, score);
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 16, ..ProptestConfig::default() })]

    /// Long OR queries (beyond the scan's [`warpsearch_cpu::frontier::SCAN_MAX`] and block-max WAND's
    /// term limit): MaxScore through the heap and by scan, block-max WAND, and every algorithm as the
    /// engine chooses it (early termination's union through the heap too), against the oracle.
    #[test]
    fn long_queries_equal_the_oracle(c in collection_of(20..70, 1..1500), seed in any::<u64>()) {
        let dir = tempfile::tempdir().unwrap();
        let index = build(&c, dir.path(), Codec::SimdBp, Some(0.5));
        let terms = c.tfs[0].len();
        let texts = long_queries(terms, seed, 17, terms as u64 + 10);
        check_long(&index, &texts);
        check_all(&index, &texts, Ranking::Bm25, Bm25Params::default());
        check_all(&index, &texts, Ranking::Bm25Static { alpha: 0.5 }, Bm25Params::default());
    }
}

/// A query beyond the scorer's term limit is refused by every algorithm, naming its term count and
/// the limit, and one at the limit is answered: one request cannot ask for unbounded work.
#[test]
fn a_query_beyond_the_term_limit_is_refused() {
    let c = Collection {
        tfs: (0..50)
            .map(|d| (0..40).map(|j| u32::from((d + j) % 3 == 0)).collect())
            .collect(),
        statics: vec![0.0; 50],
    };
    let dir = tempfile::tempdir().unwrap();
    let index = build(&c, dir.path(), Codec::SimdBp, None);
    let text: Vec<String> = (0..40).map(|j| format!("t{j}")).collect();
    let query = Query::parse(&index, &text.join(" "));
    assert_eq!(query.terms.len(), 40);
    for algorithm in Algorithm::ALL {
        let options = SearchOptions {
            ranking: Ranking::Bm25,
            bm25: Bm25Params::default(),
            algorithm,
        };
        let Ok(scorer) = Scorer::new(index.clone(), options) else {
            continue;
        };
        assert_eq!(
            scorer.max_query_terms(),
            warpsearch_query::DEFAULT_MAX_QUERY_TERMS
        );
        let mode = if algorithm == Algorithm::Daat {
            Mode::And
        } else {
            Mode::Or
        };
        let request = Request::new(query.clone(), mode, 10);
        let capped = CpuSearcher::new(Arc::new(scorer.with_max_query_terms(39)));
        let e = capped.search(&request).unwrap_err().to_string();
        assert!(
            e.contains("40 distinct terms") && e.contains("limit of 39"),
            "{e}"
        );
        let options = SearchOptions {
            ranking: Ranking::Bm25,
            bm25: Bm25Params::default(),
            algorithm,
        };
        let at = Scorer::new(index.clone(), options)
            .unwrap()
            .with_max_query_terms(40);
        assert!(CpuSearcher::new(Arc::new(at)).search(&request).is_ok());
    }
}

#[test]
fn a_query_of_a_thousand_distinct_terms() {
    // 1,000 terms, each in a few of 3,000 documents; the query names every term, some twice, plus
    // unknown ones.
    let (n, v) = (3000usize, 1000usize);
    let tfs: Vec<Vec<u32>> = (0..n)
        .map(|d| {
            (0..v)
                .map(|j| u32::from((d * 31 + j * 17) % 97 < 3) * (1 + (d + j) as u32 % 3))
                .collect()
        })
        .collect();
    let c = Collection {
        statics: (0..n).map(|d| (d % 13) as f32).collect(),
        tfs,
    };
    let dir = tempfile::tempdir().unwrap();
    let index = build(&c, dir.path(), Codec::PForDelta, None);
    let mut text: Vec<String> = (0..v).map(|j| format!("t{j}")).collect();
    text.extend((0..100).map(|j| format!("t{}", j * 7)));
    text.push("unknownterm".into());
    check_all(
        &index,
        &[text.clone(), text[..v].to_vec()],
        Ranking::Bm25,
        Bm25Params::default(),
    );
}
