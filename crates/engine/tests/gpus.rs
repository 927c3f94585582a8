//! Several engines over one index as one (replicas, one per GPU): every answer equals the exhaustive
//! oracle's (docIDs and score bits), whichever replica took the query, for closed-loop batches (cut
//! among the replicas) and for submissions (to the least loaded, large ones cut); a replica whose GPU
//! fails is taken out while the others answer, and what it failed is answered on its CPU.
//!
//! The replicas of CPU engines run everywhere; those on GPUs print "skipped: …" where the devices are
//! missing and run on the lent GPU machines.

mod common;

use std::sync::Arc;

use warpsearch_codec::Codec;
use warpsearch_engine::{BackendChoice, Collect, Engine, EngineConfig, EngineOptions, GpuSet, Policy};
use warpsearch_gpu::testing::say;
use warpsearch_gpu::GpuOptions;
use warpsearch_index::Index;
use warpsearch_query::{Answer, Mode, Request, Scorer, SearchOptions};

use common::{oracle, random_index, random_queries, requests, same};

/// Every request answered by `engine`, as a batch and as submissions of one and of many, equals the
/// oracle's answer.
fn check(engine: &Engine, index: &Arc<Index>, reqs: &[Request], what: &str) {
    let oracle = oracle(index, SearchOptions::new(index));
    let by_batch = engine.search_batch(reqs);
    let collect = Arc::new(Collect::new(reqs.len()));
    // The first requests one by one (each to the least loaded), the rest at once (cut).
    let one_by_one = reqs.len().min(64);
    for (i, r) in reqs[..one_by_one].iter().enumerate() {
        engine.submit(i as u64, vec![r.clone()], None, collect.clone());
    }
    engine.submit(
        one_by_one as u64,
        reqs[one_by_one..].to_vec(),
        None,
        collect.clone(),
    );
    let by_submission = collect.wait();
    for (how, answers) in [("batch", by_batch), ("submissions", by_submission)] {
        assert_eq!(answers.len(), reqs.len(), "{what}, {how}");
        for (i, (r, a)) in reqs.iter().zip(answers).enumerate() {
            let want = oracle.search(r).unwrap();
            let got: Answer = a.unwrap_or_else(|e| panic!("{what}, {how}: query {i}: {e}"));
            assert!(
                same(&got.hits, &want),
                "{what}, {how}: query {i} {:?} {:?} k {}: {:?} against the oracle's {:?}",
                r.query.terms,
                r.mode,
                r.k,
                got.hits,
                want
            );
        }
    }
}

/// 1,500 random requests of every mode and k 10 and 1,000 (enough to be cut among replicas).
fn mixed_requests(index: &Index, seed: u64) -> Vec<Request> {
    let queries = random_queries(index, 6, seed);
    let mut out = Vec::new();
    while out.len() < 1500 {
        for mode in [Mode::And, Mode::Or, Mode::AndOr] {
            for k in [10, 1000] {
                out.extend(requests(&queries, mode, k));
            }
        }
    }
    out.truncate(1500);
    out
}

fn engine(index: &Arc<Index>, backend: BackendChoice, device: usize, gpu: GpuOptions) -> Engine {
    let scorer = Arc::new(Scorer::new(index.clone(), SearchOptions::new(index)).unwrap());
    let options = EngineOptions {
        backend,
        cpu_threads: 1,
        gpu: GpuOptions { max_k: 1000, ..gpu },
        device,
        ..EngineOptions::default()
    };
    Engine::new(scorer, options).unwrap()
}

#[test]
fn replicas_of_cpu_engines_answer_as_one() {
    let tmp = tempfile::tempdir().unwrap();
    let (index, _) = random_index(tmp.path(), 31, Codec::SimdBp, None);
    let reqs = mixed_requests(&index, 5);
    let engines = (0..3)
        .map(|_| engine(&index, BackendChoice::Cpu, 0, GpuOptions::default()))
        .collect();
    let replicas = Engine::replicas(engines).unwrap();
    assert!(
        replicas.describe().starts_with("3 replicas"),
        "{}",
        replicas.describe()
    );
    check(&replicas, &index, &reqs, "3 CPU replicas");
}

