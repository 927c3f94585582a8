//! Inversion on every core: the terms are split by hash into partitions ([`super::analyze::partition_of`]),
//! each owned by one task per batch, so that no two threads touch one term. A partition appends its
//! postings as flat (term, doc, tf) tuples (the term its own number, given at its first occurrence); at
//! the end the tuples become lists by a counting sort on the CPU ([`Partition::lists`]) or by a sort on
//! another processor ([`super::device::DeviceInverter`]), from the same tuples.
//!
//! Within a memory budget: a partition whose share of the budget is full writes its lists as a sorted
//! run ([`super::runs`]) and starts again. Partitions own disjoint terms and add documents in increasing
//! order, so runs listed partition by partition, each partition's in the order written, merge into the
//! lists of one inversion of the whole collection.

use std::path::{Path, PathBuf};

use rayon::prelude::*;

use crate::error::Result;
use crate::strmap::StrMap;

use super::analyze::{Chunk, ChunkPart};
use super::runs::{Posting, RunWriter};

/// Bytes a posting costs in memory (three u32s).
const POSTING_COST: usize = 12;
/// Bytes a distinct term costs in memory beyond its text (its map entry and name).
const TERM_COST: usize = 64;

/// The postings of the terms of one partition, as added.
#[derive(Default)]
pub struct Partition {
    dict: StrMap<u32>,
    names: Vec<Box<str>>,
    /// Per posting: the term's number in this partition, the document, the frequency.
    pub(crate) term: Vec<u32>,
    pub(crate) doc: Vec<u32>,
    pub(crate) tf: Vec<u32>,
    bytes: usize,
    runs: Vec<PathBuf>,
    /// The current chunk part's terms' numbers here, [`UNSEEN`] until looked up (a buffer).
    resolved: Vec<u32>,
}

/// A term of a chunk's part not yet looked up in the partition's dictionary.
const UNSEEN: u32 = u32::MAX;

/// What a chunk's line that is no document of the collection (a duplicate id, or a line skipped)
/// has for its docID: its postings are not added.
pub const NO_DOC: u32 = u32::MAX;

/// Lists of a partition by term number: term t's postings are `postings[starts[t]..starts[t + 1]]`.
pub struct Lists {
    /// `names.len() + 1` offsets.
    pub starts: Vec<usize>,
    /// Postings, term after term, in document order within each.
    pub postings: Vec<Posting>,
}

impl Lists {
    /// The postings of term `t`.
    pub fn of(&self, t: u32) -> &[Posting] {
        &self.postings[self.starts[t as usize]..self.starts[t as usize + 1]]
    }
}

impl Partition {
    /// Adds the postings of a chunk's part (this partition's) whose lines `docs` numbers (documents in
    /// increasing order, after every document added before; [`NO_DOC`] for a line to leave out). Past
    /// `limit` bytes held, between two documents, it writes a sorted run of partition `p` into `dir`.
    pub fn add(
        &mut self,
        part: ChunkPart<'_>,
        docs: &[u32],
        limit: usize,
        dir: &Path,
        p: usize,
    ) -> Result<()> {
        self.resolved.clear();
        self.resolved.resize(part.terms(), UNSEEN);
        let mut line = u32::MAX;
        for &(at, t, tf) in part.postings {
            let doc = docs[at as usize];
            if doc == NO_DOC {
                continue;
            }
            if at != line {
                line = at;
                if self.bytes > limit {
                    // The run took the terms' numbers with it.
                    self.spill(dir, p)?;
                    self.resolved.clear();
                    self.resolved.resize(part.terms(), UNSEEN);
                }
            }
            let mut id = self.resolved[t as usize];
            if id == UNSEEN {
                id = self.number(part.term(t));
                self.resolved[t as usize] = id;
            }
            self.term.push(id);
            self.doc.push(doc);
            self.tf.push(tf);
            self.bytes += POSTING_COST;
        }
        Ok(())
    }

    /// The number of `term` here, given at its first occurrence.
    fn number(&mut self, term: &str) -> u32 {
        match self.dict.get(term) {
            Some(&id) => id,
            None => {
                let id = self.names.len() as u32;
                self.dict.insert(term, id);
                self.names.push(term.into());
                self.bytes += TERM_COST + 2 * term.len();
                id
            }
        }
    }

    /// Estimated memory held.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// The terms, by number.
    pub fn names(&self) -> &[Box<str>] {
        &self.names
    }

