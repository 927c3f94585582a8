//! The list cache's host side, without a GPU: admission policies, and the exact CPU completion of
//! what a GPU answered on a docID prefix (the GPU's part stood in for by the CPU on the same range).

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{oracle, random_index, random_queries, requests, same};
use warpsearch_codec::Codec;
use warpsearch_cpu::CpuSearcher;
use warpsearch_engine::cache::policy::{plan, worth_changing, Policy};
use warpsearch_engine::cache::usage::Usage;
use warpsearch_engine::cache::{dynamic_shape, CacheCtl};
use warpsearch_engine::split::{complete, gpu_mode, take_answer, Partial, Split};
use warpsearch_engine::{CacheOptions, Completion};
use warpsearch_gpu::cache::prefix_need;
use warpsearch_gpu::cache::PlanFeed;
use warpsearch_gpu::residency::Applied;
use warpsearch_gpu::{CachePlan, Capacity};
use warpsearch_index::Index;
use warpsearch_query::{Answer, DocRange, Mode, Part, Query, Ranking, Request, Scorer, SearchOptions};

fn query(terms: &[u32]) -> Query {
    Query {
        terms: terms.iter().map(|&t| (t, 1)).collect(),
        ..Query::default()
    }
}

fn longest(ix: &Index) -> u32 {
    (0..ix.term_records().len() as u32)
        .max_by_key(|&t| ix.term_records()[t as usize].df)
        .unwrap()
}

/// An index whose longest list has several blocks.
fn index_with_long_list(dir: &std::path::Path) -> Arc<Index> {
    for seed in 1u64.. {
        let (ix, _) = random_index(dir, seed * 31, Codec::PForDelta, None);
        if ix.term_records()[longest(&ix) as usize].num_blocks() >= 6 {
            return ix;
        }
    }
    unreachable!()
}

const ALL: Capacity = Capacity {
    words: u64::MAX / 8,
    blocks: u64::MAX / 64,
};

#[test]
fn qtf_admits_frequent_lists_whole_and_qtfdf_prefers_short_ones() {
    let tmp = tempfile::tempdir().unwrap();
    let ix = index_with_long_list(tmp.path());
    let long = longest(&ix);
    let short = (0..ix.term_records().len() as u32)
        .min_by_key(|&t| ix.term_records()[t as usize].df)
        .unwrap();
    assert_ne!(long, short);
    let mut u = Usage::default();
    for _ in 0..3 {
        u.add(&ix, &query(&[long]), Mode::Or, None, 1.0);
    }
    u.add(&ix, &query(&[short]), Mode::Or, None, 1.0);
    let room = prefix_need(&ix, long, u32::MAX);
    let p = plan(&ix, &u, Policy::Qtf, room, 1.0, 2);
    assert_eq!(
        p.blocks[long as usize] as usize,
        ix.term_records()[long as usize].num_blocks()
    );
    assert_eq!(p.blocks[short as usize], 0, "no room left for the rarer term");
    let p = plan(&ix, &u, Policy::QtfDf, room, 1.0, 2);
    assert!(
        p.blocks[short as usize] > 0,
        "the short list comes first by qtf/df"
    );
    assert!(room.holds(p.need(&ix)));
    let p = plan(&ix, &u, Policy::Qtf, ALL, 0.5, 2);
    let n = ix.term_records()[long as usize].num_blocks() as u32;
    assert_eq!(p.blocks[long as usize], n.div_ceil(2), "λ prunes the list");
}

#[test]
fn vfb_caches_the_most_visited_prefixes_within_lambda_and_space() {
    let tmp = tempfile::tempdir().unwrap();
    let ix = index_with_long_list(tmp.path());
    let t = longest(&ix);
    let n = ix.term_records()[t as usize].num_blocks() as u32;
    let metas = &ix.block_metas()[ix.term_records()[t as usize].first_block as usize..];
    let mut u = Usage::default();
    // Two queries stop inside block 1 (they visit blocks 0 and 1), one runs to the end.
    u.add(&ix, &query(&[t]), Mode::Or, Some(metas[1].first_doc), 1.0);
    u.add(&ix, &query(&[t]), Mode::Or, Some(metas[1].first_doc), 1.0);
    u.add(&ix, &query(&[t]), Mode::Or, None, 1.0);
    assert_eq!(u.runs(t), vec![(2, 3.0), (n, 1.0)]);
    assert_eq!(plan(&ix, &u, Policy::Vfb, ALL, 1.0, 1).blocks[t as usize], n);
    assert_eq!(
        plan(&ix, &u, Policy::Vfb, ALL, 0.5, 1).blocks[t as usize],
        n.div_ceil(2),
        "λ caps the prefix"
    );
    let two = prefix_need(&ix, t, 2);
    assert_eq!(
        plan(&ix, &u, Policy::Vfb, two, 1.0, 1).blocks[t as usize],
        2,
        "most visited first"
    );
    let p = plan(&ix, &u, Policy::Vfb, two, 1.0, 4);
    assert!(two.holds(p.need(&ix)), "a plan never exceeds its space");
    // The decayed use of the dynamic policy keeps the proportions.
    let mut d = u.clone();
    d.scale(0.5);
    assert_eq!(d.runs(t), vec![(2, 1.5), (n, 0.5)]);
    assert_eq!(plan(&ix, &d, Policy::Dynamic, two, 1.0, 1).blocks[t as usize], 2);
}

