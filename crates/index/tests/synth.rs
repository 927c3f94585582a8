//! The synthetic collection generator: deterministic by seed, an exact copy of the sample at one template
//! per document, and valid, calibrated indexes when scaled up.

use std::collections::BTreeMap;
use std::path::Path;

use warpsearch_index::testdata::{same_lists_in_shards, without_build_id};

use warpsearch_index::synth::{generate, SynthOptions};
use warpsearch_index::{
    AnalyzerConfig, Bm25Params, Codec, DocIds, DocOrder, DocTable, Index, IndexWriter, WriterOptions,
};

fn writer_options(codec: Codec) -> WriterOptions {
    WriterOptions {
        codec,
        analyzer: AnalyzerConfig::whitespace(),
        bm25: Bm25Params::default(),
        doc_order: DocOrder::Input,
        force: true,
    }
}

/// A sample of `n` documents and 400 terms with Zipf-like document frequencies, some lists clustered in
/// docID runs (as passages of one article are), with frequencies 1-4.
fn sample(dir: &Path, n: u32, seed: u64) -> Index {
    let mut x = seed | 1;
    let mut next = move |m: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % m
    };
    let mut lists: BTreeMap<String, BTreeMap<u32, u32>> = BTreeMap::new();
    for t in 0..400u64 {
        let df = (n as u64 / (t + 1)).max(1);
        let list = lists.entry(format!("t{t:03}")).or_default();
        let clustered = t % 3 == 0;
        let mut d = next(n as u64) as u32;
        for _ in 0..df {
            d = if clustered && next(4) > 0 {
                (d + 1) % n
            } else {
                next(n as u64) as u32
            };
            list.insert(d, 1 + next(4) as u32);
        }
    }
    let mut lens = vec![1u32; n as usize];
    for list in lists.values() {
        for (&d, &tf) in list {
            lens[d as usize] += tf;
        }
    }
    let mut ids = DocIds::default();
    (0..n).for_each(|d| ids.push(&format!("s{d}")));
    let table = DocTable {
        ids,
        lens,
        static_scores: None,
        global_scores: None,
    };
    let path = dir.join("sample");
    let mut w = IndexWriter::create(&path, writer_options(Codec::PForDelta), table).unwrap();
    for (term, list) in &lists {
        let (docs, tfs): (Vec<u32>, Vec<u32>) = list.iter().map(|(&d, &f)| (d, f)).unzip();
        w.add_term(term.as_bytes(), &docs, &tfs).unwrap();
    }
    w.finish().unwrap();
    Index::open(&path).unwrap()
}

fn options(docs: u32, terms_per_doc: f64, seed: u64) -> SynthOptions {
    SynthOptions {
        docs,
        terms_per_doc,
        templates: 1.0,
        length_sigma: 0.8,
        seed,
        writer: writer_options(Codec::PForDelta),
        static_scores: None,
        reorder_alpha: None,
        shards: None,
    }
}

/// Every list of `index`, decoded, by term.
fn lists(index: &Index) -> BTreeMap<Vec<u8>, (Vec<u32>, Vec<u32>)> {
    index
        .terms()
        .map(|(t, id)| (t, index.postings(id).decode_all().unwrap()))
        .collect()
}

#[test]
fn the_same_seed_gives_the_same_index() {
    let dir = tempfile::tempdir().unwrap();
    let s = sample(dir.path(), 3000, 11);
    let build = |name: &str, seed: u64| {
        let out = dir.path().join(name);
        generate(&s, &out, &options(9000, 40.0, seed), false).unwrap();
        without_build_id(std::fs::read(out.join("postings.bin")).unwrap())
    };
    let (a, b, c) = (build("a", 7), build("b", 7), build("c", 8));
    assert_eq!(a, b, "seed 7 twice");
    assert_ne!(a, c, "seeds 7 and 8");
}

