//! The per-query [`Plan`] every backend executes: a query bound to an index and a [`Ranking`], with per
//! term the posting list, the weight that multiplies BM25's tf part, and upper bounds for the list and
//! each block; a docID range and a starting threshold say which part of the work a backend does.
//!
//! Every backend scores a document the same way, so that all of them return bit-identical scores: each
//! term contribution `weight · tf_part(tf, dl)` (an `f32`) is turned into the query's fixed point
//! ([`Fixed`]), the integers are summed in any order (terms the document lacks add nothing), the sum is
//! turned back into an `f32`, and the document prior (the static part of `bm25-static`, zero for `bm25`)
//! is added last. Pruning compares upper bounds against the current k-th score with a small relative
//! slack ([`Plan::can_beat`]) so that rounding never prunes a document that belongs in the top k.

use warpsearch_index::{Bm25, Bm25Params, DocOrder, Index, IndexError, PostingList, Result};

use crate::fixed::Fixed;
use crate::norms::Norms;
use crate::query::{Query, Ranking};
use crate::topk::TopK;

/// One term of a plan.
#[derive(Clone)]
pub struct PlanTerm<'a> {
    /// The posting list.
    pub list: PostingList<'a>,
    /// Multiplies BM25's tf part to give this term's contribution.
    pub weight: f32,
    /// Upper bound of the contribution over the whole list.
    pub max_bound: f32,
    /// Upper bounds per block.
    pub bounds: BlockBounds,
}

/// Where a term's per-block upper bounds come from.
#[derive(Clone)]
pub enum BlockBounds {
    /// The index's block maxima (computed with the index's k1 and b) times this factor.
    Stored(f32),
    /// Computed for this query by decoding the list (query k1/b differ from the index's).
    Computed(Vec<f32>),
}

impl PlanTerm<'_> {
    /// Upper bound of the contribution in block `i`.
    #[inline]
    pub fn block_bound(&self, i: usize) -> f32 {
        match &self.bounds {
            BlockBounds::Stored(scale) => self.list.blocks()[i].max_score * scale,
            BlockBounds::Computed(v) => v[i],
        }
    }
}

/// A query bound to an index and a ranking, ready to execute.
pub struct Plan<'a> {
    /// The index.
    pub index: &'a Index,
    /// Terms in canonical order (the query's order of first appearance).
    pub terms: Vec<PlanTerm<'a>>,
    /// Whether the query had terms the index lacks (AND then matches nothing).
    pub has_unknown: bool,
    /// BM25 with the query's parameters and the index's statistics.
    pub bm25: Bm25,
    /// Every document's BM25 length norm under the plan's parameters ([`length_norms`]).
    pub norms: &'a [f32],
    /// The static half of `bm25-static`.
    pub prior: Option<Prior<'a>>,
    /// Upper bound of the prior over all documents (0 without one).
    pub prior_bound: f32,
    /// Bounds are multiplied by this before a pruning comparison.
    pub slack: f32,
    /// The query's fixed point, in which contributions are summed.
    pub fixed: Fixed,
    /// The share of the query's work this plan does (all of it unless a scheduler split the query).
    pub part: Part,
}

/// An inclusive range of internal docIDs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DocRange {
    /// First docID in the range.
    pub first: u32,
    /// Last docID in the range (inclusive); below `first` for an empty range.
    pub last: u32,
}

impl DocRange {
    /// Every docID.
    pub const ALL: DocRange = DocRange {
        first: 0,
        last: u32::MAX - 1,
    };

    /// No docID.
    pub const EMPTY: DocRange = DocRange { first: 1, last: 0 };

    /// The docIDs from `start` up to but excluding `end`.
    pub fn half_open(start: u32, end: u32) -> DocRange {
        if end <= start {
            DocRange::EMPTY
        } else {
            DocRange {
                first: start,
                last: end - 1,
            }
        }
    }

    /// Whether `doc` lies in the range.
    #[inline]
    pub fn contains(&self, doc: u32) -> bool {
        self.first <= doc && doc <= self.last
    }

