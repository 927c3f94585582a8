//! Builds indexes from generated collections and checks every list, document and bound against a
//! naive in-memory inversion of the same text.

use std::collections::BTreeMap;
use std::path::Path;

use warpsearch_index::build::{build_from_jsonl, BuildOptions};
use warpsearch_index::{AnalyzerConfig, Bm25Params, Codec, DocOrder, Index, WriterOptions};

use warpsearch_index::testdata::XorShift as Rng;

/// Writes `n` documents of skewed random words; returns their (id, text).
fn collection(dir: &Path, n: usize, seed: u64) -> Vec<(String, String)> {
    let mut rng = Rng(seed | 1);
    let docs: Vec<(String, String)> = (0..n)
        .map(|d| {
            let len = rng.below(40) as usize; // some documents are empty
            let words: Vec<String> = (0..len)
                .map(|_| {
                    let r = rng.below(1000);
                    format!(
                        "w{}",
                        if r < 500 {
                            r % 5
                        } else if r < 900 {
                            r % 60
                        } else {
                            r
                        }
                    )
                })
                .collect();
            (format!("doc-{d}"), words.join(" "))
        })
        .collect();
    let lines: Vec<String> = docs
        .iter()
        .map(|(id, text)| serde_json::json!({"id": id, "contents": text}).to_string())
        .collect();
    std::fs::write(dir.join("docs.jsonl"), lines.join("\n") + "\n").unwrap();
    docs
}

fn options(codec: Codec) -> BuildOptions {
    BuildOptions::new(WriterOptions {
        codec,
        analyzer: AnalyzerConfig::whitespace(),
        bm25: Bm25Params::default(),
        doc_order: DocOrder::Input,
        force: false,
    })
}

/// term -> [(input position, tf)]
fn naive(docs: &[(String, String)]) -> BTreeMap<String, Vec<(u32, u32)>> {
    let mut lists: BTreeMap<String, Vec<(u32, u32)>> = BTreeMap::new();
    for (d, (_, text)) in docs.iter().enumerate() {
        let mut counts: BTreeMap<&str, u32> = BTreeMap::new();
        for w in text.split_whitespace() {
            *counts.entry(w).or_default() += 1;
        }
        for (w, c) in counts {
            lists.entry(w.to_owned()).or_default().push((d as u32, c));
        }
    }
    lists
}

fn check_index(index: &Index, docs: &[(String, String)], position_of: impl Fn(u32) -> u32) {
    let expected = naive(docs);
    assert_eq!(index.num_docs() as usize, docs.len());
    assert_eq!(index.meta().num_terms as usize, expected.len());
    for d in 0..index.num_docs() {
        let (id, text) = &docs[position_of(d) as usize];
        assert_eq!(index.doc_id(d), id);
        assert_eq!(
            index.doc_lens()[d as usize] as usize,
            text.split_whitespace().count()
        );
    }
    // Ids looked up in batches are those looked up one by one, in order, whatever the batch's length
    // (16 at a time inside); a failure stops the walk at once.
    let order: Vec<u32> = (0..index.num_docs()).rev().collect();
    for size in [1, 15, 16, 17, 33] {
        for docs in order.chunks(size) {
            let mut ids = Vec::new();
            let walked = index.try_for_each_doc_id(docs.iter().copied(), |id| {
                ids.push(id.to_owned());
                Ok::<(), ()>(())
            });
            assert_eq!(walked, Ok(()));
            let one_by_one: Vec<&str> = docs.iter().map(|&d| index.doc_id(d)).collect();
            assert_eq!(ids, one_by_one, "{size} docs");
        }
        let mut seen = 0;
        let stopped = index.try_for_each_doc_id(order.iter().copied(), |_| {
            seen += 1;
            if seen == size {
                Err(seen)
            } else {
                Ok(())
            }
        });
        assert_eq!((stopped, seen), (Err(size), size));
    }
    assert_eq!(index.try_for_each_doc_id([], |_| Err(())), Ok(()));
    let bm25 = index.bm25();
    for (term, list) in &expected {
        let id = index
            .term_id(term)
            .unwrap_or_else(|| panic!("term {term} missing"));
        let postings = index.postings(id);
        let (got_docs, got_freqs) = postings.decode_all().unwrap();
        let got: BTreeMap<u32, u32> = got_docs
            .iter()
            .map(|&d| position_of(d))
            .zip(got_freqs.iter().copied())
            .collect();
        assert_eq!(
            got,
            list.iter().copied().collect::<BTreeMap<_, _>>(),
            "list of {term}"
        );
        assert!(got_docs.windows(2).all(|w| w[0] < w[1]));
        // Block-max bounds: above every score of the block, and tight.
        let idf = bm25.idf(postings.len() as u64);
        let mut d = [0u32; 128];
        let mut f = [0u32; 128];
        for (b, meta) in postings.blocks().iter().enumerate() {
            let n = postings.decode_docs(b, &mut d).unwrap();
            postings.decode_freqs(b, &mut f).unwrap();
            let max = (0..n)
                .map(|i| bm25.score(idf, f[i], index.doc_lens()[d[i] as usize]))
                .fold(0f32, f32::max);
            assert!(
                meta.max_score >= max && meta.max_score <= max * 1.0001 + 1e-30,
                "{term} block {b}"
            );
            assert!(postings.record().max_score >= meta.max_score);
        }
    }
    assert_eq!(index.term_id("no-such-term"), None);
}

#[test]
fn every_codec_reads_back_what_was_indexed() {
    let dir = tempfile::tempdir().unwrap();
    let docs = collection(dir.path(), 700, 7);
    for codec in Codec::ALL {
        let out = dir.path().join(format!("idx-{codec}"));
        let report = build_from_jsonl(&dir.path().join("docs.jsonl"), &out, &options(codec)).unwrap();
        assert!(
            report.empty_docs > 0,
            "the collection should contain empty documents"
        );
        check_index(&Index::open(&out).unwrap(), &docs, |d| d);
    }
}

