//! Stored documents (`index --store`): every document's input line comes back by docID, in input or
//! global-score order, from JSON lines of any schema and `id<TAB>text` lines; `docs.bin` is written with
//! the other files and checked with them at open.

use std::path::Path;

use warpsearch_index::build::{build_from_jsonl, build_from_lines, BuildOptions};
use warpsearch_index::testdata::replace_file;
use warpsearch_index::{AnalyzerConfig, Bm25Params, Codec, DocOrder, Index, IndexError, WriterOptions};

fn options(store: bool) -> BuildOptions {
    let mut o = BuildOptions::new(WriterOptions {
        codec: Codec::SimdBp,
        analyzer: AnalyzerConfig::english(),
        bm25: Bm25Params::default(),
        doc_order: DocOrder::Input,
        force: true,
    });
    o.store = store;
    o
}

/// Every document's stored line is its input line, found by its id.
fn assert_stored(index: &Index, lines: &[String], id_of: impl Fn(&str) -> String) {
    assert_eq!(index.num_docs() as usize, lines.len());
    for line in lines {
        let id = id_of(line);
        let doc = index.find_doc(&id).unwrap_or_else(|| panic!("{id} not found"));
        assert_eq!(index.doc_id(doc), id);
        assert_eq!(index.doc(doc).unwrap().as_deref(), Some(line.as_str()));
    }
    for absent in ["", "no such id", "b"] {
        assert_eq!(index.find_doc(absent), None, "{absent:?}");
    }
}

#[test]
fn stored_documents_come_back_by_docid_in_any_order_and_schema() {
    let dir = tempfile::tempdir().unwrap();
    let beir: Vec<String> = (0..300)
        .map(|i| {
            format!(
                r#"{{"_id": "b{i}", "title": "t{i}", "text": "{} apple{}", "metadata": {{}}}}"#,
                "pear ".repeat(i % 17),
                i % 5
            )
        })
        .collect();
    let input = dir.path().join("corpus.jsonl");
    std::fs::write(&input, beir.join("\n")).unwrap();
    let id_json = |l: &str| {
        let v: serde_json::Value = serde_json::from_str(l).unwrap();
        v["_id"].as_str().unwrap().to_owned()
    };
    for alpha in [None, Some(0.5)] {
        let mut opts = options(true);
        opts.reorder_alpha = alpha;
        let out = dir.path().join("beir");
        let report = build_from_jsonl(&input, &out, &opts).unwrap();
        assert!(report.meta.stored_docs);
        let index = Index::open(&out).unwrap();
        assert_stored(&index, &beir, id_json);
        assert!(index.doc(300).is_err());
    }
    // MS MARCO's collection.tsv, given as lines (as Python gives them).
    let tsv: Vec<String> = (0..50)
        .map(|i| format!("{i}\tpassage number {i} about pears"))
        .collect();
    let out = dir.path().join("tsv");
    let batches = tsv
        .chunks(7)
        .map(|c| Ok(c.iter().map(|l| l.clone().into_bytes()).collect()));
    build_from_lines("docs", batches, &out, &options(true)).unwrap();
    let index = Index::open(&out).unwrap();
    assert_stored(&index, &tsv, |l| l.split('\t').next().unwrap().to_owned());
    // Without --store there is nothing to read, and no docs.bin.
    let out = dir.path().join("plain");
    build_from_jsonl(&input, &out, &options(false)).unwrap();
    let index = Index::open(&out).unwrap();
    assert_eq!(index.doc(0).unwrap(), None);
    assert!(!out.join("docs.bin").exists());
}

fn damaged(out: &Path, what: &str) -> String {
    match Index::open(out) {
        Ok(_) => panic!("{what}: the index opened"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn a_damaged_missing_or_foreign_docs_file_is_refused_at_open() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.jsonl");
    let lines: Vec<String> = (0..100)
        .map(|i| format!(r#"{{"id": "d{i}", "contents": "word{} common"}}"#, i % 9))
        .collect();
    std::fs::write(&input, lines.join("\n")).unwrap();
    let out = dir.path().join("out");
    build_from_jsonl(&input, &out, &options(true)).unwrap();
    let docs = out.join("docs.bin");
    let good = std::fs::read(&docs).unwrap();
    // A flipped byte in the blocks fails the checksum.
    let mut bad = good.clone();
    let at = bad.len() / 2;
    bad[at] ^= 0x55;
    replace_file(&docs, &bad);
    let err = damaged(&out, "flipped byte");
    assert!(err.contains("docs.bin"), "{err}");
    // Missing while meta.json says the index stores documents.
    std::fs::remove_file(&docs).unwrap();
    let err = damaged(&out, "missing docs.bin");
    assert!(err.contains("docs.bin"), "{err}");
    // Another build's docs.bin (same documents, another build identity).
    let other = dir.path().join("other");
    build_from_jsonl(&input, &other, &options(true)).unwrap();
    replace_file(&docs, &std::fs::read(other.join("docs.bin")).unwrap());
    let err = damaged(&out, "another build's docs.bin");
    assert!(err.contains("another build"), "{err}");
    replace_file(&docs, &good);
    let index = Index::open(&out).unwrap();
    assert_stored(&index, &lines, |l| {
        serde_json::from_str::<serde_json::Value>(l).unwrap()["id"]
            .as_str()
            .unwrap()
            .to_owned()
    });
}

#[test]
fn a_failing_document_source_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let batches = vec![
        Ok(vec![br#"{"id": "a", "contents": "x"}"#.to_vec()]),
        Err(IndexError::Invalid("the iterable raised".into())),
    ];
    let err = build_from_lines("docs", batches.into_iter(), &out, &options(true)).unwrap_err();
    assert!(err.to_string().contains("the iterable raised"), "{err}");
    assert!(!out.exists());
}
