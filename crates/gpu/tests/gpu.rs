//! The GPU kernels against their CPU references, and the GPU engine against the CPU oracle.
//!
//! Every test needs a CUDA device; where there is none it prints "skipped: no CUDA device" and returns.
//! On the lent GPU machine they run (scripts/device-check.sh).

use std::path::Path;
use std::sync::{Arc, OnceLock};

use warpsearch_codec::{Codec, BLOCK_LEN};
use warpsearch_cpu::{Algorithm, Mode, Query, Ranking, Scored, SearchOptions, Searcher};
use warpsearch_gpu::kernels::{decode_raw, topk_segments, RawList};
use warpsearch_gpu::{Gpu, GpuOptions, GpuSearcher};
use warpsearch_index::build::{build_from_jsonl, BuildOptions};
use warpsearch_index::{AnalyzerConfig, BlockMeta, Bm25Params, DocOrder, Index, WriterOptions};

fn gpu() -> Option<Arc<Gpu>> {
    static GPU: OnceLock<Result<Arc<Gpu>, String>> = OnceLock::new();
    match GPU.get_or_init(|| Gpu::open(0).map(Arc::new).map_err(|e| e.to_string())) {
        Ok(g) => Some(g.clone()),
        Err(why) => {
            say(&format!("skipped: no CUDA device ({why})"));
            None
        }
    }
}

/// Writes a line to stderr past the test harness's capture, so that skips show in every log.
fn say(line: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "{line}");
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// A list of `n` postings starting at `start`, with gaps drawn from `gap_bits` and a few large tfs.
fn raw_list(
    codec: Codec,
    n: usize,
    start: u32,
    gap_bits: u32,
    rng: &mut Rng,
) -> (RawList, Vec<u32>, Vec<u32>) {
    let mut docs = Vec::with_capacity(n);
    let mut d = start as u64;
    for i in 0..n {
        if i > 0 {
            let big = rng.below(23) == 0;
            let bits = if big { gap_bits + 6 } else { gap_bits };
            d += 1 + rng.below(1u64 << bits.min(40));
        }
        docs.push(d);
    }
    // Keep every docID within u32 (shift the list down if it overflowed).
    let over = docs.last().copied().unwrap_or(0).saturating_sub(u32::MAX as u64);
    let docs: Vec<u32> = docs.iter().map(|&d| (d - over) as u32).collect();
    let freqs: Vec<u32> = (0..n)
        .map(|_| match rng.below(40) {
            0 => 70_000 + rng.below(1000) as u32,
            1..=5 => 1 + rng.below(300) as u32,
            _ => 1 + rng.below(3) as u32,
        })
        .collect();
    let params = codec.list_params(&docs, &freqs);
    let (mut words, mut blocks) = (Vec::new(), Vec::new());
    for (cd, cf) in docs.chunks(BLOCK_LEN).zip(freqs.chunks(BLOCK_LEN)) {
        let offset = words.len() as u32;
        let f = codec.encode_block(params, cd, cf, &mut words);
        blocks.push(BlockMeta {
            first_doc: cd[0],
            last_doc: *cd.last().unwrap(),
            offset,
            freq_offset: f,
            max_score: 0.0,
        });
    }
    let list = RawList {
        words,
        blocks,
        df: n as u32,
        params,
    };
    (list, docs, freqs)
}

