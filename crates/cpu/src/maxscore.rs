//! MaxScore for ranked OR (Turtle and Flood 1995, in the document-at-a-time form of PISA).
//!
//! Lists are ordered by their upper bound. The lowest-bound prefix whose bounds (plus the prior's) sum
//! below the k-th score is "non-essential": a document found only there cannot enter the top k, so
//! candidates come from the essential lists alone, and the non-essential lists are probed (skipping
//! through their skip data) only while the candidate's partial score plus the remaining bounds can still
//! beat the k-th score.

use warpsearch_index::Result;

use crate::cursor::{score_and_advance, Cursor, END};
use warpsearch_query::{Plan, Scored};

/// The top `k` documents containing at least one term of `plan`.
pub fn maxscore(plan: &Plan, k: usize) -> Result<Vec<Scored>> {
    if plan.terms.is_empty() || k == 0 {
        return Ok(Vec::new());
    }
    let mut cursors = Cursor::all(plan)?;
    cursors.sort_by(|a, b| a.term.max_bound.total_cmp(&b.term.max_bound));
    // prefix[i]: bound of a document that appears in lists 0..=i only (the prior's bound included).
    let mut prefix = Vec::with_capacity(cursors.len());
    let mut sum = plan.prior_bound;
    for c in &cursors {
        sum += c.term.max_bound;
        prefix.push(sum);
    }
    let mut top = plan.top_k(k);
    let mut first_essential = 0;
    let mut doc = cursors.iter().map(Cursor::doc).min().unwrap_or(END);
    while first_essential < cursors.len() && doc != END {
        let (mut sum, next) = score_and_advance(&mut cursors[first_essential..], doc, plan)?;
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
        doc = next;
    }
    Ok(top.into_sorted())
}
