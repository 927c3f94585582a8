//! What the list cache holds, as the engine sees it when it decides where each query's GPU part ends:
//! a [`CacheView`] borrows the index and the residency table, so that those decisions are made on all
//! cores (a [`crate::GpuSearcher`] itself stays on its thread).

use warpsearch_index::Index;
use warpsearch_query::{DocRange, Query, Request};

use crate::cache::Capacity;
use crate::residency::Residency;
use crate::stage;

/// The cache's contents and one batch's staging space ([`crate::GpuSearcher::view`]).
#[derive(Clone, Copy)]
pub struct CacheView<'a> {
    pub(crate) index: &'a Index,
    pub(crate) residency: &'a Residency,
    pub(crate) stage: Capacity,
    /// Whether the searcher caches part of the index (else all of it is on the device).
    pub(crate) caches: bool,
}

impl CacheView<'_> {
    /// The last docID up to which the GPU should answer `query`, given the cache:
    /// - `prune` (docs/references.md#pruned-list-caching section 3.4): through the smallest docID covered by the cached prefix of a
    ///   partly cached list (m = min max ℓ*(t)); lists with nothing cached are staged up to it;
    /// - else through the last document, every uncached block staged;
    ///
    /// in both cases no further than one batch's staging space reaches. Documents after it are left
    /// for the CPU to complete. `u32::MAX` when the whole index is on the device.
    pub fn cover(&self, query: &Query, prune: bool) -> Option<u32> {
        if !self.caches {
            return Some(u32::MAX);
        }
        let (index, r) = (self.index, self.residency);
        let last = index.num_docs().saturating_sub(1);
        let mut m = last;
        if prune {
            for &(id, _) in &query.terms {
                if let Some(c) = stage::cached_through(index, r, id) {
                    m = m.min(c);
                }
            }
        }
        let fits = |hi: u32| self.stage.holds(stage::need(index, r, &query.terms, 0, hi));
        if !fits(m) {
            // The farthest docID whose staging fits (need grows with it).
            let (mut lo, mut hi) = (0u64, m as u64 + 1);
            while lo < hi {
                let mid = (lo + hi) / 2;
                if fits(mid as u32) {
                    lo = mid + 1;
                } else {
                    hi = mid;
                }
            }
            if lo == 0 {
                return None;
            }
            m = (lo - 1) as u32;
        }
        Some(if m >= last { u32::MAX } else { m })
    }

    /// Whether the blocks `r` needs outside the cache over `range` fit one batch's staging space.
    pub fn fits_staging(&self, r: &Request, range: Option<DocRange>) -> bool {
        let last = self.index.num_docs().saturating_sub(1);
        let (lo, hi) = range.map_or((0, last), |d| (d.first, d.last.min(last)));
        if lo > hi {
            return true;
        }
        let need = stage::need(self.index, self.residency, &r.query.terms, lo, hi);
        self.stage.holds(need)
    }
}