    /// Postings held.
    pub fn postings(&self) -> usize {
        self.doc.len()
    }

    /// Runs written so far, in order.
    pub fn runs(&self) -> &[PathBuf] {
        &self.runs
    }

    /// The tuples as lists (a stable counting sort by term: documents stay in order), which no longer
    /// holds them.
    pub fn take_lists(&mut self) -> Lists {
        let lists = self.lists();
        self.bytes -= POSTING_COST * self.doc.len();
        (self.term, self.doc, self.tf) = Default::default();
        lists
    }

    /// The tuples as lists (a stable counting sort by term: documents stay in order).
    pub fn lists(&self) -> Lists {
        let mut starts = vec![0usize; self.names.len() + 1];
        for &t in &self.term {
            starts[t as usize + 1] += 1;
        }
        for t in 0..self.names.len() {
            starts[t + 1] += starts[t];
        }
        let mut next = starts.clone();
        let mut postings = vec![(0u32, 0u32); self.doc.len()];
        for ((&t, &d), &f) in self.term.iter().zip(&self.doc).zip(&self.tf) {
            let at = &mut next[t as usize];
            postings[*at] = (d, f);
            *at += 1;
        }
        Lists { starts, postings }
    }

    /// Writes what is held as a sorted run named after partition `p` into `dir`, and frees it.
    pub fn spill(&mut self, dir: &Path, p: usize) -> Result<()> {
        if self.doc.is_empty() {
            return Ok(());
        }
        let path = dir.join(format!("run-{p:04}-{:05}", self.runs.len()));
        let lists = self.lists();
        let mut order: Vec<u32> = (0..self.names.len() as u32).collect();
        order.sort_unstable_by(|&a, &b| self.names[a as usize].cmp(&self.names[b as usize]));
        let mut out = RunWriter::create(&path)?;
        for t in order {
            out.write(self.names[t as usize].as_bytes(), lists.of(t))?;
        }
        out.finish()?;
        let runs = std::mem::take(&mut self.runs);
        *self = Partition::default();
        self.runs = runs;
        self.runs.push(path);
        Ok(())
    }
}

/// Every partition of a build.
pub struct Partitions {
    /// The partitions, by number.
    pub parts: Vec<Partition>,
    dir: PathBuf,
    /// A partition spills past this many bytes.
    share: usize,
}

impl Partitions {
    /// `count` partitions sharing `budget` bytes, spilling into `dir`.
    pub fn new(count: usize, budget: usize, dir: &Path) -> Self {
        Partitions {
            parts: (0..count).map(|_| Partition::default()).collect(),
            dir: dir.to_owned(),
            share: (budget / count.max(1)).max(1),
        }
    }

    /// Number of partitions.
    pub fn count(&self) -> usize {
        self.parts.len()
    }

    /// Adds chunks of lines with their lines' docIDs, chunk after chunk (`docs`: in increasing docID
    /// order, after every document added before; [`NO_DOC`] for a line to leave out), each partition on
    /// a task of its own; a partition past its share of the budget spills.
    pub fn add<K: Sync>(&mut self, chunks: &[Chunk<K>], docs: &[u32]) -> Result<()> {
        if chunks.iter().map(|c| c.docs.len()).sum::<usize>() != docs.len() {
            return Err(crate::error::IndexError::Invalid(
                "the chunks' lines and their docIDs differ in number".into(),
            ));
        }
        let mut rest = docs;
        let chunks: Vec<(&Chunk<K>, &[u32])> = chunks
            .iter()
            .map(|c| {
                let (docs, tail) = rest.split_at(c.docs.len());
                rest = tail;
                (c, docs)
            })
            .collect();
        let (dir, share) = (&self.dir, self.share);
        self.parts.par_iter_mut().enumerate().try_for_each(|(p, part)| {
            chunks
                .iter()
                .try_for_each(|&(chunk, docs)| part.add(chunk.part(p), docs, share, dir, p))
        })
    }

    /// Runs written so far, in all.
    pub fn runs(&self) -> usize {
        self.parts.iter().map(|p| p.runs.len()).sum()
    }

    /// Whether a partition wrote a run (the lists are then merged from disk).
    pub fn spilled(&self) -> bool {
        self.parts.iter().any(|p| !p.runs.is_empty())
    }

    /// Every partition's tuples as lists, on every core ([`Partition::take_lists`]).
    pub fn take_lists(&mut self) -> Vec<Lists> {
        self.parts.par_iter_mut().map(|p| p.take_lists()).collect()
    }

