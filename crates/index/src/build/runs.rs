//! Memory-bounded inversion: postings accumulate in memory until a budget is reached, then are written
//! to disk as a sorted run; at the end the runs are merged term by term, at most [`MAX_OPEN_RUNS`] at
//! once: more runs are first merged group by group into fewer (as often as needed), so that neither
//! file descriptors nor read buffers grow with the number of runs.
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
/// Most runs a merge reads at once: a descriptor and a 256 KiB buffer each.
pub const MAX_OPEN_RUNS: usize = 64;

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
        let mut out = RunWriter::create(&path)?;
        let mut lists = std::mem::take(&mut self.lists);
        lists.sort_unstable_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
        for (term, postings) in &lists {
            out.write(term.as_bytes(), postings)?;
        }
        out.finish()?;
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

/// Writes one run file, entry by entry (terms in increasing byte order).
pub(crate) struct RunWriter {
    out: BufWriter<File>,
    path: PathBuf,
    buf: Vec<u8>,
}

impl RunWriter {
    pub(crate) fn create(path: &Path) -> Result<Self> {
        Ok(RunWriter {
            out: BufWriter::with_capacity(1 << 20, File::create(path).at(path)?),
            path: path.to_owned(),
            buf: Vec::with_capacity(1 << 16),
        })
    }

    pub(crate) fn write(&mut self, term: &[u8], postings: &[Posting]) -> Result<()> {
        let buf = &mut self.buf;
        buf.clear();
        put_varint(buf, term.len() as u64);
        buf.extend_from_slice(term);
        put_varint(buf, postings.len() as u64);
        let mut previous = 0u32;
        for &(doc, tf) in postings {
            put_varint(buf, (doc - previous) as u64);
            put_varint(buf, tf as u64);
            previous = doc;
        }
        self.out.write_all(buf).at(&self.path)
    }

    pub(crate) fn finish(mut self) -> Result<()> {
        self.out.flush().at(&self.path)
    }
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

/// Merges `runs` (in document order) and calls `emit` once per term, in byte order, with the term's
/// whole list, reading at most `max_open` runs at once (at least 2). Where there are more, consecutive
/// groups of `max_open` are first merged into one run each, level after level; each list stays the
/// concatenation of its parts in run order, so the lists are those of one merge of every run. Runs
/// merged into another are removed as they are read out.
pub fn merge(
    runs: &[PathBuf],
    max_open: usize,
    emit: impl FnMut(&[u8], &mut Vec<Posting>) -> Result<()>,
) -> Result<()> {
    let max_open = max_open.max(2);
    let mut level = runs.to_vec();
    let mut depth = 0;
    while level.len() > max_open {
        depth += 1;
        let mut next = Vec::with_capacity(level.len().div_ceil(max_open));
        for (g, group) in level.chunks(max_open).enumerate() {
            if let [only] = group {
                next.push(only.clone());
                continue;
            }
            let dir = group[0].parent().unwrap_or(Path::new("."));
            let path = dir.join(format!("merged-{depth}-{g:05}"));
            let mut out = RunWriter::create(&path)?;
            merge_all(group, |term, list| out.write(term, list))?;
            out.finish()?;
            for run in group {
                std::fs::remove_file(run).at(run)?;
            }
            next.push(path);
        }
        level = next;
    }
    merge_all(&level, emit)
}

/// One merge of every run in `runs`, all open at once.
fn merge_all(runs: &[PathBuf], mut emit: impl FnMut(&[u8], &mut Vec<Posting>) -> Result<()>) -> Result<()> {
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
        merge(&runs, MAX_OPEN_RUNS, |term, list| {
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

    fn open_descriptors() -> usize {
        std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count())
    }

    /// Merging every spilled run at once opened one file per run ("Too many open files" past the
    /// limit, 256 KiB of buffer each): a merge of 300 runs keeps at most `MAX_OPEN_RUNS` open, and
    /// gives each term the list a single merge gives, whatever the number merged at once.
    #[test]
    fn many_runs_merge_without_opening_them_all() {
        if !Path::new("/proc/self/fd").exists() {
            eprintln!("skipped: no /proc/self/fd to count open files");
            return;
        }
        let spill = |dir: &Path| {
            let mut inv = Inverter::new(dir);
            for doc in 0..300u32 {
                let t = |s: String, tf| (s, tf);
                inv.add(
                    doc,
                    &[t(format!("t{}", doc % 7), 1 + doc % 3), t("all".into(), 2)],
                );
                inv.spill().unwrap();
            }
            inv.finish().unwrap()
        };
        let lists = |max_open: usize| {
            let dir = tempfile::tempdir().unwrap();
            let runs = spill(dir.path());
            assert_eq!(runs.len(), 300);
            let before = open_descriptors();
            let (mut most, mut seen) = (0, Vec::new());
            merge(&runs, max_open, |term, list| {
                most = most.max(open_descriptors());
                seen.push((term.to_vec(), list.clone()));
                Ok(())
            })
            .unwrap();
            // Other tests of this binary open files meanwhile: a margin of 32.
            assert!(
                most <= before + max_open.min(MAX_OPEN_RUNS) + 32,
                "{most} descriptors open during the merge, {before} before"
            );
            seen
        };
        let reference = lists(MAX_OPEN_RUNS);
        assert_eq!(reference.len(), 8);
        assert_eq!(reference[0].0, b"all");
        assert_eq!(reference[0].1, (0..300).map(|d| (d, 2)).collect::<Vec<_>>());
        for max_open in [2, 3, 17] {
            assert!(lists(max_open) == reference, "max_open {max_open}");
        }
    }
}
