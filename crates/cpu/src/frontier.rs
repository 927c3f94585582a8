//! The docID order of many cursors at once, for the union of a long query: a binary heap of (docID,
//! cursor). Finding the next document by scanning every cursor costs the query's term count at every
//! document, so a query of thousands of terms cost thousands of times its postings; through the heap
//! each posting costs a logarithm of the term count, and the union stays near the exhaustive
//! evaluation's cost however many terms a query has. Short queries scan instead: below
//! [`SCAN_MAX`] terms a scan of a few cursors beats the heap's bookkeeping.

use std::cmp::Reverse;
use std::collections::binary_heap::{BinaryHeap, PeekMut};

use warpsearch_index::Result;
use warpsearch_query::Plan;

use crate::cursor::{Cursor, END};

/// The most terms for which a union scans its cursors for the next document; above it, a [`Frontier`].
pub const SCAN_MAX: usize = 16;

/// Cursors by current docID. It holds a cursor's position as it was pushed: a cursor moved by anyone
/// but [`Frontier::score_and_advance`] must not be in it (callers drop such cursors with `keep`).
pub struct Frontier {
    heap: BinaryHeap<Reverse<(u32, u32)>>,
}

impl Frontier {
    /// The cursors `first..` of `cursors` that are not past their last posting.
    pub fn new(cursors: &[Cursor], first: usize) -> Frontier {
        let heap = (first..cursors.len())
            .filter(|&i| cursors[i].doc() != END)
            .map(|i| Reverse((cursors[i].doc(), i as u32)))
            .collect();
        Frontier { heap }
    }

    /// The smallest docID among the cursors it holds that `keep` accepts (cursors it refuses are
    /// dropped for good), or [`END`].
    pub fn next_doc(&mut self, keep: impl Fn(usize) -> bool) -> u32 {
        while let Some(&Reverse((doc, i))) = self.heap.peek() {
            if keep(i as usize) {
                return doc;
            }
            self.heap.pop();
        }
        END
    }

    /// One step of the union at `doc` (the smallest docID held): every cursor on `doc` that `keep`
    /// accepts adds its contribution to the document's fixed-point sum and moves on; cursors `keep`
    /// refuses are dropped. Returns the sum.
    pub fn score_and_advance(
        &mut self,
        cursors: &mut [Cursor],
        doc: u32,
        plan: &Plan,
        keep: impl Fn(usize) -> bool,
    ) -> Result<u32> {
        let mut sum = 0u32;
        while let Some(mut top) = self.heap.peek_mut() {
            let Reverse((d, i)) = *top;
            if d != doc {
                break;
            }
            let i = i as usize;
            if !keep(i) {
                PeekMut::pop(top);
                continue;
            }
            let c = &mut cursors[i];
            debug_assert_eq!(c.doc(), doc, "a cursor in the frontier moved behind its back");
            sum += plan.contribution(c.term, doc, c.freq()?);
            c.advance()?;
            c.prefetch_norm(plan);
            // The cursor's entry moves down in place (one sift instead of a pop and a push).
            if c.doc() != END {
                *top = Reverse((c.doc(), i as u32));
            } else {
                PeekMut::pop(top);
            }
        }
        Ok(sum)
    }
}

/// How a union finds its next document.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Union {
    /// A scan of every cursor (short queries).
    Scan,
    /// A [`Frontier`] (long queries).
    Heap,
}

impl Union {
    /// The cheaper way for a query of `terms` terms.
    pub fn for_terms(terms: usize) -> Union {
        if terms > SCAN_MAX {
            Union::Heap
        } else {
            Union::Scan
        }
    }
}
