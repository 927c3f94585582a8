//! The GPU engine against the exhaustive CPU oracle (docIDs and score bits), and the engine's CPU
//! fallback for what the GPU fails.
//!
//! Every test needs a CUDA device; where there is none it prints "skipped: no CUDA device" and returns.
//! On the lent GPU machine they run (scripts/device-check.sh).

mod common;

use std::path::PathBuf;
use std::sync::Arc;

use std::time::Duration;
use warpsearch_codec::Codec;

use warpsearch_cpu::CpuSearcher;
use warpsearch_engine::{
    Backend, BackendChoice, CacheBudget, CacheOptions, Completion, Engine, EngineOptions, HybridOptions,
    Policy, Reply, Scheduler,
};
use warpsearch_gpu::testing::{gpu, say};
use warpsearch_gpu::{Gpu, GpuError, GpuOptions, GpuSearcher};
use warpsearch_index::{Bm25Params, Index, IndexError};
use warpsearch_query::{
    Algorithm, Answer, DocRange, Mode, Part, Query, Ranking, Request, Scorer, SearchOptions,
};

use common::{build, check_hybrid, oracle, random_index, random_queries, requests, same, Rng};

/// A random index (`seed`, `codec`; its files in `_files`): its random queries (`query_seed`), and
/// the exhaustive oracle and a scorer with its default search options.
struct Case {
    _files: tempfile::TempDir,
    queries: Vec<Query>,
    oracle: CpuSearcher,
    scorer: Arc<Scorer>,
}

fn case(seed: u64, codec: Codec, query_seed: u64) -> Case {
    let files = tempfile::tempdir().unwrap();
    let (index, v) = random_index(files.path(), seed, codec, None);
    let queries = random_queries(&index, v, query_seed);
    let options = SearchOptions::new(&index);
    let oracle = oracle(&index, options);
    let scorer = Arc::new(Scorer::new(index.clone(), options).unwrap());
    Case {
        _files: files,
        queries,
        oracle,
        scorer,
    }
}

/// The GPU searcher for `options`.
fn gpu_searcher(
    gpu: &Arc<Gpu>,
    index: &Arc<Index>,
    options: SearchOptions,
    gopts: GpuOptions,
) -> GpuSearcher {
    let scorer = Arc::new(Scorer::new(index.clone(), options).unwrap());
    GpuSearcher::new(gpu.clone(), scorer, gopts).unwrap()
}

/// The hybrid of a CPU searcher and a GPU searcher (with `gopts`) over `scorer`.
fn gpu_hybrid(gpu: &Arc<Gpu>, scorer: &Arc<Scorer>, gopts: GpuOptions, options: HybridOptions) -> Scheduler {
    let searcher = GpuSearcher::new(gpu.clone(), scorer.clone(), gopts).unwrap();
    Scheduler::hybrid(CpuSearcher::new(scorer.clone()), Some(searcher), options)
}

/// The GPU engine's answers equal the exhaustive oracle's exactly (docIDs and score bits), and none
/// failed.
fn check_engine(
    gpu: &Arc<Gpu>,
    index: &Arc<Index>,
    requests: &[Request],
    options: SearchOptions,
    gopts: GpuOptions,
    what: &str,
) {
    let oracle = oracle(index, options);
    let mut searcher = gpu_searcher(gpu, index, options, gopts);
    let got = match gopts.map_answers {
        true => search_polled(&mut searcher, requests),
        false => searcher.search_batch(requests),
    };
    for (i, (r, a)) in requests.iter().zip(got).enumerate() {
        let want = oracle.search(r).unwrap();
        let hits = a.unwrap().hits;
        assert!(
            same(&hits, &want),
            "{what}: query {i} {:?} mode {:?} k {}: GPU {:?} vs oracle {:?}",
            r.query.terms,
            r.mode,
            r.k,
            &hits[..hits.len().min(4)],
            &want[..want.len().min(4)]
        );
    }
    assert_eq!(
        searcher.take_stats().failed_queries,
        0,
        "{what}: no query may fail on the GPU"
    );
}

/// `requests` handed over as one call and polled until it is back, as the GPU backend's thread does:
/// the answers that left early, and the others from the call's end. An answer that left early is
/// also the call's at its end.
fn search_polled(searcher: &mut GpuSearcher, requests: &[Request]) -> Vec<Result<Answer, GpuError>> {
    let call = searcher.submit_polled_in(requests, None);
    let mut early: Vec<Option<Answer>> = vec![None; requests.len()];
    loop {
        searcher.poll();
        for (id, i, answer) in searcher.take_early() {
            assert_eq!(id, call, "an answer of another call");
            assert!(early[i].replace(answer).is_none(), "query {i} left early twice");
        }
        if let Some((id, answers)) = searcher.take_done() {
            assert_eq!(id, call);
            return answers
                .into_iter()
                .zip(early)
                .map(|(last, early)| match early {
                    Some(a) => {
                        assert!(
                            same(&a.hits, &last.as_ref().unwrap().hits),
                            "an early answer changed"
                        );
                        Ok(a)
                    }
                    None => last,
                })
                .collect();
        }
    }
}

/// The smallest OR window (many windows per query, blocks straddling windows), and queries cut into
/// docID ranges of about 100 postings of cost.
fn small_window() -> GpuOptions {
    GpuOptions {
        window: 256,
        split_cost: 100,
        and_split_cost: 100,
        ..GpuOptions::default()
    }
}

