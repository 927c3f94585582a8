//! A sharded index answers through the engine exactly as the same collection built as one index: the
//! same documents (collection docIDs) and score bits, for AND, OR and and-or, k of 10 and 1,000, BM25
//! and bm25-static, every CPU algorithm, on random collections cut at block edges and not, into one
//! shard, a few, and one shard a document; with shards that match nothing, k above a shard's matches,
//! and ties across shards (documents of equal text) broken by the smaller collection docID. The
//! oracle is the exhaustive evaluation of the single index.

mod common;

use std::path::Path;
use std::sync::Arc;

use warpsearch_codec::Codec;
use warpsearch_engine::{BackendChoice, Done, Engine, EngineConfig, Policy, RankingChoice, ServedBy};
use warpsearch_index::build::{build_from_jsonl, BuildOptions};
use warpsearch_index::shards::{ShardPart, ShardSplit, Sharding};
use warpsearch_index::{AnalyzerConfig, Bm25Params, DocOrder, Index, WriterOptions};
use warpsearch_query::{Algorithm, Mode, Query, Request, Scored};

use common::Rng;

/// A random collection of `n` documents as JSONL, with static scores in `dir/static.tsv`: common and
/// rare terms, term `solo` in the last document only, and every ninth document a copy of the text of
/// one 100 documents before (ties across shards).
fn collection(dir: &Path, seed: u64, n: usize) -> std::path::PathBuf {
    let mut rng = Rng(seed | 1);
    let densities = [0.9, 0.5, 0.2, 0.05, 0.01, 0.003, 0.3, 0.1];
    let (mut lines, mut statics) = (String::new(), String::new());
    let mut texts: Vec<String> = Vec::with_capacity(n);
    for d in 0..n {
        let text = if d % 9 == 8 && d >= 100 {
            texts[d - 100].clone()
        } else {
            let mut words = Vec::new();
            for (j, &p) in densities.iter().enumerate() {
                if (rng.below(10_000) as f64) < p * 10_000.0 {
                    let tf = [1, 1, 1, 2, 2, 3, 7][rng.below(7) as usize];
                    words.extend(std::iter::repeat_n(format!("t{j}"), tf));
                }
            }
            // A term of the first documents only, so later shards lack it.
            if d < n / 5 && rng.below(3) == 0 {
                words.push("early".into());
            }
            if d + 1 == n {
                words.push("solo".into());
            }
            words.extend(std::iter::repeat_n("filler".to_string(), d % 4));
            words.join(" ")
        };
        lines.push_str(&format!("{{\"id\": \"d{d}\", \"contents\": \"{text}\"}}\n"));
        // Few distinct values: ties of bm25-static's prior too.
        statics.push_str(&format!("d{d}\t{}\n", rng.below(20) as f32 / 3.0));
        texts.push(text);
    }
    std::fs::write(dir.join("static.tsv"), statics).unwrap();
    let input = dir.join("in.jsonl");
    std::fs::write(&input, lines).unwrap();
    input
}

fn options(dir: &Path, alpha: Option<f32>, shards: Option<Sharding>) -> BuildOptions {
    let mut opts = BuildOptions::new(WriterOptions {
        codec: Codec::SimdBp,
        analyzer: AnalyzerConfig::whitespace(),
        bm25: Bm25Params::default(),
        doc_order: DocOrder::Input,
        force: true,
    });
    opts.static_scores = Some(dir.join("static.tsv"));
    opts.reorder_alpha = alpha;
    opts.shards = shards;
    opts
}

fn build(dir: &Path, input: &Path, name: &str, alpha: Option<f32>, shards: Option<Sharding>) -> Arc<Index> {
    let out = dir.join(name);
    build_from_jsonl(input, &out, &options(dir, alpha, shards)).unwrap();
    Arc::new(Index::open(out).unwrap())
}

fn engine(index: &Arc<Index>, ranking: RankingChoice, algorithm: Algorithm, mode: Mode) -> Engine {
    engine_on(index, BackendChoice::Cpu, ranking, algorithm, mode, &|_| {})
}

/// Settings an engine is opened with beyond its backend, ranking and algorithm.
type Configure = dyn Fn(&mut EngineConfig);

