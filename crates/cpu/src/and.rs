//! Ranked AND, document at a time (docs/references.md#ding-gpu-query-processing section 8.4's CPU baseline; docs/references.md#griffin section 2.2).
//!
//! The shortest list drives (SvS order): its next docID is the candidate, every other list is moved to
//! the first docID ≥ the candidate through its skip data (gallop over block last-docIDs, then search
//! within the decoded block); a list that overshoots makes its docID the next target of the driver. A
//! document in every list is scored only when the sum of its blocks' upper bounds can still beat the
//! k-th score, so frequencies of hopeless blocks are never decoded.

use warpsearch_index::Result;

use crate::cursor::{prefetch_norm_of, Cursor, END};
use warpsearch_query::{Plan, Scored};

/// The top `k` documents containing every term of `plan`.
pub fn ranked_and(plan: &Plan, k: usize) -> Result<Vec<Scored>> {
    intersect(plan, k, None).map(|(hits, _)| hits)
}

/// [`ranked_and`] as a CPU without AVX2 runs it (the tests compare it with the copy this CPU runs).
pub fn ranked_and_portable(plan: &Plan, k: usize) -> Result<Vec<Scored>> {
    intersect_with::<false>(plan, k, None).map(|(hits, _)| hits)
}

/// Ranked AND; with `global_scores` (a global-score-ordered index, docs/references.md#pruned-list-caching eq. 5), stops as soon as
/// the k-th score reaches the global score of the next candidate: no later document can beat it. Also
/// returns the candidate it stopped at ([`END`] when it ran to the end).
///
/// On an x86-64 CPU with AVX2 (checked at run time) the loop runs as a copy compiled for it, with the
/// cursors' moves inlined: their counts within a block are then AVX2 compares and a popcount (one
/// thread, AND: 1.13–1.17x on the synthetic 8M collection and the passages, bench/RESULTS.md). The
/// arithmetic of the scores is the same instructions' IEEE results either way (no fused multiply-add
/// is generated without being asked for).
pub(crate) fn intersect(plan: &Plan, k: usize, global_scores: Option<&[f32]>) -> Result<(Vec<Scored>, u32)> {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("popcnt") {
        // SAFETY: the CPU has the features the copy is compiled for (checked just above).
        return unsafe { intersect_avx2(plan, k, global_scores) };
    }
    intersect_with::<false>(plan, k, global_scores)
}

/// [`intersect`] compiled for AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,popcnt,bmi1,bmi2,lzcnt")]
unsafe fn intersect_avx2(plan: &Plan, k: usize, global_scores: Option<&[f32]>) -> Result<(Vec<Scored>, u32)> {
    intersect_with::<true>(plan, k, global_scores)
}

/// The loop of [`intersect`]; `INLINE`: the cursors' moves inlined (for the AVX2 copy).
#[inline(always)]
fn intersect_with<const INLINE: bool>(
    plan: &Plan,
    k: usize,
    global_scores: Option<&[f32]>,
) -> Result<(Vec<Scored>, u32)> {
    let next_geq = |c: &mut Cursor, target: u32| {
        if INLINE {
            c.next_geq_inline(target)
        } else {
            c.next_geq(target)
        }
    };
    if plan.terms.is_empty() || plan.has_unknown || k == 0 {
        return Ok((Vec::new(), END));
    }
    let mut cursors = Cursor::all(plan)?;
    cursors.sort_by_key(|c| c.list_len());
    let mut top = plan.top_k(k);
    let mut candidate = cursors[0].doc();
    'candidates: while candidate != END {
        prefetch_norm_of(plan, candidate);
        if let Some(gs) = global_scores {
            if top.settled(gs[candidate as usize] * plan.slack) {
                return Ok((top.into_sorted(), candidate));
            }
        }
        let mut i = 1;
        while i < cursors.len() {
            next_geq(&mut cursors[i], candidate)?;
            let d = cursors[i].doc();
            if d != candidate {
                if d == END {
                    break 'candidates;
                }
                next_geq(&mut cursors[0], d)?;
                candidate = cursors[0].doc();
                continue 'candidates;
            }
            i += 1;
        }
        let threshold = top.threshold();
        let bound: f32 = cursors.iter().map(|c| c.current_block_bound()).sum();
        if plan.can_beat(plan.finish_value(candidate, bound), threshold) {
            let mut sum = 0u32;
            for c in cursors.iter_mut() {
                sum += plan.contribution(c.term, candidate, c.freq()?);
            }
            top.insert(candidate, plan.finish_sum(candidate, sum));
        }
        cursors[0].advance()?;
        // The driver's documents are the candidates: the norm of one a few postings on is loaded by
        // the time it is scored (synthetic 8M and the passages, one thread: 4-9% more queries/s).
        cursors[0].prefetch_norm(plan);
        candidate = cursors[0].doc();
    }
    Ok((top.into_sorted(), END))
}