#[test]
fn engine_equals_the_oracle_on_random_indexes() {
    let Some(gpu) = gpu() else { return };
    // WARPSEARCH_GPU_SEEDS=a..b narrows the seeds (e.g. to run one under compute-sanitizer).
    let seeds = std::env::var("WARPSEARCH_GPU_SEEDS")
        .ok()
        .and_then(|s| {
            s.split_once("..")
                .map(|(a, b)| (a.parse().unwrap(), b.parse().unwrap()))
        })
        .unwrap_or((0u64, 12u64));
    for seed in seeds.0..seeds.1 {
        let codec = Codec::ALL[seed as usize % Codec::ALL.len()];
        let tmp = tempfile::tempdir().unwrap();
        let (index, v) = random_index(tmp.path(), 0xABCD + seed * 7919, codec, None);
        let queries = random_queries(&index, v, seed);
        // Batches of 7 and 4,096; small and large OR windows; long queries cut into docID ranges of
        // about 60 and 700 postings of cost, or never, or at the defaults; OR queries sorted up to 4,096 or 64 postings, or
        // never; AND steps merged by the default ratio, never, always, or at lengths 1:1.
        let gopts = GpuOptions {
            batch_size: [7, 4096][seed as usize % 2],
            window: [256, 4096, 32768][seed as usize % 3],
            split_cost: [60, u64::MAX, 700, 200_000][seed as usize % 4],
            and_split_cost: [60, u64::MAX, 700, 2_000][seed as usize % 4],
            // AND cut to the batch (fine for batches of 7, coarse for 4,096), or at a fixed cost;
            // OR too, in parts of at least 8,192 (the default), 40 or 700 postings, of 65,536 (the
            // default), any or 100 on average; in a batch so cut, a query in at most 64 (the
            // default), 16 or 200 parts.
            split_waves: [32, 0, 1][(seed as usize / 4) % 3],
            or_split_floor: [8_192, 40, 700][(seed as usize / 3) % 3],
            or_task_cost: [65_536, 0, 100][seed as usize % 3],
            wave_parts: [64, 16, 200][(seed as usize / 2) % 3],
            small_or: [4096, 0, 64][seed as usize % 3],
            // AND steps: the default, binary search only, merging always, merging only at 1:1.
            merge_ratio: [2, 0, u32::MAX, 1][(seed as usize / 2) % 4],
            // Answers into host memory as they are done, or copied back after the kernel.
            map_answers: seed % 3 != 2,
            ..GpuOptions::default()
        };
        for mode in [Mode::And, Mode::Or, Mode::AndOr] {
            for k in [1, 3, 10, 200, 1000] {
                let base = SearchOptions::new(&index);
                let reqs = requests(&queries, mode, k);
                let what = format!("seed {seed} {codec}");
                check_engine(&gpu, &index, &reqs, base, gopts, &what);
                if k == 10 {
                    let other = SearchOptions {
                        bm25: Bm25Params { k1: 1.2, b: 0.75 },
                        ..base
                    };
                    check_engine(
                        &gpu,
                        &index,
                        &reqs,
                        other,
                        gopts,
                        &format!("{what} k1 1.2 b 0.75"),
                    );
                    let stat = SearchOptions {
                        ranking: Ranking::Bm25Static { alpha: 0.3 },
                        ..base
                    };
                    check_engine(&gpu, &index, &reqs, stat, gopts, &format!("{what} bm25-static"));
                }
            }
        }
    }
}

/// A batch of few queries cuts a long query into more parts than a full batch (up to 200 here, of
/// 2 postings and more), with and without an average for OR's parts: the oracle's answers, and some
/// query in more than the 16 parts of a full batch.
#[test]
fn queries_cut_into_many_parts_under_load_answer_as_the_oracle() {
    let Some(gpu) = gpu() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let (index, v) = random_index(tmp.path(), 0x5EED, Codec::SimdBp, None);
    let queries = random_queries(&index, v, 5);
    let options = SearchOptions::new(&index);
    for task_cost in [0, 100] {
        // No full batch's cut (it would start at a million postings); the batch's cut down to parts
        // of 2 postings, up to 200 a query; instrumented to count each query's parts.
        let gopts = GpuOptions {
            instrument: true,
            split_cost: 1_000_000,
            and_split_cost: 2,
            or_split_floor: 2,
            or_task_cost: task_cost,
            wave_parts: 200,
            ..GpuOptions::default()
        };
        for mode in [Mode::And, Mode::Or] {
            let reqs = requests(&queries, mode, 10);
            let what = format!("many parts, average {task_cost}");
            check_engine(&gpu, &index, &reqs, options, gopts, &what);
            let mut searcher = gpu_searcher(&gpu, &index, options, gopts);
            searcher.search_batch(&reqs);
            let most = searcher.take_stats().query_times.iter().map(|t| t.parts).max();
            assert!(most > Some(16), "{what} {mode:?}: at most {most:?} parts a query");
        }
    }
}

#[test]
fn an_instrumented_run_times_each_query_and_answers_as_the_oracle() {
    let Some(gpu) = gpu() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let (index, v) = random_index(tmp.path(), 0x7157, Codec::SimdBp, None);
    let queries = random_queries(&index, v, 3);
    // Batches of 7 tasks; queries cut into parts of about 20 postings (OR) and 2 of the shortest list
    // (AND).
    let gopts = GpuOptions {
        instrument: true,
        batch_size: 7,
        split_cost: 20,
        and_split_cost: 2,
        split_waves: 0,
        ..GpuOptions::default()
    };
    let options = SearchOptions::new(&index);
    for mode in [Mode::And, Mode::Or] {
        let reqs = requests(&queries, mode, 10);
        check_engine(&gpu, &index, &reqs, options, gopts, "instrumented");
        let mut searcher = gpu_searcher(&gpu, &index, options, gopts);
        searcher.search_batch(&reqs);
        let stats = searcher.take_stats();
        let times = &stats.query_times;
        // Queries answered without the GPU (an AND with an unknown term) have no times.
        assert!(
            !times.is_empty() && times.len() <= reqs.len(),
            "{mode:?}: {} times",
            times.len()
        );
        assert!(
            stats.queries > times.len() as u64,
            "{mode:?}: no query was cut into parts"
        );
        for t in times {
            assert!((1..=7).contains(&t.batch_tasks), "{mode:?}: {t:?}");
            assert!(
                t.times().iter().all(|x| x.is_finite() && *x >= 0.0),
                "{mode:?}: {t:?}"
            );
            assert!((1..=t.batch_tasks).contains(&t.parts), "{mode:?}: {t:?}");
        }
        assert!(
            times.iter().any(|t| t.parts > 1),
            "{mode:?}: no query's times have its parts"
        );
        assert!(
            times.iter().any(|t| t.run_us > 0.0),
            "{mode:?}: no query's run took time (the clocks were not read back)"
        );
        assert!(stats.phase_shares().is_some());
    }
}