/// The dynamic policy's rule for applying a plan: the bytes it saves the batches of an epoch against
/// the bytes it copies into the cache.
#[test]
fn a_plan_change_is_worth_it_when_its_savings_over_an_epoch_exceed_its_copies() {
    let tmp = tempfile::tempdir().unwrap();
    let ix = index_with_long_list(tmp.path());
    let long = longest(&ix);
    let other = (0..ix.term_records().len() as u32)
        .filter(|&t| t != long && ix.term_records()[t as usize].num_blocks() > 0)
        .max_by_key(|&t| ix.term_records()[t as usize].df)
        .unwrap();
    let mut u = Usage::default();
    for _ in 0..1000 {
        u.add(&ix, &query(&[long]), Mode::Or, None, 1.0);
    }
    u.add(&ix, &query(&[other]), Mode::Or, None, 1.0);
    let empty = CachePlan::empty(&ix);
    let with = |terms: &[u32]| {
        let mut p = CachePlan::empty(&ix);
        for &t in terms {
            p.blocks[t as usize] = ix.term_records()[t as usize].num_blocks() as u32;
        }
        p
    };
    let (only_long, only_other, both) = (with(&[long]), with(&[other]), with(&[long, other]));
    // Caching what nearly every query reads pays for itself within an epoch of two queries.
    assert!(worth_changing(&ix, &u, &empty, &only_long, 2, 1.0));
    // Swapping it for a list one query in 1,001 reads saves nothing: never worth it.
    assert!(!worth_changing(&ix, &u, &only_long, &only_other, 4096, 1.0));
    // Adding the rare list: its copy is repaid only over an epoch of some thousand queries.
    assert!(!worth_changing(&ix, &u, &only_long, &both, 16, 1.0));
    assert!(worth_changing(&ix, &u, &only_long, &both, 2000, 1.0));
    assert!(
        !worth_changing(&ix, &u, &only_long, &both, 2000, 3.0),
        "min_gain scales the bar"
    );
    // With min_gain 0 every plan is applied, and an unchanged plan copies nothing.
    assert!(worth_changing(&ix, &u, &only_long, &only_other, 16, 0.0));
    assert!(worth_changing(&ix, &u, &both, &both, 1, 1.0));
}

/// Completion of a GPU part on [0, m] (computed here by the CPU on the same range, in the mode the GPU
/// runs) equals the oracle, for every cut m at block boundaries and ends.
fn check_completion(ix: &Arc<Index>, options: SearchOptions, what: &str) {
    let cpu = CpuSearcher::new(Arc::new(Scorer::new(ix.clone(), options).unwrap()));
    let want = oracle(ix, options);
    let n = ix.num_docs();
    let v = ix.term_records().len();
    let queries = random_queries(ix, v, n as u64);
    let cuts: Vec<u32> = [
        0,
        1,
        126,
        127,
        128,
        129,
        n / 2,
        n.saturating_sub(2),
        n.saturating_sub(1),
    ]
    .into_iter()
    .filter(|&m| m + 1 < n)
    .collect();
    for mode in [Mode::And, Mode::Or, Mode::AndOr] {
        for k in [1, 10, 1000] {
            for r in requests(&queries, mode, k) {
                let w = want.search(&r).unwrap();
                for &m in &cuts {
                    let gpu_part = DocRange { first: 0, last: m };
                    let hits = cpu
                        .search_part(
                            &r,
                            gpu_mode(mode),
                            Part {
                                range: gpu_part,
                                floor: f32::NEG_INFINITY,
                            },
                        )
                        .unwrap();
                    let partial = Partial {
                        hits,
                        rest: DocRange {
                            first: m + 1,
                            last: n - 1,
                        },
                        whole: DocRange::ALL,
                    };
                    let got = complete(&cpu, &r, &partial, f32::NEG_INFINITY).unwrap();
                    assert!(same(&got, &w), "{what} {mode:?} k {k} cut at {m}: {:?}", r.query);
                    // Both ranges on the GPU (a `Split::Two`): the two answers joined, and-or's OR
                    // pass completed on the CPU where the AND pass found fewer than k documents.
                    let split = Split::Two(gpu_part, partial.rest);
                    let whole = DocRange {
                        first: 0,
                        last: n - 1,
                    };
                    let ranges: Vec<DocRange> = split.gpu_ranges(whole).collect();
                    assert_eq!(
                        ranges,
                        vec![gpu_part, partial.rest],
                        "{what}: a GPU request per range"
                    );
                    let mut answers = ranges.iter().map(|&range| {
                        let part = Part {
                            range,
                            floor: f32::NEG_INFINITY,
                        };
                        cpu.search_part(&r, gpu_mode(mode), part).map(|hits| Answer {
                            hits,
                            latency: Duration::ZERO,
                        })
                    });
                    let (joined, or_pass) = take_answer(split, &r, &mut answers);
                    assert!(answers.next().is_none(), "{what}: both answers taken");
                    let mut got = joined.unwrap().hits;
                    assert_eq!(
                        or_pass,
                        mode == Mode::AndOr && got.len() < k,
                        "{what} {mode:?} k {k}"
                    );
                    if or_pass {
                        let rest = Partial {
                            hits: got,
                            rest: DocRange::EMPTY,
                            whole: DocRange::ALL,
                        };
                        got = complete(&cpu, &r, &rest, f32::NEG_INFINITY).unwrap();
                    }
                    assert!(
                        same(&got, &w),
                        "{what} {mode:?} k {k} two ranges cut at {m}: {:?}",
                        r.query
                    );
                }
            }
        }
    }
}

