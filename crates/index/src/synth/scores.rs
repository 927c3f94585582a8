//! Static scores and the global-score order of a synthetic collection, so that docs/references.md#pruned-list-caching's setting
//! (early termination on a global-score order) can be measured at any scale.
//!
//! A synthetic document takes the static score of its first template (the sample's document it
//! starts with), from a `docid<TAB>score` file of the sample's documents, the file `index
//! --static-scores` takes. Its largest term frequency, which its global score needs, is found from the
//! sample's forward index: a term's frequencies are summed over the document's templates, as
//! [`super::lists::generate_term`] sums them (a term's variants split it between documents, never within
//! one).

use rayon::prelude::*;
use rustc_hash::FxHashMap;

use super::lists::Layout;
use super::sample::Sample;
use crate::reader::Index;

/// Per synthetic document, the first position of its run in the template stream; one entry more at
/// the end (runs are consecutive and never empty).
pub(super) fn run_starts(layout: &Layout) -> Vec<usize> {
    let mut starts = Vec::with_capacity(layout.lens.len() + 1);
    for (g, &d) in layout.doc_of.iter().enumerate() {
        if starts.len() == d as usize {
            starts.push(g);
        }
    }
    starts.push(layout.doc_of.len());
    starts
}

/// Per synthetic document, its first template's static score from `map` (0 where the file has none),
/// and how many of the sample's templates had none.
pub(super) fn static_scores(
    sample_index: &Index,
    templates: usize,
    starts: &[usize],
    map: &FxHashMap<String, f32>,
) -> (Vec<f32>, u64) {
    let per_template: Vec<Option<f32>> = (0..templates)
        .into_par_iter()
        .map(|t| map.get(sample_index.doc_id(t as u32)).copied())
        .collect();
    let missing = per_template.iter().filter(|s| s.is_none()).count() as u64;
    let scores = starts[..starts.len() - 1]
        .par_iter()
        .map(|&g| per_template[g % templates].unwrap_or(0.0))
        .collect();
    (scores, missing)
}

/// Per synthetic document, its largest term frequency.
pub(super) fn max_tfs(sample: &Sample, starts: &[usize]) -> Vec<u32> {
    let forward = sample.forward();
    let m = sample.lens.len();
    let template = |t: usize| {
        let (a, b) = (forward.start[t] as usize, forward.start[t + 1] as usize);
        (&forward.terms[a..b], &forward.tfs[a..b])
    };
    let single: Vec<u32> = (0..m)
        .into_par_iter()
        .map(|t| template(t).1.iter().copied().max().unwrap_or(0))
        .collect();
    starts
        .par_windows(2)
        .map_init(Vec::new, |pairs: &mut Vec<(u32, u32)>, run| {
            if run[1] - run[0] == 1 {
                return single[run[0] % m];
            }
            pairs.clear();
            for g in run[0]..run[1] {
                let (terms, tfs) = template(g % m);
                pairs.extend(terms.iter().copied().zip(tfs.iter().copied()));
            }
            pairs.sort_unstable_by_key(|p| p.0);
            let (mut best, mut i) = (0u32, 0);
            while i < pairs.len() {
                let mut tf = 0u32;
                let term = pairs[i].0;
                while i < pairs.len() && pairs[i].0 == term {
                    tf = tf.saturating_add(pairs[i].1);
                    i += 1;
                }
                best = best.max(tf);
            }
            best
        })
        .collect()
}