#[test]
fn early_termination_equals_the_oracle_on_global_score_indexes() {
    let Some(gpu) = gpu() else { return };
    for (seed, alpha) in [(1u64, 0.0f32), (2, 0.2), (3, 0.5), (4, 0.9), (5, 1.0)] {
        let tmp = tempfile::tempdir().unwrap();
        let (index, v) = random_index(tmp.path(), 0x5EED + seed, Codec::PForDelta, Some(alpha));
        let queries = random_queries(&index, v, seed);
        for mode in [Mode::And, Mode::Or, Mode::AndOr] {
            for k in [1, 10, 1000] {
                let options = SearchOptions {
                    ranking: Ranking::Bm25Static { alpha },
                    algorithm: Algorithm::EarlyTermination,
                    ..SearchOptions::new(&index)
                };
                check_engine(
                    &gpu,
                    &index,
                    &requests(&queries, mode, k),
                    options,
                    small_window(),
                    &format!("early alpha {alpha}"),
                );
            }
        }
    }
}

/// Queries of hundreds of terms (more than a CTA has threads: the OR kernel's other path), repeated terms
/// and an unknown one, on a collection of 400 terms.
#[test]
fn long_queries_equal_the_oracle() {
    let Some(gpu) = gpu() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let mut rng = Rng(4242);
    let mut lines = String::new();
    for d in 0..3000 {
        let words: Vec<String> = (0..1 + rng.below(40))
            .map(|_| format!("t{}", rng.below(400)))
            .collect();
        lines.push_str(&format!(
            "{{\"id\": \"d{d}\", \"contents\": \"{}\"}}\n",
            words.join(" ")
        ));
    }
    let index = build(tmp.path(), &lines, Codec::PForDelta, None);
    let texts = [
        (0..400).map(|i| format!("t{i}")).collect::<Vec<_>>().join(" "),
        (0..300)
            .map(|i| format!("t{}", (i * 7) % 400))
            .collect::<Vec<_>>()
            .join(" ")
            + " nosuchterm t3 t3",
        (0..3).map(|i| format!("t{i}")).collect::<Vec<_>>().join(" "),
    ];
    let queries: Vec<Query> = texts.iter().map(|t| Query::parse(&index, t)).collect();
    for mode in [Mode::And, Mode::Or, Mode::AndOr] {
        for k in [1, 10, 1000] {
            check_engine(
                &gpu,
                &index,
                &requests(&queries, mode, k),
                SearchOptions::new(&index),
                small_window(),
                "long queries",
            );
        }
    }
}

/// A batch the GPU fails is answered by the engine on the CPU: every query still gets the oracle's
/// answer, exactly once, and the engine says so.
#[test]
fn failed_batches_are_answered_by_the_cpu() {
    let Some(_) = gpu() else { return };
    let Case {
        _files,
        queries,
        oracle,
        scorer,
    } = case(77, Codec::PForDelta, 77);
    let gpu = GpuOptions {
        batch_size: 16,
        fail_batches: true,
        kernels: warpsearch_gpu::testing::kernel_options(),
        ..GpuOptions::default()
    };
    let backend = BackendChoice::Gpu;
    let options = EngineOptions {
        backend,
        gpu,
        ..EngineOptions::default()
    };
    let engine = Engine::new(scorer, options).unwrap();
    assert_eq!(engine.backend(), Backend::Gpu);
    for mode in [Mode::And, Mode::Or, Mode::AndOr] {
        let reqs = requests(&queries, mode, 10);
        let got = engine.search_batch(&reqs);
        assert_eq!(got.len(), reqs.len());
        for (r, a) in reqs.iter().zip(got) {
            assert!(same(&a.unwrap().hits, &oracle.search(r).unwrap()));
        }
        let sent = queries
            .iter()
            .filter(|q| !q.matches_nothing(if mode == Mode::Or { Mode::Or } else { Mode::And }))
            .count();
        let failed = engine.take_gpu_stats().unwrap().failed_queries as usize;
        assert!(failed >= sent, "{mode:?}: {failed} failed of {sent} sent");
        let notes = engine.take_notes();
        assert!(
            notes.iter().any(|n| n.contains("answered on the CPU")),
            "{mode:?}: {notes:?}"
        );
    }
}

/// Queries submitted as they come (the GPU backend's continuous calls, each query's answer leaving
/// as soon as the GPU has it, before the rest of its batch): every query answered once, with the
/// oracle's answer; with answers copied back after each kernel, the same.
#[test]
fn submitted_queries_leave_as_they_are_done_with_the_oracles_answers() {
    let Some(_) = gpu() else { return };
    let Case {
        _files,
        queries,
        oracle,
        scorer,
    } = case(0xEA51, Codec::SimdBp, 0xEA51);
    for map_answers in [true, false] {
        let gpu = GpuOptions {
            map_answers,
            kernels: warpsearch_gpu::testing::kernel_options(),
            ..GpuOptions::default()
        };
        let options = EngineOptions {
            backend: BackendChoice::Gpu,
            gpu,
            ..EngineOptions::default()
        };
        let engine = Engine::new(scorer.clone(), options).unwrap();
        let mut early = 0;
        for (mode, k) in [
            (Mode::Or, 1000),
            (Mode::And, 10),
            (Mode::AndOr, 10),
            (Mode::Or, 10),
        ] {
            let reqs = requests(&queries, mode, k);
            let (tx, rx) = std::sync::mpsc::channel();
            let reply: Arc<dyn Reply> = Arc::new(tx);
            // Twenty rounds, each in submissions of 1 to 7 queries, so that calls overlap.
            let mut id = 0u64;
            for round in 0..20 {
                let mut at = 0;
                while at < reqs.len() {
                    let n = (1 + (round + at) % 7).min(reqs.len() - at);
                    engine.submit(id, reqs[at..at + n].to_vec(), None, reply.clone());
                    id += n as u64;
                    at += n;
                }
            }
            drop(reply);
            let mut seen = vec![false; id as usize];
            for _ in 0..id {
                let done = rx
                    .recv_timeout(Duration::from_secs(60))
                    .expect("every answer within a minute");
                let i = done.id as usize;
                assert!(
                    !std::mem::replace(&mut seen[i], true),
                    "{mode:?}: query {i} answered twice"
                );
                let r = &reqs[i % reqs.len()];
                let hits = done.result.unwrap().hits;
                assert!(
                    same(&hits, &oracle.search(r).unwrap()),
                    "{mode:?} k {k}: query {i}"
                );
            }
            assert!(seen.iter().all(|&s| s), "{mode:?}: a query was not answered");
            let stats = engine.take_gpu_stats().unwrap();
            assert_eq!(stats.failed_queries, 0);
            early += stats.answered_early;
        }
        eprintln!("map_answers {map_answers}: {early} queries answered before their batch ended");
        if map_answers {
            assert!(early > 0, "no answer left before its batch ended");
        } else {
            assert_eq!(
                early, 0,
                "answers copied back after the kernel cannot leave before it"
            );
        }
    }
}