#[test]
fn one_template_per_document_copies_the_sample() {
    let dir = tempfile::tempdir().unwrap();
    let s = sample(dir.path(), 2000, 3);
    let out = dir.path().join("copy");
    // Fewer distinct terms than one template has: every document is one template, in sample order.
    let (meta, report) = generate(&s, &out, &options(2000, 1.0, 5), false).unwrap();
    assert_eq!(meta.num_docs, 2000);
    assert!((report.templates_per_doc - 1.0).abs() < 1e-9, "{report:?}");
    let synth = Index::open(&out).unwrap();
    assert_eq!(synth.doc_lens(), s.doc_lens());
    // A term's variants partition its documents: merged, they are the sample's list.
    let mut merged: BTreeMap<Vec<u8>, BTreeMap<u32, u32>> = BTreeMap::new();
    for (term, (docs, tfs)) in lists(&synth) {
        let base = term.split(|&b| b == 1).next().unwrap().to_vec();
        let list = merged.entry(base).or_default();
        for (d, f) in docs.into_iter().zip(tfs) {
            assert!(list.insert(d, f).is_none(), "document {d} in two variants");
        }
    }
    let want = lists(&s);
    assert_eq!(merged.len(), want.len());
    for (term, (docs, tfs)) in want {
        let got: Vec<(u32, u32)> = merged[&term].iter().map(|(&d, &f)| (d, f)).collect();
        let want: Vec<(u32, u32)> = docs.into_iter().zip(tfs).collect();
        assert_eq!(got, want, "term {}", String::from_utf8_lossy(&term));
    }
}

#[test]
fn scaled_up_collections_meet_their_calibration() {
    let dir = tempfile::tempdir().unwrap();
    let s = sample(dir.path(), 3000, 19);
    let mean = s.meta().num_postings as f64 / 3000.0;
    let out = dir.path().join("big");
    let target = 3.0 * mean;
    let (meta, report) = generate(&s, &out, &options(12_000, target, 1), false).unwrap();
    let synth = Index::open(&out).unwrap();
    assert_eq!(synth.num_docs(), 12_000);
    let per_doc = meta.num_postings as f64 / 12_000.0;
    assert!(
        (per_doc / target - 1.0).abs() < 0.2,
        "{per_doc:.1} distinct terms per document for a target of {target:.1} ({report:?})"
    );
    assert!(report.templates_per_doc > 1.5, "{report:?}");
    // Every sample term keeps its name (queries run unchanged); the vocabulary grows.
    for (term, _) in s.terms() {
        assert!(synth.term_id(std::str::from_utf8(&term).unwrap()).is_some());
    }
    assert!(meta.num_terms > s.meta().num_terms, "{report:?}");
    // Every list decodes and agrees with the document table.
    let lens = synth.doc_lens();
    let mut tokens = vec![0u64; 12_000];
    for (_, (docs, tfs)) in lists(&synth) {
        assert!(docs.windows(2).all(|w| w[0] < w[1]));
        for (d, f) in docs.into_iter().zip(tfs) {
            tokens[d as usize] += f as u64;
        }
    }
    for d in 0..12_000 {
        // The sample's lengths count one token outside its terms; runs of r templates add r of those.
        assert!(
            tokens[d] < lens[d] as u64,
            "document {d}: {} term tokens, length {}",
            tokens[d],
            lens[d]
        );
    }
}

/// `b` is `a` renumbered: the same documents (by id) with the same lengths and static scores, every
/// list holding the same (document id, frequency) pairs.
fn assert_renumbered(a: &Index, b: &Index) {
    assert_eq!(a.num_docs(), b.num_docs());
    let n = a.num_docs() as usize;
    let old_of: Vec<u32> = (0..n as u32)
        .map(|new| {
            let id = b.doc_id(new);
            let old: u32 = id.strip_prefix("synth-").unwrap().parse().unwrap();
            assert_eq!(a.doc_id(old), id);
            old
        })
        .collect();
    let mut seen = old_of.clone();
    seen.sort_unstable();
    assert!(
        seen.iter().enumerate().all(|(i, &d)| i as u32 == d),
        "a permutation"
    );
    for (new, &old) in old_of.iter().enumerate() {
        let old = old as usize;
        assert_eq!(b.doc_lens()[new], a.doc_lens()[old], "document {new}");
        match (a.static_scores(), b.static_scores()) {
            (Some(sa), Some(sb)) => assert_eq!(sb[new].to_bits(), sa[old].to_bits()),
            (None, None) => {}
            _ => panic!("static scores in one index only"),
        }
    }
    let (la, lb) = (lists(a), lists(b));
    assert_eq!(la.len(), lb.len());
    for ((ta, (da, fa)), (tb, (db, fb))) in la.into_iter().zip(lb) {
        assert_eq!(ta, tb);
        assert!(db.windows(2).all(|w| w[0] < w[1]), "sorted after renumbering");
        let mut mapped: Vec<(u32, u32)> = db.iter().map(|&d| old_of[d as usize]).zip(fb).collect();
        mapped.sort_unstable();
        assert_eq!(
            mapped,
            da.into_iter().zip(fa).collect::<Vec<_>>(),
            "term {:?}",
            ta
        );
    }
}

