//! Block-max WAND for ranked OR (Ding and Suel 2011).
//!
//! Cursors are kept sorted by current docID. The pivot is the first cursor at which the lists' upper
//! bounds (plus the prior's) can beat the k-th score; no document before the pivot's docID can. The
//! shallow pointers of the cursors up to the pivot then move to the blocks that would hold the pivot
//! docID, without decoding: if even those blocks' maxima cannot beat the k-th score, every document up
//! to the end of the nearest such block is skipped; otherwise the pivot document is scored (stopping
//! early once the block bounds left over say it cannot make it) or a lagging cursor is moved to it.

use warpsearch_index::Result;

use crate::cursor::{Cursor, END};
use warpsearch_query::{Plan, Scored};

/// The most terms of a query the engine runs block-max WAND on ([`crate::engine`] runs MaxScore for
/// longer ones): finding the pivot and keeping the cursors in docID order cost the term count at every
/// step, which made a query of 20,000 terms 12 times as slow as exhaustive evaluation.
pub const MAX_TERMS: usize = 32;

/// The top `k` documents containing at least one term of `plan`.
pub fn block_max_wand(plan: &Plan, k: usize) -> Result<Vec<Scored>> {
    if plan.terms.is_empty() || k == 0 {
        return Ok(Vec::new());
    }
    let mut cursors = Cursor::all(plan)?;
    let mut top = plan.top_k(k);
    let n = cursors.len();
    // Cursors are large (two decoded blocks); keep them in place and sort positions instead.
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by_key(|&i| cursors[i].doc());
    loop {
        let threshold = top.threshold();
        // Find the pivot.
        let mut bound = plan.prior_bound;
        let mut pivot = None;
        for (i, c) in order.iter().map(|&o| &cursors[o]).enumerate() {
            if c.doc() == END {
                break;
            }
            bound += c.term.max_bound;
            if plan.can_beat(bound, threshold) {
                pivot = Some(i);
                break;
            }
        }
        let Some(mut pivot) = pivot else { break };
        let pivot_doc = cursors[order[pivot]].doc();
        while pivot + 1 < n && cursors[order[pivot + 1]].doc() == pivot_doc {
            pivot += 1;
        }
        // Block-max bound of the pivot document.
        let mut block_bound = plan.prior_bound;
        let mut block_end = END;
        for &o in &order[..=pivot] {
            if let Some((b, last)) = cursors[o].block_max(pivot_doc) {
                block_bound += b;
                block_end = block_end.min(last);
            }
        }
        if plan.can_beat(block_bound, threshold) {
            if cursors[order[0]].doc() == pivot_doc {
                let mut left = block_bound;
                let mut sum = 0u32;
                let mut hopeless = false;
                for &o in &order[..=pivot] {
                    let c = &mut cursors[o];
                    let s = plan.contribution(c.term, pivot_doc, c.freq()?);
                    sum += s;
                    left -= c.current_block_bound() - plan.value(s);
                    if !plan.can_beat(left, threshold) {
                        hopeless = true;
                        break;
                    }
                }
                if !hopeless {
                    top.insert(pivot_doc, plan.finish_sum(pivot_doc, sum));
                }
                for &o in &order[..=pivot] {
                    cursors[o].advance()?;
                }
                order.sort_by_key(|&i| cursors[i].doc());
            } else {
                // Move the last cursor before the pivot docID up to it.
                let mut i = pivot;
                while cursors[order[i]].doc() == pivot_doc {
                    i -= 1;
                }
                cursors[order[i]].next_geq(pivot_doc)?;
                bubble(&cursors, &mut order, i);
            }
        } else {
            // No document up to the end of the nearest block (or the next cursor) can make it.
            let mut next = block_end.saturating_add(1);
            if pivot + 1 < n {
                next = next.min(cursors[order[pivot + 1]].doc());
            }
            if next <= pivot_doc {
                next = pivot_doc + 1;
            }
            // Advance the cursor with the largest bound among those up to the pivot.
            let bound = |i: usize| cursors[order[i]].term.max_bound;
            let i = (0..=pivot)
                .max_by(|&a, &b| bound(a).total_cmp(&bound(b)).then(b.cmp(&a)))
                .expect("pivot exists");
            cursors[order[i]].next_geq(next)?;
            bubble(&cursors, &mut order, i);
        }
    }
    Ok(top.into_sorted())
}

/// Restores docID order after the cursor at position `i` of `order` moved forward.
fn bubble(cursors: &[Cursor], order: &mut [usize], mut i: usize) {
    while i + 1 < order.len() && cursors[order[i]].doc() > cursors[order[i + 1]].doc() {
        order.swap(i, i + 1);
        i += 1;
    }
}
