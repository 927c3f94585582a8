//! Documents from Python: an index built from any iterable of dicts (streamed into the build, never
//! held whole), the build's progress as a tqdm bar where tqdm is installed (it shows in notebooks), and
//! stored documents read back by id or number.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use pyo3::exceptions::{PyKeyError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyIterator, PyString};
use warpsearch_index::build::{build_from_lines, BuildOptions, BuildProgress, BuildReport};
use warpsearch_index::{Index, IndexError};

use crate::errors::index_error;
use crate::texts::type_name;

/// Documents taken from the iterable per hold of the GIL.
const BATCH: usize = 1024;

/// Builds an index at `output` from `docs`, an iterable of dicts (each one document, its fields read
/// as a JSON line's) or of `str` lines (JSON objects or `id<TAB>text`). The iterable is pulled on the
/// build's reader thread; an exception it raises stops the build (nothing is written) and is raised
/// here as it was.
pub fn build_from_iterable(
    py: Python<'_>,
    docs: &Bound<'_, PyAny>,
    output: &Path,
    opts: BuildOptions,
    progress: bool,
) -> PyResult<BuildReport> {
    let total = docs.len().ok().map(|n| n as u64);
    let iter: Py<PyIterator> = docs
        .try_iter()
        .map_err(|_| {
            PyTypeError::new_err(format!(
                "input must be a path, or an iterable of documents (dicts like {{'id': ..., 'contents': \
                 ...}}), not {}",
                type_name(docs)
            ))
        })?
        .unbind();
    let json = py.import("json")?.getattr("dumps")?.unbind();
    let raised: Mutex<Option<PyErr>> = Mutex::new(None);
    let mut position = 0usize;
    let batches = std::iter::from_fn(|| {
        Python::attach(|py| {
            let mut items = iter.bind(py).clone();
            let mut lines = Vec::new();
            let failed = |e: PyErr| {
                *raised.lock().expect("no panic while held") = Some(e);
                Some(Err(IndexError::Invalid(
                    "the documents' iterable raised an exception".into(),
                )))
            };
            while lines.len() < BATCH {
                let item = match items.next() {
                    None => break,
                    Some(Err(e)) => return failed(e),
                    Some(Ok(item)) => item,
                };
                match line_of(py, &item, json.bind(py), position) {
                    Ok(line) => lines.push(line),
                    Err(e) => return failed(e),
                }
                position += 1;
            }
            (!lines.is_empty()).then_some(Ok(lines))
        })
    });
    let result = with_progress(py, progress, total, "docs", opts, |opts| {
        build_from_lines("documents", batches, output, opts)
    });
    if let Some(e) = raised.into_inner().expect("no panic while held") {
        return Err(e);
    }
    result.map_err(index_error)
}

/// One document as a collection line: a dict as JSON (values JSON lacks, such as numpy numbers, as
/// their `str`), a `str` as it is.
fn line_of(py: Python<'_>, item: &Bound<'_, PyAny>, dumps: &Bound<'_, PyAny>, i: usize) -> PyResult<Vec<u8>> {
    if let Ok(s) = item.cast::<PyString>() {
        return Ok(s.to_cow()?.as_bytes().to_vec());
    }
    let dict = match item.cast::<PyDict>() {
        Ok(d) => d.clone(),
        Err(_) if item.hasattr("keys")? => PyDict::from_sequence(&item.call_method0("items")?)?,
        Err(_) => {
            return Err(PyTypeError::new_err(format!(
                "document {i} of the iterable is {}: each document is a dict such as {{'id': 'd1', \
                 'contents': '...'}} (or {{'docno', 'text'}}, {{'_id', 'title', 'text'}})",
                type_name(item)
            )))
        }
    };
    let kwargs = PyDict::new(py);
    kwargs.set_item("ensure_ascii", false)?;
    kwargs.set_item("default", py.get_type::<PyString>())?;
    let text = dumps.call((dict,), Some(&kwargs))?;
    Ok(text.cast::<PyString>()?.to_cow()?.as_bytes().to_vec())
}