    /// Whether the range holds no docID.
    pub fn is_empty(&self) -> bool {
        self.first > self.last
    }
}

/// Which share of a query's work a backend does: the documents of `range` that score at least `floor`.
///
/// A query split between processors runs one part per docID range; their top-k lists merge exactly
/// ([`crate::merge::merge_top_k`]) because every document belongs to one range. A part may start from
/// another part's k-th score as its `floor`: a document scoring below it cannot enter the merged top k,
/// while one scoring exactly the floor still can (ties go to the smaller docID), so it is kept.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Part {
    /// The documents this part considers.
    pub range: DocRange,
    /// Documents scoring below this are not wanted (−∞: every document).
    pub floor: f32,
}

impl Part {
    /// The whole query.
    pub const WHOLE: Part = Part {
        range: DocRange::ALL,
        floor: f32::NEG_INFINITY,
    };

    /// The documents of `range`, every score.
    pub fn range(range: DocRange) -> Part {
        Part {
            range,
            floor: f32::NEG_INFINITY,
        }
    }
}

/// The static part of a score: `alpha · normalize(static(d))`.
#[derive(Clone, Copy)]
pub struct Prior<'a> {
    scores: &'a [f32],
    min: f32,
    max: f32,
    alpha: f32,
}

impl Prior<'_> {
    /// The prior of document `doc`.
    #[inline]
    pub fn of(&self, doc: u32) -> f32 {
        let s = self.scores[doc as usize];
        let norm = if self.max > self.min {
            (s - self.min) / (self.max - self.min)
        } else {
            0.0
        };
        self.alpha * norm
    }
}

