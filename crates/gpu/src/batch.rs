//! A batch's descriptors ([`TermDesc`], [`QueryDesc`]: the kernels' structs, defined in [`crate::abi`])
//! prepared from analysed queries, and the cutting of requests into batches.

use std::borrow::Borrow;
use std::collections::HashSet;

use rayon::prelude::*;
use warpsearch_index::Index;
use warpsearch_query::plan::{bound_slack, term_weights};
use warpsearch_query::{DocRange, Fixed, Query, Request, Scorer};

use crate::abi::NO_SHARE;
pub use crate::abi::{QueryDesc, TermDesc};
use crate::cache::Capacity;
use crate::error::GpuError;
use crate::residency::Residency;
use crate::stage::{cached_term, SpanKey, Stage};

/// A batch's descriptors in host memory; `slots[i]` is the caller's index of the query at out_slot i.
#[derive(Default)]
pub struct Prepared {
    /// Queries (and parts of queries), largest first; the parts of one query are adjacent.
    pub queries: Vec<QueryDesc>,
    /// Terms of all queries.
    pub terms: Vec<TermDesc>,
    /// The caller's query index of each out_slot (one per part).
    pub slots: Vec<usize>,
    /// Queries cut into parts, each with a key its parts share ([`QueryDesc::share`]).
    pub shared: u32,
}

impl Prepared {
    /// Bytes the batch's descriptors take on the device: the queries', padded to the terms' 8-byte
    /// alignment, the terms', and the shared keys'.
    pub fn bytes(&self) -> usize {
        self.terms_at() + std::mem::size_of_val(self.terms.as_slice()) + 8 * self.shared as usize
    }

    /// Where the terms start in the descriptors' bytes (after the queries, 8-byte aligned).
    pub fn terms_at(&self) -> usize {
        std::mem::size_of_val(self.queries.as_slice()).next_multiple_of(8)
    }
}

/// Tasks per CTA from which a batch of AND queries is not cut finer than its coarsest split
/// ([`Split::for_costs`]).
pub const FULL_WAVES: usize = 4;

/// How long queries are cut into docID ranges (docs/references.md#batched-intersection: long lists spread over many thread blocks).
#[derive(Debug, Clone, Copy)]
pub struct Split {
    /// Cost above which a query is cut: one part per `cost` (at least 1).
    pub cost: u64,
    /// Most parts.
    pub max_parts: u32,
    /// Cost is all postings (OR) rather than the shortest list (AND).
    pub or_cost: bool,
}

impl Split {
    /// The cost of `q`: postings of its shortest list (AND) or of all its lists (OR).
    pub fn cost(&self, index: &Index, q: &Query) -> u64 {
        let dfs = q
            .terms
            .iter()
            .map(|&(t, _)| index.term_records()[t as usize].df as u64);
        if self.or_cost {
            dfs.sum()
        } else {
            dfs.min().unwrap_or(0)
        }
    }

    /// Parts `q` is cut into.
    pub fn parts(&self, index: &Index, q: &Query) -> u32 {
        self.parts_of(index, self.cost(index, q))
    }

    /// Parts a query of `cost` is cut into.
    fn parts_of(&self, index: &Index, cost: u64) -> u32 {
        cost.div_ceil(self.cost.max(1))
            .max(1)
            .min(self.max_parts.max(1) as u64)
            .min(index.num_docs().max(1) as u64) as u32
    }

    /// The split of the batch of queries `chunk` (query `i` costing `costs[i]`, [`Split::cost`]),
    /// formed with `self` (the coarsest split). A batch of fewer than [`FULL_WAVES`] tasks per CTA (a call of the few queries
    /// that arrived meanwhile, or one that carries uncached lists) is otherwise about one wave of
    /// tasks that waits for its longest: its queries are cut as [`WaveCut`] says, and it stays within
    /// `batch` tasks. Fuller batches keep `self`: there every CTA is busy and the parts' fixed costs
    /// outweigh (docs/decisions/013).
    pub fn for_costs(
        self,
        index: &Index,
        costs: &[u64],
        chunk: &[usize],
        cut: WaveCut,
        batch: usize,
    ) -> Split {
        if cut.waves == 0 || cut.floor == u64::MAX {
            return self;
        }
        let tasks =
            |s: &Split| -> usize { chunk.iter().map(|&i| s.parts_of(index, costs[i]) as usize).sum() };
        if tasks(&self) >= FULL_WAVES * cut.ctas as usize {
            return self;
        }
        let total: u64 = chunk.iter().map(|&i| costs[i]).sum();
        let share = total / (cut.ctas.max(1) as u64 * cut.waves as u64);
        let mut split = Split {
            // At least 1: the doubling below must grow it.
            cost: share.max(cut.floor).max(1).min(self.cost),
            max_parts: cut.max_parts.max(self.max_parts),
            ..self
        };
        let most = match cut.task_cost {
            0 => batch,
            c => batch.min(chunk.len().max((total / c) as usize)),
        };
        while split.cost < self.cost && tasks(&split) > most {
            split.cost = split.cost.saturating_mul(2).min(self.cost);
        }
        // At the coarse cost, more parts than the coarse split's may still not fit the batch.
        if tasks(&split) > batch {
            return self;
        }
        split
    }
}