/// Every document's stored global score is docs/references.md#pruned-list-caching eq. 4 of its static score and its largest term
/// frequency in the written lists, and they do not increase with the docID.
fn assert_global_scores(index: &Index, alpha: f32) {
    let gs = index.global_scores().expect("global scores");
    assert_eq!(
        index.meta().doc_order,
        DocOrder::GlobalScore { alpha },
        "{:?}",
        index.meta()
    );
    assert!(gs.windows(2).all(|w| w[0] >= w[1]), "non-increasing");
    let mut max_tf = vec![0u32; gs.len()];
    for (_, (docs, tfs)) in lists(index) {
        for (d, f) in docs.into_iter().zip(tfs) {
            max_tf[d as usize] = max_tf[d as usize].max(f);
        }
    }
    let bm25 = index.bm25();
    let range = index.meta().static_scores;
    for d in 0..gs.len() {
        let s = match (index.static_scores(), range) {
            (Some(s), Some(r)) => r.normalize(s[d]),
            _ => 0.0,
        };
        let ir = if max_tf[d] == 0 {
            0.0
        } else {
            bm25.tf_part(max_tf[d], index.doc_lens()[d]) / (bm25.params.k1 + 1.0)
        };
        let want = warpsearch_index::bm25::loosen_bound(alpha * s + (1.0 - alpha) * ir);
        assert_eq!(gs[d].to_bits(), want.to_bits(), "document {d}");
    }
}

#[test]
fn static_scores_and_a_global_score_order_renumber_the_same_collection() {
    let dir = tempfile::tempdir().unwrap();
    let s = sample(dir.path(), 3000, 23);
    // Scores for the sample's documents, as `index --static-scores` takes them; every 97th has none.
    let file = dir.path().join("static.tsv");
    let lines: String = (0..3000u32)
        .filter(|d| d % 97 != 5)
        .map(|d| format!("s{d}\t{}\n", 1.0 / (1.0 + (d % 7) as f32)))
        .collect();
    std::fs::write(&file, format!("# passage scores\n{lines}")).unwrap();
    let with = |name: &str, scores: bool, alpha: Option<f32>| {
        let opts = SynthOptions {
            static_scores: scores.then(|| file.clone()),
            reorder_alpha: alpha,
            ..options(9000, 60.0, 4)
        };
        let out = dir.path().join(name);
        let (_, report) = generate(&s, &out, &opts, false).unwrap();
        (Index::open(&out).unwrap(), report)
    };
    let (input, report) = with("input", true, None);
    assert_eq!(report.static_missing, 31, "{report:?}");
    assert_eq!(input.meta().doc_order, DocOrder::Input);
    // A document takes its first template's score: documents follow the templates in sample order, so
    // the first starts with s0 (score 1), and every score is one of the file's or 0.
    let statics = input.static_scores().unwrap();
    assert_eq!(statics[0], 1.0);
    let allowed: Vec<f32> = (0..7).map(|i| 1.0 / (1.0 + i as f32)).chain([0.0]).collect();
    assert!(statics.iter().all(|s| allowed.contains(s)));
    assert!(statics.contains(&0.0) && statics.contains(&0.5));
    assert_eq!(input.global_scores(), None);
    // The same collection without scores: the same lists.
    let (plain, _) = with("plain", false, None);
    assert_eq!(plain.static_scores(), None);
    assert_eq!(lists(&plain), lists(&input));

    for (name, scores, alpha) in [
        ("gs", true, 0.5),
        ("gs-only-ir", false, 0.3),
        ("gs-static", true, 1.0),
    ] {
        let (ordered, _) = with(name, scores, Some(alpha));
        assert_renumbered(if scores { &input } else { &plain }, &ordered);
        assert_global_scores(&ordered, alpha);
    }
    // Documents of more templates than the sample lends (two): a template repeats within a document,
    // and its frequencies add up in the lists as in the largest frequency. The target lies between one
    // template's distinct terms and two's, so runs average under two templates and many reach three.
    std::fs::create_dir(dir.path().join("tiny")).unwrap();
    let tiny = sample(&dir.path().join("tiny"), 40, 5);
    let terms_of = |d: u32| -> std::collections::BTreeSet<Vec<u8>> {
        lists(&tiny)
            .into_iter()
            .filter(|(_, (docs, _))| docs.contains(&d))
            .map(|(t, _)| t)
            .collect()
    };
    let (t0, t1) = (terms_of(0), terms_of(1));
    let target = (t0.len() + t0.union(&t1).count()) as f64 / 2.0;
    let opts = SynthOptions {
        templates: 0.05,
        reorder_alpha: Some(0.5),
        ..options(30, target, 2)
    };
    generate(&tiny, &dir.path().join("repeats"), &opts, false).unwrap();
    let repeats = Index::open(dir.path().join("repeats")).unwrap();
    let two = tiny.doc_lens()[0] + tiny.doc_lens()[1];
    assert!(
        repeats.doc_lens().iter().any(|&l| l > two),
        "no template repeated"
    );
    assert_global_scores(&repeats, 0.5);
    let err = generate(
        &s,
        &dir.path().join("bad"),
        &SynthOptions {
            reorder_alpha: Some(1.5),
            ..options(10, 5.0, 1)
        },
        false,
    )
    .unwrap_err();
    assert!(err.to_string().contains("alpha"), "{err}");
}