/// Runs `build` on another thread with `opts`, showing its progress: with `progress`, as a tqdm bar
/// where tqdm imports (`total` documents if known, else the input's bytes), else as the terminal bar
/// of `warpsearch index`.
pub fn with_progress<F>(
    py: Python<'_>,
    progress: bool,
    total: Option<u64>,
    unit: &str,
    mut opts: BuildOptions,
    build: F,
) -> warpsearch_index::Result<BuildReport>
where
    F: FnOnce(&BuildOptions) -> warpsearch_index::Result<BuildReport> + Send,
{
    let tqdm = match progress {
        true => py.import("tqdm.auto").and_then(|m| m.getattr("tqdm")).ok(),
        false => None,
    };
    let Some(tqdm) = tqdm else {
        opts.progress = progress;
        return py.detach(|| build(&opts));
    };
    let watch = Arc::new(BuildProgress::default());
    opts.watch = Some(watch.clone());
    opts.progress = false;
    let by_bytes = unit == "B";
    let bar = (|| -> PyResult<Bound<'_, PyAny>> {
        let kwargs = PyDict::new(py);
        kwargs.set_item("total", total)?;
        kwargs.set_item("unit", unit)?;
        kwargs.set_item("unit_scale", true)?;
        kwargs.set_item("desc", "indexing")?;
        tqdm.call((), Some(&kwargs))
    })()
    .ok();
    let mut shown = 0u64;
    std::thread::scope(|scope| {
        let handle = scope.spawn(|| build(&opts));
        while !handle.is_finished() {
            py.detach(|| std::thread::sleep(Duration::from_millis(100)));
            if let Some(bar) = &bar {
                let now = match by_bytes {
                    true => watch.read_bytes.load(std::sync::atomic::Ordering::Relaxed),
                    false => watch.docs.load(std::sync::atomic::Ordering::Relaxed),
                };
                if now > shown {
                    let _ = bar.call_method1("update", (now - shown,));
                    shown = now;
                }
                if watch.writing.load(std::sync::atomic::Ordering::Relaxed) {
                    let _ = bar.call_method1("set_description", ("writing lists",));
                }
            }
        }
        if let Some(bar) = &bar {
            let _ = bar.call_method0("close");
        }
        py.detach(|| handle.join())
            .unwrap_or_else(|_| Err(IndexError::Invalid("the build's thread panicked".into())))
    })
}

/// The stored documents of an index, read by id or number.
pub struct Stored;

impl Stored {
    pub fn new() -> Stored {
        Stored
    }

    /// The number of the document `id` names: an `int` is a number, a `str` an id.
    fn number(&self, py: Python<'_>, index: &Index, id: &Bound<'_, PyAny>) -> PyResult<u32> {
        if let Ok(s) = id.cast::<PyString>() {
            let s = s.to_cow()?;
            let s: &str = &s;
            return py
                .detach(|| index.find_doc(s))
                .ok_or_else(|| PyKeyError::new_err(format!("no document has the id '{s}'")));
        }
        let n: i64 = id.extract().map_err(|_| {
            PyTypeError::new_err(format!(
                "a document is named by its id (str) or its number (int), not {}",
                type_name(id)
            ))
        })?;
        u32::try_from(n)
            .ok()
            .filter(|&d| d < index.num_docs())
            .ok_or_else(|| {
                pyo3::exceptions::PyIndexError::new_err(format!(
                    "document number {n} is out of range: the index numbers its {} documents 0 to {}",
                    index.num_docs(),
                    i64::from(index.num_docs()) - 1
                ))
            })
    }

    /// The stored texts of `ids` (each a str id or an int number), in order.
    pub fn get(
        &self,
        py: Python<'_>,
        index: &Index,
        path: &Path,
        ids: &[Bound<'_, PyAny>],
    ) -> PyResult<Vec<String>> {
        let Some(store) = index.store() else {
            return Err(PyValueError::new_err(format!(
                "{} stores no documents: build it with Index.build(..., store=True) (warpsearch index \
                 --store) to read them back",
                path.display()
            )));
        };
        let numbers = ids
            .iter()
            .map(|id| self.number(py, index, id))
            .collect::<PyResult<Vec<u32>>>()?;
        py.detach(|| store.get_many(&numbers)).map_err(index_error)
    }
}
