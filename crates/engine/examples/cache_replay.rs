//! An offline replay of the list cache's admission, without a GPU: the share of the blocks a query
//! stream visits that VFB's plan of a training log holds, against the dynamic policy's plans made as
//! it follows the stream (two passes, as `bench` with its warm-up pass). It leaves out what the GPU
//! adds (when a plan lands, how lists are placed), so it compares plans' contents, not throughput.
//!
//! ```text
//! cargo run --release -p warpsearch-engine --example cache_replay -- INDEX and|or SHARE \
//!     [drift] [decay=D] [headroom=H] [shape=vfb|index] [min_gain=G]
//! ```
//! Training log: the first 25,000 TREC 2005 efficiency queries, stream: the next 20,000 (`drift`: the
//! queries starting before "m", then those from "m" on). The cache is 3/4 of SHARE of the index (the
//! device scripts' split). The dynamic policy's options default to the engine's. Visits run to the
//! end of the lists (AND: of the shortest), as on an index without early termination; on a
//! global-score-ordered index the engine counts shorter visits.

use warpsearch_engine::cache::dynamic_shape;
use warpsearch_engine::cache::policy::{plan, plan_in_bytes, worth_changing, Policy};
use warpsearch_engine::cache::usage::Usage;
use warpsearch_engine::CacheOptions;
use warpsearch_gpu::cache::META_BYTES;
use warpsearch_gpu::{CachePlan, Capacity};
use warpsearch_index::Index;
use warpsearch_query::{Mode, Query};

const QUERIES: &str = "../shared/data/queries/trec05-efficiency.txt";
const GROUP: u32 = 2;

/// Blocks of `q`'s lists visited, and of those, cached by `plan` (as [`Usage::add`] counts visits).
fn blocks(ix: &Index, plan: &CachePlan, q: &Query, mode: Mode) -> (u64, u64) {
    let mut one = Usage::default();
    one.add(ix, q, mode, None, 1.0);
    one.ends
        .iter()
        .map(|(&t, ends)| {
            let visited = *ends.keys().next().expect("one query") as u64;
            (visited.min(plan.blocks[t as usize] as u64), visited)
        })
        .fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1))
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [index, mode, share, rest @ ..] = args.as_slice() else {
        eprintln!("usage: cache_replay INDEX and|or SHARE [drift] [decay=D] [headroom=H] [shape=vfb|index] [min_gain=G]");
        std::process::exit(2);
    };
    let opt = |name: &str, default: f64| {
        rest.iter()
            .find_map(|a| a.strip_prefix(&format!("{name}=")))
            .map_or(default, |v| v.parse().expect("a number"))
    };
    let drift = rest.iter().any(|a| a == "drift");
    let by_index = rest.iter().any(|a| a == "shape=index");
    let d = CacheOptions::default();
    let (decay, headroom, min_gain) = (
        opt("decay", d.decay),
        opt("headroom", d.headroom),
        opt("min_gain", d.min_gain),
    );
    let ix = Index::open(index).expect("an index");
    let mode = match mode.as_str() {
        "or" => Mode::Or,
        "and" => Mode::And,
        m => panic!("mode {m}: and or or"),
    };
    let text = std::fs::read_to_string(QUERIES).expect("the shared query log");
    let lines: Vec<&str> = text.lines().collect();
    let before_m = |l: &&str| l.split_whitespace().next().is_none_or(|w| w < "m");
    let (train, stream): (Vec<&str>, Vec<&str>) = if drift {
        let a = lines.iter().copied().filter(before_m).take(25000).collect();
        let b = lines
            .iter()
            .copied()
            .filter(|l| !before_m(l))
            .take(20000)
            .collect();
        (a, b)
    } else {
        assert!(lines.len() >= 45000, "{QUERIES}: 45,000 queries needed");
        (lines[..25000].to_vec(), lines[25000..45000].to_vec())
    };
    let parse = |r: &[&str]| -> Vec<Query> { r.iter().map(|l| Query::parse(&ix, l)).collect() };
    let (train, stream) = (parse(&train), parse(&stream));

    let total = ix.words().len() as u64 * 4 + ix.block_metas().len() as u64 * META_BYTES;
    let bytes = (total as f64 * share.parse::<f64>().expect("a share") * 0.75) as u64;
    let mut usage = Usage::default();
    for q in &train {
        usage.add(&ix, q, mode, None, 1.0);
    }
    let vfb = plan_in_bytes(&ix, &usage, Policy::Vfb, bytes, 1.0, GROUP);
    let rate = |p: &CachePlan| {
        let (h, n) = stream
            .iter()
            .map(|q| blocks(&ix, p, q, mode))
            .fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1));
        h as f64 / n.max(1) as f64
    };
    println!("cache {} MiB; vfb: hit rate {:.4}", bytes >> 20, rate(&vfb));

    // The dynamic policy as CacheCtl runs it, each plan applied at once.
    let need = vfb.need(&ix);
    let shape = if by_index {
        Capacity::of_bytes(&ix, bytes)
    } else {
        dynamic_shape(&ix, need, bytes)
    };
    let keep = |x: u64| (x as f64 * (1.0 - headroom)) as u64;
    let cap = Capacity {
        words: keep(shape.words),
        blocks: keep(shape.blocks),
    };
    let epoch = d.epoch;
    // As in `CacheCtl::prepare`: the first plan is VFB's (with the index's division of the budget,
    // the dynamic policy's plan of the log in that shape), then the log weighs as one epoch.
    let mut current = match by_index {
        true => plan(&ix, &usage, Policy::Dynamic, shape, 1.0, GROUP),
        false => vfb.clone(),
    };
    let mut live = usage.clone();
    live.scale((epoch as f64 / train.len() as f64).min(1.0));
    for pass in 1..=2 {
        let (mut hit, mut all, mut skipped) = (0, 0, 0);
        for (i, q) in stream.iter().enumerate() {
            let (h, n) = blocks(&ix, &current, q, mode);
            (hit, all) = (hit + h, all + n);
            live.add(&ix, q, mode, None, 1.0);
            if (i + 1) % epoch == 0 {
                let next = plan(&ix, &live, Policy::Dynamic, cap, 1.0, GROUP);
                if worth_changing(&ix, &live, &current, &next, epoch, min_gain) {
                    current = next;
                } else {
                    skipped += 1;
                }
                live.scale(decay);
            }
        }
        println!(
            "dynamic pass {pass}: hit rate {:.4} ({skipped} plans skipped)",
            hit as f64 / all.max(1) as f64
        );
    }
}
