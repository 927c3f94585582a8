//! One document's analysis for the builder (run on every core): its line parsed, its text analysed,
//! its distinct terms counted and grouped by the inversion partition that owns each term
//! ([`super::invert`]), so that every partition reads only its own terms of a batch.
//!
//! The terms' bytes live in one buffer per document instead of a string each: a document's tokens
//! cost two allocations, not one per token.

use std::hash::Hasher;

use rustc_hash::FxHasher;

use crate::analyzer::AnalyzerConfig;

use super::schema::Schema;
use super::MAX_DOC_LEN;

/// A document's distinct terms with their frequencies, grouped by partition.
#[derive(Debug, Default)]
pub struct DocTerms {
    /// The distinct terms' bytes, concatenated.
    text: String,
    /// Per distinct term: start and end in `text`, and its frequency; partition by partition, in byte
    /// order within each.
    spans: Vec<(u32, u32, u32)>,
    /// `spans[parts[p]..parts[p + 1]]` are the terms of partition p.
    parts: Vec<u32>,
}

impl DocTerms {
    /// The (term, tf) pairs of partition `p`.
    pub fn part(&self, p: usize) -> impl Iterator<Item = (&str, u32)> + '_ {
        let range = self.parts[p] as usize..self.parts[p + 1] as usize;
        self.spans[range]
            .iter()
            .map(|&(s, e, tf)| (&self.text[s as usize..e as usize], tf))
    }

    /// Distinct terms of the document.
    pub fn len(&self) -> usize {
        self.spans.len()
    }

    /// Whether the document has no term.
    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    /// The largest term frequency (0 without terms).
    pub fn max_tf(&self) -> u32 {
        self.spans.iter().map(|s| s.2).max().unwrap_or(0)
    }
}

/// An analysed document: external id, terms, length in tokens.
pub type AnalyzedDoc = (String, DocTerms, u32);

/// The partition (of `parts`) that owns `term`: the high bits of a multiply of its hash, which spread
/// the terms evenly whatever `parts` is.
pub fn partition_of(term: &str, parts: usize) -> usize {
    let mut h = FxHasher::default();
    h.write(term.as_bytes());
    ((h.finish() as u128 * parts as u128) >> 64) as usize
}

/// Parses and analyses one line into its id, its distinct terms grouped for `parts` partitions, and
/// its length; or what is wrong with the line.
pub fn analyze(
    analyzer: &AnalyzerConfig,
    schema: &Schema,
    bytes: &[u8],
    parts: usize,
) -> Result<AnalyzedDoc, String> {
    analyze_if(analyzer, schema, bytes, parts, |_| Some(())).map(|doc| doc.expect("every id is kept").1)
}

/// [`analyze`] for a line whose id `keep` accepts, with what `keep` made of the id; None where it
/// does not (the line parsed for its id only, its text left unanalysed).
pub fn analyze_if<K>(
    analyzer: &AnalyzerConfig,
    schema: &Schema,
    bytes: &[u8],
    parts: usize,
    keep: impl Fn(&str) -> Option<K>,
) -> Result<Option<(K, AnalyzedDoc)>, String> {
    let raw = schema.parse(bytes)?;
    let Some(kept) = keep(&raw.id) else {
        return Ok(None);
    };
    let mut all = String::new();
    let mut tokens: Vec<(u32, u32)> = Vec::new();
    for text in &raw.texts {
        analyzer.for_each_term(text, |t| {
            let start = all.len() as u32;
            all.push_str(t);
            tokens.push((start, all.len() as u32));
        });
    }
    if tokens.len() > MAX_DOC_LEN as usize {
        return Err(format!(
            "document has {} tokens; at most {MAX_DOC_LEN} are supported: split it",
            tokens.len()
        ));
    }
    let len = tokens.len() as u32;
    let word = |&(s, e): &(u32, u32)| &all[s as usize..e as usize];
    tokens.sort_unstable_by(|a, b| word(a).cmp(word(b)));
    // Distinct terms with counts, and each one's partition.
    let mut distinct: Vec<(u32, u32, u32, u32)> = Vec::new(); // (start, end, tf, partition)
    for t in &tokens {
        match distinct.last_mut() {
            Some(last) if word(&(last.0, last.1)) == word(t) => last.2 += 1,
            _ => distinct.push((t.0, t.1, 1, partition_of(word(t), parts) as u32)),
        }
    }
    // Grouped by partition (a counting sort, stable: byte order within each), into a compact text.
    let mut bounds = vec![0u32; parts + 1];
    for d in &distinct {
        bounds[d.3 as usize + 1] += 1;
    }
    for p in 0..parts {
        bounds[p + 1] += bounds[p];
    }
    let mut next = bounds.clone();
    let mut spans = vec![(0, 0, 0); distinct.len()];
    let mut text = String::with_capacity(distinct.iter().map(|d| (d.1 - d.0) as usize).sum());
    for d in &distinct {
        let start = text.len() as u32;
        text.push_str(word(&(d.0, d.1)));
        let at = &mut next[d.3 as usize];
        spans[*at as usize] = (start, text.len() as u32, d.2);
        *at += 1;
    }
    Ok(Some((
        kept,
        (
            raw.id,
            DocTerms {
                text,
                spans,
                parts: bounds,
            },
            len,
        ),
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terms_are_counted_and_grouped_by_partition() {
        let schema = Schema::json_collection(false);
        let line = br#"{"id": "d", "contents": "b a c b a b x y z w"}"#;
        for parts in [1, 2, 3, 7] {
            let (id, terms, len) = analyze(&AnalyzerConfig::whitespace(), &schema, line, parts).unwrap();
            assert_eq!((id.as_str(), len, terms.len(), terms.max_tf()), ("d", 10, 7, 3));
            let mut all = Vec::new();
            for p in 0..parts {
                let mut previous = "";
                for (t, tf) in terms.part(p) {
                    assert_eq!(partition_of(t, parts), p);
                    assert!(t > previous, "byte order within a partition");
                    previous = t;
                    all.push((t.to_owned(), tf));
                }
            }
            all.sort();
            let want: Vec<(String, u32)> = [
                ("a", 2),
                ("b", 3),
                ("c", 1),
                ("w", 1),
                ("x", 1),
                ("y", 1),
                ("z", 1),
            ]
            .iter()
            .map(|&(t, f)| (t.to_owned(), f))
            .collect();
            assert_eq!(all, want);
        }
    }
}