#[test]
fn gpu_refuses_what_it_cannot_do() {
    let Some(gpu) = gpu() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let (index, _) = random_index(tmp.path(), 99, Codec::PForDelta, None);
    let scorer = |options: SearchOptions| Arc::new(Scorer::new(index.clone(), options).unwrap());
    let plain = SearchOptions::new(&index);
    let big_k = GpuOptions {
        max_k: 5000,
        ..GpuOptions::default()
    };
    let err = GpuSearcher::new(gpu.clone(), scorer(plain), big_k).err().unwrap();
    assert!(err.to_string().contains("--backend cpu"), "{err}");
    let bmw = SearchOptions {
        algorithm: Algorithm::BlockMaxWand,
        ..plain
    };
    assert!(GpuSearcher::new(gpu.clone(), scorer(bmw), GpuOptions::default()).is_err());
    let tiny = GpuOptions {
        memory_budget: Some(16),
        ..GpuOptions::default()
    };
    let err = GpuSearcher::new(gpu.clone(), scorer(plain), tiny).err().unwrap();
    assert!(err.to_string().contains("--gpu-memory"), "{err}");
    // A request beyond the searcher's k fails alone, as a typed error; the engine answers it on the CPU.
    let mut searcher = gpu_searcher(
        &gpu,
        &index,
        plain,
        GpuOptions {
            max_k: 10,
            ..GpuOptions::default()
        },
    );
    let reqs = requests(&random_queries(&index, 3, 5)[..2], Mode::Or, 11);
    assert!(searcher.search_batch(&reqs).iter().all(|a| a.is_err()));
}

/// The passage index (`WARPSEARCH_WIKI_INDEX`) and the TREC 2005 queries, or None (saying why).
fn wiki() -> Option<(Arc<Index>, PathBuf)> {
    let Some(dir) = std::env::var_os("WARPSEARCH_WIKI_INDEX") else {
        say("skipped: WARPSEARCH_WIKI_INDEX is not set (a passage index built with --title)");
        return None;
    };
    let queries = std::env::var_os("WARPSEARCH_QUERIES")
        .map(PathBuf::from)
        .or_else(|| warpsearch_index::testdata::shared_data("queries/trec05-efficiency.txt"))?;
    Some((Arc::new(Index::open(&dir).unwrap()), queries))
}

/// The real check: the first 5,000 TREC 2005 queries over the Wikipedia passage index
/// (`WARPSEARCH_WIKI_INDEX`, built with `warpsearch index --title`), AND / OR / and-or at k 10 and 1000.
#[test]
fn engine_equals_the_oracle_on_wikipedia_passages() {
    let Some(gpu) = gpu() else { return };
    let Some((index, queries_path)) = wiki() else {
        return;
    };
    assert_eq!(index.num_docs(), 776_864, "not the passage collection");
    let text = std::fs::read_to_string(&queries_path).unwrap();
    let queries: Vec<Query> = text.lines().take(5000).map(|q| Query::parse(&index, q)).collect();
    assert_eq!(queries.len(), 5000);
    for mode in [Mode::And, Mode::Or, Mode::AndOr] {
        for k in [10, 1000] {
            let options = SearchOptions::new(&index);
            let oracle = oracle(&index, options);
            let reqs = requests(&queries, mode, k);
            let want = oracle.search_batch(&reqs);
            // AND top-10 also with binary search only and with merging at every step; every mode
            // and k also with queries cut into up to 16 docID ranges, whose parts share their k-th key.
            let ratios: &[u32] = if (mode, k) == (Mode::And, 10) {
                &[2, 0, u32::MAX]
            } else {
                &[2]
            };
            let mut variants: Vec<(String, GpuOptions)> = ratios
                .iter()
                .map(|&merge_ratio| {
                    let gopts = GpuOptions {
                        merge_ratio,
                        ..GpuOptions::default()
                    };
                    (format!("merge ratio {merge_ratio}"), gopts)
                })
                .collect();
            let cut = GpuOptions {
                split_cost: 20_000,
                and_split_cost: 500,
                split_waves: 0,
                max_parts: 16,
                ..GpuOptions::default()
            };
            variants.push(("cut into parts".into(), cut));
            for (variant, gopts) in variants {
                let mut searcher = gpu_searcher(&gpu, &index, options, gopts);
                let got = searcher.search_batch(&reqs);
                let mut differ = 0;
                for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                    let (g, w) = (&g.as_ref().unwrap().hits, &w.as_ref().unwrap().hits);
                    if !same(g, w) {
                        if differ < 3 {
                            eprintln!(
                                "query {i} ({}) differs: GPU {:?} oracle {:?}",
                                text.lines().nth(i).unwrap(),
                                &g[..g.len().min(3)],
                                &w[..w.len().min(3)]
                            );
                        }
                        differ += 1;
                    }
                }
                assert_eq!(
                    differ, 0,
                    "{mode:?} k {k} {variant}: {differ} of 5000 queries differ from the oracle"
                );
                let stats = searcher.take_stats();
                assert_eq!(stats.failed_queries, 0);
                if variant == "cut into parts" {
                    assert!(
                        stats.queries > 5000,
                        "{variant}: no query was cut ({})",
                        stats.queries
                    );
                }
                eprintln!(
                    "wiki {mode:?} k {k} {variant}: 5000 queries ({} parts) equal the oracle",
                    stats.queries
                );
            }
        }
    }
}

