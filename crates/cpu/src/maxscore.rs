//! MaxScore for ranked OR (Turtle and Flood 1995, in the document-at-a-time form of PISA).
//!
//! Lists are ordered by their upper bound. The lowest-bound prefix whose bounds (plus the prior's) sum
//! below the k-th score is "non-essential": a document found only there cannot enter the top k, so
//! candidates come from the essential lists alone, and the non-essential lists are probed (skipping
//! through their skip data) only while the candidate's partial score plus the remaining bounds can still
//! beat the k-th score. The essential lists' next document is found by a scan for short queries and
//! through a heap for long ones ([`crate::frontier`]), so that a query of thousands of terms costs about
//! its postings, not its postings times its terms.

use warpsearch_index::Result;

use crate::cursor::{score_and_advance, Cursor, END};
use crate::frontier::{Frontier, Union};
use warpsearch_query::{Plan, PlanTerm, Scored};

/// The top `k` documents containing at least one term of `plan`.
pub fn maxscore(plan: &Plan, k: usize) -> Result<Vec<Scored>> {
    maxscore_with(plan, k, Union::for_terms(plan.terms.len()))
}

/// [`maxscore`] with the essential lists' union found as `union` says (the same documents and scores
/// either way; the tests run both).
pub fn maxscore_with(plan: &Plan, k: usize, union: Union) -> Result<Vec<Scored>> {
    if plan.terms.is_empty() || k == 0 {
        return Ok(Vec::new());
    }
    // Made in bound order (a cursor holds two decoded blocks: sorting made cursors moved kilobytes
    // each, a second for a query of 100,000 terms).
    let mut order: Vec<&PlanTerm> = plan.terms.iter().collect();
    order.sort_by(|a, b| a.max_bound.total_cmp(&b.max_bound));
    let mut cursors = order
        .into_iter()
        .map(|t| Cursor::new(t, plan.part.range))
        .collect::<Result<Vec<_>>>()?;
    // prefix[i]: bound of a document that appears in lists 0..=i only (the prior's bound included).
    let mut prefix = Vec::with_capacity(cursors.len());
    let mut sum = plan.prior_bound;
    for c in &cursors {
        sum += c.term.max_bound;
        prefix.push(sum);
    }
    let mut top = plan.top_k(k);
    let mut first_essential = 0;
    // Lists that became non-essential leave the frontier (they are probed below instead).
    let mut frontier = (union == Union::Heap).then(|| Frontier::new(&cursors, 0));
    let mut doc = match &mut frontier {
        Some(f) => f.next_doc(|_| true),
        None => cursors.iter().map(Cursor::doc).min().unwrap_or(END),
    };
    while first_essential < cursors.len() && doc != END {
        let essential = first_essential;
        let (mut sum, next) = match &mut frontier {
            Some(f) => (
                f.score_and_advance(&mut cursors, doc, plan, |i| i >= essential)?,
                END,
            ),
            None => score_and_advance(&mut cursors[first_essential..], doc, plan)?,
        };
        let threshold = top.threshold();
        let mut pruned = false;
        for i in (0..first_essential).rev() {
            if !plan.can_beat(plan.value(sum) + prefix[i], threshold) {
                pruned = true;
                break;
            }
            let c = &mut cursors[i];
            c.next_geq(doc)?;
            if c.doc() == doc {
                sum += plan.contribution(c.term, doc, c.freq()?);
            }
        }
        if !pruned && top.insert(doc, plan.finish_sum(doc, sum)) {
            let threshold = top.threshold();
            while first_essential < cursors.len() && !plan.can_beat(prefix[first_essential], threshold) {
                first_essential += 1;
            }
        }
        doc = match &mut frontier {
            Some(f) => {
                let essential = first_essential;
                f.next_doc(|i| i >= essential)
            }
            None => next,
        };
    }
    Ok(top.into_sorted())
}
