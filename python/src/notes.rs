//! What a batch of queries says about itself, as Python warnings: queries without a searchable term
//! (they find nothing) and queries with terms the index lacks (those terms are ignored), counted over
//! the whole call with the first examples named, one warning of each kind per call, each kind a
//! `UserWarning` subclass of its own so that a user can silence one and keep the other.

use std::sync::Mutex;

use pyo3::exceptions::PyUserWarning;
use pyo3::prelude::*;
use warpsearch_query::Request;

use crate::errors::warn;

pyo3::create_exception!(
    warpsearch,
    NoSearchableTermsWarning,
    PyUserWarning,
    "Queries without a searchable term (empty, or only stopwords or punctuation): they find nothing."
);
pyo3::create_exception!(
    warpsearch,
    UnknownTermsWarning,
    PyUserWarning,
    "Queries with terms the index does not have, which are ignored: common in ad hoc retrieval, so a \
     class of its own that `warnings.simplefilter(\"ignore\", warpsearch.UnknownTermsWarning)` silences \
     alone."
);

/// How many queries a warning names.
const EXAMPLES: usize = 3;

#[derive(Default)]
struct Counts {
    empty: usize,
    empty_examples: Vec<(usize, String)>,
    unknown: usize,
    unknown_examples: Vec<(usize, String)>,
}

/// The notes of one call, filled from any thread.
#[derive(Default)]
pub struct QueryNotes(Mutex<Counts>);

impl QueryNotes {
    /// Counts `requests`, the queries from position `offset` of the call's `texts`.
    pub fn add(&self, offset: usize, requests: &[Request]) {
        let mut c = self.0.lock().expect("no panic while held");
        for (i, r) in requests.iter().enumerate() {
            let q = &r.query;
            if q.terms.is_empty() && q.unknown.is_empty() {
                c.empty += 1;
                if c.empty_examples.len() < EXAMPLES {
                    c.empty_examples.push((offset + i, String::new()));
                }
            } else if !q.unknown.is_empty() {
                c.unknown += 1;
                if c.unknown_examples.len() < EXAMPLES {
                    c.unknown_examples.push((offset + i, q.unknown.join(" ")));
                }
            }
        }
    }

    /// The warnings, naming queries by their position in `texts` (from 0) and their text.
    pub fn warn(self, py: Python<'_>, texts: &[String]) -> PyResult<()> {
        let c = self.0.into_inner().expect("no panic while held");
        // A long query is named by its start.
        let short = |t: &str| -> String {
            match t.char_indices().nth(60) {
                Some((at, _)) => format!("{}…", &t[..at]),
                None => t.to_owned(),
            }
        };
        let show = |examples: &[(usize, String)], terms: bool| -> String {
            examples
                .iter()
                .map(|(i, unknown)| match terms {
                    true => format!("texts[{i}] '{}' ({unknown})", short(&texts[*i])),
                    false => format!("texts[{i}] '{}'", short(&texts[*i])),
                })
                .collect::<Vec<_>>()
                .join(", ")
        };
        if c.empty > 0 {
            warn::<NoSearchableTermsWarning>(
                py,
                &format!(
                    "{} queries have no searchable terms (empty, or only stopwords or punctuation) and \
                     find nothing, e.g. {}",
                    c.empty,
                    show(&c.empty_examples, false)
                ),
            )?;
        }
        if c.unknown > 0 {
            warn::<UnknownTermsWarning>(
                py,
                &format!(
                    "{} queries contain terms the index does not have (they are ignored), e.g. {}",
                    c.unknown,
                    show(&c.unknown_examples, true)
                ),
            )?;
        }
        Ok(())
    }
}
