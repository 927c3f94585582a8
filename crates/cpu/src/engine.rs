//! The CPU engine's front: options, algorithm choice, one query, a batch over all cores.

use std::time::{Duration, Instant};

use rayon::prelude::*;
use warpsearch_index::{Bm25Params, Index, IndexError, Result};

use crate::query::{length_norms, Mode, Plan, Query, Ranking, Scored};
use crate::{and, bmw, early, exhaustive, maxscore};

/// Largest k accepted: beyond it a top-k is a sort of the whole result set (use the exhaustive
/// algorithm's output directly if that is what is wanted).
pub const MAX_K: usize = 100_000;

/// Query processing algorithm.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Algorithm {
    /// The fastest exact one for the mode and index: ranked AND (DAAT) for AND, MaxScore for OR, early
    /// termination where the index's global-score order matches the ranking.
    Auto,
    /// Decode everything, score every match, sort (the oracle).
    Exhaustive,
    /// Document-at-a-time ranked AND with skipping (AND only; the AND step of and-or).
    Daat,
    /// MaxScore (OR; and-or's OR step).
    MaxScore,
    /// Block-max WAND (OR; and-or's OR step).
    BlockMaxWand,
    /// Early termination on a global-score-ordered index (`bm25-static` only).
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
        match self {
            Algorithm::Auto => "auto",
            Algorithm::Exhaustive => "exhaustive",
            Algorithm::Daat => "daat",
            Algorithm::MaxScore => "maxscore",
            Algorithm::BlockMaxWand => "bmw",
            Algorithm::EarlyTermination => "early",
        }
    }

    /// Parses a command-line name.
    pub fn by_name(name: &str) -> std::result::Result<Self, String> {
        Algorithm::ALL
            .into_iter()
            .find(|a| a.name() == name)
            .ok_or_else(|| {
                let names: Vec<_> = Algorithm::ALL.iter().map(|a| a.name()).collect();
                format!("unknown algorithm '{name}': expected one of {}", names.join(", "))
            })
    }
}

/// What to compute for every query.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SearchOptions {
    /// Matching.
    pub mode: Mode,
    /// Results per query, 1 ..= [`MAX_K`].
    pub k: usize,
    /// Scoring.
    pub ranking: Ranking,
    /// BM25 parameters; block bounds are recomputed per query when they differ from the index's.
    pub bm25: Bm25Params,
    /// Algorithm.
    pub algorithm: Algorithm,
}

impl SearchOptions {
    /// BM25 with the index's parameters, `k` results, the automatic algorithm.
    pub fn new(index: &Index, mode: Mode, k: usize) -> Self {
        SearchOptions {
            mode,
            k,
            ranking: Ranking::Bm25,
            bm25: index.meta().bm25,
            algorithm: Algorithm::Auto,
        }
    }
}

/// A query's results and the time it took.
#[derive(Debug, Clone)]
pub struct Answer {
    /// The top k, best first.
    pub hits: Vec<Scored>,
    /// Wall time of planning and execution on its thread.
    pub latency: Duration,
}

/// Runs queries against one index with fixed options.
pub struct Searcher<'a> {
    index: &'a Index,
    options: SearchOptions,
    norms: Vec<f32>,
    early: bool,
}

