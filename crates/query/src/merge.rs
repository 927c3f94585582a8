//! The exact merge of partial top-k lists: the parts of a query split by docID range (between CTAs of
//! the GPU, or between the GPU and the CPU) each return the top k of their own documents; since every
//! document belongs to exactly one part, the k best of their union is the query's top k.

use crate::query::Scored;

/// The `k` best documents of `parts` (lists over disjoint documents), best first, ties to the smaller
/// docID: the order every backend returns.
pub fn merge_top_k<I>(parts: I, k: usize) -> Vec<Scored>
where
    I: IntoIterator,
    I::Item: AsRef<[Scored]>,
{
    let mut all: Vec<Scored> = Vec::new();
    for part in parts {
        all.extend_from_slice(part.as_ref());
    }
    sort_best_first(&mut all);
    debug_assert!(
        all.windows(2)
            .all(|w| w[0].doc != w[1].doc || w[0].score != w[1].score),
        "parts of a merge must not share documents"
    );
    all.truncate(k);
    all
}

/// Sorts `hits` best first: higher score, then smaller docID.
pub fn sort_best_first(hits: &mut [Scored]) {
    hits.sort_unstable_by(|a, b| b.score.total_cmp(&a.score).then(a.doc.cmp(&b.doc)));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(doc: u32, score: f32) -> Scored {
        Scored { doc, score }
    }

    #[test]
    fn merged_parts_equal_the_top_k_of_their_union() {
        let a = vec![s(7, 3.0), s(1, 2.0), s(2, 1.0)];
        let b = vec![s(5, 3.0), s(4, 2.0)];
        let empty: Vec<Scored> = Vec::new();
        let got = merge_top_k([&a, &empty, &b], 4);
        assert_eq!(got, [s(5, 3.0), s(7, 3.0), s(1, 2.0), s(4, 2.0)]);
        assert!(merge_top_k([&empty], 3).is_empty());
        assert_eq!(merge_top_k([&a], 0), []);
    }
}