#[test]
fn cpu_completion_of_a_gpu_prefix_equals_the_oracle() {
    for seed in 0..6u64 {
        let tmp = tempfile::tempdir().unwrap();
        let codec = Codec::ALL[seed as usize % Codec::ALL.len()];
        let (ix, _) = random_index(tmp.path(), 0x5EED + seed * 131, codec, None);
        check_completion(&ix, SearchOptions::new(&ix), &format!("seed {seed} {codec}"));
    }
}

#[test]
fn cpu_completion_with_early_termination_equals_the_oracle() {
    for seed in 0..4u64 {
        let tmp = tempfile::tempdir().unwrap();
        let (ix, _) = random_index(tmp.path(), 0xE417 + seed * 977, Codec::PForDelta, Some(0.4));
        let options = SearchOptions {
            ranking: Ranking::Bm25Static { alpha: 0.4 },
            ..SearchOptions::new(&ix)
        };
        check_completion(&ix, options, &format!("seed {seed} bm25-static, global order"));
    }
}

#[test]
fn usage_counts_visits_up_to_the_early_termination_stop() {
    let tmp = tempfile::tempdir().unwrap();
    let (ix, _) = random_index(tmp.path(), 0xE417, Codec::PForDelta, Some(0.4));
    let options = SearchOptions {
        ranking: Ranking::Bm25Static { alpha: 0.4 },
        ..SearchOptions::new(&ix)
    };
    let cpu = CpuSearcher::new(Arc::new(Scorer::new(ix.clone(), options).unwrap()));
    let t = longest(&ix);
    let r = Request::new(query(&[t]), Mode::Or, 1);
    let stop = cpu.stop_doc(&r).unwrap();
    let stop = stop.expect("a top-1 over the longest list stops early on a global order");
    let mut u = Usage::default();
    u.add(&ix, &r.query, r.mode, Some(stop), 1.0);
    let metas = &ix.block_metas()[ix.term_records()[t as usize].first_block as usize..];
    let visited = u.runs(t)[0].0 as usize;
    assert!(
        metas[visited - 1].first_doc <= stop,
        "the block holding the stop is visited"
    );
    assert!(
        visited == ix.term_records()[t as usize].num_blocks() || metas[visited].first_doc > stop,
        "no block after the stop is"
    );
}