impl<'a> Searcher<'a> {
    /// Checks `options` against `index`: k in range, static scores present for `bm25-static`, the
    /// algorithm valid for the mode and the index.
    pub fn new(index: &'a Index, options: SearchOptions) -> Result<Self> {
        let invalid = |s: String| Err(IndexError::Invalid(s));
        if options.k == 0 || options.k > MAX_K {
            return invalid(format!("k = {} is out of range: use 1 to {MAX_K}", options.k));
        }
        let p = options.bm25;
        if !(p.k1.is_finite() && p.k1 >= 0.0 && (0.0..=1.0).contains(&p.b)) {
            return invalid(format!(
                "BM25 needs k1 ≥ 0 and b in [0, 1], got k1 {} b {}",
                p.k1, p.b
            ));
        }
        use Algorithm::*;
        match (options.algorithm, options.mode) {
            (Daat, Mode::Or) => {
                return invalid("daat evaluates AND queries: use --mode and or and-or".into())
            }
            (MaxScore | BlockMaxWand, Mode::And) => {
                return invalid(format!(
                    "{} evaluates OR queries: use --mode or or and-or, or --algorithm daat for AND",
                    options.algorithm.name()
                ))
            }
            _ => {}
        }
        let norms = length_norms(index, options.bm25);
        // Validates the ranking against the index (static scores, alpha) and the early-termination
        // order once, on an empty query, so that a bad combination fails before any query runs.
        let plan = Plan::new(index, &Query::default(), options.ranking, options.bm25, &norms)?;
        if options.algorithm == EarlyTermination {
            early::global_scores(&plan, options.ranking)?;
        }
        // Whether the index's order fits the ranking depends on the options alone, not on the query.
        let early = match options.algorithm {
            EarlyTermination => true,
            Auto => plan.global_order_applies(options.ranking),
            _ => false,
        };
        drop(plan);
        Ok(Searcher {
            index,
            options,
            norms,
            early,
        })
    }

    /// The index.
    pub fn index(&self) -> &'a Index {
        self.index
    }

    /// The options.
    pub fn options(&self) -> &SearchOptions {
        &self.options
    }

    /// The per-document BM25 length norms of the options' k1 and b ([`length_norms`]).
    pub fn norms(&self) -> &[f32] {
        &self.norms
    }

    /// Whether queries stop early on the index's global-score order (papers/000 Algorithm 1).
    pub fn early_termination(&self) -> bool {
        self.early
    }

    /// Analyses `text` with the index's analyzer.
    pub fn parse(&self, text: &str) -> Query {
        Query::parse(self.index, text)
    }

    /// The top k of one query.
    pub fn search(&self, query: &Query) -> Result<Vec<Scored>> {
        self.search_in(query, self.options.mode)
    }

    /// The top k of one query in `mode` rather than the options' (the GPU engine's fallback answers
    /// the AND and the OR pass of and-or apart).
    pub fn search_in(&self, query: &Query, mode: Mode) -> Result<Vec<Scored>> {
        let o = &self.options;
        let plan = Plan::new(self.index, query, o.ranking, o.bm25, &self.norms)?;
        let run = |mode: Mode| -> Result<Vec<Scored>> {
            if self.early {
                return early::early_termination(&plan, o.ranking, mode, o.k);
            }
            match (o.algorithm, mode) {
                (Algorithm::Exhaustive, _) => exhaustive::exhaustive(&plan, mode, o.k),
                (_, Mode::And) => and::ranked_and(&plan, o.k),
                (Algorithm::BlockMaxWand, _) => bmw::block_max_wand(&plan, o.k),
                _ => maxscore::maxscore(&plan, o.k),
            }
        };
        match mode {
            Mode::AndOr => {
                let and = run(Mode::And)?;
                if and.len() >= o.k {
                    Ok(and)
                } else {
                    run(Mode::Or)
                }
            }
            mode => run(mode),
        }
    }

    /// The top k of one query and its latency.
    pub fn answer(&self, query: &Query) -> Result<Answer> {
        self.answer_in(query, self.options.mode)
    }

    /// [`Searcher::answer`] in `mode` rather than the options' (see [`Searcher::search_in`]).
    pub fn answer_in(&self, query: &Query, mode: Mode) -> Result<Answer> {
        let start = Instant::now();
        let hits = self.search_in(query, mode)?;
        Ok(Answer {
            hits,
            latency: start.elapsed(),
        })
    }

    /// Answers `queries` on all threads of the current rayon pool, one query per thread at a time (the
    /// papers' CPU baselines: inter-query parallelism); results in input order.
    pub fn search_batch(&self, queries: &[Query]) -> Vec<Result<Answer>> {
        queries
            .par_iter()
            .with_max_len(1)
            .map(|q| self.answer(q))
            .collect()
    }
}