#[test]
fn replicas_of_different_indexes_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let (da, db) = (tmp.path().join("a"), tmp.path().join("b"));
    std::fs::create_dir_all(&da).unwrap();
    std::fs::create_dir_all(&db).unwrap();
    let (a, _) = random_index(&da, 3, Codec::SimdBp, None);
    let (b, _) = random_index(&db, 3, Codec::SimdBp, None);
    let engines = vec![
        engine(&a, BackendChoice::Cpu, 0, GpuOptions::default()),
        engine(&b, BackendChoice::Cpu, 0, GpuOptions::default()),
    ];
    let err = Engine::replicas(engines).err().expect("refused");
    assert!(err.to_string().contains("share one index"), "{err}");
    assert!(Engine::replicas(Vec::new()).is_err());
}

/// `--gpus auto` on every device present: the index on each (replicas where two or more), and with
/// `--gpu-feeders 2` twice on each, a replica per thread that feeds it.
#[test]
fn every_gpu_answers_exactly() {
    let present = warpsearch_gpu::device_count();
    if present == 0 {
        say("skipped: no CUDA device");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let (index, _) = random_index(tmp.path(), 41, Codec::SimdBp, None);
    let reqs = mixed_requests(&index, 9);
    for (backend, feeders) in [
        (BackendChoice::Gpu, 1),
        (BackendChoice::Auto, 1),
        (BackendChoice::Gpu, 2),
    ] {
        let mut config = EngineConfig {
            backend,
            ..EngineConfig::default()
        };
        config.gpu.gpus = GpuSet::Auto;
        config.gpu.feeders = feeders;
        let engine = config.open(index.clone(), Mode::AndOr, 1000).unwrap();
        assert!(engine.has_gpu(), "{}", engine.describe());
        let replicas = present * feeders as usize;
        if replicas > 1 {
            assert!(
                engine.describe().starts_with(&format!("{replicas} replicas")),
                "{}",
                engine.describe()
            );
        }
        say(&format!(
            "{present} CUDA devices, {feeders} feeders: {}",
            engine.describe()
        ));
        let what = format!("{backend:?} on {present} GPUs, {feeders} feeders");
        check(&engine, &index, &reqs, &what);
        assert_eq!(engine.gpu_failures(), 0);
        assert_eq!(engine.fallback_queries(), 0, "{:?}", engine.take_notes());
    }
}

/// `--gpu-feeders` out of range, or above 1 with a list cache or the hybrid, is refused before any GPU
/// is opened (with or without one).
#[test]
fn feeders_where_they_do_not_apply_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let (index, _) = random_index(tmp.path(), 53, Codec::SimdBp, None);
    let refused = |config: EngineConfig, why: &str| {
        let err = config.open(index.clone(), Mode::Or, 10).err().expect("refused");
        let err = err.to_string();
        assert!(err.contains("gpu-feeders") && err.contains(why), "{err}");
    };
    for feeders in [0, 17] {
        let mut config = EngineConfig::default();
        config.gpu.feeders = feeders;
        refused(config, "give 1 to 16");
    }
    let mut cached = EngineConfig {
        backend: BackendChoice::Gpu,
        ..EngineConfig::default()
    };
    cached.gpu.feeders = 2;
    cached.cache.policy = Some(Policy::Dynamic);
    refused(cached, "gpu-cache");
    let mut hybrid = EngineConfig {
        backend: BackendChoice::Hybrid,
        ..EngineConfig::default()
    };
    hybrid.gpu.feeders = 2;
    refused(hybrid, "hybrid");
}