/// A batch's staging region as the device reads it: each staged span's words side by side, then the
/// skip data's columns with offsets from the span's start; every span covers its docID range.
#[test]
fn staged_spans_are_filled_as_the_device_reads_them() {
    use warpsearch_gpu::residency::Residency;
    use warpsearch_gpu::stage::Stage;
    let tmp = tempfile::tempdir().unwrap();
    let codecs = [Codec::SimdBp, Codec::PForDelta, Codec::EliasFano];
    for seed in 1..7u64 {
        let dir = tmp.path().join(seed.to_string());
        std::fs::create_dir_all(&dir).unwrap();
        let (ix, _) = random_index(&dir, seed * 7, codecs[seed as usize % 3], None);
        let residency = Residency::nothing_cached(&ix);
        let (base, n) = ((1000, 50), ix.num_docs());
        let mut stage = Stage::new(base, ALL);
        let mut staged = Vec::new();
        let mut rng = common::Rng(seed);
        for id in 0..ix.term_records().len() as u32 {
            let metas = &ix.block_metas()[ix.term_records()[id as usize].first_block as usize..];
            let edge = metas[0].last_doc;
            let mut ranges = vec![(0, n - 1), (edge, edge), (edge + 1, n - 1), (n - 1, n - 1)];
            for _ in 0..3 {
                let a = rng.below(n as u64) as u32;
                ranges.push((a, a + rng.below((n - a) as u64) as u32));
            }
            for (lo, hi) in ranges.into_iter().filter(|&(lo, hi)| lo <= hi && hi < n) {
                let desc = stage.term(&ix, &residency, id, lo, hi).unwrap();
                staged.push((id, lo, hi, desc));
            }
        }
        let used = stage.used();
        let (nw, nb) = (used.words as usize, used.blocks as usize);
        let mut buf = vec![u32::MAX; nw + 5 * nb];
        stage.fill(&ix, &mut buf, true);
        // Without the words (the device copies them from the index), the skip data is the same.
        let mut skips = vec![u32::MAX; nw + 5 * nb];
        stage.fill(&ix, &mut skips, false);
        assert!(
            skips[..nw].iter().all(|&w| w == u32::MAX) && skips[nw..] == buf[nw..],
            "seed {seed}: filled without words"
        );
        let col = |c: usize, j: usize| buf[nw + c * nb + j];
        for (id, lo, hi, d) in staged {
            let rec = &ix.term_records()[id as usize];
            let metas = &ix.block_metas()[rec.first_block as usize..][..rec.num_blocks()];
            let (w, b) = (
                (d.word_base - base.0) as usize,
                (d.block_base as u64 - base.1) as usize,
            );
            let first = metas.iter().position(|m| m.first_doc == col(0, b)).unwrap();
            let last = first + d.num_blocks as usize - 1;
            assert!(
                first == 0 || metas[first - 1].last_doc < lo,
                "seed {seed} term {id}"
            );
            assert!(
                last + 1 == metas.len() || metas[last].last_doc >= hi,
                "seed {seed} term {id}"
            );
            let w0 = metas[first].offset as usize;
            let words = &ix.words()[rec.offset_words as usize + w0..][..d.len_words as usize];
            assert_eq!(
                &buf[w..][..words.len()],
                words,
                "seed {seed} term {id} [{lo}, {hi}]"
            );
            for (j, m) in metas[first..=last].iter().enumerate() {
                let got = [0, 1, 2, 3, 4].map(|c| col(c, b + j));
                let want = [
                    m.first_doc,
                    m.last_doc,
                    m.offset - w0 as u32,
                    m.freq_offset,
                    m.max_score.to_bits(),
                ];
                assert_eq!(got, want, "seed {seed} term {id} block {}", first + j);
            }
        }
    }
}

