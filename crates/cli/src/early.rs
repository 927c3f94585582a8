//! `search --stats` on an index in global-score order: where early termination stopped the queries
//! (papers/000 section 3.2). The list cache's VFB policy caches the blocks before those stops, so the
//! earlier queries stop, the more it can save over caching whole lists.

use anyhow::Result;
use rayon::prelude::*;
use warpsearch_engine::Engine;
use warpsearch_query::Request;

/// How many of `requests` stop early on `engine`'s index, and at which share of its docIDs; `None`
/// where queries do not stop early (no global-score order for these options). The queries run again on
/// the CPU, after the timed run.
pub fn stop_line(engine: &Engine, requests: &[Request]) -> Result<Option<String>> {
    let cpu = engine.cpu();
    if !cpu.scorer().early_termination() {
        return Ok(None);
    }
    let docs = cpu.scorer().index().num_docs().max(1) as f64;
    let stops = requests
        .par_iter()
        .map(|r| cpu.stop_doc(r))
        .collect::<warpsearch_index::Result<Vec<Option<u32>>>>()?;
    let mut shares: Vec<f64> = stops.iter().flatten().map(|&d| d as f64 / docs * 100.0).collect();
    shares.sort_unstable_by(f64::total_cmp);
    let n = requests.len();
    if shares.is_empty() {
        return Ok(Some(format!(
            "early termination: none of {n} queries stopped before their lists ended"
        )));
    }
    let at = |p: f64| shares[((p / 100.0 * shares.len() as f64).ceil() as usize).clamp(1, shares.len()) - 1];
    let mean = shares.iter().sum::<f64>() / shares.len() as f64;
    Ok(Some(format!(
        "early termination: {} of {n} queries stopped before their lists ended, at {mean:.1}% of the \
         docIDs on average (median {:.1}%, p90 {:.1}%)",
        shares.len(),
        at(50.0),
        at(90.0)
    )))
}
