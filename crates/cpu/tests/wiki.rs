//! The real check: on the Wikipedia passages (`../shared/data/wiki`, cut as `passages.py` cuts them)
//! with the first 5,000 TREC 2005 efficiency queries, every algorithm returns exactly the oracle's
//! top-k for AND, OR and and-or at k = 10 and 1000.
//!
//! Set `WARPSEARCH_WIKI_INDEX` to a prebuilt passage index (`warpsearch index --title`) to skip the
//! build; otherwise the test builds one in a temporary directory (about a minute on two cores).

use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};

use std::sync::Arc;

use warpsearch_cpu::CpuSearcher;
use warpsearch_index::build::{build_from_jsonl, BuildOptions};
use warpsearch_index::{AnalyzerConfig, Bm25Params, Codec, DocOrder, Index, WriterOptions};
use warpsearch_query::{Algorithm, Mode, Query, Request, Scorer, SearchOptions};

fn data() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data")
}

/// `passages.py`: every article cut into passages of at most 100 white-space-separated words.
fn write_passages(out: &Path) {
    let mut w = BufWriter::new(std::fs::File::create(out).unwrap());
    for part in 0..4 {
        let path = data().join(format!("wiki/articles-0{part}.jsonl.zst"));
        let mut decoder = zstd::Decoder::new(std::fs::File::open(&path).unwrap()).unwrap();
        decoder.window_log_max(27).unwrap();
        for line in BufReader::new(decoder).lines() {
            let doc: serde_json::Value = serde_json::from_str(&line.unwrap()).unwrap();
            let words: Vec<&str> = doc["contents"].as_str().unwrap().split_whitespace().collect();
            for (n, chunk) in words.chunks(100).enumerate() {
                let passage = serde_json::json!({
                    "id": format!("{}#{n}", doc["id"].as_str().unwrap()),
                    "title": doc["title"],
                    "contents": chunk.join(" "),
                });
                writeln!(w, "{passage}").unwrap();
            }
        }
    }
    w.flush().unwrap();
}

#[test]
fn every_algorithm_equals_the_oracle_on_wikipedia_passages() {
    // Skips (a printed line) where ../shared/data lacks them; fails under WARPSEARCH_REQUIRE_DATA=1.
    let (Some(queries_path), Some(_)) = (
        warpsearch_index::testdata::shared_data("queries/trec05-efficiency.txt"),
        warpsearch_index::testdata::shared_data("wiki/articles-03.jsonl.zst"),
    ) else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let dir = match std::env::var_os("WARPSEARCH_WIKI_INDEX") {
        Some(dir) => PathBuf::from(dir),
        None => {
            write_passages(&tmp.path().join("passages.jsonl"));
            let mut opts = BuildOptions::new(WriterOptions {
                codec: Codec::PForDelta,
                analyzer: AnalyzerConfig::english(),
                bm25: Bm25Params::default(),
                doc_order: DocOrder::Input,
                force: false,
            });
            opts.include_title = true;
            build_from_jsonl(&tmp.path().join("passages.jsonl"), &tmp.path().join("idx"), &opts).unwrap();
            tmp.path().join("idx")
        }
    };
    let index = Arc::new(Index::open(&dir).unwrap());
    assert_eq!(index.num_docs(), 776_864, "not the passage collection");
    let text = std::fs::read_to_string(&queries_path).unwrap();
    let queries: Vec<Query> = text.lines().take(5000).map(|q| Query::parse(&index, q)).collect();
    for mode in [Mode::And, Mode::Or, Mode::AndOr] {
        for k in [10, 1000] {
            let searcher = |algorithm| {
                let options = SearchOptions {
                    algorithm,
                    ..SearchOptions::new(&index)
                };
                (algorithm.refuses(mode).is_none())
                    .then(|| Scorer::new(index.clone(), options).ok())
                    .flatten()
                    .map(|s| CpuSearcher::new(Arc::new(s)))
            };
            let requests: Vec<Request> = queries.iter().map(|q| Request::new(q.clone(), mode, k)).collect();
            let run = |searcher: &CpuSearcher| -> Vec<_> {
                searcher
                    .search_batch(&requests)
                    .into_iter()
                    .map(|a| a.unwrap().hits)
                    .collect()
            };
            let expected = run(&searcher(Algorithm::Exhaustive).unwrap());
            let found = expected.iter().filter(|h| !h.is_empty()).count();
            // A sanity floor, not a figure of ours: many log queries have terms Wikipedia lacks.
            let floor = if mode == Mode::And { 2000 } else { 4000 };
            assert!(found > floor, "{mode:?}: only {found} queries found anything");
            for algorithm in Algorithm::ALL {
                let Some(searcher) = searcher(algorithm) else {
                    continue;
                };
                let got = run(&searcher);
                for (i, (g, e)) in got.iter().zip(&expected).enumerate() {
                    assert_eq!(
                        g,
                        e,
                        "{} {mode:?} k {k}: query line {} differs",
                        algorithm.name(),
                        i + 1
                    );
                }
            }
        }
    }
}