/// A batch short of FULL_WAVES tasks per CTA is cut to its size: at most 1/waves of a CTA's share
/// per part, never below the floor nor above the coarse split, in at most the cut's parts, within the
/// batch's tasks and, given an average, with tasks of at least that cost on average; fuller batches
/// and `waves` 0 keep the coarse split.
#[test]
fn and_batches_are_cut_to_their_size() {
    use warpsearch_gpu::batch::{Split, WaveCut};
    let tmp = tempfile::tempdir().unwrap();
    let (ix, v) = random_index(tmp.path(), 99, Codec::PForDelta, None);
    let queries: Vec<Query> = common::random_queries(&ix, v, 5)
        .into_iter()
        .filter(|q| !q.terms.is_empty())
        .collect();
    let all: Vec<usize> = (0..queries.len()).collect();
    let coarse = Split {
        cost: 1_000_000,
        max_parts: 16,
        or_cost: false,
    };
    let cost = |i: usize| coarse.cost(&ix, &queries[i]);
    let total: u64 = all.iter().map(|&i| cost(i)).sum();
    let tasks = |s: &Split, which: &[usize]| -> usize {
        which.iter().map(|&i| s.parts(&ix, &queries[i]) as usize).sum()
    };
    let cut = |ctas: u32, waves: u32, floor: u64, max_parts: u32| WaveCut {
        ctas,
        waves,
        floor,
        max_parts,
        task_cost: 0,
    };
    // The split `s` gives a batch of every query under `cut`, within `batch` tasks.
    let cut_all = |s: &Split, cut: WaveCut, batch: usize| {
        let costs: Vec<u64> = all.iter().map(|&i| s.cost(&ix, &queries[i])).collect();
        s.for_costs(&ix, &costs, &all, cut, batch)
    };
    // Batches of fewer than FULL_WAVES tasks per CTA (60 queries or fewer, 64 CTAs) are cut finer.
    for (ctas, waves, floor, batch, max_parts) in [
        (64, 1, 1, 10_000, 16),
        (64, 2, 30, 10_000, 16),
        (64, 2, 1, 70, 16),
        (64, 1, 0, 10_000, 16),
        (64, 64, 1, all.len() + 3, 16),
        (64, 64, 1, 10_000, 64),
        (64, 64, 1, 10_000, 8),
        (64, 64, 1, all.len() * 20, 64),
    ] {
        let s = cut_all(&coarse, cut(ctas, waves, floor, max_parts), batch);
        let max_parts = max_parts.max(coarse.max_parts);
        assert_eq!(s.max_parts, max_parts, "{ctas} {waves} {floor} {batch}");
        assert!(tasks(&s, &all) <= batch, "{ctas} {waves} {floor} {batch}");
        assert!(
            s.cost >= floor && s.cost <= coarse.cost,
            "{ctas} {waves} {floor} {batch}: {}",
            s.cost
        );
        let share = (total / (ctas as u64 * waves as u64)).max(floor);
        if tasks(
            &Split {
                cost: share,
                max_parts,
                ..coarse
            },
            &all,
        ) <= batch
        {
            // The part limit: no part of a query costs more than the share, up to max_parts.
            assert_eq!(s.cost, share.min(coarse.cost));
            for &i in &all {
                let parts = s.parts(&ix, &queries[i]) as u64;
                assert!(
                    parts == max_parts as u64 || cost(i).div_ceil(parts) <= share,
                    "query {i}"
                );
            }
        } else {
            // Doubled until the batch's tasks fit.
            assert!(s.cost > share);
            assert!(
                s.cost == coarse.cost
                    || tasks(
                        &Split {
                            cost: s.cost / 2,
                            max_parts,
                            ..coarse
                        },
                        &all
                    ) > batch
            );
        }
    }
    assert_eq!(cut_all(&coarse, cut(64, 0, 1, 64), 10_000).cost, coarse.cost);
    // A batch of FULL_WAVES tasks per CTA or more keeps the coarse split.
    let ctas = (all.len() / warpsearch_gpu::batch::FULL_WAVES) as u32;
    assert_eq!(cut_all(&coarse, cut(ctas, 2, 1, 64), 10_000).cost, coarse.cost);
    assert!(cut_all(&coarse, cut(ctas + 1, 2, 1, 64), 10_000).cost < coarse.cost);
    // A batch whose queries, at the coarse cost, take more tasks in the cut's parts than the batch
    // holds keeps the coarse split (the batch was formed with it).
    let fine = Split {
        cost: 1,
        max_parts: 2,
        or_cost: false,
    };
    let batch = tasks(&fine, &all);
    assert!(
        tasks(
            &Split {
                max_parts: 64,
                ..fine
            },
            &all
        ) > batch
    );
    let s = cut_all(&fine, cut(64, 64, 1, 64), batch);
    assert_eq!((s.cost, s.max_parts), (fine.cost, fine.max_parts));
    let or = Split {
        or_cost: true,
        ..coarse
    };
    assert_eq!(cut_all(&or, cut(2, 2, 1, 64), 10_000).cost, or.cost);
    // A small OR batch's tasks cost `task_cost` on average where the coarse split allows: none of
    // its queries is cut finer where their average cost is below it.
    let or_cost = |i: usize| or.cost(&ix, &queries[i]);
    let total: u64 = all.iter().map(|&i| or_cost(i)).sum();
    let longest = all.iter().map(|&i| or_cost(i)).max().unwrap();
    let or = Split {
        cost: longest * 2,
        ..or
    };
    let fine = |task_cost: u64| {
        let cut = WaveCut {
            task_cost,
            ..cut(64, 64, 1, 64)
        };
        cut_all(&or, cut, 10_000)
    };
    let share = (total / (64 * 64)).max(1);
    assert_eq!(
        tasks(&fine(0), &all),
        tasks(
            &Split {
                cost: share,
                max_parts: 64,
                ..or
            },
            &all
        )
    );
    assert!(tasks(&fine(0), &all) > 3 * all.len());
    for task_cost in [total / all.len() as u64 + 1, total / 4, total * 2] {
        let s = fine(task_cost);
        assert_eq!(tasks(&s, &all), all.len(), "{task_cost}: {s:?}");
    }
    // An average that allows about three tasks a query: the finest cut within it.
    let task_cost = total / (3 * all.len() as u64);
    let most = all.len().max((total / task_cost) as usize);
    let s = fine(task_cost);
    let n = tasks(&s, &all);
    assert!(n > all.len() && n <= most, "{n} tasks, at most {most}");
    assert!(
        tasks(
            &Split {
                cost: s.cost / 2,
                ..s
            },
            &all
        ) > most,
        "{s:?}"
    );
}

