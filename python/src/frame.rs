//! Answers as one pandas DataFrame, a TREC run as a table: columns qid, docid, rank (from 1) and score
//! (float32: the engine's scores, exactly). Nothing is made per hit: ranks and scores are numpy arrays,
//! and qid and docid are pandas categoricals (an int32 code per hit into the distinct ids, each made
//! once as a Python string). A categorical compares, groups, merges and writes like a column of
//! strings; `frame.astype({"docid": str})` gives plain objects.
//!
//! The thread that holds the GIL is the one part of `search_batch` that no core can help with, so it does
//! per query only what needs Python (the qid's code) and keeps the answers; the columns are then written
//! once, straight into the buffers the numpy arrays share, on all the searcher's threads without the GIL
//! (which also fault in their fresh pages). The docid column's categories are the documents hit in docID
//! order, each one's code its rank among them (a bit per document), so no pass needs to go in order.
//! This measured several times cheaper for that thread than encoding every hit in first-seen order into
//! parts copied once more at the end (docs/decisions/021-python-output-modes.md). What is left is mostly
//! per distinct document: its id as a Python string, and pandas' check of the categories.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

use pyo3::exceptions::{PyImportError, PyOverflowError};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyDict, PyList, PyString};
use rayon::prelude::*;
use warpsearch_index::Index;
use warpsearch_query::Answer;

use crate::pool::on_pool;

/// Bytes per hit in each column: qid code (i32), docid code (i32), rank (i64), score (f32).
const COLUMNS: [usize; 4] = [4, 4, 8, 4];

/// Queries written by one task: enough of them that a task is worth its scheduling.
const QUERIES_PER_TASK: usize = 512;

/// The answers of a DataFrame being made, query by query.
pub struct Frame<'py> {
    pandas: Bound<'py, PyModule>,
    numpy: Bound<'py, PyModule>,
    /// Every query's qid, in order, and the distinct ones (the qid column's categories) with the code
    /// of each (a repeated qid is one category).
    qids: Vec<Bound<'py, PyString>>,
    qid_names: Bound<'py, PyList>,
    qid_code: HashMap<String, i32>,
    /// Per query pushed: its qid's code, and its answer.
    codes: Vec<i32>,
    answers: Vec<Answer>,
}

impl<'py> Frame<'py> {
    /// An empty frame for the queries `qids`; an ImportError that says what to install where pandas or
    /// numpy is missing.
    pub fn new(py: Python<'py>, qids: Vec<Bound<'py, PyString>>) -> PyResult<Frame<'py>> {
        let import = |name: &str| {
            py.import(name).map_err(|e| {
                PyImportError::new_err(format!(
                    "as_frame=True needs pandas and numpy (pip install pandas numpy): {e}"
                ))
            })
        };
        Ok(Frame {
            pandas: import("pandas")?,
            numpy: import("numpy")?,
            qids,
            qid_names: PyList::empty(py),
            qid_code: HashMap::new(),
            codes: Vec::new(),
            answers: Vec::new(),
        })
    }

    /// Keeps `answers`, the next queries', with their qids' codes.
    pub fn push(&mut self, answers: Vec<Answer>) -> PyResult<()> {
        for _ in &answers {
            let qid = &self.qids[self.codes.len()];
            let name = qid.to_cow()?;
            let code = match self.qid_code.get(name.as_ref()) {
                Some(&code) => code,
                None => {
                    let code = self.qid_names.len() as i32;
                    self.qid_names.append(qid)?;
                    self.qid_code.insert(name.into_owned(), code);
                    code
                }
            };
            self.codes.push(code);
        }
        self.answers.extend(answers);
        Ok(())
    }

    /// The DataFrame. The docid column's categories are the documents hit, in docID order; its codes
    /// and the other columns are written on `pool` (or rayon's global pool) without the GIL.
    pub fn finish(self, index: &Index, pool: Option<&rayon::ThreadPool>) -> PyResult<Bound<'py, PyAny>> {
        let py = self.qid_names.py();
        // The documents hit: a bit each, then a rank per 64-bit word, so that a document's code is the
        // number of documents hit below it.
        let hit = Hit::new(index.num_docs());
        let answers = &self.answers;
        py.detach(|| on_pool(pool, || answers.par_iter().for_each(|a| hit.mark(a))));
        let hit = hit.ranked();
        // Each task's queries are the next QUERIES_PER_TASK; its part of a column holds their hits.
        let sizes: Vec<usize> = self
            .answers
            .chunks(QUERIES_PER_TASK)
            .map(|c| c.iter().map(|a| a.hits.len()).sum())
            .collect();
        let total = sizes.iter().sum::<usize>();
        let columns = COLUMNS.map(|width| uninit_bytearray(py, total * width));
        let [qids, docs, ranks, scores] = columns;
        let (qids, docs, ranks, scores) = (qids?, docs?, ranks?, scores?);
        {
            // SAFETY: the four bytearrays were just made here and no other code holds them, so nothing
            // reads, resizes or frees them while these slices are written (also without the GIL). Their
            // bytes are not initialised yet (`uninit_bytearray`); the tasks write every one of them before
            // anything reads them (each hit's 20 bytes, and the tasks cover every hit).
            let bufs = unsafe {
                [
                    qids.as_bytes_mut(),
                    docs.as_bytes_mut(),
                    ranks.as_bytes_mut(),
                    scores.as_bytes_mut(),
                ]
            };
            let tasks = split_tasks(bufs, &sizes);
            let (codes, hit) = (&self.codes, &hit);
            py.detach(|| {
                on_pool(pool, || {
                    tasks
                        .into_par_iter()
                        .zip(answers.par_chunks(QUERIES_PER_TASK))
                        .zip(codes.par_chunks(QUERIES_PER_TASK))
                        .for_each(|((task, answers), codes)| write_task(task, answers, codes, hit))
                })
            });
        }
        let array = |bytes: Bound<'py, PyByteArray>, dtype: &str| {
            // The array shares the bytearray (writable, as numpy's own).
            self.numpy.call_method1("frombuffer", (bytes, dtype))
        };
        let categorical = |codes: Bound<'py, PyByteArray>, names: &Bound<'py, PyList>| {
            self.pandas
                .getattr("Categorical")?
                .call_method1("from_codes", (array(codes, "<i4")?, names))
        };
        let doc_names = PyList::empty(py);
        for doc in hit.docs() {
            doc_names.append(PyString::new(py, index.doc_id(doc)))?;
        }
        let columns = PyDict::new(py);
        columns.set_item("qid", categorical(qids, &self.qid_names)?)?;
        columns.set_item("docid", categorical(docs, &doc_names)?)?;
        columns.set_item("rank", array(ranks, "<i8")?)?;
        columns.set_item("score", array(scores, "<f4")?)?;
        // The columns are the frame's own: pandas need not copy them.
        let options = PyDict::new(py);
        options.set_item("copy", false)?;
        self.pandas.call_method("DataFrame", (columns,), Some(&options))
    }
}