/// Docs where a range is cut: block boundaries (127, 128, 129), the middle, the ends.
fn cuts(n: u32) -> Vec<u32> {
    let mut v = vec![0, 1, 127, 128, 129, n / 2, n.saturating_sub(1), n];
    v.retain(|&c| c <= n);
    v.dedup();
    v
}

/// A GPU request restricted to a docID range returns exactly the CPU's top k of that range, for ranges
/// cut at block boundaries, empty ones and single documents.
#[test]
fn gpu_ranges_equal_the_cpu_parts() {
    let Some(gpu) = gpu() else { return };
    for seed in 0..4u64 {
        let Case {
            _files,
            queries,
            oracle,
            scorer,
        } = case(0xCAFE + seed, Codec::ALL[seed as usize % Codec::ALL.len()], seed);
        let (index, options) = (scorer.index(), *scorer.options());
        let gopts = GpuOptions {
            split_cost: [100, u64::MAX][seed as usize % 2],
            and_split_cost: [100, u64::MAX][seed as usize % 2],
            ..GpuOptions::default()
        };
        let mut searcher = gpu_searcher(&gpu, index, options, gopts);
        let n = index.num_docs();
        let c = cuts(n);
        let mut ranges = vec![DocRange::EMPTY];
        for (i, &a) in c.iter().enumerate() {
            ranges.push(DocRange::half_open(a, a + 1));
            for &b in &c[i + 1..] {
                ranges.push(DocRange::half_open(a, b));
            }
        }
        for mode in [Mode::And, Mode::Or, Mode::AndOr] {
            for k in [1, 10, 1000] {
                let mut reqs = Vec::new();
                let mut rs = Vec::new();
                for q in &queries {
                    for r in &ranges {
                        reqs.push(Request::new(q.clone(), mode, k));
                        rs.push(*r);
                    }
                }
                let got = searcher.search_batch_in(&reqs, Some(&rs));
                for ((req, r), g) in reqs.iter().zip(&rs).zip(got) {
                    let want = oracle.search_part(req, mode, Part::range(*r)).unwrap();
                    let hits = g.unwrap().hits;
                    assert!(
                        same(&hits, &want),
                        "seed {seed} {mode:?} k {k} range {r:?} query {:?}: GPU {:?} vs CPU {:?}",
                        req.query.terms,
                        &hits[..hits.len().min(3)],
                        &want[..want.len().min(3)]
                    );
                }
            }
        }
    }
}

/// Calls handed over before the last one's answers are back (the hybrid's pipeline), in kernel
/// batches small enough that one call's batches and the next one's share the slots: every call's
/// answers are the oracle's, whether collected as they finish, or waited for in or out of order.
#[test]
fn overlapping_calls_equal_the_oracle() {
    let Some(gpu) = gpu() else { return };
    for seed in 0..4u64 {
        let tmp = tempfile::tempdir().unwrap();
        let codec = Codec::ALL[seed as usize % Codec::ALL.len()];
        let (index, v) = random_index(tmp.path(), 0xCA11 + seed * 7919, codec, None);
        let queries = random_queries(&index, v, seed);
        let options = SearchOptions::new(&index);
        let oracle = oracle(&index, options);
        let gopts = GpuOptions {
            batch_size: 16,
            ..small_window()
        };
        let mut searcher = gpu_searcher(&gpu, &index, options, gopts);
        let half = DocRange::half_open(0, index.num_docs() / 2);
        // Four calls: AND, OR (on the first half of the documents), and-or (its OR pass waits for its
        // AND pass), OR at k 1000.
        let calls: Vec<(Vec<Request>, Option<DocRange>)> = vec![
            (requests(&queries, Mode::And, 10), None),
            (requests(&queries, Mode::Or, 10), Some(half)),
            (requests(&queries, Mode::AndOr, 10), None),
            (requests(&queries, Mode::Or, 1000), None),
        ];
        let ranges: Vec<Option<Vec<DocRange>>> = calls
            .iter()
            .map(|(reqs, r)| r.map(|r| vec![r; reqs.len()]))
            .collect();
        let mut got: Vec<Option<Vec<Result<Answer, GpuError>>>> = vec![None, None, None, None];
        let mut ids = Vec::new();
        for (c, (reqs, _)) in calls.iter().enumerate() {
            ids.push(searcher.submit_in(reqs, ranges[c].as_deref()));
            // Batches already finished are collected without waiting: calls may come back in any order.
            searcher.poll();
            while let Some((id, answers)) = searcher.take_done() {
                let c = ids.iter().position(|&x| x == id).unwrap();
                assert!(got[c].is_none(), "seed {seed}: call {c} came back twice");
                got[c] = Some(answers);
            }
        }
        // What has not come back, waited for newest first.
        for c in (0..calls.len()).rev() {
            if got[c].is_none() {
                got[c] = Some(searcher.wait(ids[c]));
            }
        }
        for (c, (reqs, range)) in calls.iter().enumerate() {
            let answers = got[c].take().unwrap();
            assert_eq!(answers.len(), reqs.len());
            for (i, (r, a)) in reqs.iter().zip(answers).enumerate() {
                let want = match range {
                    Some(range) => oracle.search_part(r, r.mode, Part::range(*range)).unwrap(),
                    None => oracle.search(r).unwrap(),
                };
                let hits = a.unwrap().hits;
                assert!(
                    same(&hits, &want),
                    "seed {seed} call {c} ({:?} k {}) query {i} {:?}",
                    r.mode,
                    r.k,
                    r.query.terms
                );
            }
        }
        assert_eq!(
            searcher.take_stats().failed_queries,
            0,
            "seed {seed}: no GPU failure"
        );
    }
}

