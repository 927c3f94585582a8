//! Answers as one pandas DataFrame, a TREC run as a table: columns qid, docid, rank (from 1) and score
//! (float32: the engine's scores, exactly). Nothing is made per hit: ranks and scores are numpy arrays,
//! and qid and docid are pandas categoricals (an int32 code per hit into the distinct ids, each made
//! once as a Python string). A categorical compares, groups, merges and writes like a column of
//! strings; `frame.astype({"docid": str})` gives plain objects. Per hit this is a few bytes written
//! on the thread that holds the GIL, where a tuple, a str and a float cost about 170 ns
//! ([`crate::hits`]; bench/RESULTS.md, issue 15).

use std::collections::HashMap;

use pyo3::exceptions::PyImportError;
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyDict, PyList, PyString};
use warpsearch_index::Index;
use warpsearch_query::Answer;

/// The columns of a DataFrame being filled, query by query.
pub struct Frame<'py> {
    pandas: Bound<'py, PyModule>,
    numpy: Bound<'py, PyModule>,
    /// Every query's qid, in order, and the distinct ones (the qid column's categories) with the code
    /// of each (a repeated qid is one category).
    qids: Vec<Bound<'py, PyString>>,
    qid_names: Bound<'py, PyList>,
    qid_code: HashMap<String, i32>,
    /// Per document, 1 + its code in the docid column (0: not seen yet), and the documents seen, in
    /// the order of their codes. Zeroed memory, so the pages of documents never hit are never touched.
    doc_code: Vec<u32>,
    docs: Vec<u32>,
    /// The columns: per hit, the codes (i32), the rank (i64) and the score (f32), little-endian, in
    /// one part per chunk of answers, each allocated at its final size (at k = 1000 the columns are
    /// 20 bytes a hit, hundreds of MB: grown by doubling, their copies and page faults cost more than
    /// everything else here).
    qid_codes: Vec<Vec<u8>>,
    doc_codes: Vec<Vec<u8>>,
    ranks: Vec<Vec<u8>>,
    scores: Vec<Vec<u8>>,
    /// How many queries were pushed.
    pushed: usize,
}

impl<'py> Frame<'py> {
    /// Empty columns for the queries `qids` on `index`; an ImportError that says what to install where
    /// pandas or numpy is missing.
    pub fn new(py: Python<'py>, index: &Index, qids: Vec<Bound<'py, PyString>>) -> PyResult<Frame<'py>> {
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
            doc_code: vec![0; index.num_docs() as usize],
            docs: Vec::new(),
            qid_codes: Vec::new(),
            doc_codes: Vec::new(),
            ranks: Vec::new(),
            scores: Vec::new(),
            pushed: 0,
        })
    }

    /// Appends the hits of `answers`, the next queries'.
    pub fn push(&mut self, answers: &[Answer]) -> PyResult<()> {
        let hits: usize = answers.iter().map(|a| a.hits.len()).sum();
        let mut qid_codes = Vec::with_capacity(hits * 4);
        let mut doc_codes = Vec::with_capacity(hits * 4);
        let mut ranks = Vec::with_capacity(hits * 8);
        let mut scores = Vec::with_capacity(hits * 4);
        for answer in answers {
            let qid = &self.qids[self.pushed];
            self.pushed += 1;
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
            for (rank, hit) in (1i64..).zip(&answer.hits) {
                let slot = &mut self.doc_code[hit.doc as usize];
                if *slot == 0 {
                    self.docs.push(hit.doc);
                    *slot = self.docs.len() as u32;
                }
                qid_codes.extend_from_slice(&code.to_le_bytes());
                doc_codes.extend_from_slice(&(*slot as i32 - 1).to_le_bytes());
                ranks.extend_from_slice(&rank.to_le_bytes());
                scores.extend_from_slice(&hit.score.to_le_bytes());
            }
        }
        self.qid_codes.push(qid_codes);
        self.doc_codes.push(doc_codes);
        self.ranks.push(ranks);
        self.scores.push(scores);
        Ok(())
    }

    /// The DataFrame.
    pub fn finish(self, index: &Index) -> PyResult<Bound<'py, PyAny>> {
        let py = self.qid_names.py();
        let array = |parts: &[Vec<u8>], dtype: &str| -> PyResult<Bound<'py, PyAny>> {
            // One copy, into a bytearray that the array shares (writable, as numpy's own).
            let len = parts.iter().map(Vec::len).sum();
            let bytes = PyByteArray::new_with(py, len, |out| {
                let mut at = 0;
                for part in parts {
                    out[at..at + part.len()].copy_from_slice(part);
                    at += part.len();
                }
                Ok(())
            })?;
            self.numpy.call_method1("frombuffer", (bytes, dtype))
        };
        let categorical = |codes: &[Vec<u8>], names: &Bound<'py, PyList>| {
            self.pandas
                .getattr("Categorical")?
                .call_method1("from_codes", (array(codes, "<i4")?, names))
        };
        let doc_names = PyList::empty(py);
        for &doc in &self.docs {
            doc_names.append(PyString::new(py, index.doc_id(doc)))?;
        }
        let columns = PyDict::new(py);
        columns.set_item("qid", categorical(&self.qid_codes, &self.qid_names)?)?;
        columns.set_item("docid", categorical(&self.doc_codes, &doc_names)?)?;
        columns.set_item("rank", array(&self.ranks, "<i8")?)?;
        columns.set_item("score", array(&self.scores, "<f4")?)?;
        self.pandas.call_method1("DataFrame", (columns,))
    }
}