#[test]
fn decode_kernel_equals_the_cpu_decoders() {
    let Some(gpu) = gpu() else { return };
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    for codec in Codec::ALL {
        let mut lists = Vec::new();
        let mut expected = Vec::new();
        for &n in &[1usize, 2, 31, 127, 128, 129, 255, 256, 1000, 4097] {
            for &(start, gap_bits) in &[
                (0u32, 0u32),
                (5, 3),
                (1000, 12),
                (u32::MAX - 200_000, 10),
                (u32::MAX - 130, 0),
            ] {
                if gap_bits == 0 && start > 1000 && n > 130 {
                    continue;
                }
                let (list, docs, freqs) = raw_list(codec, n, start, gap_bits, &mut rng);
                lists.push(list);
                expected.push((docs, freqs));
            }
        }
        let got = decode_raw(&gpu, codec, &lists).unwrap();
        for (li, (list, (docs, freqs))) in lists.iter().zip(&expected).enumerate() {
            assert_eq!(got[li].len(), list.blocks.len());
            for (b, block) in got[li].iter().enumerate() {
                let r = b * BLOCK_LEN..(b * BLOCK_LEN + BLOCK_LEN).min(docs.len());
                // The CPU decoder is the reference; both must give the original postings.
                let meta = &list.blocks[b];
                let end = list
                    .blocks
                    .get(b + 1)
                    .map_or(list.words.len(), |m| m.offset as usize);
                let words = &list.words[meta.offset as usize..end];
                let mut cd = vec![0u32; r.len()];
                let mut cf = vec![0u32; r.len()];
                codec
                    .decode_docs(
                        list.params,
                        words,
                        meta.freq_offset as usize,
                        meta.first_doc,
                        meta.last_doc,
                        &mut cd,
                    )
                    .unwrap();
                codec
                    .decode_freqs(list.params, words, meta.freq_offset as usize, &mut cf)
                    .unwrap();
                let (gd, gf) = block
                    .as_ref()
                    .unwrap_or_else(|| panic!("{codec} list {li} block {b}: GPU says malformed"));
                assert_eq!(gd, &docs[r.clone()], "{codec} list {li} block {b} docIDs");
                assert_eq!(gf, &freqs[r.clone()], "{codec} list {li} block {b} freqs");
                assert_eq!((&cd, &cf), (gd, gf));
            }
        }
        // A block whose skip data disagrees with its contents is reported, not decoded into garbage.
        let (mut bad, _, _) = raw_list(codec, 200, 10, 4, &mut rng);
        bad.blocks[1].last_doc += 1;
        let got = decode_raw(&gpu, codec, &[bad]).unwrap();
        assert!(got[0][0].is_some());
        assert!(
            got[0][1].is_none(),
            "{codec}: a wrong last docID must fail the block"
        );
    }
}

/// The CPU decoder's verdict on block `b` of `list`: its postings, or `None` if it is malformed.
fn cpu_decode(codec: Codec, list: &RawList, b: usize) -> Option<(Vec<u32>, Vec<u32>)> {
    let meta = &list.blocks[b];
    let end = list
        .blocks
        .get(b + 1)
        .map_or(list.words.len(), |m| m.offset as usize);
    let n = (list.df as usize - b * BLOCK_LEN).min(BLOCK_LEN);
    let words = &list.words[meta.offset as usize..end];
    let (mut d, mut f) = (vec![0u32; n], vec![0u32; n]);
    let f_off = meta.freq_offset as usize;
    codec
        .decode_docs(list.params, words, f_off, meta.first_doc, meta.last_doc, &mut d)
        .ok()?;
    codec.decode_freqs(list.params, words, f_off, &mut f).ok()?;
    Some((d, f))
}

#[test]
fn damaged_exceptions_fail_or_decode_exactly_as_on_the_cpu() {
    // PForDelta blocks full of exceptions (large gaps and frequencies), each with one bit flipped
    // somewhere: the GPU's warp-parallel exception path must agree with the CPU decoder, block by block,
    // on whether the block is malformed and, if not, on every value.
    let Some(gpu) = gpu() else { return };
    let codec = Codec::PForDelta;
    let mut rng = Rng(0xD1B5_4A32_D192_ED03);
    let mut damaged = Vec::new();
    for trial in 0..600 {
        let (mut list, _, _) = raw_list(codec, 129 + (trial % 200), 7, 2 + (trial % 5) as u32, &mut rng);
        let at = rng.below(list.words.len() as u64) as usize;
        list.words[at] ^= 1 << rng.below(32);
        damaged.push(list);
    }
    let got = decode_raw(&gpu, codec, &damaged).unwrap();
    assert_eq!(got.len(), damaged.len());
    let (mut agreed_bad, mut agreed_good) = (0, 0);
    for (li, list) in damaged.iter().enumerate() {
        assert_eq!(got[li].len(), list.blocks.len(), "list {li}");
        for (b, on_gpu) in got[li].iter().enumerate() {
            let cpu = cpu_decode(codec, list, b);
            assert_eq!(on_gpu, &cpu, "list {li} block {b}: GPU and CPU disagree");
            if cpu.is_some() {
                agreed_good += 1;
            } else {
                agreed_bad += 1;
            }
        }
    }
    say(&format!(
        "damaged PForDelta blocks: {agreed_bad} malformed on both, {agreed_good} decoded alike"
    ));
    assert!(agreed_bad > 100, "too few flips hit: {agreed_bad}");
}

fn sorted_top(hits: &[(u32, f32)], k: usize) -> Vec<(u32, f32)> {
    let mut v = hits.to_vec();
    v.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    v.truncate(k);
    v
}

