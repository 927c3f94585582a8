//! The list cache's host side: which leading blocks of each list are cached ([`CachePlan`]), what a
//! plan needs on the device ([`Capacity`]), and the first-fit placement of lists in the device arrays
//! ([`extents`]). Which blocks deserve a place (Qtf, QtfDf, VFB, the dynamic policy) is decided by the
//! engine; this crate keeps what it is given and carries the rest with each batch.
//!
//! A list is cached as a prefix of its blocks (docs/references.md#pruned-list-caching section 3.3: pruned lists): with docIDs in
//! global-score order the prefix holds the documents that queries visit before early termination, and on
//! any index the prefix covers a docID range [0, m] in which the GPU's answer is exact.

pub mod extents;

use rayon::prelude::*;
use warpsearch_index::Index;

/// Bytes of skip data per block on the device (first and last docID, offset, frequency offset, bound).
pub const META_BYTES: u64 = 20;

/// Device space: postings words and blocks of skip data.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Capacity {
    /// Postings words (4 bytes each).
    pub words: u64,
    /// Blocks (skip data, [`META_BYTES`] each).
    pub blocks: u64,
}

impl Capacity {
    /// Bytes these take on the device.
    pub fn bytes(&self) -> u64 {
        self.words * 4 + self.blocks * META_BYTES
    }

    /// Whether `need` fits in this.
    pub fn holds(&self, need: Capacity) -> bool {
        need.words <= self.words && need.blocks <= self.blocks
    }

    /// The sum of two.
    pub fn plus(self, other: Capacity) -> Capacity {
        Capacity {
            words: self.words + other.words,
            blocks: self.blocks + other.blocks,
        }
    }

    /// `bytes` of device memory divided between words and blocks in `index`'s proportion, with a
    /// quarter more blocks than that proportion gives (short lists have more blocks per word).
    pub fn of_bytes(index: &Index, bytes: u64) -> Capacity {
        let words = index.words().len() as u64;
        let blocks = index.block_metas().len() as u64;
        if words + blocks == 0 {
            return Capacity::default();
        }
        let per_block = (words * 4) as f64 / blocks.max(1) as f64 + META_BYTES as f64;
        let blocks = ((bytes as f64 / per_block) * 1.25).min((bytes / META_BYTES) as f64) as u64;
        Capacity {
            words: (bytes - blocks * META_BYTES) / 4,
            blocks,
        }
    }
}

/// What applying a plan did.
#[derive(Debug, Clone, Copy, Default)]
pub struct Applied {
    /// Lists whose cached prefix changed.
    pub lists: u64,
    /// Bytes copied to the device from the host.
    pub bytes: u64,
    /// Lists that could not grow for want of contiguous space (they keep their old prefix).
    pub skipped: u64,
}

/// Where a searcher finds plan changes to make while its batches run (the engine's dynamic policy).
/// The searcher asks after the last batch of each call is submitted, and applies a plan behind the
/// batches in flight, so that the GPU computes while the host places lists and gathers their blocks.
pub trait PlanFeed: Send + Sync {
    /// A plan to apply now, if one is ready; asked once per call (and by
    /// [`crate::GpuSearcher::apply_ready_plan`]), so it should be cheap: it should not wait for a plan
    /// still being made.
    fn ready(&self) -> Option<CachePlan>;
    /// What applying `plan` did, and the seconds it took the searcher's thread. On an error the cache
    /// holds nothing (every list is then staged: slower, still exact).
    fn applied(&self, plan: CachePlan, result: Result<Applied, &crate::error::GpuError>, seconds: f64);
}

/// Copies the slices of `srcs`, one after another, to the start of `dst`, on all cores (the gather of
/// a cache layout from the memory-mapped index; a batch's staged spans are gathered by
/// [`crate::stage::Stage::fill`]).
pub(crate) fn gather<'a>(dst: &mut [u32], srcs: impl IntoIterator<Item = &'a [u32]>) {
    use rayon::prelude::*;
    let mut rest = dst;
    let mut jobs = Vec::new();
    for src in srcs {
        let (d, tail) = rest.split_at_mut(src.len());
        jobs.push((d, src));
        rest = tail;
    }
    jobs.into_par_iter().for_each(|(d, s)| d.copy_from_slice(s));
}

/// Words of the first `blocks` blocks of term `id`'s list (the whole list's words when it has no more).
pub fn prefix_words(index: &Index, id: u32, blocks: u32) -> u64 {
    let rec = &index.term_records()[id as usize];
    if blocks as usize >= rec.num_blocks() {
        rec.len_words as u64
    } else {
        index.block_metas()[rec.first_block as usize + blocks as usize].offset as u64
    }
}

/// The device space of the first `blocks` blocks of term `id`'s list.
pub fn prefix_need(index: &Index, id: u32, blocks: u32) -> Capacity {
    let rec = &index.term_records()[id as usize];
    let blocks = blocks.min(rec.num_blocks() as u32);
    Capacity {
        words: prefix_words(index, id, blocks),
        blocks: blocks as u64,
    }
}

/// Leading blocks cached of each term's list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CachePlan {
    /// Cached blocks per term id (at most the list's blocks).
    pub blocks: Vec<u32>,
}

impl CachePlan {
    /// Nothing cached.
    pub fn empty(index: &Index) -> CachePlan {
        CachePlan {
            blocks: vec![0; index.term_records().len()],
        }
    }

    /// What the plan takes on the device.
    pub fn need(&self, index: &Index) -> Capacity {
        // On all cores: a plan has an entry per term.
        self.blocks
            .par_iter()
            .enumerate()
            .filter(|(_, &b)| b > 0)
            .map(|(id, &b)| prefix_need(index, id as u32, b))
            .reduce(Capacity::default, Capacity::plus)
    }
}