#[test]
fn spilling_runs_gives_the_same_index_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    collection(dir.path(), 500, 11);
    let input = dir.path().join("docs.jsonl");
    let one = dir.path().join("one");
    let many = dir.path().join("many");
    let r1 = build_from_jsonl(&input, &one, &options(Codec::PForDelta)).unwrap();
    let mut tiny = options(Codec::PForDelta);
    tiny.memory_budget = 2000;
    let r2 = build_from_jsonl(&input, &many, &tiny).unwrap();
    assert_eq!(r1.runs, 0, "the postings fit in memory");
    assert!(r2.runs > 3, "expected several runs, got {}", r2.runs);
    assert_same_files(&one, &many);
}

/// More runs than the merge reads at once are merged in levels (the merge opened every run, past the
/// file descriptor limit): the index is the one a single merge writes, byte for byte.
#[test]
fn multi_level_merge_gives_the_same_index_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    collection(dir.path(), 500, 13);
    let input = dir.path().join("docs.jsonl");
    let mut tiny = options(Codec::PForDelta);
    tiny.memory_budget = 2000;
    // The reference: every run merged at once.
    tiny.max_open_runs = usize::MAX;
    let single = build_from_jsonl(&input, &dir.path().join("single"), &tiny).unwrap();
    assert!(single.runs > 64, "{} runs", single.runs);
    for max_open in [2, 3, warpsearch_index::build::runs::MAX_OPEN_RUNS] {
        let mut levels = tiny.clone();
        levels.max_open_runs = max_open;
        let out = dir.path().join(format!("levels-{max_open}"));
        assert_eq!(build_from_jsonl(&input, &out, &levels).unwrap().runs, single.runs);
        assert_same_files(&dir.path().join("single"), &out);
    }
}

pub fn assert_same_files(a: &Path, b: &Path) {
    let names = |p: &Path| {
        let mut v: Vec<_> = std::fs::read_dir(p)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        v.sort();
        v
    };
    assert_eq!(names(a), names(b));
    for name in names(a) {
        assert!(read(&a.join(&name)) == read(&b.join(&name)), "{name:?} differs");
    }
}

#[test]
fn global_score_order_renumbers_documents_consistently() {
    let dir = tempfile::tempdir().unwrap();
    let docs = collection(dir.path(), 400, 23);
    let scores: String = (0..400)
        .filter(|d| d % 3 != 0)
        .map(|d| format!("doc-{d}\t{}\n", (d * 37 % 101) as f32 / 7.0))
        .collect();
    std::fs::write(
        dir.path().join("static.tsv"),
        format!("# comment\n{scores}unknown-doc\t1.5\n"),
    )
    .unwrap();
    let mut opts = options(Codec::EliasFano);
    opts.static_scores = Some(dir.path().join("static.tsv"));
    opts.reorder_alpha = Some(0.3);
    let out = dir.path().join("gs");
    let report = build_from_jsonl(&dir.path().join("docs.jsonl"), &out, &opts).unwrap();
    assert_eq!((report.static_missing, report.static_unknown), (134, 1));
    let index = Index::open(&out).unwrap();
    assert_eq!(index.meta().doc_order, DocOrder::GlobalScore { alpha: 0.3 });
    let gs = index.global_scores().unwrap();
    assert!(
        gs.windows(2).all(|w| w[0] >= w[1]),
        "global scores must not increase with docID"
    );
    let position_of = |d: u32| index.doc_id(d)[4..].parse::<u32>().unwrap();
    check_index(&index, &docs, position_of);
    // The global score bounds the normalised score of any query: check it against each term alone.
    let (bm25, range) = (index.bm25(), index.meta().static_scores.unwrap());
    let statics = index.static_scores().unwrap();
    for (_, id) in index.terms() {
        let (ds, fs) = index.postings(id).decode_all().unwrap();
        for (&d, &f) in ds.iter().zip(&fs) {
            let ir = bm25.tf_part(f, index.doc_lens()[d as usize]) / (bm25.params.k1 + 1.0);
            let s = 0.3 * range.normalize(statics[d as usize]) + 0.7 * ir;
            assert!(s <= gs[d as usize], "doc {d}: {s} > {}", gs[d as usize]);
        }
    }
}

#[test]
fn english_analyzer_on_real_cacm() {
    let Some(cacm) = warpsearch_index::testdata::shared_data("cacm/docs.jsonl") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let mut opts = options(Codec::PForDelta);
    opts.writer.analyzer = AnalyzerConfig::english();
    let out = dir.path().join("cacm");
    build_from_jsonl(&cacm, &out, &opts).unwrap();
    let index = Index::open(&out).unwrap();
    assert_eq!(index.num_docs(), 3204);
    assert_eq!(index.doc_id(0), "CACM-1");
    // Stopwords are gone and terms are stemmed: "algorithms" is indexed as "algorithm".
    assert_eq!(index.term_id("the"), None);
    assert_eq!(index.term_id("algorithms"), None);
    let algorithm = index.postings(index.term_id("algorithm").unwrap());
    let (docs, _) = algorithm.decode_all().unwrap();
    let text = std::fs::read_to_string(&cacm).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    for d in docs {
        assert!(lines[d as usize].to_lowercase().contains("algorithm"), "doc {d}");
    }
}

/// An index file's bytes, build identity and checksum zeroed (two builds compare equal).
fn read(path: &std::path::Path) -> Vec<u8> {
    warpsearch_index::testdata::without_build_id(std::fs::read(path).unwrap())
}
