//! How long analysing a query and finding its terms takes, per query, serially: the analyzer and the
//! dictionary's FST directly, against `Query::parse` (through the index's per-thread cache of tokens,
//! `warpsearch_index::lookup`). Three rounds; the first fills the caches.
//!
//!     cargo run --release -p warpsearch-query --example parse_speed -- INDEX QUERIES
//!
//! QUERIES: one query per line (`qid<TAB>text` lines are read as their text).

use std::time::Instant;

use warpsearch_index::Index;
use warpsearch_query::Query;

fn main() {
    let mut args = std::env::args().skip(1);
    let (Some(index), Some(queries)) = (args.next(), args.next()) else {
        eprintln!("usage: parse_speed INDEX QUERIES");
        std::process::exit(2);
    };
    let index = Index::open(&index).unwrap_or_else(|e| panic!("{index}: {e}"));
    let text = std::fs::read_to_string(&queries).unwrap_or_else(|e| panic!("{queries}: {e}"));
    let queries: Vec<&str> = text
        .lines()
        .map(|l| l.split_once('\t').map_or(l, |(_, t)| t))
        .collect();
    let per_query = |t: Instant| t.elapsed().as_nanos() as f64 / queries.len().max(1) as f64;
    for round in 1..=3 {
        let t = Instant::now();
        let mut direct = 0;
        for q in &queries {
            index
                .meta()
                .analyzer
                .for_each_term(q, |term| direct += index.term_id(term).is_some() as usize);
        }
        let direct_ns = per_query(t);
        let t = Instant::now();
        let parsed: usize = queries.iter().map(|q| Query::parse(&index, q).terms.len()).sum();
        println!(
            "round {round}: analyzer and FST {direct_ns:.0} ns a query ({direct} known terms), \
             Query::parse {:.0} ns ({parsed} distinct known terms)",
            per_query(t)
        );
    }
}