/// The dynamic policy's plan feed, without a GPU: nothing before an epoch of queries is observed; then
/// the plan made from them, within the budget less the room lists move through, and caching lists
/// they read; after it is applied, nothing until the next epoch. A plan that saves less than its
/// copies is held back and counted.
#[test]
fn the_dynamic_policy_feeds_one_plan_per_epoch() {
    let tmp = tempfile::tempdir().unwrap();
    let ix = index_with_long_list(tmp.path());
    let long = longest(&ix);
    let cpu = CpuSearcher::new(Arc::new(
        Scorer::new(ix.clone(), SearchOptions::new(&ix)).unwrap(),
    ));
    let whole = warpsearch_gpu::residency::device_bytes(&ix) as u64;
    let seen: Vec<Request> = (0..8)
        .map(|_| Request::new(query(&[long]), Mode::Or, 10))
        .collect();
    let feed = |min_gain: f64| {
        let options = CacheOptions {
            policy: Policy::Dynamic,
            epoch: 8,
            min_gain,
            ..CacheOptions::default()
        };
        let (ctl, first) = CacheCtl::prepare(&cpu, options, whole / 2).unwrap();
        // No training log: the first plan caches nothing.
        assert!(first.blocks.iter().all(|&b| b == 0));
        Arc::new(ctl)
    };

    let ctl = feed(0.0);
    assert!(ctl.ready().is_none(), "no plan before an epoch of queries");
    ctl.observe_all(seen[..7].iter().map(|r| (r, None)));
    ctl.settle();
    assert!(ctl.ready().is_none(), "no plan before an epoch of queries");
    ctl.observe_all(seen[7..].iter().map(|r| (r, None)));
    ctl.settle();
    let plan = ctl.ready().expect("a plan after an epoch");
    assert!(
        plan.blocks[long as usize] > 0,
        "the list every query read is cached"
    );
    assert!(
        Capacity::of_bytes(&ix, whole / 2).holds(plan.need(&ix)),
        "the plan fits the budget"
    );
    let lists = plan.blocks.iter().filter(|&&b| b > 0).count() as u64;
    let applied = Applied {
        lists,
        bytes: plan.need(&ix).bytes(),
        skipped: 0,
    };
    ctl.applied(plan, Ok(applied), 0.25);
    assert!(ctl.ready().is_none(), "one plan per epoch");
    let stats = ctl.take_stats();
    assert_eq!((stats.replans, stats.lists_changed), (1, lists));
    assert!(stats.replan_seconds >= 0.25);

    // The same plan under a gain the epoch's savings cannot reach: held back, and counted.
    let ctl = feed(1e12);
    ctl.observe_all(seen.iter().map(|r| (r, None)));
    ctl.settle();
    assert!(ctl.ready().is_none());
    let stats = ctl.take_stats();
    assert_eq!((stats.replans, stats.plans_skipped, stats.unobserved), (0, 1, 0));
}

/// The dynamic policy's thread runs at nice 10 or lower priority (Linux, read from /proc), and the
/// caller's thread is left as it was.
#[cfg(target_os = "linux")]
#[test]
fn the_dynamic_policy_thread_runs_at_a_lower_priority() {
    // A task's nice value, the 19th field of its stat line; None once it has ended.
    let nice_of = |task: &std::path::Path| -> Option<i64> {
        let stat = std::fs::read_to_string(task.join("stat")).ok()?;
        let rest = &stat[stat.rfind(')')? + 2..];
        rest.split_whitespace().nth(16)?.parse().ok()
    };
    let me = std::path::Path::new("/proc/thread-self");
    let before = nice_of(me).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let ix = index_with_long_list(tmp.path());
    let cpu = CpuSearcher::new(Arc::new(
        Scorer::new(ix.clone(), SearchOptions::new(&ix)).unwrap(),
    ));
    let options = CacheOptions {
        policy: Policy::Dynamic,
        ..CacheOptions::default()
    };
    let whole = warpsearch_gpu::residency::device_bytes(&ix) as u64;
    let (ctl, _) = CacheCtl::prepare(&cpu, options, whole / 2).unwrap();
    let r = Request::new(query(&[longest(&ix)]), Mode::Or, 10);
    ctl.observe_all([(&r, None)]);
    // Taken in: the thread has lowered its priority before its first message.
    ctl.settle();
    let policy_threads: Vec<i64> = std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|e| {
            let t = e.ok()?.path();
            let comm = std::fs::read_to_string(t.join("comm")).ok()?;
            comm.starts_with("warpsearch-cach").then(|| nice_of(&t)).flatten()
        })
        .collect();
    assert!(!policy_threads.is_empty(), "the policy's thread, by its name");
    for nice in policy_threads {
        assert!(nice >= 10 && nice >= before, "a policy thread at nice {nice}");
    }
    assert_eq!(nice_of(me).unwrap(), before, "this thread's priority unchanged");
    drop(ctl);
}

