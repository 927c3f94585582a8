//! Memory-bounded inversion: postings accumulate in memory until a budget is reached, then are written
//! to disk as a sorted run; at the end the runs are merged term by term.
//!
//! Run file: a sequence of entries `varint(term length) term-bytes varint(count)` followed by `count`
//! pairs `varint(docID gap) varint(tf)`, terms in increasing byte order. Runs are written in document
//! order, so the lists of one term in runs 0, 1, 2 … concatenate into a sorted list.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use rustc_hash::FxHashMap;

use crate::error::{corrupt, IoContext, Result};

/// A posting before compression: (docID, term frequency).
pub type Posting = (u32, u32);

/// Bytes a posting costs in memory, with vector slack.
const POSTING_COST: usize = 12;
/// Bytes a distinct term costs in memory beyond its text.
const TERM_COST: usize = 96;

/// In-memory inverter that spills sorted runs.
pub struct Inverter {
    dict: FxHashMap<Box<str>, u32>,
    lists: Vec<(Box<str>, Vec<Posting>)>,
    bytes: usize,
    dir: PathBuf,
    runs: Vec<PathBuf>,
}

impl Inverter {
    /// An inverter writing its runs into `dir`.
    pub fn new(dir: &Path) -> Self {
        Inverter {
            dict: FxHashMap::default(),
            lists: Vec::new(),
            bytes: 0,
            dir: dir.to_owned(),
            runs: Vec::new(),
        }
    }

    /// Adds document `doc` with its (term, tf) pairs. DocIDs must increase across calls.
    pub fn add(&mut self, doc: u32, terms: &[(String, u32)]) {
        for (term, tf) in terms {
            let id = match self.dict.get(term.as_str()) {
                Some(&id) => id,
                None => {
                    let id = self.lists.len() as u32;
                    self.dict.insert(term.as_str().into(), id);
                    self.lists.push((term.as_str().into(), Vec::new()));
                    self.bytes += TERM_COST + 2 * term.len();
                    id
                }
            };
            self.lists[id as usize].1.push((doc, *tf));
        }
        self.bytes += POSTING_COST * terms.len();
    }

    /// Estimated memory held.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Number of runs written so far.
    pub fn runs(&self) -> usize {
        self.runs.len()
    }

    /// Writes what is in memory as a sorted run and frees it.
    pub fn spill(&mut self) -> Result<()> {
        if self.lists.is_empty() {
            return Ok(());
        }
        let path = self.dir.join(format!("run-{:05}", self.runs.len()));
        let mut out = BufWriter::with_capacity(1 << 20, File::create(&path).at(&path)?);
        let mut lists = std::mem::take(&mut self.lists);
        lists.sort_unstable_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
        let mut buf = Vec::with_capacity(1 << 16);
        for (term, postings) in &lists {
            buf.clear();
            put_varint(&mut buf, term.len() as u64);
            buf.extend_from_slice(term.as_bytes());
            put_varint(&mut buf, postings.len() as u64);
            let mut previous = 0u32;
            for &(doc, tf) in postings {
                put_varint(&mut buf, (doc - previous) as u64);
                put_varint(&mut buf, tf as u64);
                previous = doc;
            }
            out.write_all(&buf).at(&path)?;
        }
        out.flush().at(&path)?;
        self.dict = FxHashMap::default();
        self.bytes = 0;
        self.runs.push(path);
        Ok(())
    }

    /// Spills what remains and returns all runs, in document order.
    pub fn finish(mut self) -> Result<Vec<PathBuf>> {
        self.spill()?;
        Ok(self.runs)
    }
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

struct RunReader {
    input: BufReader<File>,
    path: PathBuf,
    term: Vec<u8>,
    postings: Vec<Posting>,
}

impl RunReader {
    fn open(path: &Path) -> Result<Self> {
        let input = BufReader::with_capacity(1 << 18, File::open(path).at(path)?);
        Ok(RunReader {
            input,
            path: path.to_owned(),
            term: Vec::new(),
            postings: Vec::new(),
        })
    }

    /// Loads the next entry; false at the end of the run.
    fn advance(&mut self) -> Result<bool> {
        let len = match self.varint(true)? {
            None => return Ok(false),
            Some(len) => len as usize,
        };
        self.term.resize(len, 0);
        self.input.read_exact(&mut self.term).at(&self.path)?;
        let count = self.varint(false)?.unwrap_or(0);
        self.postings.clear();
        let mut doc = 0u32;
        for _ in 0..count {
            let gap = self.varint(false)?.unwrap_or(0) as u32;
            let tf = self.varint(false)?.unwrap_or(0) as u32;
            doc += gap;
            self.postings.push((doc, tf));
        }
        Ok(true)
    }

    fn varint(&mut self, eof_ok: bool) -> Result<Option<u64>> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let mut byte = [0u8];
            if self.input.read(&mut byte).at(&self.path)? == 0 {
                return if eof_ok && shift == 0 {
                    Ok(None)
                } else {
                    Err(corrupt(&self.path, "truncated run file"))
                };
            }
            v |= ((byte[0] & 0x7f) as u64) << shift;
            if byte[0] < 0x80 {
                return Ok(Some(v));
            }
        }
        Err(corrupt(&self.path, "bad varint in run file"))
    }
}

/// Merges `runs` and calls `emit` once per term, in byte order, with the term's whole list.
pub fn merge(runs: &[PathBuf], mut emit: impl FnMut(&[u8], &mut Vec<Posting>) -> Result<()>) -> Result<()> {
    let mut readers = Vec::with_capacity(runs.len());
    let mut heap = BinaryHeap::new();
    for (i, path) in runs.iter().enumerate() {
        let mut r = RunReader::open(path)?;
        if r.advance()? {
            heap.push(Reverse((r.term.clone(), i)));
        }
        readers.push(r);
    }
    let mut list = Vec::new();
    while let Some(Reverse((term, i))) = heap.pop() {
        list.clear();
        list.append(&mut readers[i].postings);
        if readers[i].advance()? {
            heap.push(Reverse((readers[i].term.clone(), i)));
        }
        while heap.peek().is_some_and(|Reverse((t, _))| *t == term) {
            let Reverse((_, j)) = heap.pop().expect("peeked");
            list.append(&mut readers[j].postings);
            if readers[j].advance()? {
                heap.push(Reverse((readers[j].term.clone(), j)));
            }
        }
        emit(&term, &mut list)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spilled_runs_merge_into_sorted_lists() {
        let dir = tempfile::tempdir().unwrap();
        let mut inv = Inverter::new(dir.path());
        let t = |s: &str, tf| (s.to_owned(), tf);
        inv.add(0, &[t("b", 1), t("a", 2)]);
        inv.spill().unwrap();
        inv.add(1, &[t("a", 1)]);
        inv.add(300, &[t("c", 5), t("b", 1)]);
        inv.spill().unwrap();
        inv.add(70_000, &[t("a", 9)]);
        let runs = inv.finish().unwrap();
        assert_eq!(runs.len(), 3);
        let mut seen = Vec::new();
        merge(&runs, |term, list| {
            seen.push((String::from_utf8(term.to_vec()).unwrap(), list.clone()));
            Ok(())
        })
        .unwrap();
        let expect = vec![
            ("a".to_owned(), vec![(0, 2), (1, 1), (70_000, 9)]),
            ("b".to_owned(), vec![(0, 1), (300, 1)]),
            ("c".to_owned(), vec![(300, 5)]),
        ];
        assert_eq!(seen, expect);
    }
}