impl<'a> Prior<'a> {
    /// The prior of `bm25-static` with weight `alpha`, or an error if the index has no static scores or
    /// `alpha` is outside [0, 1].
    pub fn new(index: &'a Index, alpha: f32) -> Result<Prior<'a>> {
        if !(0.0..=1.0).contains(&alpha) {
            return Err(IndexError::Invalid(format!("alpha {alpha} is outside [0, 1]")));
        }
        let (Some(scores), Some(range)) = (index.static_scores(), index.static_range()) else {
            return Err(IndexError::Invalid(format!(
                "the index in {} has no static scores: rebuild it with --static-scores <file> \
                 to rank with bm25-static",
                index.dir().display()
            )));
        };
        Ok(Prior {
            scores,
            min: range.min,
            max: range.max,
            alpha,
        })
    }

    /// The bound of every document's prior (its weight α).
    pub fn alpha(&self) -> f32 {
        self.alpha
    }
}

/// The weight of each query term (in slot order) that multiplies BM25's tf part: the term's idf times
/// its count for `bm25`; for `bm25-static`, docs/references.md#pruned-list-caching eq. 3's normalised weight `(1 − α)·w/Σw/(k1 + 1)`.
///
/// For a query sent to a shard ([`Query::collection`] not empty), the weights are the single index's:
/// idf from the collection's document frequencies, `bm25-static`'s sum over every term of the
/// collection's query in its order. With them, the query's fixed point: that of the weights of every
/// term of the query as the collection knows it (a shard's lacking terms included), so that a shard
/// sums its scores in the single index's fixed point, bit for bit.
pub fn term_weights(
    index: &Index,
    query: &Query,
    ranking: Ranking,
    params: Bm25Params,
) -> Result<(Vec<f32>, Fixed)> {
    let (here, all) = query_weights(index, query, ranking, params)?;
    let fixed = Fixed::for_weights(all.as_deref().unwrap_or(&here), params.k1);
    Ok((here, fixed))
}

fn query_weights(
    index: &Index,
    query: &Query,
    ranking: Ranking,
    params: Bm25Params,
) -> Result<(Vec<f32>, Option<Vec<f32>>)> {
    let bm25 = Bm25 {
        params,
        ..index.bm25()
    };
    let idfs: Vec<f32> = if query.collection.is_empty() {
        query
            .terms
            .iter()
            .map(|&(id, count)| bm25.idf(index.postings(id).len() as u64) * count as f32)
            .collect()
    } else {
        query
            .collection
            .iter()
            .map(|t| bm25.idf(t.df) * t.count as f32)
            .collect()
    };
    let all = match ranking {
        Ranking::Bm25 => idfs,
        Ranking::Bm25Static { alpha } => {
            Prior::new(index, alpha)?;
            let total: f32 = idfs.iter().sum();
            let k1 = params.k1;
            idfs.iter()
                .map(|&w| (1.0 - alpha) * (w / total) / (k1 + 1.0))
                .collect()
        }
    };
    if query.collection.is_empty() {
        return Ok((all, None));
    }
    let here: Vec<f32> = query
        .collection
        .iter()
        .zip(&all)
        .filter(|(t, _)| t.here)
        .map(|(_, &w)| w)
        .collect();
    if here.len() != query.terms.len() {
        return Err(IndexError::Invalid(format!(
            "a shard's query has {} terms but its collection terms say {}",
            query.terms.len(),
            here.len()
        )));
    }
    Ok((here, Some(all)))
}

/// The relative slack of upper bounds for a query of `n` terms (see [`Plan::can_beat`]).
pub fn bound_slack(n: usize) -> f32 {
    // Relative rounding of a sum of n + 1 non-negative f32 values in any order, with room to spare.
    1.0 + (8 * n as u32 + 32) as f32 * f32::EPSILON
}

impl<'a> Plan<'a> {
    /// Binds `query` to `index` under `ranking` with BM25 parameters `params`; `norms` must be
    /// [`length_norms`] of the same index and parameters.
    pub fn new(
        index: &'a Index,
        query: &Query,
        ranking: Ranking,
        params: Bm25Params,
        norms: &'a [f32],
    ) -> Result<Plan<'a>> {
        let stats = index.bm25();
        let bm25 = Bm25 { params, ..stats };
        assert_eq!(
            norms.len(),
            index.num_docs() as usize,
            "length norms of another index"
        );
        let same_params = params == stats.params;
        let (weights, all_weights) = query_weights(index, query, ranking, params)?;
        let prior = match ranking {
            Ranking::Bm25 => None,
            Ranking::Bm25Static { alpha } => Some(Prior::new(index, alpha)?),
        };
        let prior_bound = prior.map_or(0.0, |p| p.alpha);
        let n = query.terms.len();
        let slack = bound_slack(n);
        let fixed = Fixed::for_weights(all_weights.as_deref().unwrap_or(&weights), params.k1);
        let mut terms = Vec::with_capacity(n);
        for (&(id, _), &weight) in query.terms.iter().zip(&weights) {
            let list = index.postings(id);
            let (bounds, max_bound) = if same_params {
                // Stored bounds are ≥ idf · tf_part for weight-1 idf; rescale to this weight.
                let f = weight / bm25.idf(list.len() as u64) * slack;
                (BlockBounds::Stored(f), list.record().max_score * f)
            } else {
                let v = computed_bounds(&list, &bm25, weight, norms)?;
                let max = v.iter().copied().fold(0.0, f32::max);
                (BlockBounds::Computed(v), max)
            };
            terms.push(PlanTerm {
                list,
                weight,
                max_bound,
                bounds,
            });
        }
        Ok(Plan {
            index,
            terms,
            has_unknown: !query.unknown.is_empty(),
            bm25,
            norms,
            prior,
            prior_bound: prior_bound * slack,
            slack,
            fixed,
            part: Part::WHOLE,
        })
    }

