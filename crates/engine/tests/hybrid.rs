//! The hybrid scheduler against the exhaustive oracle, without a GPU (its CPU workers alone): every
//! query answered exactly once, with the oracle's documents and score bits, whole or split by docID
//! range among the workers, in a closed loop and one query at a time (when every worker is idle, so
//! that every query is split). With a GPU the same checks run in `tests/gpu_engine.rs`.

mod common;

use std::sync::Arc;
use std::time::Duration;

use warpsearch_codec::Codec;
use warpsearch_cpu::CpuSearcher;
use warpsearch_engine::{Backend, BackendChoice, Engine, EngineOptions, HybridOptions, Scheduler};
use warpsearch_query::{Mode, Ranking, Scorer, SearchOptions};

use common::{check_hybrid, oracle, random_index, random_queries, requests, same};

fn options(split: bool) -> HybridOptions {
    HybridOptions {
        cpu_workers: 4,
        split_above: split.then_some(Duration::ZERO),
        split_parts: 4,
        ..HybridOptions::default()
    }
}

/// A server's worker count for when a GPU takes part leaves a GPU-less hybrid every core.
#[test]
fn workers_for_a_gpu_do_not_apply_without_one() {
    let tmp = tempfile::tempdir().unwrap();
    let (index, _) = random_index(tmp.path(), 0xC0FE, Codec::SimdBp, None);
    let cpu = CpuSearcher::new(Arc::new(
        Scorer::new(index.clone(), SearchOptions::new(&index)).unwrap(),
    ));
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let gpu_only = HybridOptions {
        gpu_cpu_workers: Some(1),
        ..HybridOptions::default()
    };
    assert_eq!(
        Scheduler::hybrid(cpu.clone(), None, gpu_only)
            .hybrid_options()
            .unwrap()
            .cpu_workers,
        cores
    );
    let both = HybridOptions {
        cpu_workers: 3,
        gpu_cpu_workers: Some(1),
        ..HybridOptions::default()
    };
    assert_eq!(
        Scheduler::hybrid(cpu, None, both)
            .hybrid_options()
            .unwrap()
            .cpu_workers,
        3
    );
}

#[test]
fn hybrid_on_the_cpu_equals_the_oracle_whole_and_split() {
    for seed in 0..6u64 {
        let tmp = tempfile::tempdir().unwrap();
        let codec = Codec::ALL[seed as usize % Codec::ALL.len()];
        let (index, v) = random_index(tmp.path(), 0xB0B + seed * 31, codec, None);
        let queries = random_queries(&index, v, seed);
        for ranking in [Ranking::Bm25, Ranking::Bm25Static { alpha: 0.3 }] {
            let search = SearchOptions {
                ranking,
                ..SearchOptions::new(&index)
            };
            let oracle = oracle(&index, search);
            let cpu = CpuSearcher::new(Arc::new(Scorer::new(index.clone(), search).unwrap()));
            for split in [false, true] {
                let hybrid = Scheduler::hybrid(cpu.clone(), None, options(split));
                for mode in [Mode::And, Mode::Or, Mode::AndOr] {
                    for k in [1, 10, 1000] {
                        let reqs = requests(&queries, mode, k);
                        let want: Vec<_> = reqs.iter().map(|r| oracle.search(r).unwrap()).collect();
                        let what = format!("seed {seed} {ranking:?} split {split} {mode:?} k {k}");
                        check_hybrid(&hybrid, &reqs, &want, &what);
                    }
                }
                let stats = hybrid.take_stats().unwrap();
                assert_eq!(stats.gpu_queries + stats.both_queries, 0);
                if split {
                    assert!(stats.splits > 0, "seed {seed}: nothing was split");
                }
            }
        }
    }
}

#[test]
fn hybrid_without_a_gpu_says_so_and_runs_on_the_cpu() {
    let tmp = tempfile::tempdir().unwrap();
    let (index, v) = random_index(tmp.path(), 5, Codec::PForDelta, None);
    let scorer = Arc::new(Scorer::new(index.clone(), SearchOptions::new(&index)).unwrap());
    let options = EngineOptions {
        backend: BackendChoice::Hybrid,
        hybrid: Some(options(true)),
        ..EngineOptions::default()
    };
    let engine = Engine::new(scorer, options).unwrap();
    assert_eq!(engine.backend(), Backend::Hybrid);
    if engine.has_gpu() {
        eprintln!("(a GPU is present: the CPU-alone line is not printed here)");
    } else {
        let line = engine.choice().unwrap();
        assert!(line.contains("the CPU alone"), "{line}");
    }
    let reqs = requests(&random_queries(&index, v, 9), Mode::Or, 10);
    let oracle = oracle(&index, SearchOptions::new(&index));
    for (r, a) in reqs.iter().zip(engine.search_batch(&reqs)) {
        assert!(same(&a.unwrap().hits, &oracle.search(r).unwrap()));
    }
}

/// A closed loop of several chunks (1,024 queries each, made into tasks on several threads and queued
/// in no set order): every answer in its place, equal to the oracle's, with the workers taking several
/// tasks at a time; each counted once by the time the loop returns (a query is counted before its
/// answer is sent).
#[test]
fn a_closed_loop_of_many_chunks_equals_the_oracle() {
    let tmp = tempfile::tempdir().unwrap();
    let (index, v) = random_index(tmp.path(), 77, Codec::SimdBp, None);
    let queries = random_queries(&index, v, 3);
    let search = SearchOptions::new(&index);
    let oracle = oracle(&index, search);
    let cpu = CpuSearcher::new(Arc::new(Scorer::new(index.clone(), search).unwrap()));
    let hybrid = Scheduler::hybrid(cpu, None, options(false));
    for mode in [Mode::And, Mode::Or] {
        let one = requests(&queries, mode, 10);
        let want_one: Vec<_> = one.iter().map(|r| oracle.search(r).unwrap()).collect();
        // 60 distinct queries over and over, 3,000 in all: two chunks of 1,024 and one of 952.
        let reqs: Vec<_> = one.iter().cycle().take(3000).cloned().collect();
        let answers = hybrid.search_batch(&reqs);
        assert_eq!(answers.len(), reqs.len());
        for (i, a) in answers.iter().enumerate() {
            let hits = &a.as_ref().unwrap().hits;
            assert!(same(hits, &want_one[i % one.len()]), "{mode:?}: query {i}");
        }
    }
    assert_eq!(
        hybrid.take_stats().unwrap().cpu_queries,
        6000,
        "each counted once"
    );
}
