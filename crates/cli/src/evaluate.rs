//! `warpsearch evaluate`: a TREC run scored against TREC qrels with trec_eval's measures
//! (`warpsearch_index::eval`), printed as trec_eval prints them.

use std::fs::File;

use anyhow::{Context, Result};
use warpsearch_index::eval::{self, Measure};

use crate::args::EvaluateArgs;

pub fn run(a: EvaluateArgs) -> Result<()> {
    let measures = Measure::parse_all(&a.measures).map_err(anyhow::Error::msg)?;
    let open = |p: &std::path::Path, what: &str| {
        File::open(p).with_context(|| format!("reading {what} {}", p.display()))
    };
    let qrels = eval::read_qrels(open(&a.qrels, "qrels")?, &a.qrels.display().to_string())?;
    let run = eval::read_run(open(&a.run, "run")?, &a.run.display().to_string())?;
    let result = eval::evaluate(&qrels, &run, &measures, a.all_queries);
    let unjudged = run.keys().filter(|q| !qrels.contains_key(*q)).count();
    if unjudged > 0 {
        eprintln!("note: {unjudged} queries of the run have no judgments and are not counted");
    }
    let missing: Vec<&String> = qrels.keys().filter(|q| !run.contains_key(*q)).collect();
    if !missing.is_empty() {
        let shown: Vec<&str> = missing.iter().take(5).map(|q| q.as_str()).collect();
        let effect = if a.all_queries {
            "they count as 0 (--all-queries)"
        } else {
            "they are left out of the averages; --all-queries counts them as 0, as trec_eval -c does"
        };
        eprintln!(
            "warning: {} judged queries have no results in the run (e.g. {}): {effect}",
            missing.len(),
            shown.join(", ")
        );
    }
    for w in eval::depth_warnings(&run, &measures) {
        eprintln!("warning: {w}");
    }
    let print = |q: &str, values: &[f64]| {
        for (m, v) in measures.iter().zip(values) {
            println!("{}\t{q}\t{v:.4}", m.name());
        }
    };
    if a.per_query {
        for (q, values) in &result.per_query {
            print(q, values);
        }
    }
    println!("num_q\tall\t{}", result.per_query.len());
    print("all", &result.mean);
    Ok(())
}
