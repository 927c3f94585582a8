//! Where a batch finds each term's blocks: in the list cache when its cached prefix covers the
//! query's docID range, else in the batch's staging region, to which the blocks the range needs are
//! copied with the batch (docs/references.md#pruned-list-caching section 3.1.5: a batch carries the lists the cache lacks).

use std::collections::HashMap;

use rayon::prelude::*;
use warpsearch_index::{Index, TermRecord};

use cudarc::driver::CudaStream;

use crate::abi::{IndexArgs, TermDesc, BLOCK_LEN};
use crate::cache::Capacity;
use crate::driver::{self, Pinned};
use crate::error::GpuError;
use crate::registered::Registered;
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

/// The descriptor of term `id`'s list for documents `[lo, hi]` when its cached prefix covers `hi`,
/// with the blocks of the range read from the cache; `None` when the term must be staged. It changes
/// nothing, so a batch's queries are looked up on all cores.
pub fn cached_term(
    index: &Index,
    residency: &Residency,
    id: u32,
    lo: u32,
    hi: u32,
) -> Option<(TermDesc, u64)> {
    if !from_cache(index, residency, id, hi) {
        return None;
    }
    let rec = &index.term_records()[id as usize];
    let metas = &index.block_metas()[rec.first_block as usize..][..rec.num_blocks()];
    let c = residency.cached(id);
    let whole = c.blocks as usize >= rec.num_blocks();
    let first = metas.partition_point(|m| m.last_doc < lo) as u64;
    let upto = metas.partition_point(|m| m.last_doc < hi) as u64 + 1;
    let mut desc = TermDesc::for_list(rec, c.loc.word_base, c.loc.block_base);
    if !whole {
        desc.num_blocks = c.blocks;
        desc.df = c.blocks * BLOCK_LEN as u32;
        desc.len_words = metas[c.blocks as usize].offset;
    }
    Some((desc, upto.min(c.blocks as u64).saturating_sub(first)))
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

/// One staged span of a list: where its words and skip data come from in the index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StagedSpan {
    /// First word in the index's postings.
    pub word: u64,
    /// Words.
    pub words: u32,
    /// First block in the index's skip data.
    pub block: u64,
    /// Blocks.
    pub blocks: u32,
    /// The span's first word relative to its list's start, subtracted from the blocks' offsets.
    pub rebase: u32,
}

/// A batch's staging region, filled on the host while the batch is prepared.
pub struct Stage {
    /// Device word and block where the region starts.
    base: (u64, u64),
    cap: Capacity,
    /// The spans to copy, in staging order: their words and skip data are copied side by side, so
    /// the batch's preparation records only where each comes from (the copies run on all cores).
    pub spans: Vec<StagedSpan>,
    used: Capacity,
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
            used: Capacity::default(),
            staged: HashMap::new(),
            cached_blocks: 0,
            staged_blocks: 0,
        }
    }

    /// The space filled.
    pub fn used(&self) -> Capacity {
        self.used
    }

    /// Writes the staged spans into `buf` as the device takes them: every span's words side by side
    /// (unless `with_words` is false: the device copies them from the index itself), then the skip data's
    /// five columns (first docID, last docID, offset from the span's start, frequency offset, bound),
    /// on all cores. `buf` holds at least `words + 5 × blocks` of [`Stage::used`].
    pub fn fill(&self, index: &Index, buf: &mut [u32], with_words: bool) {
        let (nw, nb) = (self.used.words as usize, self.used.blocks as usize);
        let (mut words, cols) = buf[..nw + 5 * nb].split_at_mut(nw);
        let mut cols: Vec<&mut [u32]> = cols.chunks_mut(nb.max(1)).collect();
        let mut jobs = Vec::with_capacity(self.spans.len());
        for span in &self.spans {
            let (w, rest) = std::mem::take(&mut words).split_at_mut(span.words as usize);
            words = rest;
            let mut mine: [&mut [u32]; 5] = Default::default();
            for (m, col) in mine.iter_mut().zip(cols.iter_mut()) {
                let (c, rest) = std::mem::take(col).split_at_mut(span.blocks as usize);
                *m = c;
                *col = rest;
            }
            jobs.push((span, w, mine));
        }
        let (all_words, all_metas) = (index.words(), index.block_metas());
        jobs.into_par_iter()
            .for_each(|(span, w, [first, last, off, foff, max])| {
                if with_words {
                    w.copy_from_slice(&all_words[span.word as usize..][..span.words as usize]);
                }
                let metas = &all_metas[span.block as usize..][..span.blocks as usize];
                for (j, m) in metas.iter().enumerate() {
                    first[j] = m.first_doc;
                    last[j] = m.last_doc;
                    off[j] = m.offset - span.rebase;
                    foff[j] = m.freq_offset;
                    max[j] = m.max_score.to_bits();
                }
            });
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
        if let Some((desc, blocks)) = cached_term(index, residency, id, lo, hi) {
            self.cached_blocks += blocks;
            return Some(desc);
        }
        let rec = &index.term_records()[id as usize];
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
                    word_base: self.base.0 + self.used.words,
                    block_base: (self.base.1 + self.used.blocks) as u32,
                };
                let (w0, w1) = span_words(index, rec, first, last);
                self.spans.push(StagedSpan {
                    word: rec.offset_words + w0 as u64,
                    words: w1 - w0,
                    block: rec.first_block + first as u64,
                    blocks: last - first + 1,
                    rebase: w0,
                });
                self.used = self.used.plus(need);
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
        let mut desc = TermDesc::for_list(rec, loc.word_base, loc.block_base);
        desc.num_blocks = blocks;
        desc.df = (blocks - 1) * BLOCK_LEN as u32 + last_postings;
        desc.len_words = w1 - w0;
        Some(desc)
    }
}

/// Copies a batch's staged blocks to the staging region at word `w` and block `b` of the device arrays
/// `ix` points at (asynchronously on `stream`); returns the bytes. The skip data's columns were gathered
/// into the slot's pinned buffer `h`; the words too, unless the index's words are `registered`: then
/// each span's are copied from the index.
pub(crate) fn copy(
    stream: &CudaStream,
    h: &Pinned<u32>,
    stage: &Stage,
    registered: Option<&Registered>,
    ix: &IndexArgs,
    w: u64,
    b: u64,
) -> Result<u64, GpuError> {
    let used = stage.used();
    let (nw, nb) = (used.words as usize, used.blocks as usize);
    let buf = h.as_slice();
    match registered {
        Some(r) => {
            let mut at = ix.words + w * 4;
            for span in &stage.spans {
                let src = &r.words()[span.word as usize..][..span.words as usize];
                driver::copy_to_device(stream, at, src)?;
                at += span.words as u64 * 4;
            }
        }
        None => driver::copy_to_device(stream, ix.words + w * 4, &buf[..nw])?,
    }
    let targets = [ix.blk_first, ix.blk_last, ix.blk_off, ix.blk_foff, ix.blk_max];
    for (c, &dst) in targets.iter().enumerate() {
        let col = &buf[nw + c * nb..nw + (c + 1) * nb];
        driver::copy_to_device(stream, dst + b * 4, col)?;
    }
    Ok((nw * 4 + nb * 20) as u64)
}