/// Two GPUs named by number, and the refusal of a device that is not there.
#[test]
fn replicas_across_two_gpus() {
    let present = warpsearch_gpu::device_count();
    if present < 2 {
        say(&format!("skipped: {present} CUDA devices, two needed"));
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let (index, _) = random_index(tmp.path(), 43, Codec::SimdBp, None);
    let mut config = EngineConfig {
        backend: BackendChoice::Gpu,
        ..EngineConfig::default()
    };
    config.gpu.gpus = GpuSet::Devices(vec![1, 0]);
    let engine = config.open(index.clone(), Mode::AndOr, 1000).unwrap();
    assert!(
        engine.describe().starts_with("2 replicas"),
        "{}",
        engine.describe()
    );
    check(&engine, &index, &mixed_requests(&index, 13), "devices 1,0");
    config.gpu.gpus = GpuSet::Devices(vec![0, present]);
    let err = config.open(index, Mode::AndOr, 1000).err().expect("refused");
    assert!(
        err.to_string().contains(&format!("no CUDA device {present}")),
        "{err}"
    );
}

/// Replicas on two GPUs, each with a list cache of its own (at most half of each list cached, the
/// rest staged with each batch): answers equal the oracle's.
#[test]
fn replicas_with_list_caches() {
    let present = warpsearch_gpu::device_count();
    if present < 2 {
        say(&format!("skipped: {present} CUDA devices, two needed"));
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let (index, _) = random_index(tmp.path(), 47, Codec::SimdBp, None);
    // VFB's training log; the dynamic policy learns from the stream.
    let train = tmp.path().join("train.txt");
    std::fs::write(&train, "t0 t1\nt2\nt3 t4 t5\nt1 t6\nt0\n").unwrap();
    for policy in [Policy::Vfb, Policy::Dynamic] {
        let mut config = EngineConfig {
            backend: BackendChoice::Gpu,
            ..EngineConfig::default()
        };
        config.gpu.gpus = GpuSet::First(2);
        config.gpu.memory = Some(8 << 20);
        config.cache.policy = Some(policy);
        config.cache.buffer = Some(1 << 20);
        config.cache.ratio = Some(0.5);
        config.cache.train = (policy == Policy::Vfb).then(|| train.clone());
        let engine = config.open(index.clone(), Mode::AndOr, 1000).unwrap();
        assert!(
            engine.describe().starts_with("2 replicas"),
            "{}",
            engine.describe()
        );
        check(&engine, &index, &mixed_requests(&index, 17), policy.name());
        assert_eq!(engine.fallback_queries(), 0, "{:?}", engine.take_notes());
    }
}

/// A replica whose GPU fails every batch: its share of the first batch is answered on its CPU
/// (exactly), then it is taken out and the other replica answers alone.
#[test]
fn a_replica_whose_gpu_fails_is_taken_out() {
    if warpsearch_gpu::device_count() == 0 {
        say("skipped: no CUDA device");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let (index, _) = random_index(tmp.path(), 47, Codec::SimdBp, None);
    let reqs = mixed_requests(&index, 17);
    let failing = GpuOptions {
        fail_batches: true,
        ..GpuOptions::default()
    };
    let engines = vec![
        engine(&index, BackendChoice::Gpu, 0, GpuOptions::default()),
        engine(&index, BackendChoice::Gpu, 0, failing),
    ];
    let replicas = Engine::replicas(engines).unwrap();
    let oracle = oracle(&index, SearchOptions::new(&index));
    let first = replicas.search_batch(&reqs);
    for (r, a) in reqs.iter().zip(first) {
        assert!(same(&a.unwrap().hits, &oracle.search(r).unwrap()));
    }
    let failed = replicas.gpu_failures();
    assert!(failed > 0, "the failing replica took no part of the batch");
    assert_eq!(replicas.fallback_queries(), failed);
    // Taken out: the next batch and submissions go to the other replica, and nothing more fails.
    check(&replicas, &index, &reqs, "one replica out");
    assert_eq!(replicas.gpu_failures(), failed);
}
