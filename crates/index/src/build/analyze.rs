//! One document's analysis for the builder (run on every core): its line parsed, its text analysed,
//! its distinct terms counted and grouped by the inversion partition that owns each term
//! ([`super::invert`]), so that every partition reads only its own terms of a batch.
//!
//! Each thread analyses through a [`Vocabulary`] of its own: a distinct token is stemmed once, and a
//! document's terms are counted by their numbers there, without comparing strings. The terms' bytes
//! live in one buffer per document instead of a string each.

use std::cell::RefCell;
use std::hash::Hasher;

use rustc_hash::FxHasher;

use crate::analyzer::{AnalyzerConfig, Vocabulary};

use super::schema::Schema;
use super::MAX_DOC_LEN;

/// A document's distinct terms with their frequencies, grouped by partition.
#[derive(Debug, Default)]
pub struct DocTerms {
    /// The distinct terms' bytes, concatenated.
    text: String,
    /// Per distinct term: start and end in `text`, and its frequency; partition by partition, in no
    /// order within each that the inversion depends on (it numbers terms itself and writes them by name).
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
    let terms = ANALYSIS.with(|a| {
        let mut a = a.borrow_mut();
        let Analysis {
            vocabulary,
            parts: held_parts,
            partition,
            numbers,
            keys,
        } = &mut *a;
        // One vocabulary per analyzer and partition count; reset between documents when it has grown
        // large, which bounds a thread's memory on a collection of many distinct words.
        if vocabulary.as_ref().map(Vocabulary::analyzer) != Some(*analyzer)
            || *held_parts != parts
            || vocabulary.as_ref().is_some_and(|v| v.len() > MAX_TERMS)
        {
            *vocabulary = Some(Vocabulary::new(*analyzer));
            *held_parts = parts;
            partition.clear();
        }
        let vocabulary = vocabulary.as_mut().expect("made above");
        numbers.clear();
        for text in &raw.texts {
            vocabulary.for_each_term(text, |n| numbers.push(n));
        }
        if numbers.len() > MAX_DOC_LEN as usize {
            return Err(format!(
                "document has {} tokens; at most {MAX_DOC_LEN} are supported: split it",
                numbers.len()
            ));
        }
        // Each term's partition, computed once per term the vocabulary numbers.
        for n in partition.len()..vocabulary.len() {
            partition.push(partition_of(vocabulary.term(n as u32), parts) as u32);
        }
        Ok(group(vocabulary, partition, numbers, keys, parts))
    })?;
    Ok(Some((kept, (raw.id, terms.0, terms.1))))
}

/// Most distinct terms a thread's vocabulary holds before it starts again (some 160 MiB with its
/// maps and pieces).
const MAX_TERMS: usize = 1 << 21;

/// A thread's state of analysis, kept from one document to the next.
#[derive(Default)]
struct Analysis {
    /// The thread's vocabulary (None before its first document).
    vocabulary: Option<Vocabulary>,
    /// The partition count `partition` is for.
    parts: usize,
    /// Each numbered term's partition.
    partition: Vec<u32>,
    /// A document's term numbers, in its order (a buffer).
    numbers: Vec<u32>,
    /// Their sort keys (a buffer).
    keys: Vec<u64>,
}

thread_local! {
    static ANALYSIS: RefCell<Analysis> = RefCell::default();
}

/// Frees the vocabularies of the current pool's threads and of the caller: they would otherwise stay
/// with the threads after a build (up to some 160 MiB each), in a process that goes on to search.
pub fn release_vocabularies() {
    let free = || ANALYSIS.with(|a| *a.borrow_mut() = Analysis::default());
    rayon::broadcast(|_| free());
    free();
}

/// A document's terms (`numbers`, in its order) as distinct terms with their frequencies, grouped by
/// partition (`of` gives each term's), with the document's length: the terms sorted by (partition,
/// number) in `keys`, a buffer, so that each run of one key is a distinct term and its frequency, in
/// partition order, and the outputs are allocated once at their sizes.
fn group(
    vocabulary: &Vocabulary,
    of: &[u32],
    numbers: &[u32],
    keys: &mut Vec<u64>,
    parts: usize,
) -> (DocTerms, u32) {
    keys.clear();
    keys.extend(
        numbers
            .iter()
            .map(|&n| (u64::from(of[n as usize]) << 32) | u64::from(n)),
    );
    keys.sort_unstable();
    // Runs of one key: (term number, frequency, partition).
    let runs = || {
        let mut rest = &keys[..];
        std::iter::from_fn(move || {
            let &key = rest.first()?;
            let run = rest.iter().take_while(|&&k| k == key).count();
            rest = &rest[run..];
            Some((key as u32, run as u32, (key >> 32) as usize))
        })
    };
    let (distinct, bytes) = runs().fold((0, 0), |(d, b), (n, _, _)| (d + 1, b + vocabulary.term(n).len()));
    let mut bounds = vec![0u32; parts + 1];
    let mut spans = Vec::with_capacity(distinct);
    let mut text = String::with_capacity(bytes);
    for (n, tf, p) in runs() {
        let start = text.len() as u32;
        text.push_str(vocabulary.term(n));
        spans.push((start, text.len() as u32, tf));
        bounds[p + 1] += 1;
    }
    for p in 0..parts {
        bounds[p + 1] += bounds[p];
    }
    (
        DocTerms {
            text,
            spans,
            parts: bounds,
        },
        numbers.len() as u32,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vocabularies_are_released() {
        let schema = Schema::json_collection(false);
        analyze(
            &AnalyzerConfig::english(),
            &schema,
            br#"{"id": "d", "contents": "x y"}"#,
            2,
        )
        .unwrap();
        let held = || ANALYSIS.with(|a| a.borrow().vocabulary.as_ref().map_or(0, Vocabulary::len));
        assert_eq!(held(), 2);
        release_vocabularies();
        assert_eq!(held(), 0);
    }

    #[test]
    fn terms_are_counted_and_grouped_by_partition() {
        let schema = Schema::json_collection(false);
        let line = br#"{"id": "d", "contents": "b a c b a b x y z w"}"#;
        for parts in [1, 2, 3, 7] {
            let (id, terms, len) = analyze(&AnalyzerConfig::whitespace(), &schema, line, parts).unwrap();
            assert_eq!((id.as_str(), len, terms.len(), terms.max_tf()), ("d", 10, 7, 3));
            let mut all = Vec::new();
            for p in 0..parts {
                for (t, tf) in terms.part(p) {
                    assert_eq!(partition_of(t, parts), p);
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