/// The hybrid scheduler with the GPU: the oracle's answers, whole, split between the GPU and the CPU
/// workers (several GPU shares), in a closed loop and one query at a time.
#[test]
fn hybrid_with_the_gpu_equals_the_oracle() {
    let Some(gpu) = gpu() else { return };
    for seed in 0..4u64 {
        let Case {
            _files,
            queries,
            oracle,
            scorer,
        } = case(0xF00D + seed, Codec::ALL[seed as usize % Codec::ALL.len()], seed);
        for share in [None, Some(0.3), Some(0.5), Some(1.0)] {
            let options = HybridOptions {
                cpu_workers: 3,
                split_above: share.map(|_| Duration::ZERO),
                split_parts: 3,
                split_gpu_share: share,
                ..HybridOptions::default()
            };
            let hybrid = gpu_hybrid(&gpu, &scorer, GpuOptions::default(), options);
            for mode in [Mode::And, Mode::Or, Mode::AndOr] {
                for k in [1, 10, 1000] {
                    let reqs = requests(&queries, mode, k);
                    let want: Vec<_> = reqs.iter().map(|r| oracle.search(r).unwrap()).collect();
                    let what = format!("seed {seed} share {share:?} {mode:?} k {k}");
                    check_hybrid(&hybrid, &reqs, &want, &what);
                }
            }
            let stats = hybrid.take_stats().unwrap();
            assert_eq!(stats.gpu_fallbacks, 0);
            if share.is_some() {
                assert!(
                    stats.both_queries + stats.gpu_queries > 0,
                    "share {share:?}: {stats:?}"
                );
            }
            say(&format!("hybrid seed {seed} share {share:?}: {stats:?}"));
        }
    }
}

/// Hedging at once: every query the hybrid gives the CPU whole is sent to the GPU as well as soon as
/// the hedger sees it unanswered; each query still gets exactly one answer, the oracle's, whichever
/// processor gives it.
#[test]
fn hedged_queries_are_answered_once_with_the_oracles_answer() {
    let Some(gpu) = gpu() else { return };
    let mut hedges = 0;
    for seed in 0..2u64 {
        let Case {
            _files,
            queries,
            oracle,
            scorer,
        } = case(0xBEE + seed, Codec::ALL[seed as usize], seed);
        let options = HybridOptions {
            cpu_workers: 3,
            split_above: None,
            hedge_after: Some(0.0),
            ..HybridOptions::default()
        };
        let hybrid = gpu_hybrid(&gpu, &scorer, GpuOptions::default(), options);
        let (tx, rx) = std::sync::mpsc::channel();
        let mut want = Vec::new();
        for mode in [Mode::And, Mode::Or, Mode::AndOr] {
            for k in [1, 10, 1000] {
                for r in requests(&queries, mode, k) {
                    let id = want.len() as u64;
                    want.push(oracle.search(&r).unwrap());
                    let reply: Arc<dyn Reply> = Arc::new(tx.clone());
                    hybrid.submit(id, vec![r], Some(Duration::from_secs(60)), reply);
                    let done = rx.recv().unwrap();
                    assert_eq!(done.id, id, "seed {seed} {mode:?} k {k}");
                    assert!(
                        same(&done.result.unwrap().hits, &want[id as usize]),
                        "seed {seed} {mode:?} k {k}: query {id}"
                    );
                }
            }
        }
        let stats = hybrid.take_stats().unwrap();
        // Every copy still running finishes before the scheduler is gone: none may answer again.
        drop(hybrid);
        drop(tx);
        assert_eq!(rx.iter().count(), 0, "seed {seed}: a query answered twice");
        assert_eq!(stats.gpu_fallbacks, 0);
        assert!(stats.hedges_won <= stats.hedges, "{stats:?}");
        hedges += stats.hedges;
        say(&format!("hedged hybrid seed {seed}: {stats:?}"));
    }
    assert!(hedges > 0, "no query was hedged");
}

/// Failure injection: every GPU batch fails; the hybrid reruns each task on the CPU, answers every
/// query once with the oracle's result, and counts the fallbacks.
#[test]
fn hybrid_reruns_failed_gpu_tasks_on_the_cpu() {
    let Some(gpu) = gpu() else { return };
    let Case {
        _files,
        queries,
        oracle,
        scorer,
    } = case(321, Codec::PForDelta, 321);
    let failing = GpuOptions {
        fail_batches: true,
        ..GpuOptions::default()
    };
    let options = HybridOptions {
        cpu_workers: 2,
        split_above: Some(Duration::ZERO),
        split_gpu_share: Some(0.5),
        ..HybridOptions::default()
    };
    let hybrid = gpu_hybrid(&gpu, &scorer, failing, options);
    // The GPU searcher answers a query that matches nothing without a batch (so without failing).
    let (mut trivial, mut fallbacks, mut gpu_queries) = (0, 0, 0);
    // Whether the GPU gets any task is the scheduler's choice (2 CPU workers may take them all, as
    // one device run saw): rounds until it has failed some, every answer checked in each.
    for _round in 0..20 {
        for mode in [Mode::And, Mode::Or, Mode::AndOr] {
            let reqs = requests(&queries, mode, 10);
            trivial += reqs
                .iter()
                .filter(|r| {
                    let q = &r.query;
                    match mode {
                        Mode::And => q.matches_nothing(Mode::And),
                        Mode::Or => q.matches_nothing(Mode::Or),
                        Mode::AndOr => q.matches_nothing(Mode::And) && q.matches_nothing(Mode::Or),
                    }
                })
                .count() as u64;
            let got = hybrid.search_batch(&reqs);
            assert_eq!(got.len(), reqs.len());
            for (r, g) in reqs.iter().zip(got) {
                assert!(same(&g.unwrap().hits, &oracle.search(r).unwrap()), "{mode:?}");
            }
        }
        let stats = hybrid.take_stats().unwrap();
        fallbacks += stats.gpu_fallbacks;
        gpu_queries += stats.gpu_queries;
        if fallbacks > 0 {
            break;
        }
    }
    assert!(fallbacks > 0, "no GPU task in 20 rounds");
    assert!(
        gpu_queries <= trivial,
        "a failed GPU task cannot answer ({trivial} queries match nothing, {gpu_queries} answered by the GPU)"
    );
}

