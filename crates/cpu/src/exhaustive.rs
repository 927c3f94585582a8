//! The exhaustive oracle: decode every posting of the query's lists, score every matching document,
//! sort them all (within the plan's docID range, above its floor). Every fast path, on the CPU and on
//! the GPU, is tested against it.

use warpsearch_index::Result;

use warpsearch_query::{Mode, Plan, Scored};

/// The top `k` documents of `plan` under `mode` (And or Or), best first, ties to smaller docIDs.
pub fn exhaustive(plan: &Plan, mode: Mode, k: usize) -> Result<Vec<Scored>> {
    if plan.terms.is_empty() || k == 0 || (mode == Mode::And && plan.has_unknown) {
        return Ok(Vec::new());
    }
    let slots = plan.terms.len();
    // (doc, contribution) of every posting; fixed-point sums are the same in any order.
    let mut postings: Vec<(u32, u32)> = Vec::new();
    for t in &plan.terms {
        let (docs, freqs) = t.list.decode_all()?;
        postings.extend(
            docs.iter()
                .zip(&freqs)
                .filter(|(&d, _)| plan.part.range.contains(d))
                .map(|(&d, &f)| (d, plan.contribution(t, d, f))),
        );
    }
    postings.sort_unstable_by_key(|p| p.0);
    let need = if mode == Mode::And { slots } else { 1 };
    let mut out: Vec<Scored> = postings
        .chunk_by(|a, b| a.0 == b.0)
        .filter(|group| group.len() >= need)
        .map(|group| {
            let doc = group[0].0;
            let sum = group.iter().map(|p| p.1).sum();
            Scored {
                doc,
                score: plan.finish_sum(doc, sum),
            }
        })
        .filter(|s| s.score >= plan.part.floor)
        .collect();
    out.sort_unstable_by(|a, b| b.score.total_cmp(&a.score).then(a.doc.cmp(&b.doc)));
    out.truncate(k);
    Ok(out)
}
