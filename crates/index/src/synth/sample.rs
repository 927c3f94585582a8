//! The sample a synthetic collection is made from: its template documents' postings, term-major, and
//! the forward index and Heaps' law fitted on them.

use rayon::prelude::*;

use crate::error::Result;
use crate::reader::Index;

/// The sample's template postings, term-major, restricted to the first `templates` documents.
pub(super) struct Sample {
    pub(super) names: Vec<Vec<u8>>,
    pub(super) offsets: Vec<u64>,
    pub(super) docs: Vec<u32>,
    pub(super) tfs: Vec<u32>,
    pub(super) lens: Vec<u32>,
}

impl Sample {
    pub(super) fn load(index: &Index, templates: u32) -> Result<Sample> {
        let terms: Vec<(Vec<u8>, u32)> = index.terms().collect();
        let lists: Vec<(Vec<u32>, Vec<u32>)> = terms
            .par_iter()
            .map(|(_, id)| {
                let (mut d, mut f) = index.postings(*id).decode_all()?;
                let keep = d.partition_point(|&x| x < templates);
                d.truncate(keep);
                f.truncate(keep);
                Ok((d, f))
            })
            .collect::<Result<_>>()?;
        let mut offsets = Vec::with_capacity(terms.len() + 1);
        offsets.push(0u64);
        let (mut docs, mut tfs) = (Vec::new(), Vec::new());
        let mut names = Vec::new();
        for ((name, _), (d, f)) in terms.into_iter().zip(lists) {
            if d.is_empty() {
                continue;
            }
            names.push(name);
            docs.extend_from_slice(&d);
            tfs.extend_from_slice(&f);
            offsets.push(docs.len() as u64);
        }
        Ok(Sample {
            names,
            offsets,
            docs,
            tfs,
            lens: index.doc_lens()[..templates as usize].to_vec(),
        })
    }

    pub(super) fn list(&self, t: usize) -> (&[u32], &[u32]) {
        let (a, b) = (self.offsets[t] as usize, self.offsets[t + 1] as usize);
        (&self.docs[a..b], &self.tfs[a..b])
    }

    pub(super) fn df(&self, t: usize) -> u64 {
        self.offsets[t + 1] - self.offsets[t]
    }

    /// Per template document, its term indexes and frequencies (compressed sparse rows).
    pub(super) fn forward(&self) -> Forward {
        let m = self.lens.len();
        let mut start = vec![0u64; m + 1];
        for &d in &self.docs {
            start[d as usize + 1] += 1;
        }
        for i in 0..m {
            start[i + 1] += start[i];
        }
        let mut fill = start.clone();
        let mut terms = vec![0u32; self.docs.len()];
        let mut tfs = vec![0u32; self.docs.len()];
        for t in 0..self.names.len() {
            let (docs, freqs) = self.list(t);
            for (&d, &f) in docs.iter().zip(freqs) {
                let i = fill[d as usize] as usize;
                (terms[i], tfs[i]) = (t as u32, f);
                fill[d as usize] += 1;
            }
        }
        Forward { start, terms, tfs }
    }

    /// Heaps' law V = k · n^β fitted by least squares on the log of prefixes of the templates (1/64 of
    /// them up to all): n tokens, V terms first seen in the prefix.
    pub(super) fn heaps(&self) -> (f64, f64) {
        let m = self.lens.len();
        let mut first: Vec<u32> = (0..self.names.len()).map(|t| self.list(t).0[0]).collect();
        first.sort_unstable();
        let mut tokens = vec![0u64; m + 1];
        for i in 0..m {
            tokens[i + 1] = tokens[i] + self.lens[i] as u64;
        }
        let points: Vec<(f64, f64)> = (0..7)
            .map(|i| (m >> i).max(1))
            .filter(|&p| tokens[p] > 0)
            .map(|p| {
                let v = first.partition_point(|&d| (d as usize) < p);
                ((tokens[p] as f64).ln(), (v.max(1) as f64).ln())
            })
            .collect();
        let n = points.len() as f64;
        let (sx, sy) = points.iter().fold((0.0, 0.0), |a, p| (a.0 + p.0, a.1 + p.1));
        let (mx, my) = (sx / n, sy / n);
        let sxx: f64 = points.iter().map(|p| (p.0 - mx).powi(2)).sum();
        let sxy: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
        let beta = if sxx > 0.0 { sxy / sxx } else { 1.0 };
        ((my - beta * mx).exp(), beta)
    }
}

/// The sample's forward index: template d's terms and frequencies are at `start[d]..start[d + 1]`.
pub(super) struct Forward {
    pub(super) start: Vec<u64>,
    pub(super) terms: Vec<u32>,
    pub(super) tfs: Vec<u32>,
}
