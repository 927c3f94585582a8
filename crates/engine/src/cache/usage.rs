//! How a query log uses the lists: per term, the queries that use it and how far into its list each
//! one's visits reach (docs/references.md#pruned-list-caching section 3.3.1: a query visits the blocks of a list up to where its
//! processing stopped, early termination included). Built from a training log for the static policies
//! and from the live stream, with decay, for the dynamic one.

use std::collections::{BTreeMap, HashMap};

use warpsearch_index::Index;
use warpsearch_query::{Mode, Query};

/// Weighted use of each term's list.
#[derive(Debug, Clone, Default)]
pub struct Usage {
    /// Weight of the queries that use each term (each query once per term).
    pub qtf: HashMap<u32, f64>,
    /// Per term: weight of the queries by the number of leading blocks they visit.
    pub ends: HashMap<u32, BTreeMap<u32, f64>>,
    /// Queries added (weighted).
    pub queries: f64,
}

impl Usage {
    /// Adds `query` run in `mode` with weight `w`; its processing stopped before docID `stop` (early
    /// termination), or ran to the end of its lists (`None`): for AND at most to the smallest last
    /// docID of its lists, where the intersection ends.
    pub fn add(&mut self, index: &Index, query: &Query, mode: Mode, stop: Option<u32>, w: f64) {
        self.add_terms(index, query.term_ids(), mode, stop, w);
    }

    /// [`Usage::add`] for a query of `terms` (in any order, repeats allowed).
    pub fn add_terms(&mut self, index: &Index, mut terms: Vec<u32>, mode: Mode, stop: Option<u32>, w: f64) {
        let records = index.term_records();
        let metas = index.block_metas();
        terms.sort_unstable();
        terms.dedup();
        if terms.is_empty() {
            return;
        }
        let list = |t: u32| {
            let r = &records[t as usize];
            &metas[r.first_block as usize..][..r.num_blocks()]
        };
        let mut end = stop.unwrap_or(u32::MAX);
        if mode != Mode::Or {
            let last = terms
                .iter()
                .map(|&t| list(t).last().map_or(0, |m| m.last_doc))
                .min();
            end = end.min(last.unwrap_or(0));
        }
        self.queries += w;
        for &t in &terms {
            *self.qtf.entry(t).or_default() += w;
            // Blocks whose first document comes no later than the end are visited.
            let visited = list(t).partition_point(|m| m.first_doc <= end) as u32;
            if visited > 0 {
                *self.ends.entry(t).or_default().entry(visited).or_default() += w;
            }
        }
    }

    /// Multiplies every weight by `f` (the dynamic policy's decay), dropping what becomes negligible.
    pub fn scale(&mut self, f: f64) {
        self.queries *= f;
        self.qtf.retain(|_, w| {
            *w *= f;
            *w > 1e-3
        });
        self.ends.retain(|_, m| {
            m.retain(|_, w| {
                *w *= f;
                *w > 1e-3
            });
            !m.is_empty()
        });
    }

    /// Term `t`'s visiting frequency as runs: `(blocks, vf)` pairs, ascending in blocks, meaning the
    /// blocks before `blocks` (after the previous pair's) are visited by queries of weight `vf`.
    pub fn runs(&self, t: u32) -> Vec<(u32, f64)> {
        let Some(ends) = self.ends.get(&t) else {
            return Vec::new();
        };
        // vf of block b = weight of queries visiting more than b blocks: a suffix sum over ends.
        let mut out = Vec::with_capacity(ends.len());
        let mut above: f64 = ends.values().sum();
        for (&blocks, &w) in ends {
            out.push((blocks, above));
            above -= w;
        }
        out
    }
}
