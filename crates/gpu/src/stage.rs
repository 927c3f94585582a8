//! Where a batch finds each term's blocks: in the list cache when its cached prefix covers the
//! query's docID range, else in the batch's staging region, to which the blocks the range needs are
//! copied with the batch (papers/000 section 3.1.5: a batch carries the lists the cache lacks).

use std::collections::HashMap;

use warpsearch_index::{BlockMeta, Index, TermRecord};

use crate::batch::TermDesc;
use crate::cache::Capacity;
use crate::device::BLOCK_LEN;
use crate::residency::{ListLocation, Residency};

/// The last docID of term `id`'s list that its cached prefix covers: every posting of the list up to
/// it is cached (`None`: nothing cached; `u32::MAX`: the whole list).
pub fn cached_through(index: &Index, residency: &Residency, id: u32) -> Option<u32> {
    let rec = &index.term_records()[id as usize];
    let c = residency.cached(id).blocks as usize;
    if c >= rec.num_blocks() {
        Some(u32::MAX)
    } else if c == 0 {
        None
    } else {
        // Up to just before the first uncached block's first document.
        Some(index.block_metas()[rec.first_block as usize + c].first_doc - 1)
    }
}

/// The blocks `[first, last]` of `rec`'s list that hold its documents in `[lo, hi]` (at least one
/// block: the last, when none does). A span of at least half the list is widened to the whole list,
/// so that the queries of a batch that use the list share one staged copy.
pub fn blocks_for(index: &Index, rec: &TermRecord, lo: u32, hi: u32) -> (u32, u32) {
    let metas = &index.block_metas()[rec.first_block as usize..][..rec.num_blocks()];
    let n = metas.len() as u32;
    let first = (metas.partition_point(|m| m.last_doc < lo) as u32).min(n - 1);
    let last = (metas.partition_point(|m| m.last_doc < hi) as u32).clamp(first, n - 1);
    if 2 * (last - first + 1) >= n {
        (0, n - 1)
    } else {
        (first, last)
    }
}

/// The device space that staging blocks `[first, last]` of `rec`'s list takes.
fn span_need(index: &Index, rec: &TermRecord, first: u32, last: u32) -> Capacity {
    let (w0, w1) = span_words(index, rec, first, last);
    Capacity {
        words: (w1 - w0) as u64,
        blocks: (last - first + 1) as u64,
    }
}

/// The words `[start, end)` (from the list's start) of blocks `[first, last]` of `rec`'s list.
fn span_words(index: &Index, rec: &TermRecord, first: u32, last: u32) -> (u32, u32) {
    let metas = &index.block_metas()[rec.first_block as usize..];
    let end = if last as usize + 1 >= rec.num_blocks() {
        rec.len_words
    } else {
        metas[last as usize + 1].offset
    };
    (metas[first as usize].offset, end)
}

/// Whether term `id` is served from the cache for documents `[lo, hi]`.
fn from_cache(index: &Index, residency: &Residency, id: u32, hi: u32) -> bool {
    cached_through(index, residency, id).is_some_and(|m| hi <= m)
}

/// A span of blocks staged once per batch: (term, first block, last block).
pub type SpanKey = (u32, u32, u32);

/// The spans a query's terms stage over `[lo, hi]`, with their space.
pub fn spans(
    index: &Index,
    residency: &Residency,
    terms: &[(u32, u32)],
    lo: u32,
    hi: u32,
) -> Vec<(SpanKey, Capacity)> {
    terms
        .iter()
        .filter(|&&(id, _)| !from_cache(index, residency, id, hi))
        .map(|&(id, _)| {
            let rec = &index.term_records()[id as usize];
            let (f, l) = blocks_for(index, rec, lo, hi);
            ((id, f, l), span_need(index, rec, f, l))
        })
        .collect()
}

/// The staging space a query's terms need over `[lo, hi]` (each term's span once).
pub fn need(index: &Index, residency: &Residency, terms: &[(u32, u32)], lo: u32, hi: u32) -> Capacity {
    spans(index, residency, terms, lo, hi)
        .into_iter()
        .fold(Capacity::default(), |acc, (_, c)| acc.plus(c))
}