#[test]
fn topk_kernel_equals_a_full_sort() {
    let Some(gpu) = gpu() else { return };
    let mut rng = Rng(7);
    for k in [1usize, 10, 100, 1000] {
        let mut segments = Vec::new();
        for &n in &[
            0usize, 1, 2, 255, 256, 257, 999, 1000, 1001, 1024, 1025, 5000, 20_000,
        ] {
            for kind in 0..3 {
                let mut docs: Vec<u32> = (0..n as u32)
                    .map(|i| i.wrapping_mul(2_654_435_761) ^ 0xF000_0000)
                    .collect();
                docs.sort_unstable();
                docs.dedup();
                // Shuffle so that the kernel sees docIDs out of order.
                for i in (1..docs.len()).rev() {
                    docs.swap(i, rng.below(i as u64 + 1) as usize);
                }
                let hits: Vec<(u32, f32)> = docs
                    .iter()
                    .map(|&d| {
                        let s = match kind {
                            0 => rng.below(1 << 20) as f32 / 1000.0,
                            1 => (rng.below(4) as f32) * 0.5, // many ties
                            _ => 3.25,                        // all equal
                        };
                        (d, s)
                    })
                    .collect();
                segments.push(hits);
            }
        }
        segments.push((0..3000).map(|i| (u32::MAX - i, 1.0)).collect());
        let got = topk_segments(&gpu, &segments, k).unwrap();
        for (i, seg) in segments.iter().enumerate() {
            let want = sorted_top(seg, k);
            let same = got[i].len() == want.len()
                && got[i]
                    .iter()
                    .zip(&want)
                    .all(|(a, b)| a.0 == b.0 && a.1.to_bits() == b.1.to_bits());
            assert!(
                same,
                "k {k} segment {i} of {}: GPU {:?}.. vs {:?}..",
                seg.len(),
                &got[i][..got[i].len().min(5)],
                &want[..want.len().min(5)]
            );
        }
    }
}

/// A random collection over terms t0..tV (document d holds term j tfs[d][j] times), written as JSONL with
/// static scores, and built into an index.
fn random_index(dir: &Path, seed: u64, codec: Codec, alpha: Option<f32>) -> (Index, usize) {
    let mut rng = Rng(seed | 1);
    let n = 1 + rng.below(6000) as usize;
    let densities: Vec<f64> = (0..1 + rng.below(7))
        .map(|_| [0.97, 0.6, 0.3, 0.08, 0.01, 0.002][rng.below(6) as usize])
        .collect();
    let (mut lines, mut statics) = (String::new(), String::new());
    for d in 0..n {
        let mut words = Vec::new();
        for (j, &p) in densities.iter().enumerate() {
            if (rng.below(10_000) as f64) < p * 10_000.0 {
                let tf = [1, 1, 1, 2, 2, 3, 7, 40][rng.below(8) as usize];
                words.extend(std::iter::repeat_n(format!("t{j}"), tf));
            }
        }
        words.extend(std::iter::repeat_n("filler".to_string(), d % 5));
        lines.push_str(&format!(
            "{{\"id\": \"d{d}\", \"contents\": \"{}\"}}\n",
            words.join(" ")
        ));
        statics.push_str(&format!("d{d}\t{}\n", rng.below(1000) as f32 / 7.0));
    }
    std::fs::write(dir.join("static.tsv"), statics).unwrap();
    (build(dir, &lines, codec, Some(alpha)), densities.len())
}

/// Builds `dir/idx` from JSONL `lines` (white-space analysis); `statics`: with `dir/static.tsv` as static
/// scores, reordered by global score when it holds an α.
fn build(dir: &Path, lines: &str, codec: Codec, statics: Option<Option<f32>>) -> Index {
    std::fs::write(dir.join("in.jsonl"), lines).unwrap();
    let mut opts = BuildOptions::new(WriterOptions {
        codec,
        analyzer: AnalyzerConfig::whitespace(),
        bm25: Bm25Params::default(),
        doc_order: DocOrder::Input,
        force: true,
    });
    if let Some(alpha) = statics {
        opts.static_scores = Some(dir.join("static.tsv"));
        opts.reorder_alpha = alpha;
    }
    build_from_jsonl(&dir.join("in.jsonl"), &dir.join("idx"), &opts).unwrap();
    Index::open(dir.join("idx")).unwrap()
}