/// Failure injection with a list cache: every GPU batch fails; the GPU and the hybrid answer each query
/// once, with the oracle's documents, on the CPU, and say so (a cached call leaves its failures to the
/// one fallback every setting shares).
#[test]
fn failed_cached_batches_are_answered_by_the_cpu() {
    let Some(_gpu) = gpu() else { return };
    let Case {
        _files,
        queries,
        oracle,
        scorer,
    } = case(4077, Codec::SimdBp, 4077);
    let (index, options) = (scorer.index(), *scorer.options());
    let whole = warpsearch_gpu::residency::device_bytes(index) as u64;
    let failing = GpuOptions {
        fail_batches: true,
        ..GpuOptions::default()
    };
    for backend in [BackendChoice::Gpu, BackendChoice::Hybrid] {
        let train = requests(&queries, Mode::Or, 10);
        let engine = cached_engine(
            failing,
            index,
            options,
            backend,
            whole / 4,
            whole / 4,
            Policy::Vfb,
            Completion::Transfer,
            1.0,
            train,
        );
        for mode in [Mode::And, Mode::Or] {
            let reqs = requests(&queries, mode, 10);
            let got = engine.search_batch(&reqs);
            assert_eq!(got.len(), reqs.len());
            for (r, a) in reqs.iter().zip(got) {
                assert!(
                    same(&a.unwrap().hits, &oracle.search(r).unwrap()),
                    "{backend:?} {mode:?}"
                );
            }
        }
        if engine.fallback_queries() > 0 {
            let notes = engine.take_notes();
            assert!(
                notes.iter().any(|n| n.contains("answered on the CPU")),
                "{backend:?}: {notes:?}"
            );
        }
        say(&format!(
            "cached, failing, {backend:?}: {} queries answered on the CPU after the GPU failed them",
            engine.fallback_queries()
        ));
        if backend == BackendChoice::Gpu {
            assert!(engine.fallback_queries() > 0, "no query reached the failing GPU");
        }
    }
}

/// An engine on `backend` whose GPU (`base` otherwise) caches part of the index: `cache` bytes of
/// list cache (S_c) and `stage` bytes of staging buffers (S_b), filled by `policy` from `train`.
#[allow(clippy::too_many_arguments)]
fn cached_engine(
    base: GpuOptions,
    index: &Arc<Index>,
    options: SearchOptions,
    backend: BackendChoice,
    cache: u64,
    stage: u64,
    policy: Policy,
    completion: Completion,
    ratio: f64,
    train: Vec<Request>,
) -> Engine {
    let scorer = Arc::new(Scorer::new(index.clone(), options).unwrap());
    let gpu = GpuOptions {
        memory_budget: Some((cache + stage) as usize),
        cache: Some(CacheBudget {
            cache_bytes: cache,
            stage_bytes: stage,
            shape: None,
            slots: 0,
        }),
        kernels: warpsearch_gpu::testing::kernel_options(),
        ..base
    };
    let cache = CacheOptions {
        policy,
        train,
        ratio: Some(ratio),
        completion,
        epoch: 16,
        // Every plan applied, so that the test sees plan changes (the gain rule has its own test).
        min_gain: 0.0,
        ..CacheOptions::default()
    };
    let options = EngineOptions {
        backend,
        gpu,
        cache: Some(cache),
        ..EngineOptions::default()
    };
    Engine::new(scorer, options).unwrap()
}

/// Budgets from one block to more than the index, every policy, both completions, the GPU alone and
/// the hybrid, bm25 and bm25-static on a global-score order, a call in one chunk or in chunks of 5
/// queries (each sent while the one before computes): always the oracle's answers.
#[test]
fn cached_engine_equals_the_oracle_on_random_indexes() {
    let Some(_gpu) = gpu() else { return };
    let policies = [Policy::Vfb, Policy::Qtf, Policy::QtfDf, Policy::Dynamic];
    let mut hybrid_two_ranges = 0;
    for seed in 0..8u64 {
        let tmp = tempfile::tempdir().unwrap();
        let codec = Codec::ALL[seed as usize % Codec::ALL.len()];
        let global = seed % 2 == 1;
        let (index, v) = random_index(tmp.path(), 0xCAC4E + seed * 7907, codec, global.then_some(0.4));
        let options = SearchOptions {
            ranking: if global {
                Ranking::Bm25Static { alpha: 0.4 }
            } else {
                Ranking::Bm25
            },
            ..SearchOptions::new(&index)
        };
        let queries = random_queries(&index, v, seed);
        let whole = warpsearch_gpu::residency::device_bytes(&index) as u64;
        let block = whole / index.block_metas().len().max(1) as u64 + 64;
        for (b, cache) in [block, whole / 10, whole / 4, whole / 2, whole + whole / 5]
            .into_iter()
            .enumerate()
        {
            let policy = policies[(seed as usize + b) % 4];
            let completion =
                [Completion::Cpu, Completion::Transfer, Completion::Auto][(seed as usize + b) % 3];
            let backend = [BackendChoice::Gpu, BackendChoice::Hybrid][b % 2];
            // Staging from a few blocks' worth (queries then run partly or wholly on the CPU) to plenty.
            let stage = [4 * block, whole / 2 + 4096][(seed as usize + b / 2) % 2];
            let ratio = [1.0, 0.75, 0.5][(seed as usize + b) % 3];
            let oracle = oracle(&index, options);
            let what = format!(
                "seed {seed} {codec} cache {cache} of {whole} B, stage {stage}, {} λ {ratio} {} {}",
                policy.name(),
                completion.name(),
                backend.name()
            );
            let train = requests(&queries[..30], Mode::And, 10);
            let gopts = GpuOptions {
                batch_size: [GpuOptions::default().batch_size, 5][(seed as usize / 2) % 2],
                ..GpuOptions::default()
            };
            let engine = cached_engine(
                gopts, &index, options, backend, cache, stage, policy, completion, ratio, train,
            );
            for mode in [Mode::And, Mode::Or, Mode::AndOr] {
                for k in [10, 1000] {
                    let reqs = requests(&queries, mode, k);
                    // Twice: the dynamic policy replans in between.
                    for pass in 0..2 {
                        if pass > 0 {
                            engine.settle_cache();
                        }
                        for (i, (r, a)) in reqs.iter().zip(engine.search_batch(&reqs)).enumerate() {
                            let want = oracle.search(r).unwrap();
                            let hits = a.unwrap().hits;
                            assert!(
                                same(&hits, &want),
                                "{what} {mode:?} k {k} pass {pass}: query {i} {:?}",
                                r.query.terms
                            );
                        }
                    }
                }
            }
            assert_eq!(engine.fallback_queries(), 0, "{what}: no GPU failure");
            let stats = engine.take_cache_stats().expect("a cached engine");
            // The cache settled between passes: the dynamic policy changed it (the first plan, then at
            // least one replan), and none of its plans failed to apply.
            if policy == Policy::Dynamic && backend == BackendChoice::Gpu && cache < whole {
                assert!(stats.replans >= 2, "{what}: {} plans applied", stats.replans);
            }
            if backend == BackendChoice::Hybrid {
                hybrid_two_ranges += stats.two_ranges;
            }
        }
        eprintln!("cache seed {seed}: every budget, policy and backend equals the oracle");
    }
    // The hybrid's GPU ran queries as two ranges (the cached one and the staged rest) and merged them.
    assert!(
        hybrid_two_ranges > 0,
        "the hybrid never ran a query as two ranges"
    );
    say(&format!(
        "the hybrid ran {hybrid_two_ranges} queries as two ranges"
    ));
}