fn engine_on(
    index: &Arc<Index>,
    backend: BackendChoice,
    ranking: RankingChoice,
    algorithm: Algorithm,
    mode: Mode,
    configure: &Configure,
) -> Engine {
    let mut config = EngineConfig {
        backend,
        threads: 2,
        ..EngineConfig::default()
    };
    config.scoring.ranking = ranking;
    config.scoring.algorithm = algorithm;
    configure(&mut config);
    config.open(index.clone(), mode, 1000).unwrap()
}

fn queries(index: &Index, seed: u64) -> Vec<Query> {
    let mut rng = Rng(seed | 1);
    let mut texts: Vec<String> = (0..40)
        .map(|_| {
            (0..1 + rng.below(4))
                .map(|_| match rng.below(12) {
                    0 => "early".to_string(),
                    1 => "solo".to_string(),
                    2 => "nowhere".to_string(),
                    _ => format!("t{}", rng.below(8)),
                })
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect();
    texts.extend(
        [
            "solo", "early", "early t5", "t0 t0 t1", "solo t0", "nowhere", "filler",
        ]
        .map(String::from),
    );
    texts.iter().map(|t| Query::parse(index, t)).collect()
}

fn same(a: &[Scored], b: &[Scored]) -> bool {
    common::same(a, b)
}

/// Every request on the single index's oracle and on the sharded index's engine: equal answers.
fn check(single: &Arc<Index>, sharded: &Arc<Index>, what: &str) {
    check_on(single, sharded, BackendChoice::Cpu, what)
}

/// [`check`] with the shards' engines on `backend` (on the GPUs, the algorithm is the GPU's own).
fn check_on(single: &Arc<Index>, sharded: &Arc<Index>, backend: BackendChoice, what: &str) {
    check_with(single, sharded, backend, &|_| {}, what)
}

/// [`check_on`] with the shards' engines opened with `configure` too.
fn check_with(
    single: &Arc<Index>,
    sharded: &Arc<Index>,
    backend: BackendChoice,
    configure: &Configure,
    what: &str,
) {
    assert!(sharded.is_sharded(), "{what}: not sharded");
    let rankings = match single.static_scores() {
        Some(_) => vec![RankingChoice::Bm25, RankingChoice::Bm25Static],
        None => vec![RankingChoice::Bm25],
    };
    for ranking in rankings {
        for mode in [Mode::And, Mode::Or, Mode::AndOr] {
            let oracle = engine(single, ranking, Algorithm::Exhaustive, mode);
            let algorithms = match mode {
                _ if backend != BackendChoice::Cpu => vec![Algorithm::Auto],
                Mode::And => vec![Algorithm::Auto, Algorithm::Daat, Algorithm::Exhaustive],
                Mode::Or => vec![Algorithm::Auto, Algorithm::MaxScore, Algorithm::BlockMaxWand],
                // and-or's steps reach each shard as plain AND and OR, whatever the algorithm.
                Mode::AndOr => vec![
                    Algorithm::Auto,
                    Algorithm::Daat,
                    Algorithm::MaxScore,
                    Algorithm::BlockMaxWand,
                ],
            };
            for algorithm in algorithms {
                let shards = engine_on(sharded, backend, ranking, algorithm, mode, configure);
                if backend != BackendChoice::Cpu {
                    assert!(
                        shards.has_gpu(),
                        "{what}: the shards are not on the GPUs: {}",
                        shards.describe()
                    );
                }
                for k in [10, 1000] {
                    let one: Vec<Request> = queries(single, 7)
                        .into_iter()
                        .map(|q| Request::new(q, mode, k))
                        .collect();
                    let many: Vec<Request> = queries(sharded, 7)
                        .into_iter()
                        .map(|q| Request::new(q, mode, k))
                        .collect();
                    let want = oracle.search_batch(&one);
                    let got = shards.search_batch(&many);
                    for (i, (w, g)) in want.iter().zip(&got).enumerate() {
                        let (w, g) = (&w.as_ref().unwrap().hits, &g.as_ref().unwrap().hits);
                        assert!(
                            same(w, g),
                            "{what}: {ranking:?} {mode:?} {algorithm:?} k {k}, query {i} ({:?}): \
                             the single index gives {w:?}\nthe shards {g:?}",
                            one[i].query
                        );
                    }
                }
                // Who answered: the CPU's shards say the CPU; the GPUs' shards say a GPU took part.
                let reqs: Vec<Request> = queries(sharded, 7)
                    .into_iter()
                    .map(|q| Request::new(q, mode, 10))
                    .collect();
                let (tx, rx) = std::sync::mpsc::channel::<Done>();
                shards.submit(0, reqs.clone(), None, Arc::new(tx));
                let served: Vec<ServedBy> = rx.iter().map(|d| d.served_by).collect();
                assert_eq!(served.len(), reqs.len(), "{what}");
                match backend {
                    BackendChoice::Cpu => assert!(served.iter().all(|&s| s == ServedBy::Cpu), "{what}"),
                    _ => assert!(served.iter().any(|&s| s != ServedBy::Cpu), "{what}: {served:?}"),
                }
            }
        }
    }
}

#[test]
fn shards_equal_the_single_index_on_random_collections() {
    let splits: Vec<(u64, usize, ShardSplit)> = vec![
        (3, 1000, ShardSplit::Count(1)),
        (5, 1000, ShardSplit::Count(3)),
        // At block edges of a list every document holds (t0 is in 90%: near them), and not.
        (11, 900, ShardSplit::Starts(vec![0, 128, 256, 512])),
        (13, 700, ShardSplit::Starts(vec![0, 1, 129, 600, 699])),
        (17, 40, ShardSplit::Count(40)),
    ];
    for (seed, n, split) in splits {
        let tmp = tempfile::tempdir().unwrap();
        let input = collection(tmp.path(), seed, n);
        let single = build(tmp.path(), &input, "one", None, None);
        let sharded = build(
            tmp.path(),
            &input,
            "shards",
            None,
            Some(Sharding {
                split: split.clone(),
                parallel: seed % 2 == 1,
                part: ShardPart::All,
            }),
        );
        check(
            &single,
            &sharded,
            &format!("seed {seed}, {n} documents, {split:?}"),
        );
    }
}

/// The shards on the GPUs (`--gpus auto`: on one GPU every shard; on two, spread, and one shard
/// replicated on both) answer as the single index does.
/// The random collection of `n` documents (`seed`) built in `dir` as one index and as shards cut at
/// `split`.
fn one_and_sharded(dir: &Path, seed: u64, n: usize, split: &ShardSplit) -> (Arc<Index>, Arc<Index>) {
    let input = collection(dir, seed, n);
    let single = build(dir, &input, "one", None, None);
    let sharding = Sharding {
        split: split.clone(),
        parallel: true,
        part: ShardPart::All,
    };
    (single, build(dir, &input, "shards", None, Some(sharding)))
}

#[test]
fn shards_on_the_gpus_equal_the_single_index() {
    let present = warpsearch_gpu::device_count();
    if present == 0 {
        warpsearch_gpu::testing::say("skipped: no CUDA device for the shards");
        return;
    }
    warpsearch_gpu::testing::say(&format!("shards on {present} CUDA devices"));
    for (seed, n, split) in [
        (3, 1000, ShardSplit::Count(1)),
        (5, 1000, ShardSplit::Count(2)),
        (13, 700, ShardSplit::Starts(vec![0, 1, 129, 600, 699])),
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let (single, sharded) = one_and_sharded(tmp.path(), seed, n, &split);
        check_on(
            &single,
            &sharded,
            BackendChoice::Gpu,
            &format!("GPU, seed {seed}, {n} documents, {split:?}"),
        );
    }
}

/// Each shard's engine with a list cache of its own (at most half of each list's blocks cached, the
/// rest staged with each batch), in its share of the GPU's memory: answers equal the single index's.
#[test]
fn shards_with_list_caches_on_the_gpus_equal_the_single_index() {
    let present = warpsearch_gpu::device_count();
    if present == 0 {
        warpsearch_gpu::testing::say("skipped: no CUDA device for the cached shards");
        return;
    }
    for policy in [Policy::Vfb, Policy::Dynamic] {
        for (seed, n, split) in [
            (5, 1000, ShardSplit::Count(2)),
            (13, 700, ShardSplit::Starts(vec![0, 1, 129, 600, 699])),
        ] {
            let tmp = tempfile::tempdir().unwrap();
            let (single, sharded) = one_and_sharded(tmp.path(), seed, n, &split);
            // VFB's training log; the dynamic policy learns from the stream.
            let train = tmp.path().join("train.txt");
            std::fs::write(&train, "t0 t1\nt2\nearly t5\nsolo t0\nt3 t4 t5\n").unwrap();
            let cached = move |c: &mut EngineConfig| {
                c.gpu.memory = Some(8 << 20);
                c.cache.policy = Some(policy);
                c.cache.buffer = Some(1 << 20);
                c.cache.ratio = Some(0.5);
                c.cache.train = (policy == Policy::Vfb).then(|| train.clone());
            };
            check_with(
                &single,
                &sharded,
                BackendChoice::Gpu,
                &cached,
                &format!(
                    "cached ({}), seed {seed}, {n} documents, {split:?}",
                    policy.name()
                ),
            );
        }
    }
}

#[test]
fn shards_of_a_global_score_order_equal_the_single_index() {
    let tmp = tempfile::tempdir().unwrap();
    let input = collection(tmp.path(), 23, 1500);
    let single = build(tmp.path(), &input, "one", Some(0.3), None);
    let sharded = build(tmp.path(), &input, "shards", Some(0.3), Some(Sharding::count(4)));
    check(&single, &sharded, "global-score order, 4 shards");
}

#[test]
fn documents_are_named_across_shards() {
    let tmp = tempfile::tempdir().unwrap();
    let input = collection(tmp.path(), 29, 300);
    let mut opts = options(tmp.path(), None, Some(Sharding::count(3)));
    opts.store = true;
    build_from_jsonl(&input, &tmp.path().join("shards"), &opts).unwrap();
    let sharded = Index::open(tmp.path().join("shards")).unwrap();
    let lines: Vec<String> = std::fs::read_to_string(&input)
        .unwrap()
        .lines()
        .map(String::from)
        .collect();
    assert_eq!(sharded.num_docs(), 300);
    for d in [0u32, 99, 100, 101, 199, 200, 299] {
        assert_eq!(sharded.doc_id(d), format!("d{d}"));
        assert_eq!(sharded.find_doc(&format!("d{d}")), Some(d));
        assert_eq!(
            sharded.doc(d).unwrap().as_deref(),
            Some(lines[d as usize].as_str())
        );
    }
    assert_eq!(sharded.find_doc("d300"), None);
}

#[test]
fn engines_over_disjoint_shards_merge_into_the_whole_index() {
    let tmp = tempfile::tempdir().unwrap();
    let input = collection(tmp.path(), 31, 900);
    let single = build(tmp.path(), &input, "one", None, None);
    let sharded = build(tmp.path(), &input, "shards", None, Some(Sharding::count(3)));
    let keep = |shards: Vec<usize>| {
        let config = EngineConfig {
            backend: BackendChoice::Cpu,
            threads: 1,
            shards: Some(shards),
            ..EngineConfig::default()
        };
        config.open(sharded.clone(), Mode::Or, 1000)
    };
    for mode in [Mode::And, Mode::Or] {
        let oracle = engine(&single, RankingChoice::Bm25, Algorithm::Exhaustive, mode);
        let groups = [
            vec![keep(vec![0]).unwrap(), keep(vec![2, 1]).unwrap()],
            vec![
                keep(vec![1]).unwrap(),
                keep(vec![0]).unwrap(),
                keep(vec![2]).unwrap(),
            ],
        ];
        for k in [10, 1000] {
            let requests = |index: &Index| -> Vec<Request> {
                queries(index, 3)
                    .into_iter()
                    .map(|q| Request::new(q, mode, k))
                    .collect()
            };
            let want = oracle.search_batch(&requests(&single));
            for engines in &groups {
                let answers: Vec<_> = engines
                    .iter()
                    .map(|e| e.search_batch(&requests(&sharded)))
                    .collect();
                for (i, w) in want.iter().enumerate() {
                    let parts = answers.iter().map(|a| a[i].as_ref().unwrap().hits.clone());
                    let merged = warpsearch_query::merge_top_k(parts, k);
                    let w = &w.as_ref().unwrap().hits;
                    assert!(
                        same(w, &merged),
                        "{mode:?} k {k}, query {i}: {w:?}\nmerged {merged:?}"
                    );
                }
            }
        }
    }
    let refused = |shards: Vec<usize>| keep(shards).err().expect("refused").to_string();
    assert!(
        refused(vec![3]).contains("has shards 0 to 2"),
        "{}",
        refused(vec![3])
    );
    assert!(refused(vec![0, 0]).contains("each named at most once"));
    assert!(refused(vec![]).contains("is empty"));
    let config = EngineConfig {
        shards: Some(vec![0]),
        ..EngineConfig::default()
    };
    let err = config
        .open(single.clone(), Mode::Or, 10)
        .err()
        .expect("refused")
        .to_string();
    assert!(err.contains("applies to a sharded index"), "{err}");
}