    /// Spills what every partition holds and returns every run, partition by partition, in the order
    /// [`super::runs::merge`] reads them.
    pub fn spill_all(&mut self) -> Result<Vec<PathBuf>> {
        let dir = &self.dir;
        self.parts
            .par_iter_mut()
            .enumerate()
            .try_for_each(|(p, part)| part.spill(dir, p))?;
        Ok(self.parts.iter().flat_map(|p| p.runs.iter().cloned()).collect())
    }

    /// Every term of every partition in byte order, as (partition, term number); and, per partition,
    /// each term's position in that order (its rank).
    pub fn term_order(&self) -> (Vec<(u32, u32)>, Vec<Vec<u32>>) {
        let mut order: Vec<(u32, u32)> = self
            .parts
            .iter()
            .enumerate()
            .flat_map(|(p, part)| (0..part.names.len() as u32).map(move |t| (p as u32, t)))
            .collect();
        let name = |&(p, t): &(u32, u32)| &*self.parts[p as usize].names[t as usize];
        // Terms are distinct across partitions: the order is total, and the unstable sort deterministic.
        order.par_sort_unstable_by(|a, b| name(a).cmp(name(b)));
        let mut ranks: Vec<Vec<u32>> = self.parts.iter().map(|p| vec![0; p.names.len()]).collect();
        for (r, &(p, t)) in order.iter().enumerate() {
            ranks[p as usize][t as usize] = r as u32;
        }
        (order, ranks)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analyzer::AnalyzerConfig;
    use crate::build::analyze::analyze;
    use crate::build::input::Line;
    use crate::build::schema::Schema;

    /// Every term's list, by name, from the partitions and the runs they spilled.
    fn all_lists(parts: &mut Partitions) -> Vec<(String, Vec<Posting>)> {
        let runs = parts.spill_all().unwrap();
        let mut out = Vec::new();
        super::super::runs::merge(&runs, 8, |term, list| {
            out.push((String::from_utf8(term.to_vec()).unwrap(), list.clone()));
            Ok(())
        })
        .unwrap();
        out
    }

    #[test]
    fn left_out_lines_add_nothing_and_spills_inside_a_chunk_lose_nothing() {
        let texts = [
            "apple banana cherry apple",
            "banana only-in-a-duplicate",
            "cherry date apple",
            "elder fig banana banana",
            "apple",
            "fig grape",
        ];
        let lines: Vec<Line> = texts
            .iter()
            .enumerate()
            .map(|(i, t)| Line {
                file: 0,
                line: i as u64 + 1,
                bytes: format!(r#"{{"id": "d{i}", "contents": "{t}"}}"#).into_bytes(),
            })
            .collect();
        let schema = Schema::json_collection(false);
        let analyzer = AnalyzerConfig::whitespace();
        // Line 1 is left out (a duplicate id, say): its postings, and its term no other line has,
        // must not reach the lists; the others are numbered 0, 1, … in order.
        let docs = [0, NO_DOC, 1, 2, 3, 4];
        let want: Vec<(String, Vec<Posting>)> = [
            ("apple", vec![(0, 2), (1, 1), (3, 1)]),
            ("banana", vec![(0, 1), (2, 2)]),
            ("cherry", vec![(0, 1), (1, 1)]),
            ("date", vec![(1, 1)]),
            ("elder", vec![(2, 1)]),
            ("fig", vec![(2, 1), (4, 1)]),
            ("grape", vec![(4, 1)]),
        ]
        .into_iter()
        .map(|(t, l)| (t.to_owned(), l))
        .collect();
        for (count, budget, chunk_len) in [(1, 1 << 30, 6), (3, 1 << 30, 2), (1, 1, 6), (2, 1, 3), (5, 30, 1)]
        {
            let dir = tempfile::tempdir().unwrap();
            let mut parts = Partitions::new(count, budget, dir.path());
            let chunks: Vec<_> = lines
                .chunks(chunk_len)
                .map(|l| analyze(&analyzer, &schema, l, count))
                .collect();
            assert!(parts.add(&chunks, &docs[1..]).is_err(), "a docID for every line");
            parts.add(&chunks, &docs).unwrap();
            if budget == 1 {
                assert!(parts.runs() > 1, "a budget of one byte spills between documents");
            }
            assert_eq!(
                all_lists(&mut parts),
                want,
                "{count} partitions, {budget} bytes, chunks of {chunk_len}"
            );
        }
    }
}