/// How [`Split::for_costs`] cuts a batch short of [`FULL_WAVES`] tasks per CTA: so finely that its
/// largest task takes at most 1/`waves` of what each of `ctas` CTAs has to do on average, but never
/// below `floor` postings a part (`u64::MAX`, or `waves` 0: not cut this way), in at most `max_parts`
/// parts a query, and with at least `task_cost` postings a task on average where the coarse split
/// allows.
#[derive(Debug, Clone, Copy)]
pub struct WaveCut {
    /// CTAs the batch's kernel runs at once.
    pub ctas: u32,
    /// Parts' cost at most 1/`waves` of a CTA's average share.
    pub waves: u32,
    /// Least cost of a part.
    pub floor: u64,
    /// Most parts a query is cut into (at least the coarse split's).
    pub max_parts: u32,
    /// Least average cost of the batch's tasks (0: any). Each task costs the host the same work (its
    /// descriptor, its answer) whatever its size, so short queries that arrive fast must not be cut
    /// into more parts than the host keeps up with, while long ones still are (docs/decisions/042).
    pub task_cost: u64,
}

/// Cuts `which` (of queries costing `costs[i]`, [`Split::cost`]) into batches of at most `batch`
/// descriptors (a query cut into P parts takes P) whose staged spans (`spans(i)`; a span several
/// queries share is staged once) fit `stage` together.
pub fn batches(
    index: &Index,
    costs: &[u64],
    which: &[usize],
    split: Split,
    batch: usize,
    stage: Capacity,
    spans: impl Fn(usize) -> Vec<(SpanKey, Capacity)>,
) -> Vec<Vec<usize>> {
    let mut out: Vec<Vec<usize>> = Vec::new();
    let mut used = 0usize;
    let mut staged = Capacity::default();
    let mut seen: HashSet<SpanKey> = HashSet::new();
    for &i in which {
        let parts = split.parts_of(index, costs[i]) as usize;
        let mine = spans(i);
        // The space `mine` adds to a batch that has staged `seen` (none when all of it is cached: the
        // common case, which then allocates nothing).
        let new = |seen: &HashSet<SpanKey>| {
            if mine.is_empty() {
                return Capacity::default();
            }
            let mut keys: Vec<&(SpanKey, Capacity)> =
                mine.iter().filter(|(k, _)| !seen.contains(k)).collect();
            keys.sort_by_key(|(k, _)| *k);
            keys.dedup_by_key(|(k, _)| *k);
            keys.iter().fold(Capacity::default(), |acc, (_, c)| acc.plus(*c))
        };
        let mut add = new(&seen);
        if out.is_empty() || used + parts > batch.max(parts) || !stage.holds(staged.plus(add)) {
            out.push(Vec::new());
            used = 0;
            staged = Capacity::default();
            seen.clear();
            add = new(&seen);
        }
        out.last_mut().expect("a batch").push(i);
        used += parts;
        staged = staged.plus(add);
        seen.extend(mine.iter().map(|(k, _)| *k));
    }
    out
}

/// Items below which [`map_all`] stays on the calling thread: handing a small batch to the pool costs
/// more (a wake-up of its threads) than the work, and the latency of a call of a few queries with it.
const PARALLEL_FROM: usize = 256;

/// `f` of every item, in order: on all cores of the current pool where `parallel` and there are enough.
pub(crate) fn map_all<T: Sync, U: Send>(
    items: &[T],
    parallel: bool,
    f: impl Fn(&T) -> U + Sync + Send,
) -> Vec<U> {
    if parallel && items.len() >= PARALLEL_FROM {
        items.par_iter().map(f).collect()
    } else {
        items.iter().map(f).collect()
    }
}

/// One query's descriptors, built on any thread.
struct Built {
    /// Its terms in plan order (ascending document frequency); those in `staged` are yet to be placed.
    terms: Vec<TermDesc>,
    /// (position in `terms`, term id) of the terms the cache lacks.
    staged: Vec<(usize, u32)>,
    /// Blocks of its range read from the cache.
    cached_blocks: u64,
    slack: f32,
    fixed: Fixed,
}

