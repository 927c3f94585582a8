//! The library's typed errors as Python exceptions. The message is always the library's own sentence
//! (it names the file, line, field or query at fault); the class says what kind of mistake it is:
//!
//! - `FileNotFoundError` / `FileExistsError` / `OSError`: the operating system refused a file, or a path
//!   to open holds nothing;
//! - `ValueError`: bad input (a malformed collection line, an unknown option name, k out of range, an
//!   option the index cannot serve) or a damaged index file;
//! - `RuntimeError`: `backend="gpu"` where no GPU can serve the options.

use std::ffi::CString;
use std::io::ErrorKind;
use std::path::Path;

use pyo3::exceptions::{PyFileExistsError, PyFileNotFoundError, PyOSError, PyRuntimeError, PyValueError};
use pyo3::{PyErr, PyResult, PyTypeInfo, Python};
use warpsearch_engine::EngineError;
use warpsearch_index::IndexError;

/// The command's option names in `message` as `Index.build`'s keywords spell them.
pub fn python_terms(message: &str) -> String {
    const NAMES: [(&str, &str); 9] = [
        ("pass --force", "pass force=True"),
        ("--output", "output"),
        ("--force", "force=True"),
        ("--skip-bad", "skip_bad=True"),
        ("--max-line-mb", "the line limit"),
        ("--id-field", "id_field"),
        ("--fields", "fields"),
        ("--title", "title=True"),
        ("--static-scores", "static_scores"),
    ];
    NAMES
        .iter()
        .fold(message.to_owned(), |m, (flag, keyword)| m.replace(flag, keyword))
}

/// `e` as the Python exception of its kind, its option names in Python's terms.
pub fn index_error(e: IndexError) -> PyErr {
    let message = python_terms(&e.to_string());
    match e {
        IndexError::Io { cause, .. } => match cause.kind() {
            ErrorKind::NotFound => PyFileNotFoundError::new_err(message),
            ErrorKind::AlreadyExists => PyFileExistsError::new_err(message),
            _ => PyOSError::new_err(message),
        },
        IndexError::Corrupt { .. }
        | IndexError::Input { .. }
        | IndexError::Invalid(_)
        | IndexError::Codec { .. } => PyValueError::new_err(message),
    }
}

/// `e`, from opening the index at `path`: a path that holds nothing is a `FileNotFoundError` (with the
/// library's message, which says what an index directory must hold).
pub fn open_error(e: IndexError, path: &Path) -> PyErr {
    if !path.exists() {
        return PyFileNotFoundError::new_err(e.to_string());
    }
    index_error(e)
}

/// An engine that could not be made.
pub fn engine_error(e: EngineError) -> PyErr {
    match e {
        EngineError::Index(e) => index_error(e),
        EngineError::Config(message) => value_error(message),
        e @ (EngineError::GpuRequired(_) | EngineError::Threads(_)) => PyRuntimeError::new_err(e.to_string()),
    }
}

/// A `ValueError` with `message` (an option name the library refused).
pub fn value_error(message: impl Into<String>) -> PyErr {
    PyValueError::new_err(message.into())
}

/// Issues a Python warning of class `W`.
pub fn warn<W: PyTypeInfo>(py: Python<'_>, message: &str) -> PyResult<()> {
    let message = CString::new(message.replace('\0', " ")).expect("NUL bytes were replaced");
    PyErr::warn(py, &py.get_type::<W>(), &message, 1)
}
