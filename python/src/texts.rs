//! Query texts and qids from any Python iterable (a list, a tuple, a generator, a pandas Series), with
//! errors in Python's terms: which item is not a string, and what to give instead.

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::PyString;

/// The texts of `texts`, any iterable of `str`; one `str` alone is refused (it would be read as its
/// characters).
pub fn query_texts(texts: &Bound<'_, PyAny>) -> PyResult<Vec<String>> {
    if texts.is_instance_of::<PyString>() {
        return Err(PyTypeError::new_err(
            "texts is one string: give a list (or any iterable) of query texts, or call search(text) \
             for one query",
        ));
    }
    let iter = texts.try_iter().map_err(|_| {
        PyTypeError::new_err(format!(
            "texts must be an iterable of query strings, not {}",
            type_name(texts)
        ))
    })?;
    let mut out = Vec::with_capacity(texts.len().unwrap_or(0));
    for (i, item) in iter.enumerate() {
        let item = item?;
        match item.cast::<PyString>() {
            Ok(s) => out.push(s.to_cow()?.into_owned()),
            Err(_) => {
                return Err(PyTypeError::new_err(format!(
                    "texts[{i}] is {}, not a str: every query is a text",
                    type_name(&item)
                )))
            }
        }
    }
    Ok(out)
}

/// The qids of `qids`, any iterable of `str` or `int` (ints are written in decimal, as a run file
/// holds them).
pub fn qid_strings<'py>(qids: &Bound<'py, PyAny>) -> PyResult<Vec<Bound<'py, PyString>>> {
    if qids.is_instance_of::<PyString>() {
        return Err(PyTypeError::new_err(
            "qids is one string: give one qid per query, as a list or any iterable",
        ));
    }
    let iter = qids.try_iter().map_err(|_| {
        PyTypeError::new_err(format!(
            "qids must be an iterable of str or int, not {}",
            type_name(qids)
        ))
    })?;
    iter.enumerate()
        .map(|(i, item)| {
            let item = item?;
            if let Ok(s) = item.cast::<PyString>() {
                return Ok(s.clone());
            }
            match item.extract::<i64>() {
                Ok(n) => Ok(PyString::new(item.py(), &n.to_string())),
                Err(_) => Err(PyTypeError::new_err(format!(
                    "qids[{i}] is {}: a qid is a str or an int",
                    type_name(&item)
                ))),
            }
        })
        .collect()
}

/// The name of `obj`'s type, for messages.
pub fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "an object".into())
}
