//! Early termination for `bm25-static` on a global-score-ordered index (docs/references.md#pruned-list-caching section 3.2,
//! Algorithm 1, on the CPU).
//!
//! DocIDs run in descending global score GS(d) = α·static(d) + (1 − α)·max_t IR(d, t), which bounds the
//! score of d under every query (eq. 5). Documents are visited in docID order; once the top k is full and
//! its k-th score reaches GS of the next document to visit, no later document can enter and the search
//! stops. The paper checks after every round of a thread block; on the CPU the check costs one load per
//! candidate, so it runs before each. Exact: the stop compares against GS with the plan's slack.

use warpsearch_index::Result;

use crate::cursor::{score_and_advance, Cursor, END};
use crate::frontier::{Frontier, Union};
use warpsearch_query::{Mode, Plan, Ranking, Scored};

/// The top `k` of `plan` under `mode` (And or Or) with early termination; an error if the index is not
/// ordered by the global score of this ranking (same α, k1 and b).
pub fn early_termination(plan: &Plan, ranking: Ranking, mode: Mode, k: usize) -> Result<Vec<Scored>> {
    stopping(plan, ranking, mode, k).map(|(hits, _)| hits)
}

/// [`early_termination`] and the docID it stopped at ([`END`]: it did not stop early); docs/references.md#pruned-list-caching's
/// visiting frequency counts the blocks before it.
pub fn stopping(plan: &Plan, ranking: Ranking, mode: Mode, k: usize) -> Result<(Vec<Scored>, u32)> {
    let gs = plan.global_scores(ranking)?;
    match mode {
        Mode::Or => union(plan, k, gs),
        _ => crate::and::intersect(plan, k, Some(gs)),
    }
}

/// Document-at-a-time OR over all lists, stopping on the global-score bound (the next document found
/// by a scan for short queries, through a heap for long ones: [`crate::frontier`]).
fn union(plan: &Plan, k: usize, gs: &[f32]) -> Result<(Vec<Scored>, u32)> {
    if plan.terms.is_empty() || k == 0 {
        return Ok((Vec::new(), END));
    }
    let mut cursors = Cursor::all(plan)?;
    let mut top = plan.top_k(k);
    let mut frontier = (Union::for_terms(cursors.len()) == Union::Heap).then(|| Frontier::new(&cursors, 0));
    let mut doc = match &mut frontier {
        Some(f) => f.next_doc(|_| true),
        None => cursors.iter().map(Cursor::doc).min().unwrap_or(END),
    };
    while doc != END {
        if top.settled(gs[doc as usize] * plan.slack) {
            return Ok((top.into_sorted(), doc));
        }
        let (sum, next) = match &mut frontier {
            Some(f) => {
                let sum = f.score_and_advance(&mut cursors, doc, plan, |_| true)?;
                (sum, f.next_doc(|_| true))
            }
            None => score_and_advance(&mut cursors, doc, plan)?,
        };
        top.insert(doc, plan.finish_sum(doc, sum));
        doc = next;
    }
    Ok((top.into_sorted(), END))
}
