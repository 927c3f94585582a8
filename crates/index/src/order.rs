//! The global-score docID order of docs/references.md#pruned-list-caching (eq. 4), shared by `index` and `synth`: documents
//! renumbered by descending GS(d) = α·static(d) + (1 − α)·max_t IR(d, t), so that a query on
//! `bm25-static` can stop once its k-th score reaches the next document's GS (eq. 5).

use rayon::prelude::*;

use crate::bm25::{loosen_bound, Bm25, Bm25Params};
use crate::error::{IndexError, Result};
use crate::format::StaticRange;

/// A renumbering by descending global score.
pub struct GlobalOrder {
    /// `order[new]`: the document's docID before renumbering.
    pub order: Vec<u32>,
    /// `new_id[old]`: the document's docID after renumbering.
    pub new_id: Vec<u32>,
    /// `scores[new]`: the global scores, in the new order (non-increasing).
    pub scores: Vec<f32>,
}

/// The global-score order of documents with lengths `lens`, largest term frequencies `max_tfs` (0 for
/// a document without terms) and optional raw `static_scores` (min-max normalised here), under
/// `params` and weight `alpha`. Ties keep the input order. BM25 is [`Bm25::for_collection`] of `lens`,
/// as the writer's, so GS(d) bounds the scores the engines compute on the written index; each score
/// is loosened by a few ulps against rounding.
pub fn global_order(
    alpha: f32,
    params: Bm25Params,
    lens: &[u32],
    max_tfs: &[u32],
    static_scores: Option<&[f32]>,
) -> GlobalOrder {
    let n = lens.len();
    let total: u64 = lens.iter().map(|&l| l as u64).sum();
    let bm25 = Bm25::for_collection(params, n as u64, total);
    let range = static_scores.map(StaticRange::of);
    let gs: Vec<f32> = (0..n)
        .into_par_iter()
        .map(|d| {
            let s = match (static_scores, range) {
                (Some(s), Some(r)) => r.normalize(s[d]),
                _ => 0.0,
            };
            let ir = if max_tfs[d] == 0 {
                0.0
            } else {
                bm25.tf_part(max_tfs[d], lens[d]) / (params.k1 + 1.0)
            };
            loosen_bound(alpha * s + (1.0 - alpha) * ir)
        })
        .collect();
    let mut order: Vec<u32> = (0..n as u32).collect();
    // A total order (ties by docID), so the unstable parallel sort is deterministic.
    order.par_sort_unstable_by(|&a, &b| gs[b as usize].total_cmp(&gs[a as usize]).then(a.cmp(&b)));
    let mut new_id = vec![0u32; n];
    for (new, &old) in order.iter().enumerate() {
        new_id[old as usize] = new as u32;
    }
    let scores = permuted(&gs, &order);
    GlobalOrder {
        order,
        new_id,
        scores,
    }
}

/// An error unless the α of a global-score order, if one is asked for, lies in [0, 1] (for a build to
/// check before it starts).
pub fn check_alpha(alpha: Option<f32>) -> Result<()> {
    match alpha.filter(|a| !(0.0..=1.0).contains(a)) {
        Some(alpha) => Err(IndexError::Invalid(format!(
            "alpha, the static score's weight in the global-score order, must lie in [0, 1] (got {alpha})"
        ))),
        None => Ok(()),
    }
}

/// `v` reordered so that entry `new` holds `v[order[new]]`.
pub fn permuted<T: Copy + Send + Sync>(v: &[T], order: &[u32]) -> Vec<T> {
    order.par_iter().map(|&d| v[d as usize]).collect()
}