/// A batch's staging region, filled on the host while the batch is prepared.
pub struct Stage {
    /// Device word and block where the region starts.
    base: (u64, u64),
    cap: Capacity,
    /// Postings words to copy, as (first word in the index's postings, words), in staging order.
    pub spans: Vec<(u64, u32)>,
    words: u64,
    /// Skip data to copy (offsets relative to each staged span's first word).
    pub metas: Vec<BlockMeta>,
    staged: HashMap<SpanKey, ListLocation>,
    /// Blocks of the batch's ranges read from the cache.
    pub cached_blocks: u64,
    /// Blocks of the batch's ranges staged (counted per term of each query).
    pub staged_blocks: u64,
}

impl Stage {
    /// An empty staging region of `cap` space at device word and block `base`.
    pub fn new(base: (u64, u64), cap: Capacity) -> Stage {
        Stage {
            base,
            cap,
            spans: Vec::new(),
            words: 0,
            metas: Vec::new(),
            staged: HashMap::new(),
            cached_blocks: 0,
            staged_blocks: 0,
        }
    }

    /// The space filled.
    pub fn used(&self) -> Capacity {
        Capacity {
            words: self.words,
            blocks: self.metas.len() as u64,
        }
    }

    /// The descriptor of term `id`'s list for documents `[lo, hi]`: its cached prefix when that covers
    /// `hi`, else the blocks covering `[lo, hi]`, staged (once per batch); `None` when the staging
    /// region is full.
    pub fn term(
        &mut self,
        index: &Index,
        residency: &Residency,
        id: u32,
        lo: u32,
        hi: u32,
    ) -> Option<TermDesc> {
        let rec = &index.term_records()[id as usize];
        let metas = &index.block_metas()[rec.first_block as usize..][..rec.num_blocks()];
        if from_cache(index, residency, id, hi) {
            let c = residency.cached(id);
            let whole = c.blocks as usize >= rec.num_blocks();
            let first = metas.partition_point(|m| m.last_doc < lo) as u64;
            let upto = metas.partition_point(|m| m.last_doc < hi) as u64 + 1;
            self.cached_blocks += upto.min(c.blocks as u64).saturating_sub(first);
            let mut desc = TermDesc::for_list(rec, c.loc);
            if !whole {
                desc.num_blocks = c.blocks;
                desc.df = c.blocks * BLOCK_LEN as u32;
                desc.len_words = metas[c.blocks as usize].offset;
            }
            return Some(desc);
        }
        let (first, last) = blocks_for(index, rec, lo, hi);
        self.staged_blocks += (last - first + 1) as u64;
        let loc = match self.staged.get(&(id, first, last)) {
            Some(&loc) => loc,
            None => {
                let need = span_need(index, rec, first, last);
                if !self.cap.holds(self.used().plus(need)) {
                    return None;
                }
                let loc = ListLocation {
                    word_base: self.base.0 + self.words,
                    block_base: (self.base.1 + self.metas.len() as u64) as u32,
                };
                let (w0, w1) = span_words(index, rec, first, last);
                self.spans.push((rec.offset_words + w0 as u64, w1 - w0));
                self.words += (w1 - w0) as u64;
                self.metas
                    .extend(metas[first as usize..=last as usize].iter().map(|m| BlockMeta {
                        offset: m.offset - w0,
                        ..*m
                    }));
                self.staged.insert((id, first, last), loc);
                loc
            }
        };
        let blocks = last - first + 1;
        let last_postings = if last as usize + 1 == rec.num_blocks() {
            rec.df - last * BLOCK_LEN as u32
        } else {
            BLOCK_LEN as u32
        };
        let (w0, w1) = span_words(index, rec, first, last);
        let mut desc = TermDesc::for_list(rec, loc);
        desc.num_blocks = blocks;
        desc.df = (blocks - 1) * BLOCK_LEN as u32 + last_postings;
        desc.len_words = w1 - w0;
        Some(desc)
    }
}
