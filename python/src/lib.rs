//! warpsearch for Python: the `warpsearch` extension module. It owns the Python-facing names only; every
//! step is a library call, the ones the `warpsearch` binary makes:
//!
//! - [`index`]: `Index.build` (`warpsearch index`: `build_from_jsonl` or `ciff::import`) and `Index.open`.
//! - [`searcher`]: `Index.searcher` (an [`warpsearch_engine::Engine`] as `search` makes one) and its
//!   `search` / `search_batch`, which release the GIL while the engine runs.
//! - [`frame`]: answers as a pandas DataFrame (`search_batch(..., as_frame=True)`).
//! - [`hits`]: answers as lists of `(docid, score)` tuples (`search` and `search_batch`), made as cheaply
//!   as CPython allows: at large k this, on the thread holding the GIL, is what limits `search_batch`.
//! - [`errors`]: the library's typed errors as Python exceptions, with the library's messages.
//! - `read_queries`: a query file as `warpsearch search --queries` reads it.
//!
//! Results are the binary's, bit for bit: the same analysis, the same engine, the same `f32` scores
//! (a Python float holds an `f32` exactly).

#![warn(missing_docs)]

use std::path::PathBuf;

use pyo3::exceptions::PyUserWarning;
use pyo3::prelude::*;
use warpsearch_index::IndexError;

mod arrays;
mod cache;
mod docs;
mod errors;
mod eval;
mod frame;
mod hits;
mod index;
mod notes;
mod pool;
mod searcher;
mod texts;

/// warpsearch: exact top-k BM25 search over a compressed inverted index, on CPUs and GPUs.
#[pymodule]
fn _warpsearch(m: &Bound<'_, PyModule>) -> PyResult<()> {
    // A damaged term dictionary can make the `fst` crate panic; the index crate contains that panic and
    // reports the file as damaged (a ValueError), so its message would only be noise on stderr.
    warpsearch_index::termdict::quiet_fst_panics();
    m.add_class::<index::PyIndex>()?;
    m.add_class::<searcher::PySearcher>()?;
    m.add_function(wrap_pyfunction!(read_queries, m)?)?;
    m.add_function(wrap_pyfunction!(eval::evaluate, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("MAX_K", warpsearch_query::MAX_K)?;
    let py = m.py();
    m.add(
        "NoSearchableTermsWarning",
        py.get_type::<notes::NoSearchableTermsWarning>(),
    )?;
    m.add("UnknownTermsWarning", py.get_type::<notes::UnknownTermsWarning>())?;
    Ok(())
}

/// The queries of the file at `path` as `warpsearch search --queries` reads them: `qid<TAB>text` lines,
/// or one query per line (qid = line number), as a list of `(qid, text)`. Lines that are not UTF-8
/// are decoded with U+FFFD and named in a `UserWarning`.
#[pyfunction]
fn read_queries(py: Python<'_>, path: PathBuf) -> PyResult<Vec<(String, String)>> {
    let file = std::fs::File::open(&path).map_err(|cause| {
        errors::index_error(IndexError::Io {
            path: path.clone(),
            cause,
        })
    })?;
    let mut warnings = Vec::new();
    let lines = warpsearch_index::queries::read_queries(file, &path.display().to_string(), &mut warnings)
        .map_err(errors::index_error)?;
    for w in warnings {
        errors::warn::<PyUserWarning>(py, &w)?;
    }
    Ok(lines.into_iter().map(|l| (l.qid, l.text)).collect())
}
