//! Answers as two numpy arrays, the shape bm25s returns: one row per query and k columns, the documents'
//! numbers (int64, best first, -1 past a query's last hit) and their scores (float32, the engine's
//! scores exactly, NaN past the last hit). Nothing is made per hit or per query: both arrays are written
//! into buffers numpy shares, on the searcher's threads without the GIL, so the thread that holds the GIL
//! does the same work for any k. A document's number is its place in the index (0 to num_docs - 1);
//! `Index.doc_ids` turns numbers into the documents' ids.

use pyo3::exceptions::PyImportError;
use pyo3::prelude::*;
use pyo3::types::PyTuple;
use rayon::prelude::*;
use warpsearch_query::Answer;

use crate::frame::uninit_bytearray;
use crate::pool::on_pool;

/// Queries written by one task.
const ROWS_PER_TASK: usize = 1024;

/// `(docs, scores)` of `answers`, each `len(answers) × k`, written on `pool` (or rayon's global pool).
pub fn arrays<'py>(
    py: Python<'py>,
    answers: &[Answer],
    k: usize,
    pool: Option<&rayon::ThreadPool>,
) -> PyResult<Bound<'py, PyTuple>> {
    let numpy = py.import("numpy").map_err(|e| {
        PyImportError::new_err(format!("as_arrays=True needs numpy (pip install numpy): {e}"))
    })?;
    let n = answers.len();
    let (docs, scores) = (uninit_bytearray(py, n * k * 8)?, uninit_bytearray(py, n * k * 4)?);
    {
        // SAFETY: both bytearrays were just made here and no other code holds them, so nothing reads,
        // resizes or frees them while these slices are written (also without the GIL). Every byte is
        // written below (each row's k cells, hit or padding) before Python can read any.
        let (d, s) = unsafe { (docs.as_bytes_mut(), scores.as_bytes_mut()) };
        py.detach(|| {
            on_pool(pool, || {
                d.par_chunks_mut(ROWS_PER_TASK * k * 8)
                    .zip(s.par_chunks_mut(ROWS_PER_TASK * k * 4))
                    .zip(answers.par_chunks(ROWS_PER_TASK))
                    .for_each(|((d, s), answers)| write_rows(d, s, answers, k))
            })
        });
    }
    let array = |bytes, dtype: &str| {
        // The array shares the bytearray (writable, as numpy's own).
        numpy
            .call_method1("frombuffer", (bytes, dtype))?
            .call_method1("reshape", (n, k))
    };
    PyTuple::new(py, [array(docs, "<i8")?, array(scores, "<f4")?])
}

/// Writes the rows of `answers` (k cells each) into their part of the two arrays.
fn write_rows(docs: &mut [u8], scores: &mut [u8], answers: &[Answer], k: usize) {
    for ((d, s), answer) in docs.chunks_mut(k * 8).zip(scores.chunks_mut(k * 4)).zip(answers) {
        let hits = answer.hits.iter().map(|h| (i64::from(h.doc), h.score));
        let cells = hits.chain(std::iter::repeat((-1, f32::NAN))).take(k);
        for ((d, s), (doc, score)) in d.chunks_exact_mut(8).zip(s.chunks_exact_mut(4)).zip(cells) {
            d.copy_from_slice(&doc.to_le_bytes());
            s.copy_from_slice(&score.to_le_bytes());
        }
    }
}