/// A synthetic collection written as shards (in input and in global-score order) is the one index
/// cut at the shards' docID boundaries: the same documents, statistics and document frequencies in
/// the head, each shard scoring with the collection's statistics and holding exactly its documents'
/// part of every list.
#[test]
fn a_sharded_synthetic_collection_is_the_one_index_cut_at_its_shards() {
    let dir = tempfile::tempdir().unwrap();
    let s = sample(dir.path(), 3000, 11);
    let file = dir.path().join("static.tsv");
    let lines: String = (0..3000u32)
        .map(|d| format!("s{d}\t{}\n", 1.0 / (1.0 + (d % 5) as f32)))
        .collect();
    std::fs::write(&file, lines).unwrap();
    // Input order without static scores; global-score order with them.
    for alpha in [None, Some(0.5)] {
        let with = |name: &str, shards: Option<usize>| {
            let opts = SynthOptions {
                reorder_alpha: alpha,
                static_scores: alpha.map(|_| file.clone()),
                shards,
                ..options(7001, 40.0, 3)
            };
            let out = dir.path().join(name);
            generate(&s, &out, &opts, false).unwrap();
            Index::open(&out).unwrap()
        };
        let one = with("one", None);
        let head = with("three", Some(3));
        assert_eq!(head.shards().len(), 3);
        let (a, b) = (one.meta(), head.meta());
        assert_eq!(
            (
                a.num_docs,
                a.num_terms,
                a.num_postings,
                a.total_doc_len,
                a.doc_order
            ),
            (
                b.num_docs,
                b.num_terms,
                b.num_postings,
                b.total_doc_len,
                b.doc_order
            )
        );
        assert_eq!(head.doc_lens(), one.doc_lens());
        let firsts: Vec<u32> = head.shards().iter().map(|s| s.first_doc()).collect();
        assert_eq!(
            firsts,
            vec![0, 2333, 4667],
            "shards of nearly equal document counts"
        );
        for shard in head.shards() {
            let bm = shard.index().bm25();
            let ones = one.bm25();
            assert_eq!(
                (bm.num_docs, bm.avg_doc_len.to_bits()),
                (ones.num_docs, ones.avg_doc_len.to_bits())
            );
            assert_eq!(shard.index().static_range(), one.meta().static_scores);
        }
        assert_eq!(one.meta().static_scores.is_some(), alpha.is_some());
        for d in [0u32, 2332, 2333, 4667, 7000] {
            assert_eq!(head.doc_id(d), one.doc_id(d), "document {d}");
        }
        same_lists_in_shards(&one, &head);
    }
}

#[test]
fn bad_parameters_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let s = sample(dir.path(), 100, 1);
    let bad = SynthOptions {
        templates: 0.0,
        ..options(10, 5.0, 1)
    };
    let err = generate(&s, &dir.path().join("x"), &bad, false).unwrap_err();
    assert!(err.to_string().contains("templates"), "{err}");
    let err = generate(&s, &dir.path().join("y"), &options(0, 5.0, 1), false).unwrap_err();
    assert!(err.to_string().contains("0 documents"), "{err}");
}