/// The passages for the cache tests ([`wiki_cached`]).
struct WikiCached {
    index: Arc<Index>,
    /// The first TREC 2005 queries.
    queries: Vec<Query>,
    /// The index's bytes on the device.
    whole: u64,
    options: SearchOptions,
    oracle: CpuSearcher,
}

/// The passages with their first `n` TREC 2005 queries and the oracle; None (saying why) without them.
fn wiki_cached(n: usize) -> Option<WikiCached> {
    let (index, queries_path) = wiki()?;
    let text = std::fs::read_to_string(&queries_path).unwrap();
    let queries: Vec<Query> = text.lines().take(n).map(|q| Query::parse(&index, q)).collect();
    let whole = warpsearch_gpu::residency::device_bytes(&index) as u64;
    let options = SearchOptions::new(&index);
    let oracle = oracle(&index, options);
    Some(WikiCached {
        index,
        queries,
        whole,
        options,
        oracle,
    })
}

/// How many answers differ from the oracle's (every answer must be a success).
fn differing(got: &[Result<Answer, IndexError>], want: &[Result<Answer, IndexError>]) -> usize {
    got.iter()
        .zip(want)
        .filter(|(g, w)| !same(&g.as_ref().unwrap().hits, &w.as_ref().unwrap().hits))
        .count()
}

/// The passages with a quarter and a tenth of the index cached, trained on the first 2,500 TREC 2005
/// queries and run on the next 2,500, against the oracle.
#[test]
fn cached_engine_equals_the_oracle_on_wikipedia_passages() {
    let Some(_gpu) = gpu() else { return };
    let Some(w) = wiki_cached(5000) else { return };
    let (index, queries, whole, options, oracle) = (w.index, w.queries, w.whole, w.options, w.oracle);
    for mode in [Mode::And, Mode::Or] {
        let reqs = requests(&queries, mode, 10);
        let want = oracle.search_batch(&reqs[2500..]);
        for (policy, share, backend) in [
            (Policy::Vfb, 4, BackendChoice::Gpu),
            (Policy::Qtf, 10, BackendChoice::Gpu),
            (Policy::Dynamic, 4, BackendChoice::Hybrid),
        ] {
            let engine = cached_engine(
                GpuOptions::default(),
                &index,
                options,
                backend,
                whole / share,
                64 << 20,
                policy,
                Completion::Auto,
                1.0,
                reqs[..2500].to_vec(),
            );
            let got = engine.search_batch(&reqs[2500..]);
            let differ = differing(&got, &want);
            assert_eq!(
                differ,
                0,
                "{mode:?} {} 1/{share} {}: {differ} of 2500 differ",
                policy.name(),
                backend.name()
            );
            let g = engine.take_gpu_stats().unwrap();
            eprintln!(
                "wiki cache {mode:?} {} 1/{share} {}: 2500 queries equal the oracle; hit rate {:.3}, {:.2} MiB staged",
                policy.name(),
                backend.name(),
                g.hit_rate().unwrap_or(0.0),
                g.staged_bytes as f64 / (1u64 << 20) as f64
            );
        }
    }
}

/// The dynamic policy's plans applied while batches run: calls of 64 queries whose blocks outside an
/// eighth of the index fill 4 MiB of staging, so that an AND call makes several batches and a plan
/// (one every 16 queries) lands behind the last with the one before it still in flight (an OR call:
/// behind its one batch). Passages, trained on TREC 2005 queries 1–1,000, run three times on
/// 1,001–3,000: every answer equals the oracle, and plans were applied.
#[test]
fn dynamic_plans_applied_while_batches_run_keep_answers_exact() {
    let Some(_gpu) = gpu() else { return };
    let Some(w) = wiki_cached(3000) else { return };
    let (index, queries, whole, options, oracle) = (w.index, w.queries, w.whole, w.options, w.oracle);
    let base = GpuOptions {
        batch_size: 64,
        ..GpuOptions::default()
    };
    for mode in [Mode::And, Mode::Or] {
        let reqs = requests(&queries, mode, 10);
        let want = oracle.search_batch(&reqs[1000..]);
        let engine = cached_engine(
            base,
            &index,
            options,
            BackendChoice::Gpu,
            whole / 8,
            8 << 20,
            Policy::Dynamic,
            Completion::Auto,
            1.0,
            reqs[..1000].to_vec(),
        );
        for pass in 0..3 {
            let got = engine.search_batch(&reqs[1000..]);
            let differ = differing(&got, &want);
            assert_eq!(differ, 0, "{mode:?} pass {pass}: {differ} of 2000 differ");
        }
        let stats = engine.take_cache_stats().expect("a cached engine");
        // The first plan, then (at an epoch of 16 queries) one in nearly every call.
        assert!(stats.replans >= 3, "{mode:?}: {} plans applied", stats.replans);
        // AND's calls make several batches, so that a plan lands with another batch still in flight
        // (OR's fit one batch a call here: 96 in 96 calls on the H200).
        let calls = 3 * 2000u64.div_ceil(64);
        let batches = engine.take_gpu_stats().expect("a GPU").batches;
        if mode == Mode::And {
            assert!(batches > calls, "{mode:?}: {batches} batches in {calls} calls");
        }
        eprintln!(
            "dynamic mid-call {mode:?}: 3 x 2000 queries equal the oracle; {} plans applied, {} lists changed, {} to the CPU",
            stats.replans, stats.lists_changed, stats.cpu_only
        );
    }
}
