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
    keep_top_k(&mut all, k);
    all
}

/// Keeps the `k` best of `hits` (over distinct documents), best first. The order is total (score,
/// then docID), so the `k` kept are those a full sort would put first; only they are sorted.
pub fn keep_top_k(hits: &mut Vec<Scored>, k: usize) {
    debug_assert!(
        {
            let mut docs: Vec<u32> = hits.iter().map(|h| h.doc).collect();
            docs.sort_unstable();
            docs.windows(2).all(|w| w[0] != w[1])
        },
        "parts of a merge must not share documents"
    );
    if k == 0 {
        hits.clear();
        return;
    }
    if hits.len() > k {
        hits.select_nth_unstable_by(k - 1, best_first);
        hits.truncate(k);
    }
    sort_best_first(hits);
}

/// Sorts `hits` best first: higher score, then smaller docID.
pub fn sort_best_first(hits: &mut [Scored]) {
    hits.sort_unstable_by(best_first);
}

/// The order of hits, best first: higher score, then smaller docID.
fn best_first(a: &Scored, b: &Scored) -> std::cmp::Ordering {
    b.score.total_cmp(&a.score).then(a.doc.cmp(&b.doc))
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

    #[test]
    fn the_k_kept_are_the_first_k_of_a_full_sort() {
        // Scores drawn from few values, so that ties (broken by docID) are common.
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for round in 0..500 {
            let n = (next() % 60) as usize;
            let mut docs: Vec<u32> = (0..200).collect();
            for i in (1..docs.len()).rev() {
                docs.swap(i, (next() % (i as u64 + 1)) as usize);
            }
            let hits: Vec<Scored> = docs[..n]
                .iter()
                .map(|&doc| s(doc, (next() % 5) as f32 * 0.5))
                .collect();
            for k in [0, 1, 3, 10, n, n + 5] {
                let mut want = hits.clone();
                sort_best_first(&mut want);
                want.truncate(k);
                let mut got = hits.clone();
                keep_top_k(&mut got, k);
                assert_eq!(got, want, "round {round}, {n} hits, k {k}");
            }
        }
    }
}
