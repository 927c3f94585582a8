//! The descriptors of a batch as the kernels read them (`TermDesc`, `QueryDesc` in `kernels/search.cu`),
//! and their preparation from analysed queries.

use bytemuck::{Pod, Zeroable};
use warpsearch_cpu::query::{bound_slack, term_weights};
use warpsearch_cpu::{Query, Ranking};
use warpsearch_index::{Bm25Params, Index, Result};

use crate::residency::DeviceIndex;

/// One query term as the kernel reads it (40 bytes; mirrors `struct TermDesc`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Pod, Zeroable)]
pub struct TermDesc {
    /// Offset of the list's first word in the device postings buffer.
    pub word_base: u64,
    /// Index of the list's first block in the device block arrays.
    pub block_base: u32,
    /// Blocks of the list.
    pub num_blocks: u32,
    /// Postings of the list.
    pub df: u32,
    /// Words of the whole list.
    pub len_words: u32,
    /// Codec parameters: docID parameter | frequency parameter << 8.
    pub params: u32,
    /// Position, in processing order, of the term whose plan slot is this entry's index.
    pub slot_term: u32,
    /// Weight multiplying BM25's tf part.
    pub weight: f32,
    /// Block max_score times this bounds a contribution (with slack); negative: no usable bounds.
    pub bound_scale: f32,
}

/// One query as the kernel reads it (16 bytes; mirrors `struct QueryDesc`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Pod, Zeroable)]
pub struct QueryDesc {
    /// First [`TermDesc`] of the query.
    pub term_begin: u32,
    /// Terms of the query.
    pub num_terms: u32,
    /// Where its results go: `out[out_slot * k ..]`.
    pub out_slot: u32,
    /// Relative slack of bounds for this query ([`bound_slack`]).
    pub slack: f32,
}

unsafe impl cudarc::driver::DeviceRepr for TermDesc {}

impl TermDesc {
    /// The list of `rec` at device location `loc`, with weight 0, no block bounds and slot 0.
    pub fn for_list(rec: &warpsearch_index::TermRecord, loc: crate::residency::ListLocation) -> TermDesc {
        TermDesc {
            word_base: loc.word_base,
            block_base: loc.block_base,
            num_blocks: rec.num_blocks() as u32,
            df: rec.df,
            len_words: rec.len_words,
            params: rec.doc_param as u32 | (rec.freq_param as u32) << 8,
            slot_term: 0,
            weight: 0.0,
            bound_scale: -1.0,
        }
    }
}
unsafe impl cudarc::driver::DeviceRepr for QueryDesc {}

/// A batch's descriptors in host memory; `slots[i]` is the caller's index of the query at out_slot i.
#[derive(Default)]
pub struct Prepared {
    /// Queries, largest first.
    pub queries: Vec<QueryDesc>,
    /// Terms of all queries.
    pub terms: Vec<TermDesc>,
    /// The caller's query index of each out_slot.
    pub slots: Vec<usize>,
}

impl Prepared {
    /// Bytes the batch's descriptors take on the device.
    pub fn bytes(&self) -> usize {
        std::mem::size_of_val(self.queries.as_slice()) + std::mem::size_of_val(self.terms.as_slice())
    }
}

/// Builds the descriptors of `queries[i]` for each `i` in `which`. Terms are ordered by ascending
/// document frequency (SvS: the shortest list generates the candidates); queries are ordered by
/// descending cost (the shortest list for AND, all postings for OR), so that the persistent grid takes
/// the long queries first and fills in with short ones (papers/002's bucketing by shortest-list length,
/// taken to its limit: one bucket per length).
pub fn prepare(
    index: &Index,
    dev: &DeviceIndex,
    queries: &[Query],
    which: &[usize],
    ranking: Ranking,
    params: Bm25Params,
    or_cost: bool,
) -> Result<Prepared> {
    let same_params = params == index.meta().bm25;
    let bm25 = warpsearch_index::Bm25 {
        params,
        ..index.bm25()
    };
    let mut order: Vec<(u64, usize)> = which
        .iter()
        .map(|&i| {
            let dfs = queries[i]
                .terms
                .iter()
                .map(|&(t, _)| index.term_records()[t as usize].df as u64);
            let cost = if or_cost {
                dfs.sum()
            } else {
                dfs.min().unwrap_or(0)
            };
            (cost, i)
        })
        .collect();
    order.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    let mut out = Prepared::default();
    for (slot, &(_, i)) in order.iter().enumerate() {
        let q = &queries[i];
        let weights = term_weights(index, q, ranking, params)?;
        let n = q.terms.len();
        let slack = bound_slack(n);
        let mut by_df: Vec<usize> = (0..n).collect();
        let df = |s: usize| index.term_records()[q.terms[s].0 as usize].df;
        by_df.sort_by_key(|&s| (df(s), s));
        let begin = out.terms.len();
        for &s in &by_df {
            let (id, _) = q.terms[s];
            let rec = &index.term_records()[id as usize];
            let loc = dev.residency().list(id);
            let bound_scale = if same_params {
                weights[s] / bm25.idf(rec.df as u64) * slack
            } else {
                -1.0
            };
            out.terms.push(TermDesc {
                weight: weights[s],
                bound_scale,
                ..TermDesc::for_list(rec, loc)
            });
        }
        for (pos, &s) in by_df.iter().enumerate() {
            out.terms[begin + s].slot_term = pos as u32;
        }
        out.queries.push(QueryDesc {
            term_begin: begin as u32,
            num_terms: n as u32,
            out_slot: slot as u32,
            slack,
        });
        out.slots.push(i);
    }
    Ok(out)
}
