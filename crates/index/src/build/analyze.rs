//! The analysis of consecutive lines for the builder (run on every core, a chunk of lines a task):
//! each line parsed, its text analysed, its distinct terms counted, and the chunk's postings grouped by
//! the inversion partition that owns each term ([`super::invert`]), so that every partition reads its
//! own postings of a chunk as one run of memory.
//!
//! Each thread analyses through a [`Vocabulary`] of its own: a distinct token is stemmed once, and a
//! document's terms are counted by their numbers there, without comparing strings. A chunk holds each
//! of its distinct terms' bytes once, and its postings name them by a number within the chunk, so a
//! partition looks a term up once a chunk instead of once a posting.

use std::cell::RefCell;
use std::hash::Hasher;

use rustc_hash::FxHasher;

use crate::analyzer::{AnalyzerConfig, Vocabulary};

use super::input::Line;
use super::schema::Schema;
use super::MAX_DOC_LEN;

/// A line's document as analysed.
#[derive(Debug, PartialEq)]
pub struct Doc {
    /// Its external id.
    pub id: String,
    /// Its length in tokens.
    pub len: u32,
    /// Its largest term frequency (0 without terms).
    pub max_tf: u32,
}

/// What a line of a chunk is: a document with what the filter made of its id, none where the filter
/// did not keep it, or what is wrong with the line.
pub type LineDoc<K> = Result<Option<(K, Doc)>, String>;

/// The analysis of consecutive lines: their documents, and their postings partition by partition.
#[derive(Debug)]
pub struct Chunk<K = ()> {
    /// Per line, in order.
    pub docs: Vec<LineDoc<K>>,
    /// (line in the chunk, term in its partition's part of the chunk, frequency), partition by
    /// partition, in line order within each.
    postings: Vec<(u32, u32, u32)>,
    /// `postings[posting_bounds[p]..posting_bounds[p + 1]]` are partition p's.
    posting_bounds: Vec<u32>,
    /// The distinct terms' bytes, partition by partition.
    text: String,
    /// Each distinct term's end in `text`; `term_bounds[p]..term_bounds[p + 1]` are partition p's
    /// terms, its term t at `term_bounds[p] + t`.
    ends: Vec<u32>,
    term_bounds: Vec<u32>,
}

/// One partition's part of a [`Chunk`].
#[derive(Clone, Copy)]
pub struct ChunkPart<'a> {
    /// (line in the chunk, term number in this part, frequency), in line order.
    pub postings: &'a [(u32, u32, u32)],
    text: &'a str,
    /// The part's terms' ends in `text`, after the end of the term before its first.
    ends: &'a [u32],
    start: u32,
}

impl<'a> ChunkPart<'a> {
    /// Term `t` of this part.
    pub fn term(&self, t: u32) -> &'a str {
        let t = t as usize;
        let start = if t == 0 { self.start } else { self.ends[t - 1] };
        &self.text[start as usize..self.ends[t] as usize]
    }

    /// Distinct terms in this part.
    pub fn terms(&self) -> usize {
        self.ends.len()
    }
}

impl<K> Chunk<K> {
    /// Partition `p`'s part.
    pub fn part(&self, p: usize) -> ChunkPart<'_> {
        let (t0, t1) = (self.term_bounds[p] as usize, self.term_bounds[p + 1] as usize);
        let postings = &self.postings[self.posting_bounds[p] as usize..self.posting_bounds[p + 1] as usize];
        ChunkPart {
            postings,
            text: &self.text,
            ends: &self.ends[t0..t1],
            start: if t0 == 0 { 0 } else { self.ends[t0 - 1] },
        }
    }
}

/// The partition (of `parts`) that owns `term`: the high bits of a multiply of its hash, which spread
/// the terms evenly whatever `parts` is.
pub fn partition_of(term: &str, parts: usize) -> usize {
    let mut h = FxHasher::default();
    h.write(term.as_bytes());
    ((h.finish() as u128 * parts as u128) >> 64) as usize
}

/// Parses and analyses `lines` into a [`Chunk`] for `parts` partitions.
pub fn analyze(analyzer: &AnalyzerConfig, schema: &Schema, lines: &[Line], parts: usize) -> Chunk {
    analyze_if(analyzer, schema, lines, parts, |_| Some(()))
}