/// The dynamic policy's cache on the device: without a training log (or with one that reads no list),
/// the budget divided in the index's proportion; with one, room for VFB's plan of that log, which is
/// its first plan, and from the bytes that plan leaves up to 5% more block slots in its proportion;
/// the whole budget and no more.
#[test]
fn the_dynamic_policy_shapes_its_cache_like_vfb_of_its_training_log() {
    let tmp = tempfile::tempdir().unwrap();
    let ix = index_with_long_list(tmp.path());
    let cpu = CpuSearcher::new(Arc::new(
        Scorer::new(ix.clone(), SearchOptions::new(&ix)).unwrap(),
    ));
    let bytes = warpsearch_gpu::residency::device_bytes(&ix) as u64 / 3;
    let v = ix.term_records().len();
    let train: Vec<Request> = random_queries(&ix, v, 7)
        .into_iter()
        .map(|q| Request::new(q, Mode::And, 10))
        .collect();
    let prepare = |policy: Policy, train: &[Request]| {
        let options = CacheOptions {
            policy,
            train: train.to_vec(),
            ..CacheOptions::default()
        };
        CacheCtl::prepare(&cpu, options, bytes).unwrap()
    };

    let (untrained, _) = prepare(Policy::Dynamic, &[]);
    let empty = CachePlan::empty(&ix);
    assert_eq!(untrained.shape(&ix, &empty), Capacity::of_bytes(&ix, bytes));
    let unknown = [Request::new(Query::parse(&ix, "unknownterm"), Mode::And, 10)];
    let (unread, _) = prepare(Policy::Dynamic, &unknown);
    assert_eq!(unread.shape(&ix, &empty), Capacity::of_bytes(&ix, bytes));

    let (vfb, vfb_plan) = prepare(Policy::Vfb, &train);
    let need = vfb_plan.need(&ix);
    assert!(need.blocks > 0, "the log reads cached lists");
    assert_eq!(
        vfb.shape(&ix, &vfb_plan),
        need,
        "a static plan's cache is its need"
    );
    let (dynamic, first) = prepare(Policy::Dynamic, &train);
    assert_eq!(first.blocks, vfb_plan.blocks, "the first plan is VFB's");
    let shape = dynamic.shape(&ix, &first);
    let meta = warpsearch_gpu::cache::META_BYTES;
    assert!(shape.holds(need), "the cache holds VFB's plan");
    let slots = (need.blocks as f64 * (bytes as f64 / need.bytes() as f64) * 1.05) as u64;
    let spare = bytes - need.bytes();
    assert_eq!(
        shape.blocks,
        need.blocks + slots.saturating_sub(need.blocks).min(spare / meta),
        "up to 5% more slots in VFB's proportion, from the bytes its plan leaves"
    );
    assert_eq!(
        shape.words,
        (bytes - shape.blocks * meta) / 4,
        "the rest of the budget in words"
    );
    assert_ne!(shape, Capacity::of_bytes(&ix, bytes), "shaped by the log");
    let room = |x: u64| (x as f64 * (1.0 - CacheOptions::default().headroom)) as u64;
    assert!(
        need.words > room(shape.words) || need.blocks > room(shape.blocks),
        "the log asks for more than all but the headroom, so the first plan fills that too"
    );

    // A log of many epochs weighs as one epoch from then on, but the first plan is still VFB's.
    let options = CacheOptions {
        policy: Policy::Dynamic,
        train: train.clone(),
        epoch: 3,
        ..CacheOptions::default()
    };
    assert!(train.len() > 3 * options.epoch);
    let (weighed, first) = CacheCtl::prepare(&cpu, options, bytes).unwrap();
    assert_eq!(first.blocks, vfb_plan.blocks, "the first plan is VFB's");
    assert_eq!(weighed.shape(&ix, &first), shape);
}

/// The dynamic policy weighs a long training log as one epoch of the live stream: trained on 40
/// queries of one list in a cache that list fills, its first plan caches that list whole; an epoch and
/// a half of queries of another list then outweighs the log (7 against 4), so the next plan caches
/// that other list first. Weighed 40, the log would keep its list whole and leave the other none.
#[test]
fn a_long_training_log_weighs_as_one_epoch_of_the_stream() {
    let tmp = tempfile::tempdir().unwrap();
    let ix = index_with_long_list(tmp.path());
    let long = longest(&ix);
    let records = ix.term_records();
    let other = (0..records.len() as u32)
        .filter(|&t| t != long)
        .max_by_key(|&t| records[t as usize].df)
        .unwrap();
    let other_blocks = records[other as usize].num_blocks() as u32;
    assert!(other_blocks > 0);
    let cpu = CpuSearcher::new(Arc::new(
        Scorer::new(ix.clone(), SearchOptions::new(&ix)).unwrap(),
    ));
    let options = CacheOptions {
        policy: Policy::Dynamic,
        train: vec![Request::new(query(&[other]), Mode::Or, 10); 40],
        epoch: 4,
        headroom: 0.0,
        min_gain: 0.0,
        ..CacheOptions::default()
    };
    let bytes = prefix_need(&ix, other, other_blocks).bytes();
    let (ctl, first) = CacheCtl::prepare(&cpu, options, bytes).unwrap();
    assert_eq!(
        first.blocks[other as usize], other_blocks,
        "the log's list, whole"
    );
    assert_eq!(first.blocks[long as usize], 0);
    let stream = vec![Request::new(query(&[long]), Mode::Or, 10); 7];
    ctl.observe_all(stream.iter().map(|r| (r, None)));
    ctl.settle();
    let next = ctl.ready().expect("a plan after an epoch");
    assert!(
        next.blocks[long as usize] > 0,
        "the stream's list outweighs the log's"
    );
    assert!(next.blocks[other as usize] < other_blocks);
}

