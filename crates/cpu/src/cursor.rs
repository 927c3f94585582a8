//! A forward cursor over one posting list: block skipping through the skip data, search within a
//! decoded block, frequencies decoded only when asked for, and a "shallow" block pointer that moves over
//! the skip data without decoding (for block-max bounds). A cursor sees only its plan's docID range:
//! it starts at the range's first docID and reads [`END`] past its last.

use warpsearch_index::{BlockMeta, Result, BLOCK_LEN};

use warpsearch_query::{DocRange, Plan, PlanTerm};

/// Past the last posting. DocIDs are below the number of documents, itself at most `u32::MAX`.
pub const END: u32 = u32::MAX;

/// A cursor over a plan term's list.
pub struct Cursor<'p, 'a> {
    /// The term.
    pub term: &'p PlanTerm<'a>,
    metas: &'a [BlockMeta],
    block: usize,
    pos: usize,
    len: usize,
    /// The block's docIDs, then [`END`] up to the end (past a short last block, and [`NEAR`] more).
    docs: [u32; BLOCK_LEN + NEAR],
    freqs: [u32; BLOCK_LEN],
    freqs_ready: bool,
    doc: u32,
    last: u32,
    shallow: usize,
}

impl<'p, 'a> Cursor<'p, 'a> {
    /// A cursor per term of `plan`, in the plan's order, each on its first posting in the plan's range.
    pub fn all(plan: &'p Plan<'a>) -> Result<Vec<Self>> {
        plan.terms
            .iter()
            .map(|t| Cursor::new(t, plan.part.range))
            .collect()
    }

    /// A cursor on the first posting of `term`'s list within `range`.
    pub fn new(term: &'p PlanTerm<'a>, range: DocRange) -> Result<Self> {
        let mut c = Cursor {
            term,
            metas: term.list.blocks(),
            block: 0,
            pos: 0,
            len: 0,
            docs: [END; BLOCK_LEN + NEAR],
            freqs: [0; BLOCK_LEN],
            freqs_ready: false,
            doc: END,
            last: range.last,
            shallow: 0,
        };
        if !c.metas.is_empty() && !range.is_empty() {
            c.load(0)?;
            c.set(c.docs[0]);
            c.next_geq(range.first)?;
        }
        Ok(c)
    }

    /// The current docID, or [`END`].
    #[inline]
    pub fn doc(&self) -> u32 {
        self.doc
    }

    /// Postings in the list.
    pub fn list_len(&self) -> usize {
        self.term.list.len()
    }

    /// Sets the current docID, or [`END`] past the range.
    #[inline]
    fn set(&mut self, doc: u32) {
        self.doc = if doc > self.last { END } else { doc };
    }

    fn load(&mut self, block: usize) -> Result<()> {
        self.block = block;
        let docs: &mut [u32; BLOCK_LEN] = (&mut self.docs[..BLOCK_LEN]).try_into().expect("a block");
        self.len = self.term.list.decode_docs(block, docs)?;
        // Past the list's last posting, docIDs no target reaches (next_geq counts past `len`).
        if self.len < BLOCK_LEN {
            self.docs[self.len..BLOCK_LEN].fill(END);
        }
        self.freqs_ready = false;
        self.pos = 0;
        Ok(())
    }

    /// The term frequency at the current posting (not at [`END`]).
    #[inline]
    pub fn freq(&mut self) -> Result<u32> {
        if !self.freqs_ready {
            self.term.list.decode_freqs(self.block, &mut self.freqs)?;
            self.freqs_ready = true;
        }
        Ok(self.freqs[self.pos])
    }

    /// Moves to the next posting.
    #[inline]
    pub fn advance(&mut self) -> Result<()> {
        if self.doc == END {
            return Ok(());
        }
        self.pos += 1;
        if self.pos < self.len {
            self.set(self.docs[self.pos]);
        } else if self.block + 1 < self.metas.len() {
            self.load(self.block + 1)?;
            self.set(self.docs[0]);
        } else {
            self.doc = END;
        }
        Ok(())
    }

    /// Moves to the first posting with docID ≥ `target` (or [`END`]); never moves backwards.
    #[inline]
    pub fn next_geq(&mut self, target: u32) -> Result<()> {
        self.next_geq_inline(target)
    }

