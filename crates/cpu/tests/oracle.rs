//! The oracle against BM25 computed by hand from the formula on a tiny collection.

use std::sync::Arc;

use warpsearch_cpu::CpuSearcher;
use warpsearch_index::build::{build_from_jsonl, BuildOptions};
use warpsearch_index::{AnalyzerConfig, Bm25Params, Codec, DocOrder, Index, WriterOptions};
use warpsearch_query::{Algorithm, Mode, Query, Ranking, Request, Scored, Scorer, SearchOptions};

#[test]
fn and_or_semantics_and_scores_follow_the_formula() {
    let dir = tempfile::tempdir().unwrap();
    let docs = ["a b b", "b c", "a a a c d", "d"];
    let lines: String = docs
        .iter()
        .enumerate()
        .map(|(i, t)| format!("{{\"id\": \"{i}\", \"contents\": \"{t}\"}}\n"))
        .collect();
    std::fs::write(dir.path().join("in.jsonl"), lines).unwrap();
    let writer = WriterOptions {
        codec: Codec::PForDelta,
        analyzer: AnalyzerConfig::whitespace(),
        bm25: Bm25Params::default(),
        doc_order: DocOrder::Input,
        force: false,
    };
    build_from_jsonl(
        &dir.path().join("in.jsonl"),
        &dir.path().join("idx"),
        &BuildOptions::new(writer),
    )
    .unwrap();
    let index = Arc::new(Index::open(dir.path().join("idx")).unwrap());
    let t = |s: &str| index.term_id(s);
    let exhaustive =
        |index: &Arc<Index>, ids: &[Option<u32>], mode: Mode, k: usize| -> Result<Vec<Scored>, String> {
            let options = SearchOptions {
                ranking: Ranking::Bm25,
                bm25: Bm25Params::default(),
                algorithm: Algorithm::Exhaustive,
            };
            let scorer = Scorer::new(index.clone(), options).map_err(|e| e.to_string())?;
            let request = Request::new(Query::from_ids(ids), mode, k);
            CpuSearcher::new(Arc::new(scorer))
                .search(&request)
                .map_err(|e| e.to_string())
        };
    // By hand: N = 4, avgdl = 11 / 4, k1 = 0.9, b = 0.4.
    let bm25 = |tf: f64, df: f64, dl: f64| {
        let idf = (1.0 + (4.0 - df + 0.5) / (df + 0.5)).ln();
        idf * tf * 1.9 / (tf + 0.9 * (1.0 - 0.4 + 0.4 * dl / 2.75))
    };
    let and = exhaustive(&index, &[t("a"), t("b")], Mode::And, 10).unwrap();
    assert_eq!(and.iter().map(|s| s.doc).collect::<Vec<_>>(), [0]);
    let expected = bm25(1.0, 2.0, 3.0) + bm25(2.0, 2.0, 3.0);
    assert!((and[0].score as f64 - expected).abs() < 1e-5 * expected);
    let or = exhaustive(&index, &[t("a"), t("b")], Mode::Or, 10).unwrap();
    assert_eq!(or.iter().map(|s| s.doc).collect::<Vec<_>>(), [0, 2, 1]);
    // A repeated term weighs twice; an unknown term empties AND and is ignored by OR.
    let twice = exhaustive(&index, &[t("d"), t("d")], Mode::Or, 10).unwrap();
    let once = exhaustive(&index, &[t("d")], Mode::Or, 10).unwrap();
    assert!((twice[0].score - 2.0 * once[0].score).abs() < 1e-6);
    assert!(exhaustive(&index, &[t("a"), None], Mode::And, 10)
        .unwrap()
        .is_empty());
    assert_eq!(
        exhaustive(&index, &[t("a"), None], Mode::Or, 10).unwrap().len(),
        2
    );
    // Ties are broken by the smaller docID; k truncates.
    let c = exhaustive(&index, &[t("c")], Mode::Or, 1).unwrap();
    assert_eq!(c.len(), 1);
    assert!(exhaustive(&index, &[], Mode::Or, 10).unwrap().is_empty());
    assert!(exhaustive(&index, &[t("a")], Mode::Or, 0)
        .unwrap_err()
        .contains("k = 0 is out of range"));
}