/// [`analyze`] of the lines whose id `keep` accepts, each with what `keep` made of its id; the others
/// are parsed for their id only, their text left unanalysed, and their documents are None.
pub fn analyze_if<K>(
    analyzer: &AnalyzerConfig,
    schema: &Schema,
    lines: &[Line],
    parts: usize,
    keep: impl Fn(&str) -> Option<K>,
) -> Chunk<K> {
    ANALYSIS.with(|a| {
        let mut a = a.borrow_mut();
        let a = &mut *a;
        // One vocabulary per analyzer and partition count; started again between chunks when it has
        // grown large, which bounds a thread's memory on a collection of many distinct words.
        if a.vocabulary.as_ref().map(Vocabulary::analyzer) != Some(*analyzer)
            || a.parts != parts
            || a.vocabulary.as_ref().is_some_and(|v| v.len() > MAX_TERMS)
        {
            a.vocabulary = Some(Vocabulary::new(*analyzer));
            a.parts = parts;
            a.terms.clear();
        }
        a.chunk += 1;
        a.postings.resize_with(parts, Vec::new);
        a.names.resize_with(parts, Vec::new);
        let docs = lines
            .iter()
            .enumerate()
            .map(|(i, l)| a.line(schema, &l.bytes, i as u32, &keep))
            .collect();
        a.chunk_of(docs)
    })
}

/// Most distinct terms a thread's vocabulary holds before it starts again (some 250 MiB with its
/// maps and pieces).
const MAX_TERMS: usize = 1 << 21;

/// A thread's state of analysis, kept from one chunk to the next.
#[derive(Default)]
struct Analysis {
    /// The thread's vocabulary (None before its first chunk).
    vocabulary: Option<Vocabulary>,
    /// The partition count `terms` is for.
    parts: usize,
    /// Each numbered term's state, by its number: the one slot a token visits.
    terms: Vec<TermState>,
    /// The current chunk's count (a chunk's terms are those whose state names it).
    chunk: u64,
    /// The current document's count (its terms are those whose state names it).
    doc: u64,
    /// A document's term numbers, in its order (a buffer).
    numbers: Vec<u32>,
    /// Its distinct term numbers, in the order first met (a buffer).
    distinct: Vec<u32>,
    /// The chunk's postings and its terms' numbers, by partition (buffers).
    postings: Vec<Vec<(u32, u32, u32)>>,
    names: Vec<Vec<u32>>,
}

/// What a thread's analysis holds of one term of its vocabulary.
#[derive(Clone, Copy, Default)]
struct TermState {
    /// The chunk it was last met in, and its number in its partition's part of that chunk.
    chunk: u64,
    local: u32,
    /// Its partition.
    part: u32,
    /// The document it was last met in, and its frequency there.
    doc: u64,
    tf: u32,
}

thread_local! {
    static ANALYSIS: RefCell<Analysis> = RefCell::default();
}

/// Frees the vocabularies of the current pool's threads and of the caller: they would otherwise stay
/// with the threads after a build (up to some 250 MiB each), in a process that goes on to search.
pub fn release_vocabularies() {
    let free = || ANALYSIS.with(|a| *a.borrow_mut() = Analysis::default());
    rayon::broadcast(|_| free());
    free();
    crate::analyzer::release_shared_stems();
}

impl Analysis {
    /// Analyses line `at` of the chunk into the chunk's buffers: its distinct terms counted, and each
    /// term's posting put in its partition's buffer.
    fn line<K>(
        &mut self,
        schema: &Schema,
        bytes: &[u8],
        at: u32,
        keep: &impl Fn(&str) -> Option<K>,
    ) -> LineDoc<K> {
        let raw = schema.parse(bytes)?;
        let Some(kept) = keep(&raw.id) else {
            return Ok(None);
        };
        let vocabulary = self.vocabulary.as_mut().expect("made for the chunk");
        self.numbers.clear();
        for text in &raw.texts {
            vocabulary.for_each_term(text, |n| self.numbers.push(n));
        }
        if self.numbers.len() > MAX_DOC_LEN as usize {
            return Err(format!(
                "document has {} tokens; at most {MAX_DOC_LEN} are supported: split it",
                self.numbers.len()
            ));
        }
        // Each term's partition, computed once per term the vocabulary numbers.
        for n in self.terms.len()..vocabulary.len() {
            let part = partition_of(vocabulary.term(n as u32), self.parts) as u32;
            self.terms.push(TermState {
                part,
                ..TermState::default()
            });
        }
        // The document's terms counted in place: each distinct term is listed at its first token.
        self.doc += 1;
        self.distinct.clear();
        for &n in &self.numbers {
            let state = &mut self.terms[n as usize];
            if state.doc != self.doc {
                (state.doc, state.tf) = (self.doc, 0);
                self.distinct.push(n);
            }
            state.tf += 1;
        }
        let mut max_tf = 0;
        for &n in &self.distinct {
            let state = &mut self.terms[n as usize];
            let p = state.part as usize;
            if state.chunk != self.chunk {
                (state.chunk, state.local) = (self.chunk, self.names[p].len() as u32);
                self.names[p].push(n);
            }
            self.postings[p].push((at, state.local, state.tf));
            max_tf = max_tf.max(state.tf);
        }
        let doc = Doc {
            id: raw.id,
            len: self.numbers.len() as u32,
            max_tf,
        };
        Ok(Some((kept, doc)))
    }

