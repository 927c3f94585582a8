//! What the engine's tests share: random indexes and queries, the exhaustive oracle, exact comparison.
#![allow(dead_code)]

use std::path::Path;
use std::sync::Arc;

use std::sync::mpsc::channel;
use std::time::Duration;
use warpsearch_codec::Codec;
use warpsearch_cpu::CpuSearcher;
use warpsearch_index::build::{build_from_jsonl, BuildOptions};
use warpsearch_index::{AnalyzerConfig, Bm25Params, DocOrder, Index, WriterOptions};

use warpsearch_engine::{Reply, Scheduler};
use warpsearch_query::{Algorithm, Mode, Query, Request, Scored, Scorer, SearchOptions};

pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// A random collection over terms t0..tV (document d holds term j tfs[d][j] times), written as JSONL with
/// static scores, and built into an index.
pub fn random_index(dir: &Path, seed: u64, codec: Codec, alpha: Option<f32>) -> (Arc<Index>, usize) {
    let mut rng = Rng(seed | 1);
    let n = 1 + rng.below(6000) as usize;
    let densities: Vec<f64> = (0..1 + rng.below(7))
        .map(|_| [0.97, 0.6, 0.3, 0.08, 0.01, 0.002][rng.below(6) as usize])
        .collect();
    let (mut lines, mut statics) = (String::new(), String::new());
    for d in 0..n {
        let mut words = Vec::new();
        for (j, &p) in densities.iter().enumerate() {
            if (rng.below(10_000) as f64) < p * 10_000.0 {
                let tf = [1, 1, 1, 2, 2, 3, 7, 40][rng.below(8) as usize];
                words.extend(std::iter::repeat_n(format!("t{j}"), tf));
            }
        }
        words.extend(std::iter::repeat_n("filler".to_string(), d % 5));
        lines.push_str(&format!(
            "{{\"id\": \"d{d}\", \"contents\": \"{}\"}}\n",
            words.join(" ")
        ));
        statics.push_str(&format!("d{d}\t{}\n", rng.below(1000) as f32 / 7.0));
    }
    std::fs::write(dir.join("static.tsv"), statics).unwrap();
    (build(dir, &lines, codec, Some(alpha)), densities.len())
}

/// Builds `dir/idx` from JSONL `lines` (white-space analysis); `statics`: with `dir/static.tsv` as static
/// scores, reordered by global score when it holds an α.
pub fn build(dir: &Path, lines: &str, codec: Codec, statics: Option<Option<f32>>) -> Arc<Index> {
    std::fs::write(dir.join("in.jsonl"), lines).unwrap();
    let mut opts = BuildOptions::new(WriterOptions {
        codec,
        analyzer: AnalyzerConfig::whitespace(),
        bm25: Bm25Params::default(),
        doc_order: DocOrder::Input,
        force: true,
    });
    if let Some(alpha) = statics {
        opts.static_scores = Some(dir.join("static.tsv"));
        opts.reorder_alpha = alpha;
    }
    build_from_jsonl(&dir.join("in.jsonl"), &dir.join("idx"), &opts).unwrap();
    Arc::new(Index::open(dir.join("idx")).unwrap())
}

pub fn random_queries(index: &Index, num_terms: usize, seed: u64) -> Vec<Query> {
    let mut rng = Rng(seed | 1);
    (0..60)
        .map(|_| {
            // Up to 8 words: GPU AND keeps the last four lists' frequencies and looks earlier ones up
            // again, so queries of more than five terms take both paths.
            let words: Vec<String> = (0..1 + rng.below(8))
                .map(|_| match rng.below(14) {
                    0 => "unknownterm".to_string(),
                    _ => format!("t{}", rng.below(num_terms as u64)),
                })
                .collect();
            Query::parse(index, &words.join(" "))
        })
        .collect()
}

/// The exhaustive CPU oracle for `options`.
pub fn oracle(index: &Arc<Index>, options: SearchOptions) -> CpuSearcher {
    let options = SearchOptions {
        algorithm: Algorithm::Exhaustive,
        ..options
    };
    CpuSearcher::new(Arc::new(Scorer::new(index.clone(), options).unwrap()))
}

/// Every query in `mode` at `k`.
pub fn requests(queries: &[Query], mode: Mode, k: usize) -> Vec<Request> {
    queries.iter().map(|q| Request::new(q.clone(), mode, k)).collect()
}

pub fn same(a: &[Scored], b: &[Scored]) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|(x, y)| x.doc == y.doc && x.score.to_bits() == y.score.to_bits())
}

/// The hybrid answers every request of `reqs` with `want`'s documents and score bits: in a closed loop
/// (all at once), then one query at a time (every worker idle, so long queries are split), each
/// answered once and with its own id.
pub fn check_hybrid(hybrid: &Scheduler, reqs: &[Request], want: &[Vec<Scored>], what: &str) {
    for (i, (g, w)) in hybrid.search_batch(reqs).iter().zip(want).enumerate() {
        assert!(same(&g.as_ref().unwrap().hits, w), "{what}: query {i}");
    }
    let (tx, rx) = channel();
    for (i, r) in reqs.iter().enumerate() {
        let reply: Arc<dyn Reply> = Arc::new(tx.clone());
        hybrid.submit(i as u64, vec![r.clone()], Some(Duration::from_secs(60)), reply);
        let done = rx.recv().unwrap();
        assert_eq!(done.id, i as u64);
        assert!(
            same(&done.result.unwrap().hits, &want[i]),
            "{what}: one at a time, query {i}"
        );
    }
    drop(tx);
    assert!(rx.try_recv().is_err(), "{what}: a query answered twice");
}