    /// The plan restricted to `part`.
    pub fn with_part(self, part: Part) -> Plan<'a> {
        Plan { part, ..self }
    }

    /// An empty top-k collector for this plan: it keeps `k` documents and refuses those below the
    /// part's floor.
    pub fn top_k(&self, k: usize) -> TopK {
        TopK::with_floor(k, self.part.floor)
    }

    /// Term `t`'s contribution for a posting `(doc, tf)`, in the query's fixed point: sum these in any
    /// order, then [`Plan::finish_sum`].
    #[inline]
    pub fn contribution(&self, t: &PlanTerm, doc: u32, tf: u32) -> u32 {
        self.fixed
            .of(t.weight * self.bm25.tf_part_normed(tf, self.norms[doc as usize]))
    }

    /// The score, before the prior, of fixed-point sum `q` (for comparisons with bounds).
    #[inline]
    pub fn value(&self, q: u32) -> f32 {
        self.fixed.value(q)
    }

    /// The final score from the fixed-point sum of the document's contributions.
    #[inline]
    pub fn finish_sum(&self, doc: u32, sum: u32) -> f32 {
        self.finish_value(doc, self.value(sum))
    }

    /// The final score from `value`, an `f32` score before the prior (a sum's [`Plan::value`], or a
    /// bound of one).
    #[inline]
    pub fn finish_value(&self, doc: u32, value: f32) -> f32 {
        match &self.prior {
            Some(p) => value + p.of(doc),
            None => value,
        }
    }

    /// Whether a document whose score is at most `bound` could still enter a top-k whose k-th score is
    /// `threshold` (always true while the top-k is not full: `threshold` is −∞ then).
    #[inline]
    pub fn can_beat(&self, bound: f32, threshold: f32) -> bool {
        bound * self.slack >= threshold
    }

    /// Whether the plan's static weight and BM25 parameters are those the index's global-score docID
    /// order was computed with, so that GS(d) bounds every later document's score (docs/references.md#pruned-list-caching eq. 5).
    pub fn global_order_applies(&self, ranking: Ranking) -> bool {
        match (ranking, self.index.meta().doc_order) {
            (Ranking::Bm25Static { alpha }, DocOrder::GlobalScore { alpha: a }) => {
                alpha == a
                    && self.bm25.params == self.index.meta().bm25
                    && self.index.global_scores().is_some()
            }
            _ => false,
        }
    }

    /// The index's global scores GS(d), or an error if its docID order was not made for `ranking` under
    /// the plan's BM25 parameters.
    pub fn global_scores(&self, ranking: Ranking) -> Result<&'a [f32]> {
        match self.index.global_scores() {
            Some(gs) if self.global_order_applies(ranking) => Ok(gs),
            _ => Err(IndexError::Invalid(format!(
                "early termination needs an index built with --doc-order global-score and ranking \
                 bm25-static with the same alpha, k1 and b (index {}: {:?}, bm25 {:?})",
                self.index.dir().display(),
                self.index.meta().doc_order,
                self.index.meta().bm25
            ))),
        }
    }
}

/// Exact per-block maxima of `weight · tf_part` for parameters other than the index's.
fn computed_bounds(list: &PostingList, bm25: &Bm25, weight: f32, norms: &[f32]) -> Result<Vec<f32>> {
    let (mut docs, mut freqs) = (
        [0u32; warpsearch_index::BLOCK_LEN],
        [0u32; warpsearch_index::BLOCK_LEN],
    );
    (0..list.blocks().len())
        .map(|i| {
            let n = list.decode_docs(i, &mut docs)?;
            list.decode_freqs(i, &mut freqs)?;
            let max = docs[..n]
                .iter()
                .zip(&freqs[..n])
                .map(|(&d, &f)| weight * bm25.tf_part_normed(f, norms[d as usize]))
                .fold(0.0, f32::max);
            Ok(warpsearch_index::bm25::loosen_bound(max))
        })
        .collect()
}

/// Every document's [`Bm25::length_norm`] under `params` (computed once per searcher: it takes the
/// division by the mean length out of every posting's score).
pub fn length_norms(index: &Index, params: Bm25Params) -> Norms {
    let bm25 = Bm25 {
        params,
        ..index.bm25()
    };
    let lens = index.doc_lens();
    Norms::collect(lens.len(), lens.iter().map(|&l| bm25.length_norm(l)))
}