/// A bytearray of `len` bytes whose memory is left for its writers to touch first: zeroing it here
/// would fault in every page on the thread that holds the GIL (a third of that thread's time at
/// top-1000, measured with `perf`), where the writers fault them in on all cores. The caller writes
/// every byte before Python can read any.
pub(crate) fn uninit_bytearray(py: Python<'_>, len: usize) -> PyResult<Bound<'_, PyByteArray>> {
    let len = isize::try_from(len).map_err(|_| PyOverflowError::new_err("too many hits for one frame"))?;
    // SAFETY: a null pointer asks CPython for `len` bytes it does not initialise; the new reference is
    // owned by the returned Bound, and a null result is turned into the Python error CPython set.
    unsafe {
        Bound::from_owned_ptr_or_err(py, ffi::PyByteArray_FromStringAndSize(std::ptr::null(), len))
            .map(|b| b.cast_into_unchecked())
    }
}

/// One task's part of each column.
type Task<'a> = [&'a mut [u8]; 4];

/// The four columns cut into each task's part (`sizes`: each task's hits).
fn split_tasks<'a>(mut rest: Task<'a>, sizes: &[usize]) -> Vec<Task<'a>> {
    sizes
        .iter()
        .map(|&hits| {
            let mut part: Task<'a> = Default::default();
            for (c, width) in COLUMNS.into_iter().enumerate() {
                let (head, tail) = std::mem::take(&mut rest[c]).split_at_mut(hits * width);
                part[c] = head;
                rest[c] = tail;
            }
            part
        })
        .collect()
}

/// Writes one task's hits: per hit its qid's code, its document's code, its rank and its score.
fn write_task(task: Task, answers: &[Answer], codes: &[i32], hit: &Ranked) {
    let [q, d, r, s] = task;
    let mut at = 0;
    for (answer, &code) in answers.iter().zip(codes) {
        for (rank, h) in (1i64..).zip(&answer.hits) {
            q[at * 4..at * 4 + 4].copy_from_slice(&code.to_le_bytes());
            d[at * 4..at * 4 + 4].copy_from_slice(&(hit.code(h.doc) as i32).to_le_bytes());
            r[at * 8..at * 8 + 8].copy_from_slice(&rank.to_le_bytes());
            s[at * 4..at * 4 + 4].copy_from_slice(&h.score.to_le_bytes());
            at += 1;
        }
    }
}

/// The documents hit, a bit each, set from any thread.
struct Hit {
    words: Vec<AtomicU64>,
}

impl Hit {
    fn new(num_docs: u32) -> Hit {
        Hit {
            words: (0..(num_docs as usize).div_ceil(64))
                .map(|_| AtomicU64::new(0))
                .collect(),
        }
    }

    fn mark(&self, answer: &Answer) {
        for h in &answer.hits {
            self.words[h.doc as usize / 64].fetch_or(1u64 << (h.doc % 64), Ordering::Relaxed);
        }
    }

    /// The bits with the number of documents hit before each word.
    fn ranked(self) -> Ranked {
        let words: Vec<u64> = self.words.into_iter().map(AtomicU64::into_inner).collect();
        let mut before = Vec::with_capacity(words.len());
        let mut n = 0u32;
        for w in &words {
            before.push(n);
            n += w.count_ones();
        }
        Ranked { words, before }
    }
}

/// The documents hit, each with its code: how many documents hit come before it.
struct Ranked {
    words: Vec<u64>,
    before: Vec<u32>,
}

impl Ranked {
    fn code(&self, doc: u32) -> u32 {
        let (w, b) = (doc as usize / 64, doc % 64);
        self.before[w] + (self.words[w] & ((1u64 << b) - 1)).count_ones()
    }

    /// The documents hit, in docID order (their codes' order).
    fn docs(&self) -> impl Iterator<Item = u32> + '_ {
        self.words.iter().enumerate().flat_map(|(w, &bits)| {
            let mut bits = bits;
            std::iter::from_fn(move || {
                (bits != 0).then(|| {
                    let b = bits.trailing_zeros();
                    bits &= bits - 1;
                    (w * 64) as u32 + b
                })
            })
        })
    }
}
