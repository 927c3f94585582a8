//! The engine as the commands open and call it: its choice and notes printed for people.

use std::sync::Arc;

use anyhow::Result;
use warpsearch_engine::{Engine, EngineConfig, EngineError};
use warpsearch_index::Index;
use warpsearch_query::{Mode, Request};

/// The engine `config` describes on `index`, checked for requests of `mode` and up to `max_k` results
/// before any query runs, its backend choice printed, with a note when k1/b make it slow.
pub fn open_engine(config: &EngineConfig, index: Arc<Index>, mode: Mode, max_k: usize) -> Result<Engine> {
    open_engine_with(config, index, mode, max_k, true)
}

/// [`open_engine`], printing the backend choice only with `show_choice`: a command whose output is the
/// answers (`search`) stays quiet unless asked for its statistics.
pub fn open_engine_with(
    config: &EngineConfig,
    index: Arc<Index>,
    mode: Mode,
    max_k: usize,
    show_choice: bool,
) -> Result<Engine> {
    let engine = config.open(index.clone(), mode, max_k).map_err(|e| match e {
        EngineError::Index(e) => anyhow::Error::new(e).context("invalid search options"),
        e => e.into(),
    })?;
    if let Some(choice) = engine.choice().filter(|_| show_choice) {
        eprintln!("{choice}");
    }
    if let Some(note) = config.bm25_note(&index) {
        eprintln!("note: {note}");
    }
    Ok(engine)
}

/// Answers `requests` on `engine` and prints what the engine says happened (fallbacks to the CPU).
pub fn answer_batch(
    engine: &Engine,
    requests: &[Request],
) -> Vec<warpsearch_index::Result<warpsearch_query::Answer>> {
    let answers = engine.search_batch(requests);
    for note in engine.take_notes() {
        eprintln!("warpsearch: {note}");
    }
    answers
}
