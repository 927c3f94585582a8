//! The exhaustive oracle: decode everything, score every matching document, full sort.

use warpsearch_index::{Index, Result};

/// Conjunctive or disjunctive matching.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Documents containing every query term.
    And,
    /// Documents containing at least one query term.
    Or,
}

/// A ranked document.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Scored {
    /// Internal docID.
    pub doc: u32,
    /// BM25 score.
    pub score: f32,
}

/// The top `k` documents for `terms` (term ordinals; `None` for a term the index lacks; a repeated
/// term counts that many times, as Anserini's bag-of-words query weights it), by descending score,
/// ties broken by smaller docID. Under [`Mode::And`] a missing term matches nothing.
pub fn exhaustive(index: &Index, terms: &[Option<u32>], mode: Mode, k: usize) -> Result<Vec<Scored>> {
    let mut weighted: Vec<(u32, f32)> = Vec::new();
    for t in terms {
        match (t, mode) {
            (None, Mode::And) => return Ok(Vec::new()),
            (None, Mode::Or) => {}
            (Some(id), _) => match weighted.iter_mut().find(|(t, _)| t == id) {
                Some(w) => w.1 += 1.0,
                None => weighted.push((*id, 1.0)),
            },
        }
    }
    if weighted.is_empty() || k == 0 {
        return Ok(Vec::new());
    }
    let bm25 = index.bm25();
    let lens = index.doc_lens();
    let n = index.num_docs() as usize;
    let mut scores = vec![0f32; n];
    let mut hits = vec![0u16; n];
    for &(id, weight) in &weighted {
        let list = index.postings(id);
        let idf = bm25.idf(list.len() as u64) * weight;
        let (docs, freqs) = list.decode_all()?;
        for (&d, &f) in docs.iter().zip(&freqs) {
            scores[d as usize] += bm25.score(idf, f, lens[d as usize]);
            hits[d as usize] += 1;
        }
    }
    let need = if mode == Mode::And {
        weighted.len() as u16
    } else {
        1
    };
    let mut out: Vec<Scored> = (0..n)
        .filter(|&d| hits[d] >= need)
        .map(|d| Scored {
            doc: d as u32,
            score: scores[d],
        })
        .collect();
    out.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.doc.cmp(&b.doc)));
    out.truncate(k);
    Ok(out)
}