    /// [`Cursor::next_geq`], always inlined: for a loop compiled for a wider instruction set (ranked
    /// AND's AVX2 copy), whose counts within a block then use it.
    #[inline(always)]
    pub(crate) fn next_geq_inline(&mut self, target: u32) -> Result<()> {
        if target <= self.doc {
            return Ok(());
        }
        if target > self.last {
            self.doc = END;
            return Ok(());
        }
        if target > self.metas[self.block].last_doc {
            let rest = &self.metas[self.block + 1..];
            let skip = gallop(rest, |m| m.last_doc < target);
            if skip == rest.len() {
                self.doc = END;
                return Ok(());
            }
            self.load(self.block + 1 + skip)?;
        }
        // The block's last docID is ≥ target, so the answer is inside the block. Most moves are short
        // (on the TREC queries, 85% go at most 8 places), but their lengths vary, so a scan's exit was
        // a mispredicted branch at nearly every call (a quarter of ranked AND's time on the 25M
        // collection). The next NEAR docIDs are counted instead, without branches; a longer move counts
        // the whole block.
        if self.docs[self.pos] < target {
            let pos = self.pos + 1;
            let near: &[u32; NEAR] = self.docs[pos..pos + NEAR].try_into().expect("padded");
            let below = count_below(near, target);
            self.pos = if below < NEAR {
                pos + below
            } else {
                count_below(&self.docs, target)
            };
        }
        self.set(self.docs[self.pos]);
        Ok(())
    }

    /// Moves the shallow pointer to the block that would hold `target` and returns that block's
    /// upper bound and last docID; `None` when no block of the list reaches `target`.
    #[inline]
    pub fn block_max(&mut self, target: u32) -> Option<(f32, u32)> {
        self.shallow = self.shallow.max(self.block);
        let rest = &self.metas[self.shallow..];
        self.shallow += gallop(rest, |m| m.last_doc < target);
        self.metas
            .get(self.shallow)
            .map(|m| (self.term.block_bound(self.shallow), m.last_doc))
    }

    /// Asks the memory system for the length norm of the document `AHEAD` postings on in this block:
    /// scoring waits on that load (a cache miss on a large collection) more than on anything else.
    #[inline]
    pub fn prefetch_norm(&self, plan: &Plan) {
        prefetch_norm_of(plan, self.docs[(self.pos + AHEAD).min(BLOCK_LEN + NEAR - 1)]);
    }

    /// The upper bound of the block holding the current posting.
    #[inline]
    pub fn current_block_bound(&self) -> f32 {
        self.term.block_bound(self.block)
    }
}

/// One step of a document-at-a-time union: every cursor on `doc` adds its contribution to the
/// document's fixed-point sum and moves on. Returns that sum and the smallest docID the cursors are on
/// afterwards.
pub fn score_and_advance(cursors: &mut [Cursor], doc: u32, plan: &Plan) -> Result<(u32, u32)> {
    let (mut sum, mut next) = (0u32, END);
    for c in cursors {
        if c.doc() == doc {
            sum += plan.contribution(c.term, doc, c.freq()?);
            c.advance()?;
            c.prefetch_norm(plan);
        }
        next = next.min(c.doc());
    }
    Ok((sum, next))
}

/// Asks the memory system for the length norm of document `doc` (nothing past the collection).
#[inline]
pub fn prefetch_norm_of(plan: &Plan, doc: u32) {
    if let Some(norm) = plan.norms.get(doc as usize) {
        prefetch(norm);
    }
}

/// How far ahead [`Cursor::prefetch_norm`] looks.
const AHEAD: usize = 16;

/// A hint to load the cache line of `x`; nothing where there is no such instruction.
#[inline(always)]
fn prefetch<T>(x: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is a hint, it never faults, and `x` is a valid reference anyway.
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>((x as *const T).cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = x;
}

/// Docs past the current position that [`Cursor::next_geq`] counts before it counts the whole block.
const NEAR: usize = 8;

/// How many of `docs` are below `target` (in a sorted block: the position of the first docID ≥ target).
#[inline]
fn count_below<const N: usize>(docs: &[u32; N], target: u32) -> usize {
    docs.iter().map(|&d| (d < target) as u32).sum::<u32>() as usize
}

/// The first index `i` where `pred(&s[i])` is false (`pred` is true on a prefix), found by doubling
/// from the start then binary search: cheap for short moves, logarithmic for long ones.
#[inline]
pub fn gallop<T>(s: &[T], pred: impl Fn(&T) -> bool) -> usize {
    let mut hi = 1;
    while hi <= s.len() && pred(&s[hi - 1]) {
        hi *= 2;
    }
    let lo = hi / 2;
    let hi = hi.min(s.len());
    lo + s[lo..hi].partition_point(pred)
}

#[cfg(test)]
mod tests {
    use super::gallop;

    #[test]
    fn gallop_finds_the_partition_point() {
        for n in 0..70usize {
            let v: Vec<usize> = (0..n).collect();
            for t in 0..=n + 1 {
                assert_eq!(gallop(&v, |&x| x < t), t.min(n), "n {n} t {t}");
            }
        }
    }
}
