//! The front door: every backend takes submissions from many threads at once and answers each query
//! exactly once, under its own id, with the exhaustive oracle's documents and score bits; a dropped
//! engine answers what was queued first; answers say whether their deadline was missed; queries whose
//! reply is no longer wanted are dropped.
//!
//! The GPU variants need a CUDA device; where there is none they print "skipped: no CUDA device".

mod common;

use std::collections::HashSet;
use std::sync::mpsc::channel;
use std::sync::Arc;
use std::time::Duration;

use warpsearch_codec::Codec;
use warpsearch_engine::{BackendChoice, Done, Engine, EngineOptions, HybridOptions, Reply};
use warpsearch_index::Index;
use warpsearch_query::{Mode, Request, Scorer, SearchOptions};

use common::{oracle, random_index, random_queries, same};

/// An engine on `backend` (three CPU threads or workers), or None where the GPU is asked for and
/// there is none (said on stderr).
fn engine(index: &Arc<Index>, backend: BackendChoice) -> Option<Engine> {
    if backend == BackendChoice::Gpu && warpsearch_gpu::testing::gpu().is_none() {
        return None;
    }
    let scorer = Arc::new(Scorer::new(index.clone(), SearchOptions::new(index)).unwrap());
    let options = EngineOptions {
        backend,
        cpu_threads: 3,
        hybrid: Some(HybridOptions {
            cpu_workers: 3,
            ..HybridOptions::default()
        }),
        ..EngineOptions::default()
    };
    Some(Engine::new(scorer, options).unwrap())
}

/// Request `i` of a varied stream: AND and OR, k from 1 to 12, over the random queries.
fn request(queries: &[warpsearch_query::Query], i: usize) -> Request {
    let mode = [Mode::And, Mode::Or, Mode::AndOr][i % 3];
    Request::new(queries[i % queries.len()].clone(), mode, 1 + i % 12)
}

/// Four threads submit batches of 1, 17, 0, 64 and 2 queries each, ids disjoint, to one sink: every
/// id comes back once, with the oracle's answer.
fn submissions_from_many_threads(backend: BackendChoice) {
    let tmp = tempfile::tempdir().unwrap();
    let (index, v) = random_index(tmp.path(), 31, Codec::SimdBp, None);
    let Some(engine) = engine(&index, backend) else {
        return;
    };
    let queries = random_queries(&index, v, 5);
    let oracle = oracle(&index, SearchOptions::new(&index));
    let (tx, rx) = channel::<Done>();
    let sizes = [1usize, 17, 0, 64, 2];
    let per_thread: usize = sizes.iter().sum();
    std::thread::scope(|s| {
        for t in 0..4 {
            let (engine, queries, tx) = (&engine, &queries, tx.clone());
            s.spawn(move || {
                let mut id = t * per_thread;
                for &n in &sizes {
                    let reqs = (id..id + n).map(|i| request(queries, i)).collect();
                    let reply: Arc<dyn Reply> = Arc::new(tx.clone());
                    engine.submit(id as u64, reqs, Some(Duration::from_secs(60)), reply);
                    id += n;
                }
            });
        }
    });
    drop(tx);
    let mut seen = HashSet::new();
    for done in rx.iter().take(4 * per_thread) {
        let i = done.id as usize;
        assert!(seen.insert(i), "{backend:?}: id {i} answered twice");
        let want = oracle.search(&request(&queries, i)).unwrap();
        assert!(same(&done.result.unwrap().hits, &want), "{backend:?}: query {i}");
        assert!(!done.missed_deadline, "{backend:?}: a minute is enough");
    }
    assert_eq!(seen.len(), 4 * per_thread, "{backend:?}: every query answered");
    drop(engine); // joins the engine's threads: returns only if every thread stops
    assert!(
        rx.try_recv().is_err(),
        "{backend:?}: no answer beyond one per query"
    );
}

#[test]
fn submissions_from_many_threads_cpu() {
    submissions_from_many_threads(BackendChoice::Cpu);
}

#[test]
fn submissions_from_many_threads_hybrid() {
    submissions_from_many_threads(BackendChoice::Hybrid);
}

#[test]
fn submissions_from_many_threads_auto() {
    submissions_from_many_threads(BackendChoice::Auto);
}

#[test]
fn submissions_from_many_threads_gpu() {
    submissions_from_many_threads(BackendChoice::Gpu);
}