fn random_queries(index: &Index, num_terms: usize, seed: u64) -> Vec<Query> {
    let mut rng = Rng(seed | 1);
    (0..60)
        .map(|_| {
            let words: Vec<String> = (0..1 + rng.below(6))
                .map(|_| match rng.below(14) {
                    0 => "unknownterm".to_string(),
                    _ => format!("t{}", rng.below(num_terms as u64)),
                })
                .collect();
            Query::parse(index, &words.join(" "))
        })
        .collect()
}

/// The exhaustive CPU oracle for `options`.
fn oracle(index: &Index, options: SearchOptions) -> Searcher<'_> {
    Searcher::new(
        index,
        SearchOptions {
            algorithm: Algorithm::Exhaustive,
            ..options
        },
    )
    .unwrap()
}

fn same(a: &[Scored], b: &[Scored]) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|(x, y)| x.doc == y.doc && x.score.to_bits() == y.score.to_bits())
}

/// The GPU engine's answers equal the exhaustive oracle's exactly (docIDs and score bits).
fn check_engine(
    gpu: &Arc<Gpu>,
    index: &Index,
    queries: &[Query],
    options: SearchOptions,
    gopts: GpuOptions,
    what: &str,
) {
    let oracle = oracle(index, options);
    let mut searcher = GpuSearcher::new(gpu.clone(), index, options, gopts).unwrap();
    let got = searcher.search_batch(queries);
    for (i, (q, a)) in queries.iter().zip(got).enumerate() {
        let want = oracle.search(q).unwrap();
        let hits = a.unwrap().hits;
        assert!(
            same(&hits, &want),
            "{what}: query {i} {:?} mode {:?} k {}: GPU {:?} vs oracle {:?}",
            q.terms,
            options.mode,
            options.k,
            &hits[..hits.len().min(4)],
            &want[..want.len().min(4)]
        );
    }
    assert_eq!(
        searcher.take_stats().cpu_fallback_queries,
        0,
        "{what}: no query may need the CPU"
    );
}

/// The smallest OR window (many windows per query, blocks straddling windows), and queries cut into
/// docID ranges of about 100 postings of cost.
fn small_window() -> GpuOptions {
    GpuOptions {
        window: 256,
        split_cost: 100,
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
        let codec = Codec::ALL[seed as usize % 3];
        let tmp = tempfile::tempdir().unwrap();
        let (index, v) = random_index(tmp.path(), 0xABCD + seed * 7919, codec, None);
        let queries = random_queries(&index, v, seed);
        // Batches of 7 and 4,096; small and large OR windows; long queries cut into docID ranges of
        // about 60 and 700 postings of cost, or never; OR queries sorted up to 4,096 or 64 postings, or
        // never; AND steps merged by the default ratio, never, always, or at lengths 1:1.
        let gopts = GpuOptions {
            batch_size: [7, 4096][seed as usize % 2],
            window: [256, 4096, 32768][seed as usize % 3],
            split_cost: [60, u64::MAX, 700, 200_000][seed as usize % 4],
            small_or: [4096, 0, 64][seed as usize % 3],
            // AND steps: the default, binary search only, merging always, merging only at 1:1.
            merge_ratio: [2, 0, u32::MAX, 1][(seed as usize / 2) % 4],
            ..GpuOptions::default()
        };
        for mode in [Mode::And, Mode::Or, Mode::AndOr] {
            for k in [1, 3, 10, 200, 1000] {
                let base = SearchOptions::new(&index, mode, k);
                let what = format!("seed {seed} {codec}");
                check_engine(&gpu, &index, &queries, base, gopts, &what);
                if k == 10 {
                    let other = SearchOptions {
                        bm25: Bm25Params { k1: 1.2, b: 0.75 },
                        ..base
                    };
                    check_engine(
                        &gpu,
                        &index,
                        &queries,
                        other,
                        gopts,
                        &format!("{what} k1 1.2 b 0.75"),
                    );
                    let stat = SearchOptions {
                        ranking: Ranking::Bm25Static { alpha: 0.3 },
                        ..base
                    };
                    check_engine(
                        &gpu,
                        &index,
                        &queries,
                        stat,
                        gopts,
                        &format!("{what} bm25-static"),
                    );
                }
            }
        }
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
                    ..SearchOptions::new(&index, mode, k)
                };
                check_engine(
                    &gpu,
                    &index,
                    &queries,
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
                &queries,
                SearchOptions::new(&index, mode, k),
                small_window(),
                "long queries",
            );
        }
    }
}