    /// The chunk made of the buffers (which it empties) and the lines' documents.
    fn chunk_of<K>(&mut self, docs: Vec<LineDoc<K>>) -> Chunk<K> {
        let vocabulary = self.vocabulary.as_ref().expect("made for the chunk");
        let postings_len = self.postings.iter().map(Vec::len).sum();
        let terms_len = self.names.iter().map(Vec::len).sum();
        let bytes = self
            .names
            .iter()
            .flatten()
            .map(|&n| vocabulary.term(n).len())
            .sum();
        let mut chunk = Chunk {
            docs,
            postings: Vec::with_capacity(postings_len),
            posting_bounds: Vec::with_capacity(self.parts + 1),
            text: String::with_capacity(bytes),
            ends: Vec::with_capacity(terms_len),
            term_bounds: Vec::with_capacity(self.parts + 1),
        };
        chunk.posting_bounds.push(0);
        chunk.term_bounds.push(0);
        for (postings, names) in self.postings.iter_mut().zip(&mut self.names) {
            chunk.postings.append(postings);
            chunk.posting_bounds.push(chunk.postings.len() as u32);
            for n in names.drain(..) {
                chunk.text.push_str(vocabulary.term(n));
                chunk.ends.push(chunk.text.len() as u32);
            }
            chunk.term_bounds.push(chunk.ends.len() as u32);
        }
        chunk
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(texts: &[&str]) -> Vec<Line> {
        texts
            .iter()
            .enumerate()
            .map(|(i, t)| Line {
                file: 0,
                line: i as u64 + 1,
                bytes: t.as_bytes().to_vec(),
            })
            .collect()
    }

    #[test]
    fn vocabularies_are_released() {
        let schema = Schema::json_collection(false);
        analyze(
            &AnalyzerConfig::english(),
            &schema,
            &lines(&[r#"{"id": "d", "contents": "x y"}"#]),
            2,
        );
        let held = || ANALYSIS.with(|a| a.borrow().vocabulary.as_ref().map_or(0, Vocabulary::len));
        assert_eq!(held(), 2);
        release_vocabularies();
        assert_eq!(held(), 0);
    }

    #[test]
    fn terms_are_counted_and_grouped_by_partition() {
        let schema = Schema::json_collection(false);
        let chunk_lines = lines(&[
            r#"{"id": "d", "contents": "b a c b a b x y z w"}"#,
            r#"{"id": "e" "contents": "broken"}"#,
            r#"{"id": "f", "contents": "y b q"}"#,
            r#"{"id": "g", "contents": ""}"#,
            r#"{"id": "h", "contents": "skipped by the filter"}"#,
        ]);
        // Two chunks in a row on one thread: the second must not take the first's term numbers.
        for parts in [1, 2, 3, 7, 7] {
            let chunk = analyze_if(
                &AnalyzerConfig::whitespace(),
                &schema,
                &chunk_lines,
                parts,
                |id| (id != "h").then_some(id.len()),
            );
            let doc = |id: &str, len, max_tf| {
                let id = id.to_owned();
                Some((1, Doc { id, len, max_tf }))
            };
            let docs: Vec<_> = chunk.docs.iter().map(|d| d.as_ref().ok()).collect();
            assert_eq!(
                docs,
                [
                    Some(&doc("d", 10, 3)),
                    None,
                    Some(&doc("f", 3, 1)),
                    Some(&doc("g", 0, 0)),
                    Some(&None)
                ]
            );
            let mut all = Vec::new();
            for p in 0..parts {
                let part = chunk.part(p);
                let mut names: Vec<&str> = (0..part.terms() as u32).map(|t| part.term(t)).collect();
                let distinct = names.len();
                names.sort();
                names.dedup();
                assert_eq!(names.len(), distinct, "a term named twice in one part");
                assert!(
                    part.postings.windows(2).all(|w| w[0].0 <= w[1].0),
                    "lines out of order"
                );
                for &(line, t, tf) in part.postings {
                    assert_eq!(partition_of(part.term(t), parts), p);
                    all.push((line, part.term(t).to_owned(), tf));
                }
            }
            all.sort();
            let want: Vec<(u32, String, u32)> = [
                (0, "a", 2),
                (0, "b", 3),
                (0, "c", 1),
                (0, "w", 1),
                (0, "x", 1),
                (0, "y", 1),
                (0, "z", 1),
                (2, "b", 1),
                (2, "q", 1),
                (2, "y", 1),
            ]
            .iter()
            .map(|&(l, t, f)| (l, t.to_owned(), f))
            .collect();
            assert_eq!(all, want);
        }
    }
}