/// Builds the descriptors of `queries[i]` (costing `costs[i]`, [`Split::cost`]) for each `i` in
/// `which` under the scorer's ranking, over the documents of `ranges[i]`
/// (every document without `ranges`; a range must hold at least one document of the index). Terms are ordered by ascending
/// document frequency (SvS: the shortest list generates the candidates). A query whose cost exceeds
/// `split.cost` becomes several descriptors over disjoint docID ranges (sharing its terms), adjacent in
/// the output. Queries are ordered by descending cost per part, so that the persistent grid takes the long
/// ones first and fills in with short ones (docs/references.md#batched-intersection's bucketing by shortest-list length, taken to its
/// limit: one bucket per length).
#[allow(clippy::too_many_arguments)]
pub fn prepare<R: Borrow<Request> + Sync>(
    scorer: &Scorer,
    residency: &Residency,
    queries: &[R],
    costs: &[u64],
    which: &[usize],
    split: Split,
    ranges: Option<&[DocRange]>,
    stage: &mut Stage,
    parallel: bool,
) -> Result<Prepared, GpuError> {
    let index: &Index = scorer.index();
    let (ranking, params) = (scorer.options().ranking, scorer.options().bm25);
    let same_params = params == index.meta().bm25;
    let bm25 = warpsearch_index::Bm25 {
        params,
        ..index.bm25()
    };
    let mut order: Vec<(u64, usize, u32)> = which
        .iter()
        .map(|&i| {
            let parts = split.parts_of(index, costs[i]);
            (costs[i] / parts as u64, i, parts)
        })
        .collect();
    order.sort_unstable_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    let num_docs = index.num_docs() as u64;
    let range = |i: usize| match ranges {
        Some(r) => (r[i].first as u64, (r[i].last as u64).min(num_docs.max(1) - 1)),
        None => (0, num_docs.max(1) - 1),
    };
    // Each query's descriptors (on all cores where `parallel`: the host's share of a batch of cheap
    // queries), with the terms the cache lacks left for the staging pass below, which runs in order.
    let build = |&(_, i, _): &(u64, usize, u32)| {
        let q = &queries[i].borrow().query;
        let (weights, fixed) = term_weights(index, q, ranking, params)?;
        let n = q.terms.len();
        let slack = bound_slack(n);
        let mut by_df: Vec<usize> = (0..n).collect();
        let df = |s: usize| index.term_records()[q.terms[s].0 as usize].df;
        by_df.sort_by_key(|&s| (df(s), s));
        let (lo, hi) = range(i);
        let mut b = Built {
            terms: Vec::with_capacity(n),
            staged: Vec::new(),
            cached_blocks: 0,
            slack,
            fixed,
        };
        for &s in &by_df {
            let (id, _) = q.terms[s];
            let rec = &index.term_records()[id as usize];
            let bound_scale = if same_params {
                weights[s] / bm25.idf(rec.df as u64) * slack
            } else {
                -1.0
            };
            let desc = match cached_term(index, residency, id, lo as u32, hi as u32) {
                Some((desc, blocks)) => {
                    b.cached_blocks += blocks;
                    desc
                }
                None => {
                    b.staged.push((b.terms.len(), id));
                    TermDesc::default()
                }
            };
            b.terms.push(TermDesc {
                weight: weights[s],
                bound_scale,
                ..desc
            });
        }
        for (pos, &s) in by_df.iter().enumerate() {
            b.terms[s].slot_term = pos as u32;
        }
        Ok(b)
    };
    let built: Vec<Result<Built, GpuError>> = map_all(&order, parallel, build);
    let mut out = Prepared::default();
    for (&(_, i, parts), b) in order.iter().zip(built) {
        let mut b = b?;
        let (lo, hi) = range(i);
        stage.cached_blocks += b.cached_blocks;
        for &(pos, id) in &b.staged {
            let Some(desc) = stage.term(index, residency, id, lo as u32, hi as u32) else {
                return Err(GpuError::Failed(
                    "the batch's blocks outgrew its staging region".into(),
                ));
            };
            let t = &mut b.terms[pos];
            *t = TermDesc {
                weight: t.weight,
                bound_scale: t.bound_scale,
                slot_term: t.slot_term,
                ..desc
            };
        }
        let (begin, n) = (out.terms.len(), b.terms.len());
        out.terms.extend_from_slice(&b.terms);
        let span = hi + 1 - lo;
        let parts = (parts as u64).min(span);
        let share = match parts {
            1 => NO_SHARE,
            _ => {
                out.shared += 1;
                out.shared - 1
            }
        };
        for part in 0..parts {
            let (doc_lo, doc_hi) = if parts == 1 && ranges.is_none() {
                (0, u32::MAX)
            } else {
                (
                    (lo + part * span / parts) as u32,
                    (lo + (part + 1) * span / parts - 1) as u32,
                )
            };
            out.queries.push(QueryDesc {
                term_begin: begin as u32,
                num_terms: n as u32,
                out_slot: out.slots.len() as u32,
                slack: b.slack,
                doc_lo,
                doc_hi,
                fixed_scale: b.fixed.scale(),
                fixed_unit: b.fixed.unit(),
                share,
            });
            out.slots.push(i);
        }
    }
    Ok(out)
}
