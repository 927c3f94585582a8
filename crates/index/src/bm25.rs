//! BM25 as every backend computes it (Anserini's form, exact document lengths).
//!
//! `score(t, d) = idf(t) · tf · (k1 + 1) / (tf + k1 · (1 − b + b · dl / avgdl))` with
//! `idf(t) = ln(1 + (N − df + 0.5) / (df + 0.5))`. Arithmetic is in `f32` in the order written here;
//! the block-max bounds stored in the index are computed with these same functions.

use serde::{Deserialize, Serialize};

/// BM25 parameters.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Bm25Params {
    /// Term-frequency saturation.
    pub k1: f32,
    /// Length normalisation.
    pub b: f32,
}

impl Bm25Params {
    /// `k1` and `b` checked: k1 > 0 and finite, b in [0, 1]. The one rule for building an index and for
    /// searching one, so that every index built can be searched with its own parameters.
    pub fn checked(k1: f32, b: f32) -> Result<Self, String> {
        if !(k1 > 0.0 && k1.is_finite() && (0.0..=1.0).contains(&b)) {
            return Err(format!("BM25 needs k1 > 0 and 0 <= b <= 1 (got k1 {k1}, b {b})"));
        }
        Ok(Bm25Params { k1, b })
    }
}

impl Default for Bm25Params {
    /// Anserini's defaults, k1 = 0.9, b = 0.4.
    fn default() -> Self {
        Bm25Params { k1: 0.9, b: 0.4 }
    }
}

/// BM25 bound to one collection's statistics.
#[derive(Debug, Clone, Copy)]
pub struct Bm25 {
    /// The parameters.
    pub params: Bm25Params,
    /// Number of documents, N.
    pub num_docs: u64,
    /// Mean document length.
    pub avg_doc_len: f32,
}

/// The mean document length an index stores (`meta.json`'s `avg_doc_len`) for `num_docs` documents of
/// `total_len` tokens in all; 0 without documents.
pub fn mean_doc_len(total_len: u64, num_docs: u64) -> f64 {
    if num_docs == 0 {
        0.0
    } else {
        total_len as f64 / num_docs as f64
    }
}

impl Bm25 {
    /// BM25 under `params` for `num_docs` documents of `total_len` tokens in all, with the mean length the
    /// index stores, as the engines read it back: the statistics every backend scores the written index
    /// with, so that bounds computed while writing (block maxima, global scores) bound its scores.
    pub fn for_collection(params: Bm25Params, num_docs: u64, total_len: u64) -> Bm25 {
        Bm25 {
            params,
            num_docs,
            avg_doc_len: mean_doc_len(total_len, num_docs) as f32,
        }
    }

    /// The inverse document frequency of a term in `df` documents.
    pub fn idf(&self, df: u64) -> f32 {
        let (n, df) = (self.num_docs as f64, df as f64);
        (1.0 + (n - df + 0.5) / (df + 0.5)).ln() as f32
    }

    /// The length-normalised term-frequency part (without idf).
    #[inline]
    pub fn tf_part(&self, tf: u32, doc_len: u32) -> f32 {
        self.tf_part_normed(tf, self.length_norm(doc_len))
    }

    /// `k1 · (1 − b + b · dl / avgdl)`: the document's part of the denominator, which engines compute
    /// once per document; [`Bm25::tf_part_normed`] of it equals [`Bm25::tf_part`] bit for bit.
    #[inline]
    pub fn length_norm(&self, doc_len: u32) -> f32 {
        let Bm25Params { k1, b } = self.params;
        let norm = if self.avg_doc_len > 0.0 {
            doc_len as f32 / self.avg_doc_len
        } else {
            0.0
        };
        k1 * (1.0 - b + b * norm)
    }

    /// The tf part given the document's [`Bm25::length_norm`].
    #[inline]
    pub fn tf_part_normed(&self, tf: u32, length_norm: f32) -> f32 {
        let tf = tf as f32;
        tf * (self.params.k1 + 1.0) / (tf + length_norm)
    }

    /// One term's contribution.
    #[inline]
    pub fn score(&self, idf: f32, tf: u32, doc_len: u32) -> f32 {
        idf * self.tf_part(tf, doc_len)
    }
}

/// Rounds an upper bound up a little so that it stays an upper bound for backends whose arithmetic
/// differs from this module's in the last bits (e.g. fused multiply-add on a GPU).
pub fn loosen_bound(bound: f32) -> f32 {
    bound * (1.0 + 4.0 * f32::EPSILON) + f32::MIN_POSITIVE
}
