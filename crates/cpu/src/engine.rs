//! The CPU engine's front: algorithm choice, one query (or one part of one), a batch over all cores.

use std::sync::Arc;
use std::time::Instant;

use rayon::prelude::*;
use warpsearch_index::Result;
use warpsearch_query::{Algorithm, Answer, Mode, Part, Request, Scored, Scorer};

use crate::{and, bmw, early, exhaustive, maxscore};

/// Runs queries against one index under one [`Scorer`] (ranking and algorithm); each query brings its
/// own mode and k.
#[derive(Clone)]
pub struct CpuSearcher {
    scorer: Arc<Scorer>,
}

impl CpuSearcher {
    /// A searcher over `scorer`'s index and options.
    pub fn new(scorer: Arc<Scorer>) -> Self {
        CpuSearcher { scorer }
    }

    /// The scorer.
    pub fn scorer(&self) -> &Arc<Scorer> {
        &self.scorer
    }

    /// The top k of one request.
    pub fn search(&self, request: &Request) -> Result<Vec<Scored>> {
        self.search_part(request, request.mode, Part::WHOLE)
    }

    /// The top k of `request` under `mode` (and-or's passes are answered apart by other backends'
    /// fallbacks) among the documents of `part`.
    pub fn search_part(&self, request: &Request, mode: Mode, part: Part) -> Result<Vec<Scored>> {
        self.scorer.check_shape(request)?;
        let plan = self.scorer.plan(&request.query, part)?;
        let options = self.scorer.options();
        let k = request.k;
        let run = |mode: Mode| -> Result<Vec<Scored>> {
            if self.scorer.early_termination() {
                return early::early_termination(&plan, options.ranking, mode, k);
            }
            match (options.algorithm, mode) {
                (Algorithm::Exhaustive, _) => exhaustive::exhaustive(&plan, mode, k),
                (_, Mode::And) => and::ranked_and(&plan, k),
                // Block-max WAND's pivot search and cursor order cost its term count at every
                // step: a long query runs MaxScore, whose union goes through a heap.
                (Algorithm::BlockMaxWand, _) if plan.terms.len() <= bmw::MAX_TERMS => {
                    bmw::block_max_wand(&plan, k)
                }
                _ => maxscore::maxscore(&plan, k),
            }
        };
        match mode {
            Mode::AndOr => {
                let and = run(Mode::And)?;
                if and.len() >= k {
                    Ok(and)
                } else {
                    run(Mode::Or)
                }
            }
            mode => run(mode),
        }
    }

    /// Where early termination stopped `request` (its first pass for and-or): the first docID it did
    /// not visit, or `None` when it visited every candidate (always, on an index without global-score
    /// order). The list cache's visiting frequencies count the blocks before it (docs/references.md#pruned-list-caching 3.3.1).
    pub fn stop_doc(&self, request: &Request) -> Result<Option<u32>> {
        if !self.scorer.early_termination() {
            return Ok(None);
        }
        self.scorer.check_shape(request)?;
        let plan = self.scorer.plan(&request.query, Part::WHOLE)?;
        let mode = if request.mode == Mode::Or {
            Mode::Or
        } else {
            Mode::And
        };
        let (_, stop) = early::stopping(&plan, self.scorer.options().ranking, mode, request.k)?;
        Ok((stop != crate::cursor::END).then_some(stop))
    }

    /// The top k of one request and its latency.
    pub fn answer(&self, request: &Request) -> Result<Answer> {
        self.answer_part(request, request.mode, Part::WHOLE)
    }

    /// [`CpuSearcher::search_part`] and its latency.
    pub fn answer_part(&self, request: &Request, mode: Mode, part: Part) -> Result<Answer> {
        let start = Instant::now();
        let hits = self.search_part(request, mode, part)?;
        Ok(Answer {
            hits,
            latency: start.elapsed(),
        })
    }

    /// Answers `requests` on all threads of the current rayon pool, one query per thread at a time (the
    /// papers' CPU baselines: inter-query parallelism); results in input order.
    pub fn search_batch(&self, requests: &[Request]) -> Vec<Result<Answer>> {
        requests
            .par_iter()
            .with_max_len(1)
            .map(|r| self.answer(r))
            .collect()
    }
}