/// The GPU backend's continuous calls: single queries streamed from four threads, with 2, 3 and 8
/// pipeline slots and kernel batches of 5 queries (so that calls are in flight together, finish out of
/// order and are cut into several batches), and with every batch failing (answered on the CPU); and
/// `auto`'s: every query comes back once, with the oracle's answer.
#[test]
fn streamed_single_queries_come_back_once_whatever_the_gpu_slots_gpu() {
    if warpsearch_gpu::testing::gpu().is_none() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let (index, v) = random_index(tmp.path(), 91, Codec::SimdBp, None);
    let queries = random_queries(&index, v, 13);
    let oracle = oracle(&index, SearchOptions::new(&index));
    let runs = [
        (BackendChoice::Gpu, 2, false),
        (BackendChoice::Gpu, 3, false),
        (BackendChoice::Gpu, 8, false),
        (BackendChoice::Gpu, 3, true),
        (BackendChoice::Auto, 4, false),
        (BackendChoice::Auto, 3, true),
    ];
    for (backend, slots, fail_batches) in runs {
        let scorer = Arc::new(Scorer::new(index.clone(), SearchOptions::new(&index)).unwrap());
        let options = EngineOptions {
            backend,
            cpu_threads: 4,
            gpu: warpsearch_gpu::GpuOptions {
                slots,
                batch_size: 5,
                fail_batches,
                ..Default::default()
            },
            ..EngineOptions::default()
        };
        let engine = Engine::new(scorer, options).unwrap();
        let (tx, rx) = channel::<Done>();
        let per_thread = 150;
        std::thread::scope(|s| {
            for t in 0..4 {
                let (engine, queries, tx) = (&engine, &queries, tx.clone());
                s.spawn(move || {
                    for i in t * per_thread..(t + 1) * per_thread {
                        let reply: Arc<dyn Reply> = Arc::new(tx.clone());
                        engine.submit(i as u64, vec![request(queries, i)], None, reply);
                        if i % 7 == 0 {
                            std::thread::yield_now();
                        }
                    }
                });
            }
        });
        drop(tx);
        let what = format!("{backend:?}, {slots} slots, failing batches {fail_batches}");
        let mut seen = HashSet::new();
        for done in rx.iter().take(4 * per_thread) {
            let i = done.id as usize;
            assert!(seen.insert(i), "{what}: id {i} answered twice");
            let want = oracle.search(&request(&queries, i)).unwrap();
            assert!(same(&done.result.unwrap().hits, &want), "{what}: query {i}");
        }
        assert_eq!(seen.len(), 4 * per_thread, "{what}: every query answered");
        drop(engine);
        assert!(rx.try_recv().is_err(), "{what}: one answer per query");
    }
}

/// Submissions queued behind busy threads are answered before a dropped engine's threads stop.
fn dropped_engine_answers_what_is_queued(backend: BackendChoice) {
    let tmp = tempfile::tempdir().unwrap();
    let (index, v) = random_index(tmp.path(), 57, Codec::SimdBp, None);
    let Some(engine) = engine(&index, backend) else {
        return;
    };
    let queries = random_queries(&index, v, 9);
    let (tx, rx) = channel::<Done>();
    for s in 0..20 {
        let reqs = (0..50).map(|i| request(&queries, s * 50 + i)).collect();
        engine.submit((s * 50) as u64, reqs, None, Arc::new(tx.clone()));
    }
    drop(engine);
    drop(tx);
    let ids: HashSet<u64> = rx.iter().map(|d| d.id).collect();
    assert_eq!(ids.len(), 1000, "{backend:?}: every queued query answered");
}

#[test]
fn dropped_engine_answers_what_is_queued_cpu() {
    dropped_engine_answers_what_is_queued(BackendChoice::Cpu);
}

#[test]
fn dropped_engine_answers_what_is_queued_hybrid() {
    dropped_engine_answers_what_is_queued(BackendChoice::Hybrid);
}

#[test]
fn dropped_engine_answers_what_is_queued_auto() {
    dropped_engine_answers_what_is_queued(BackendChoice::Auto);
}

#[test]
fn dropped_engine_answers_what_is_queued_gpu() {
    dropped_engine_answers_what_is_queued(BackendChoice::Gpu);
}

/// A reply that stops wanting answers at its first one, counting what still comes.
#[derive(Default)]
struct Abandoning {
    ids: std::sync::Mutex<Vec<u64>>,
    gone: std::sync::atomic::AtomicBool,
}

impl Reply for Abandoning {
    fn send(&self, done: Done) {
        self.ids.lock().unwrap().push(done.id);
        self.gone.store(true, std::sync::atomic::Ordering::Relaxed);
    }

