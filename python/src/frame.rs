//! Answers as one pandas DataFrame, a TREC run as a table: columns qid, docid, rank (from 1) and score
//! (float32: the engine's scores, exactly). Scores and ranks go through numpy arrays, not one Python
//! object each.

use pyo3::exceptions::PyImportError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyString};
use warpsearch_index::Index;
use warpsearch_query::Answer;

/// The columns of a DataFrame being filled, query by query.
pub struct Frame<'py> {
    pandas: Bound<'py, PyModule>,
    numpy: Bound<'py, PyModule>,
    qid: Bound<'py, PyList>,
    docid: Bound<'py, PyList>,
    /// Little-endian u32 and f32.
    ranks: Vec<u8>,
    scores: Vec<u8>,
}

impl<'py> Frame<'py> {
    /// Empty columns; an ImportError that says what to install where pandas or numpy is missing.
    pub fn new(py: Python<'py>) -> PyResult<Frame<'py>> {
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
            qid: PyList::empty(py),
            docid: PyList::empty(py),
            ranks: Vec::new(),
            scores: Vec::new(),
        })
    }

    /// Appends the hits of `answer`, the query `qid`'s.
    pub fn push(&mut self, index: &Index, qid: &Bound<'py, PyString>, answer: &Answer) -> PyResult<()> {
        for (i, h) in answer.hits.iter().enumerate() {
            self.qid.append(qid)?;
            self.docid
                .append(PyString::new(self.qid.py(), index.doc_id(h.doc)))?;
            self.ranks.extend_from_slice(&(i as u32 + 1).to_le_bytes());
            self.scores.extend_from_slice(&h.score.to_le_bytes());
        }
        Ok(())
    }

    /// The DataFrame.
    pub fn finish(self) -> PyResult<Bound<'py, PyAny>> {
        let py = self.qid.py();
        let array = |bytes: &[u8], dtype: &str| -> PyResult<Bound<'py, PyAny>> {
            // frombuffer shares the bytes object's memory, read-only: copy into an array of its own.
            self.numpy
                .call_method1("frombuffer", (PyBytes::new(py, bytes), dtype))?
                .call_method0("copy")
        };
        let columns = PyDict::new(py);
        columns.set_item("qid", &self.qid)?;
        columns.set_item("docid", &self.docid)?;
        columns.set_item(
            "rank",
            array(&self.ranks, "<u4")?.call_method1("astype", ("int64",))?,
        )?;
        columns.set_item("score", array(&self.scores, "<f4")?)?;
        self.pandas.call_method1("DataFrame", (columns,))
    }
}
