//! The k best documents seen so far: a binary min-heap on (score, −docID).

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use crate::query::Scored;

/// Heap entry ordered so that the heap's top is the worst document kept: lowest score, and among equal
/// scores the largest docID (ties are broken in favour of smaller docIDs).
#[derive(Clone, Copy)]
struct Worst(Scored);

impl PartialEq for Worst {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Worst {}
impl PartialOrd for Worst {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Worst {
    fn cmp(&self, other: &Self) -> Ordering {
        // "Greater" = worse, so that BinaryHeap (a max-heap) keeps the worst on top.
        other
            .0
            .score
            .total_cmp(&self.0.score)
            .then(self.0.doc.cmp(&other.0.doc))
    }
}

/// Whether `a` ranks before `b`: higher score, then smaller docID.
#[inline]
pub fn better(a: Scored, b: Scored) -> bool {
    a.score > b.score || (a.score == b.score && a.doc < b.doc)
}

/// Collects the top `k` documents, optionally only those scoring at least a floor.
pub struct TopK {
    k: usize,
    floor: f32,
    heap: BinaryHeap<Worst>,
}

impl TopK {
    /// An empty collector for `k` documents.
    pub fn new(k: usize) -> TopK {
        TopK::with_floor(k, f32::NEG_INFINITY)
    }

    /// An empty collector for `k` documents that refuses documents scoring below `floor` (a starting
    /// threshold from another part of the same query; see `Part`).
    pub fn with_floor(k: usize, floor: f32) -> TopK {
        TopK {
            k,
            floor,
            heap: BinaryHeap::with_capacity(k.min(1 << 16) + 1),
        }
    }

    /// The score a document must reach to have a chance of entering: the k-th best score when `k`
    /// documents are held, else the floor (−∞ without one).
    #[inline]
    pub fn threshold(&self) -> f32 {
        if self.heap.len() < self.k {
            self.floor
        } else {
            self.heap
                .peek()
                .map_or(f32::INFINITY, |w| w.0.score)
                .max(self.floor)
        }
    }

    /// Whether no document visited from now on whose score is at most `bound` can enter, documents
    /// being visited in increasing docID order: the collector is full and its k-th score reaches
    /// `bound` (a later document would lose the tie), or the floor lies above `bound`.
    #[inline]
    pub fn settled(&self, bound: f32) -> bool {
        bound < self.floor || (self.is_full() && self.heap.peek().is_some_and(|w| w.0.score >= bound))
    }

    /// Whether `k` documents are held.
    #[inline]
    pub fn is_full(&self) -> bool {
        self.heap.len() >= self.k
    }

    /// Offers a document; returns whether it was kept.
    #[inline]
    pub fn insert(&mut self, doc: u32, score: f32) -> bool {
        let s = Scored { doc, score };
        if score < self.floor {
            false
        } else if self.heap.len() < self.k {
            self.heap.push(Worst(s));
            true
        } else if self.heap.peek().is_some_and(|w| better(s, w.0)) {
            *self.heap.peek_mut().expect("non-empty") = Worst(s);
            true
        } else {
            false
        }
    }

    /// The documents, best first.
    pub fn into_sorted(self) -> Vec<Scored> {
        // Ascending by "worse" order = best first.
        self.heap.into_sorted_vec().into_iter().map(|w| w.0).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_best_with_ties_to_smaller_docids() {
        let mut top = TopK::new(3);
        assert_eq!(top.threshold(), f32::NEG_INFINITY);
        for (doc, score) in [(5, 1.0), (1, 2.0), (7, 2.0), (3, 2.0), (2, 0.5), (0, 2.0)] {
            top.insert(doc, score);
        }
        let docs: Vec<u32> = top.into_sorted().iter().map(|s| s.doc).collect();
        assert_eq!(docs, [0, 1, 3]);
        let mut none = TopK::new(0);
        assert!(!none.insert(1, 1.0));
        assert!(none.into_sorted().is_empty());
    }

    #[test]
    fn a_floor_refuses_lower_scores_and_keeps_equal_ones() {
        let mut top = TopK::with_floor(2, 2.0);
        assert_eq!(top.threshold(), 2.0);
        assert!(!top.settled(2.0));
        assert!(top.settled(1.5));
        assert!(!top.insert(4, 1.9));
        assert!(top.insert(9, 2.0));
        assert!(top.insert(3, 5.0));
        assert!(top.settled(2.0));
        assert!(!top.settled(2.5));
        let got: Vec<(u32, f32)> = top.into_sorted().iter().map(|s| (s.doc, s.score)).collect();
        assert_eq!(got, [(3, 5.0), (9, 2.0)]);
    }
}