    fn wanted(&self) -> bool {
        !self.gone.load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// Abandoned requests (a server's client that hung up): once a reply is no longer wanted, the
/// submissions and queries not yet started are dropped unanswered, what was answered came once each,
/// and the engine lets go of the reply. The first submission goes alone and is answered before the
/// others are queued: queued together, the GPU backend may take all of them into its first call.
fn queries_no_longer_wanted_are_dropped(backend: BackendChoice) {
    let tmp = tempfile::tempdir().unwrap();
    let (index, v) = random_index(tmp.path(), 57, Codec::SimdBp, None);
    let Some(engine) = engine(&index, backend) else {
        return;
    };
    let queries = random_queries(&index, v, 9);
    let reply = Arc::new(Abandoning::default());
    let (submissions, size) = (300, 10);
    let since = std::time::Instant::now();
    for s in 0..submissions {
        let reqs = (0..size).map(|i| request(&queries, s * size + i)).collect();
        engine.submit((s * size) as u64, reqs, None, reply.clone());
        while s == 0 && reply.ids.lock().unwrap().is_empty() {
            assert!(
                since.elapsed() < Duration::from_secs(60),
                "{backend:?}: the first submission was not answered"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    while Arc::strong_count(&reply) > 1 {
        assert!(
            since.elapsed() < Duration::from_secs(60),
            "{backend:?}: the engine still holds the reply"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let ids = reply.ids.lock().unwrap().clone();
    let unique: HashSet<u64> = ids.iter().copied().collect();
    assert_eq!(unique.len(), ids.len(), "{backend:?}: a query answered twice");
    assert!(
        !ids.is_empty() && ids.len() < submissions * size / 2,
        "{backend:?}: {} of {} queries answered after their reply was abandoned",
        ids.len(),
        submissions * size
    );
    drop(engine);
}

#[test]
fn queries_no_longer_wanted_are_dropped_cpu() {
    queries_no_longer_wanted_are_dropped(BackendChoice::Cpu);
}

#[test]
fn queries_no_longer_wanted_are_dropped_hybrid() {
    queries_no_longer_wanted_are_dropped(BackendChoice::Hybrid);
}

#[test]
fn queries_no_longer_wanted_are_dropped_auto() {
    queries_no_longer_wanted_are_dropped(BackendChoice::Auto);
}

#[test]
fn queries_no_longer_wanted_are_dropped_gpu() {
    queries_no_longer_wanted_are_dropped(BackendChoice::Gpu);
}

/// An answer later than its deadline says so; one without a deadline never does.
fn answers_say_when_their_deadline_was_missed(backend: BackendChoice) {
    let tmp = tempfile::tempdir().unwrap();
    let (index, v) = random_index(tmp.path(), 91, Codec::SimdBp, None);
    let Some(engine) = engine(&index, backend) else {
        return;
    };
    let queries = random_queries(&index, v, 13);
    for (deadline, missed) in [(Some(Duration::ZERO), true), (None, false)] {
        let (tx, rx) = channel::<Done>();
        let reqs: Vec<Request> = (0..40).map(|i| request(&queries, i)).collect();
        engine.submit(0, reqs, deadline, Arc::new(tx));
        let answers: Vec<Done> = rx.iter().collect();
        assert_eq!(answers.len(), 40, "{backend:?}");
        assert!(
            answers.iter().all(|d| d.missed_deadline == missed),
            "{backend:?}: deadline {deadline:?}"
        );
    }
}

#[test]
fn answers_say_when_their_deadline_was_missed_cpu() {
    answers_say_when_their_deadline_was_missed(BackendChoice::Cpu);
}

#[test]
fn answers_say_when_their_deadline_was_missed_hybrid() {
    answers_say_when_their_deadline_was_missed(BackendChoice::Hybrid);
}

#[test]
fn answers_say_when_their_deadline_was_missed_auto() {
    answers_say_when_their_deadline_was_missed(BackendChoice::Auto);
}

#[test]
fn answers_say_when_their_deadline_was_missed_gpu() {
    answers_say_when_their_deadline_was_missed(BackendChoice::Gpu);
}

/// `search_batch` is the submission API waited on: the same answers, in order, from every backend,
/// for a batch large enough that the CPU's threads claim and answer it several queries at a time.
#[test]
fn search_batch_equals_the_oracle_on_every_backend() {
    let tmp = tempfile::tempdir().unwrap();
    let (index, v) = random_index(tmp.path(), 73, Codec::PForDelta, None);
    let queries = random_queries(&index, v, 21);
    let oracle = oracle(&index, SearchOptions::new(&index));
    let reqs: Vec<Request> = (0..3001).map(|i| request(&queries, i)).collect();
    for backend in [
        BackendChoice::Cpu,
        BackendChoice::Hybrid,
        BackendChoice::Gpu,
        BackendChoice::Auto,
    ] {
        let Some(engine) = engine(&index, backend) else {
            continue;
        };
        let got = engine.search_batch(&reqs);
        assert_eq!(got.len(), reqs.len());
        for (i, (r, a)) in reqs.iter().zip(got).enumerate() {
            assert!(
                same(&a.unwrap().hits, &oracle.search(r).unwrap()),
                "{backend:?}: query {i}"
            );
        }
        assert!(engine.search_batch(&[]).is_empty());
    }
}