/// A batch the GPU fails is answered by the CPU: every query still gets the oracle's answer.
#[test]
fn failed_batches_are_answered_by_the_cpu() {
    let Some(gpu) = gpu() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let (index, v) = random_index(tmp.path(), 77, Codec::PForDelta, None);
    let queries = random_queries(&index, v, 77);
    for mode in [Mode::And, Mode::Or, Mode::AndOr] {
        let options = SearchOptions::new(&index, mode, 10);
        let oracle = oracle(&index, options);
        let gopts = GpuOptions {
            batch_size: 16,
            fail_batches: true,
            ..GpuOptions::default()
        };
        let mut searcher = GpuSearcher::new(gpu.clone(), &index, options, gopts).unwrap();
        let got = searcher.search_batch(&queries);
        for (q, a) in queries.iter().zip(got) {
            assert!(same(&a.unwrap().hits, &oracle.search(q).unwrap()));
        }
        let sent = queries
            .iter()
            .filter(|q| !q.matches_nothing(if mode == Mode::Or { Mode::Or } else { Mode::And }))
            .count();
        assert!(
            searcher.take_stats().cpu_fallback_queries as usize >= sent,
            "{mode:?}"
        );
    }
}

#[test]
fn gpu_refuses_what_it_cannot_do() {
    let Some(gpu) = gpu() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let (index, _) = random_index(tmp.path(), 99, Codec::PForDelta, None);
    let big_k = SearchOptions::new(&index, Mode::Or, 5000);
    let err = GpuSearcher::new(gpu.clone(), &index, big_k, GpuOptions::default())
        .err()
        .unwrap();
    assert!(err.to_string().contains("--backend cpu"), "{err}");
    let bmw = SearchOptions {
        algorithm: Algorithm::BlockMaxWand,
        ..SearchOptions::new(&index, Mode::Or, 10)
    };
    assert!(GpuSearcher::new(gpu.clone(), &index, bmw, GpuOptions::default()).is_err());
    let tiny = GpuOptions {
        memory_budget: Some(16),
        ..GpuOptions::default()
    };
    let err = GpuSearcher::new(gpu, &index, SearchOptions::new(&index, Mode::Or, 10), tiny)
        .err()
        .unwrap();
    assert!(err.to_string().contains("--gpu-memory"), "{err}");
}

/// The real check: the first 5,000 TREC 2005 queries over the Wikipedia passage index
/// (`WARPSEARCH_WIKI_INDEX`, built with `warpsearch index --title`), AND / OR / and-or at k 10 and 1000.
#[test]
fn engine_equals_the_oracle_on_wikipedia_passages() {
    let Some(gpu) = gpu() else { return };
    let Some(dir) = std::env::var_os("WARPSEARCH_WIKI_INDEX") else {
        say("skipped: WARPSEARCH_WIKI_INDEX is not set (a passage index built with --title)");
        return;
    };
    let queries_path = std::env::var_os("WARPSEARCH_QUERIES")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/queries/trec05-efficiency.txt")
        });
    let index = Index::open(&dir).unwrap();
    assert_eq!(index.num_docs(), 776_864, "not the passage collection");
    let text = std::fs::read_to_string(&queries_path).unwrap();
    let queries: Vec<Query> = text.lines().take(5000).map(|q| Query::parse(&index, q)).collect();
    assert_eq!(queries.len(), 5000);
    for mode in [Mode::And, Mode::Or, Mode::AndOr] {
        for k in [10, 1000] {
            let options = SearchOptions::new(&index, mode, k);
            let oracle = oracle(&index, options);
            let want = oracle.search_batch(&queries);
            // AND top-10 also with binary search only and with merging at every step.
            let ratios: &[u32] = if (mode, k) == (Mode::And, 10) {
                &[2, 0, u32::MAX]
            } else {
                &[2]
            };
            for &merge_ratio in ratios {
                let gopts = GpuOptions {
                    merge_ratio,
                    ..GpuOptions::default()
                };
                let mut searcher = GpuSearcher::new(gpu.clone(), &index, options, gopts).unwrap();
                let got = searcher.search_batch(&queries);
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
                "{mode:?} k {k} merge ratio {merge_ratio}: {differ} of 5000 queries differ from the oracle"
            );
                assert_eq!(searcher.take_stats().cpu_fallback_queries, 0);
                eprintln!("wiki {mode:?} k {k} merge ratio {merge_ratio}: 5000 queries equal the oracle");
            }
        }
    }
}