/// The dynamic cache's division of a budget around VFB's need: every byte of the budget and no more,
/// never fewer words or slots than the need; extra slots only from the bytes the need leaves, at most
/// 5% more in the need's proportion; none where fewer bytes than a slot are left; the index's division
/// where the need is empty or larger than the budget.
#[test]
fn the_dynamic_cache_holds_vfbs_need_and_takes_slots_only_from_what_it_leaves() {
    let tmp = tempfile::tempdir().unwrap();
    let ix = index_with_long_list(tmp.path());
    let meta = warpsearch_gpu::cache::META_BYTES;
    let need = Capacity {
        words: 100_000,
        blocks: 1_000,
    };
    let full = need.bytes();
    for (bytes, slots) in [
        // No spare byte, then fewer than a slot's: VFB's slots exactly.
        (full, 1_000),
        (full + meta - 1, 1_000),
        // Three slots' worth: three more.
        (full + 3 * meta, 1_003),
        // Plenty: 5% more than the need's proportion of the budget, the rest as words.
        (2 * full, (1_000.0 * 2.0 * 1.05) as u64),
    ] {
        let shape = dynamic_shape(&ix, need, bytes);
        assert_eq!(shape.blocks, slots, "{bytes} bytes");
        assert_eq!(shape.words, (bytes - slots * meta) / 4, "{bytes} bytes");
        assert!(shape.holds(need) && shape.bytes() <= bytes, "{bytes} bytes");
    }
    assert_eq!(
        dynamic_shape(&ix, need, full - 1),
        Capacity::of_bytes(&ix, full - 1),
        "a need larger than the budget"
    );
    assert_eq!(
        dynamic_shape(&ix, Capacity::default(), full),
        Capacity::of_bytes(&ix, full),
        "no need"
    );
}

/// λ where none is given: 0.5 for VFB and the dynamic policy where the CPU completes on a global-score
/// order (`auto` there, or `cpu`), 1 for Qtf and QtfDf, for plain BM25 and for `transfer`; a given λ
/// always.
#[test]
fn lambda_defaults_to_a_half_only_for_prefix_policies_completed_on_a_global_order() {
    let tmp = tempfile::tempdir().unwrap();
    let (gs, _) = random_index(tmp.path(), 0x1A4B, Codec::PForDelta, Some(0.4));
    let tmp2 = tempfile::tempdir().unwrap();
    let (plain, _) = random_index(tmp2.path(), 0x1A4B, Codec::PForDelta, None);
    let searcher = |ix: &Arc<Index>, ranking: Ranking| {
        let options = SearchOptions {
            ranking,
            ..SearchOptions::new(ix)
        };
        CpuSearcher::new(Arc::new(Scorer::new(ix.clone(), options).unwrap()))
    };
    let early = searcher(&gs, Ranking::Bm25Static { alpha: 0.4 });
    assert!(early.scorer().early_termination());
    let bm25_on_gs = searcher(&gs, Ranking::Bm25);
    let bm25 = searcher(&plain, Ranking::Bm25);
    // λ and how much of the longest list the first plan caches, trained on a query that reads that
    // list to its end (k above its length: nothing stops it early), in a cache as large as the index.
    let lambda = |cpu: &CpuSearcher, policy: Policy, completion: Completion, given: Option<f64>| {
        let ix = cpu.scorer().index();
        let long = longest(ix);
        let options = CacheOptions {
            policy,
            train: vec![Request::new(query(&[long]), Mode::Or, 100_000)],
            completion,
            ratio: given,
            ..CacheOptions::default()
        };
        let whole = warpsearch_gpu::residency::device_bytes(ix) as u64;
        let (ctl, plan) = CacheCtl::prepare(cpu, options, whole).unwrap();
        let n = ix.term_records()[long as usize].num_blocks() as f64;
        (ctl.ratio(), plan.blocks[long as usize], n)
    };
    let (auto, cpu, transfer) = (Completion::Auto, Completion::Cpu, Completion::Transfer);
    for policy in [Policy::Vfb, Policy::Dynamic, Policy::Qtf, Policy::QtfDf] {
        let prefixes = matches!(policy, Policy::Vfb | Policy::Dynamic);
        let cases = [
            (&early, auto, None, if prefixes { 0.5 } else { 1.0 }),
            (&early, cpu, None, if prefixes { 0.5 } else { 1.0 }),
            (&early, transfer, None, 1.0),
            (&bm25_on_gs, auto, None, 1.0),
            (&bm25, auto, None, 1.0),
            (&bm25, cpu, None, 1.0),
            (&early, auto, Some(0.25), 0.25),
        ];
        for (i, (searcher, completion, given, want)) in cases.into_iter().enumerate() {
            let (got, cached, n) = lambda(searcher, policy, completion, given);
            assert_eq!(got, want, "{} case {i}", policy.name());
            assert!(n >= 4.0, "the longest list has {n} blocks");
            let admitted = ((n * want).ceil() as u32).max(1);
            assert_eq!(cached, admitted, "{} case {i}: the plan's λ", policy.name());
        }
    }
}
