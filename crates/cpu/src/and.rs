//! Ranked AND, document at a time (papers/001 section 8.4's CPU baseline; papers/004 section 2.2).
//!
//! The shortest list drives (SvS order): its next docID is the candidate, every other list is moved to
//! the first docID ≥ the candidate through its skip data (gallop over block last-docIDs, then search
//! within the decoded block); a list that overshoots makes its docID the next target of the driver. A
//! document in every list is scored only when the sum of its blocks' upper bounds can still beat the
//! k-th score, so frequencies of hopeless blocks are never decoded.

use warpsearch_index::Result;

use crate::cursor::{Cursor, END};
use warpsearch_query::{Plan, Scored};

/// The top `k` documents containing every term of `plan`.
pub fn ranked_and(plan: &Plan, k: usize) -> Result<Vec<Scored>> {
    intersect(plan, k, None).map(|(hits, _)| hits)
}

/// Ranked AND; with `global_scores` (a global-score-ordered index, papers/000 eq. 5), stops as soon as
/// the k-th score reaches the global score of the next candidate: no later document can beat it. Also
/// returns the candidate it stopped at ([`END`] when it ran to the end).
pub(crate) fn intersect(plan: &Plan, k: usize, global_scores: Option<&[f32]>) -> Result<(Vec<Scored>, u32)> {
    if plan.terms.is_empty() || plan.has_unknown || k == 0 {
        return Ok((Vec::new(), END));
    }
    let mut cursors = Cursor::all(plan)?;
    cursors.sort_by_key(|c| c.list_len());
    let mut top = plan.top_k(k);
    let mut contributions = vec![0f32; plan.terms.len()];
    let mut candidate = cursors[0].doc();
    'candidates: while candidate != END {
        if let Some(gs) = global_scores {
            if top.settled(gs[candidate as usize] * plan.slack) {
                return Ok((top.into_sorted(), candidate));
            }
        }
        let mut i = 1;
        while i < cursors.len() {
            cursors[i].next_geq(candidate)?;
            let d = cursors[i].doc();
            if d != candidate {
                if d == END {
                    break 'candidates;
                }
                cursors[0].next_geq(d)?;
                candidate = cursors[0].doc();
                continue 'candidates;
            }
            i += 1;
        }
        let threshold = top.threshold();
        let bound: f32 = cursors.iter().map(|c| c.current_block_bound()).sum();
        if plan.can_beat(plan.finish_sum(candidate, bound), threshold) {
            for c in cursors.iter_mut() {
                let tf = c.freq()?;
                contributions[c.slot()] = plan.contribution(c.term, candidate, tf);
            }
            top.insert(candidate, plan.finish(candidate, &contributions));
        }
        cursors[0].advance()?;
        // The driver's documents are the candidates: the norm of one a few postings on is loaded by
        // the time it is scored (synthetic 8M and the passages, one thread: 4-9% more queries/s).
        cursors[0].prefetch_norm(plan);
        candidate = cursors[0].doc();
    }
    Ok((top.into_sorted(), END))
}
