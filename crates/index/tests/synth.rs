//! The synthetic collection generator: deterministic by seed, an exact copy of the sample at one template
//! per document, and valid, calibrated indexes when scaled up.

use std::collections::BTreeMap;
use std::path::Path;

use warpsearch_index::testdata::without_build_id;

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
