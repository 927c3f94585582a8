//! An index under one ranking: the validated [`SearchOptions`], every document's BM25 length norm, and
//! whether queries may stop early on the index's global-score order. Every backend plans its queries
//! through one shared [`Scorer`], so that all of them compute the same float operations.

use std::sync::Arc;

use warpsearch_index::{Bm25Params, Index, IndexError, Result};

use crate::norms::Norms;
use crate::options::{Algorithm, Request, SearchOptions, MAX_K};
use crate::plan::{length_norms, Part, Plan};
use crate::query::Query;

/// An index, the options it is searched with, and what every query's plan shares.
pub struct Scorer {
    index: Arc<Index>,
    options: SearchOptions,
    norms: Norms,
    early: bool,
    max_terms: usize,
}

/// The most distinct terms a query may have unless a scorer is told otherwise
/// ([`Scorer::with_max_query_terms`]): far beyond any typed query, and a bound on the work one query can
/// ask for (its lists are read once each).
pub const DEFAULT_MAX_QUERY_TERMS: usize = 1024;

impl Scorer {
    /// Checks `options` against `index` (BM25 parameters in range, static scores present for
    /// `bm25-static`, the early-termination order when asked for) and computes the length norms.
    pub fn new(index: Arc<Index>, options: SearchOptions) -> Result<Scorer> {
        if index.is_sharded() {
            return Err(IndexError::Invalid(format!(
                "{} is a sharded index: its shards answer queries, through the engine \
                 (EngineConfig::open), which merges their answers",
                index.dir().display()
            )));
        }
        let p = options.bm25;
        Bm25Params::checked(p.k1, p.b).map_err(IndexError::Invalid)?;
        let norms = length_norms(&index, options.bm25);
        // Validates the ranking against the index (static scores, alpha) and the early-termination
        // order once, on an empty query, so that a bad combination fails before any query runs.
        let plan = Plan::new(&index, &Query::default(), options.ranking, options.bm25, &norms)?;
        if options.algorithm == Algorithm::EarlyTermination {
            plan.global_scores(options.ranking)?;
        }
        // Whether the index's order fits the ranking depends on the options alone, not on the query.
        let early = match options.algorithm {
            Algorithm::EarlyTermination => true,
            Algorithm::Auto => plan.global_order_applies(options.ranking),
            _ => false,
        };
        drop(plan);
        Ok(Scorer {
            index,
            options,
            norms,
            early,
            max_terms: DEFAULT_MAX_QUERY_TERMS,
        })
    }

    /// The scorer of a sharded index's head: it analyses queries against the collection's dictionary
    /// and checks requests, but plans none ([`Scorer::plan`] refuses: the head has no lists); `shard`
    /// is the scorer of one of its shards, made with the same options, which validated them.
    pub fn for_head(index: Arc<Index>, shard: &Scorer) -> Scorer {
        Scorer {
            index,
            options: shard.options,
            norms: Norms::collect(0, std::iter::empty()),
            early: false,
            max_terms: shard.max_terms,
        }
    }

    /// This scorer with at most `max_terms` distinct terms a query (at least 1; the default is
    /// [`DEFAULT_MAX_QUERY_TERMS`]): [`Scorer::check`] refuses a longer query, on every backend.
    pub fn with_max_query_terms(mut self, max_terms: usize) -> Scorer {
        self.max_terms = max_terms.max(1);
        self
    }

    /// The most distinct terms a query may have.
    pub fn max_query_terms(&self) -> usize {
        self.max_terms
    }

    /// The index.
    pub fn index(&self) -> &Arc<Index> {
        &self.index
    }

    /// The options.
    pub fn options(&self) -> &SearchOptions {
        &self.options
    }

    /// The per-document BM25 length norms of the options' k1 and b ([`length_norms`]).
    pub fn norms(&self) -> &[f32] {
        &self.norms
    }

    /// Whether queries stop early on the index's global-score order (docs/references.md#pruned-list-caching Algorithm 1).
    pub fn early_termination(&self) -> bool {
        self.early
    }

    /// Analyses `text` with the index's analyzer.
    pub fn parse(&self, text: &str) -> Query {
        Query::parse(&self.index, text)
    }

    /// Why `request` cannot be answered with these options (k out of range, an algorithm that does
    /// not evaluate its mode, more distinct terms than [`Scorer::max_query_terms`]), if it cannot: what
    /// every front door (the CLI's options, the server's requests, Python's calls) checks.
    pub fn check(&self, request: &Request) -> Result<()> {
        self.check_shape(request)?;
        match self.options.algorithm.refuses(request.mode) {
            Some(why) => Err(IndexError::Invalid(why)),
            None => Ok(()),
        }
    }

    /// [`Scorer::check`] but the algorithm's modes: what a backend checks of each request. A backend
    /// answers AND with ranked AND whatever the algorithm, and OR with MaxScore where the algorithm is
    /// daat (as and-or's two steps always are), so that the shards of an index can answer and-or's
    /// steps apart on one engine each.
    pub fn check_shape(&self, request: &Request) -> Result<()> {
        if request.k == 0 || request.k > MAX_K {
            return Err(IndexError::Invalid(format!(
                "k = {} is out of range: use 1 to {MAX_K}",
                request.k
            )));
        }
        let terms = request.query.terms.len();
        if terms > self.max_terms {
            return Err(IndexError::Invalid(format!(
                "the query has {terms} distinct terms, more than the limit of {}: shorten it, or raise \
                 the limit (--max-query-terms; max_query_terms in Python)",
                self.max_terms
            )));
        }
        Ok(())
    }

    /// The plan of `query` restricted to `part`.
    pub fn plan(&self, query: &Query, part: Part) -> Result<Plan<'_>> {
        if self.index.is_sharded() {
            return Err(IndexError::Invalid(format!(
                "{} is a sharded index, whose head has no posting lists: search its shards",
                self.index.dir().display()
            )));
        }
        let o = &self.options;
        Ok(Plan::new(&self.index, query, o.ranking, o.bm25, &self.norms)?.with_part(part))
    }
}
