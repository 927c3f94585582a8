//! An offline count, without a GPU, of what AND queries carry to the GPU under a list cache: the
//! uncached blocks of every list (what batches carry today), against only the uncached blocks of the
//! longer lists that hold a document of the query's shortest list (the blocks an intersection can
//! use: a document of the shortest list that falls in no such block is in no block of that list).
//!
//! ```text
//! cargo run --release -p warpsearch-engine --example and_staging -- INDEX SHARE
//! ```
//! The cache is VFB's plan of the first 25,000 TREC 2005 efficiency queries in 3/4 of SHARE of the
//! index (the device scripts' split); the stream is the next 20,000, AND. Each query is counted alone:
//! a batch stages a list once for all of its queries that use it, today and with the selection alike.

use std::collections::BTreeSet;

use warpsearch_engine::cache::policy::{plan_in_bytes, Policy};
use warpsearch_engine::cache::usage::Usage;
use warpsearch_gpu::cache::{prefix_need, META_BYTES};
use warpsearch_index::Index;
use warpsearch_query::{Mode, Query};

const QUERIES: &str = "../shared/data/queries/trec05-efficiency.txt";
const GROUP: u32 = 2;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [index, share] = args.as_slice() else {
        eprintln!("usage: and_staging INDEX SHARE");
        std::process::exit(2);
    };
    let ix = Index::open(index).expect("an index");
    let text = std::fs::read_to_string(QUERIES).expect("the shared query log");
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines.len() >= 45000, "{QUERIES}: 45,000 queries needed");
    let parse = |r: &[&str]| -> Vec<Query> { r.iter().map(|l| Query::parse(&ix, l)).collect() };
    let (train, stream) = (parse(&lines[..25000]), parse(&lines[25000..45000]));
    let total = ix.words().len() as u64 * 4 + ix.block_metas().len() as u64 * META_BYTES;
    let bytes = (total as f64 * share.parse::<f64>().expect("a share") * 0.75) as u64;
    let mut usage = Usage::default();
    for q in &train {
        usage.add(&ix, q, Mode::And, None, 1.0);
    }
    let plan = plan_in_bytes(&ix, &usage, Policy::Vfb, bytes, 1.0, GROUP);

    let records = ix.term_records();
    let metas = ix.block_metas();
    // The bytes of blocks [a, b) of term t's list.
    let span = |t: u32, a: u32, b: u32| prefix_need(&ix, t, b).bytes() - prefix_need(&ix, t, a).bytes();
    let (mut today, mut selected, mut queries, mut driver_bytes) = (0u64, 0u64, 0u64, 0u64);
    for q in &stream {
        let mut terms = q.term_ids();
        terms.sort_unstable();
        terms.dedup();
        if terms.len() < 2 {
            continue;
        }
        queries += 1;
        terms.sort_by_key(|&t| records[t as usize].df);
        let a = terms[0];
        let (docs, _) = ix.postings(a).decode_all().expect("a list");
        for (i, &t) in terms.iter().enumerate() {
            let r = &records[t as usize];
            let n = r.num_blocks() as u32;
            let cached = plan.blocks[t as usize].min(n);
            if cached == n {
                continue;
            }
            let all = span(t, cached, n);
            today += all;
            if i == 0 {
                selected += all;
                driver_bytes += all;
                continue;
            }
            let m = &metas[r.first_block as usize..][..r.num_blocks()];
            let mut need = BTreeSet::new();
            for &d in &docs {
                let b = m.partition_point(|x| x.last_doc < d) as u32;
                if b >= cached && b < n && m[b as usize].first_doc <= d {
                    need.insert(b);
                }
            }
            selected += need.iter().map(|&b| span(t, b, b + 1)).sum::<u64>();
        }
    }
    let kib = |x: u64| x as f64 / queries.max(1) as f64 / 1024.0;
    println!(
        "cache {} MiB; {queries} AND queries of 2+ terms: {:.1} KiB a query carried today, {:.1} KiB with the \
         longer lists' blocks selected by the shortest list's documents ({:.3} of today; the shortest lists' \
         own {:.1} KiB included in both)",
        bytes >> 20,
        kib(today),
        kib(selected),
        selected as f64 / today.max(1) as f64,
        kib(driver_bytes)
    );
}
