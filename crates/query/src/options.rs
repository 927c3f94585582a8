//! What a searcher is configured with ([`SearchOptions`]: ranking, BM25 parameters, CPU algorithm) and
//! what each query asks for ([`Request`]: its mode and k), with the answer a backend gives ([`Answer`]).

use std::time::Duration;

use crate::query::{Mode, Query, Ranking, Scored};
use warpsearch_index::{Bm25Params, Index};

/// Largest k accepted: beyond it a top-k is a sort of the whole result set (use the exhaustive
/// algorithm's output directly if that is what is wanted).
pub const MAX_K: usize = 100_000;

/// Query processing algorithm of the CPU engine (the GPU runs its own, chosen by mode).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Default,
    strum::Display,
    strum::EnumString,
    strum::IntoStaticStr,
    strum::VariantNames,
    serde::Serialize,
    serde::Deserialize,
)]
#[strum(serialize_all = "lowercase")]
#[serde(rename_all = "lowercase")]
pub enum Algorithm {
    /// The fastest exact one for the mode and index: ranked AND (DAAT) for AND, MaxScore for OR, early
    /// termination where the index's global-score order matches the ranking.
    #[default]
    Auto,
    /// Decode everything, score every match, sort (the oracle).
    Exhaustive,
    /// Document-at-a-time ranked AND with skipping (AND only; the AND step of and-or).
    Daat,
    /// MaxScore (OR; and-or's OR step).
    MaxScore,
    /// Block-max WAND (OR; and-or's OR step).
    #[strum(serialize = "bmw")]
    #[serde(rename = "bmw")]
    BlockMaxWand,
    /// Early termination on a global-score-ordered index (`bm25-static` only).
    #[strum(serialize = "early")]
    #[serde(rename = "early")]
    EarlyTermination,
}

impl Algorithm {
    /// Every algorithm, for tests and benchmarks.
    pub const ALL: [Algorithm; 6] = [
        Algorithm::Auto,
        Algorithm::Exhaustive,
        Algorithm::Daat,
        Algorithm::MaxScore,
        Algorithm::BlockMaxWand,
        Algorithm::EarlyTermination,
    ];

    /// The command-line name.
    pub fn name(self) -> &'static str {
        self.into()
    }

    /// Parses a command-line name.
    pub fn by_name(name: &str) -> std::result::Result<Self, String> {
        crate::named("algorithm", name)
    }

    /// Why this algorithm cannot evaluate `mode`, if it cannot.
    pub fn refuses(self, mode: Mode) -> Option<String> {
        match (self, mode) {
            (Algorithm::Daat, Mode::Or) => {
                Some("daat evaluates AND queries: use --mode and or and-or".into())
            }
            (Algorithm::MaxScore | Algorithm::BlockMaxWand, Mode::And) => Some(format!(
                "{} evaluates OR queries: use --mode or or and-or, or --algorithm daat for AND",
                self.name()
            )),
            _ => None,
        }
    }
}

/// How a searcher scores documents: fixed when it is made (the GPU uploads length norms and priors
/// for them); a query's mode and k come with each [`Request`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SearchOptions {
    /// Scoring.
    pub ranking: Ranking,
    /// BM25 parameters; block bounds are recomputed per query when they differ from the index's.
    pub bm25: Bm25Params,
    /// The CPU engine's algorithm.
    pub algorithm: Algorithm,
}

impl SearchOptions {
    /// BM25 with the index's parameters, the automatic algorithm.
    pub fn new(index: &Index) -> Self {
        SearchOptions {
            ranking: Ranking::Bm25,
            bm25: index.meta().bm25,
            algorithm: Algorithm::Auto,
        }
    }
}

/// One query to answer: the analysed query, what matches, how many results.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    /// The analysed query.
    pub query: Query,
    /// Matching.
    pub mode: Mode,
    /// Results wanted, 1 ..= [`MAX_K`].
    pub k: usize,
}

impl Request {
    /// A request for the top `k` of `query` under `mode`.
    pub fn new(query: Query, mode: Mode, k: usize) -> Request {
        Request { query, mode, k }
    }
}

/// A query's results and the time it took.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    /// The top k, best first.
    pub hits: Vec<Scored>,
    /// Wall time from the moment the backend took the query to its results being ready.
    pub latency: Duration,
}
