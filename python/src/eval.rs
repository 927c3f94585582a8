//! `warpsearch.evaluate`: a run scored against qrels with trec_eval's measures, as `warpsearch
//! evaluate` scores them (the same library code).

use std::collections::HashMap;
use std::path::PathBuf;

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use warpsearch_index::eval::{self, Measure, Qrels, Run};
use warpsearch_index::IndexError;

use crate::errors::{index_error, value_error, warn};

/// Scores `run` against `qrels` with `measures` (trec_eval's names, as `warpsearch evaluate -m`:
/// "map", "ndcg_cut.10", "P.10", "recall.1000", "recip_rank", or ir_measures' "nDCG@10", "RR@10", …;
/// default ndcg_cut.10, map, P.10, recall.1000). `qrels`: a TREC or BEIR qrels file, or a dict
/// {qid: {docno: relevance}}; `run`: a TREC run file, or a dict {qid: {docno: score}}. Returns a dict
/// {measure name: mean}; with `per_query=True`, also {qid: {measure name: value}}. The mean runs over
/// the queries in both (`all_queries=True`: every judged query, as trec_eval -c). A run too shallow
/// for a measure is named in a UserWarning.
#[pyfunction]
#[pyo3(signature = (qrels, run, measures=None, *, per_query=false, all_queries=false))]
pub fn evaluate<'py>(
    py: Python<'py>,
    qrels: &Bound<'py, PyAny>,
    run: &Bound<'py, PyAny>,
    measures: Option<Vec<String>>,
    per_query: bool,
    all_queries: bool,
) -> PyResult<Bound<'py, PyAny>> {
    let measures = Measure::parse_all(&measures.unwrap_or_default()).map_err(value_error)?;
    let qrels: Qrels = match qrels.extract::<HashMap<String, HashMap<String, i32>>>() {
        Ok(map) => map.into_iter().collect(),
        Err(_) => {
            let path = as_path(qrels, "qrels", "{qid: {docno: relevance}}")?;
            eval::read_qrels(open(&path)?, &path.display().to_string()).map_err(index_error)?
        }
    };
    let run: Run = match run.extract::<HashMap<String, HashMap<String, f64>>>() {
        Ok(map) => map
            .into_iter()
            .map(|(q, d)| (q, d.into_iter().collect()))
            .collect(),
        Err(_) => {
            let path = as_path(run, "run", "{qid: {docno: score}}")?;
            eval::read_run(open(&path)?, &path.display().to_string()).map_err(index_error)?
        }
    };
    for w in eval::depth_warnings(&run, &measures) {
        warn::<pyo3::exceptions::PyUserWarning>(py, &w)?;
    }
    let result = eval::evaluate(&qrels, &run, &measures, all_queries);
    let means = PyDict::new(py);
    for (m, v) in measures.iter().zip(&result.mean) {
        means.set_item(m.name(), v)?;
    }
    if !per_query {
        return Ok(means.into_any());
    }
    let each = PyDict::new(py);
    for (q, values) in &result.per_query {
        let d = PyDict::new(py);
        for (m, v) in measures.iter().zip(values) {
            d.set_item(m.name(), v)?;
        }
        each.set_item(q, d)?;
    }
    Ok((means, each).into_pyobject(py)?.into_any())
}

fn as_path(obj: &Bound<'_, PyAny>, what: &str, shape: &str) -> PyResult<PathBuf> {
    obj.extract::<PathBuf>().map_err(|_| {
        PyTypeError::new_err(format!(
            "{what} must be a file path or a dict {shape}, not {}",
            crate::texts::type_name(obj)
        ))
    })
}

fn open(path: &std::path::Path) -> PyResult<std::fs::File> {
    std::fs::File::open(path).map_err(|cause| {
        index_error(IndexError::Io {
            path: path.to_owned(),
            cause,
        })
    })
}
