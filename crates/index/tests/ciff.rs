//! CIFF: a round trip gives back an identical index; a hand-made CIFF imports correctly; damaged or
//! arbitrary bytes give errors, never panics.

use std::path::Path;

use proptest::prelude::*;
use prost::Message;
use warpsearch_index::build::{build_from_jsonl, BuildOptions};
use warpsearch_index::ciff::{self, DocRecord, Header, ImportOptions, Posting, PostingsList};
use warpsearch_index::{AnalyzerConfig, Bm25Params, Codec, DocOrder, Index, WriterOptions};

fn writer(codec: Codec) -> WriterOptions {
    WriterOptions {
        codec,
        analyzer: AnalyzerConfig::english(),
        bm25: Bm25Params::default(),
        doc_order: DocOrder::Input,
        force: false,
    }
}

fn import_opts(codec: Codec) -> ImportOptions {
    ImportOptions {
        writer: writer(codec),
        analyzer_override: false,
    }
}

fn same_files(a: &Path, b: &Path) {
    for entry in std::fs::read_dir(a).unwrap() {
        let name = entry.unwrap().file_name();
        assert!(read(&a.join(&name)) == read(&b.join(&name)), "{name:?} differs");
    }
    assert_eq!(
        std::fs::read_dir(a).unwrap().count(),
        std::fs::read_dir(b).unwrap().count()
    );
}

#[test]
fn export_then_import_gives_an_identical_index() {
    let dir = tempfile::tempdir().unwrap();
    let lines: String = (0..900)
        .map(|i| {
            format!(
                "{{\"id\": \"d{i}\", \"contents\": \"w{} w{} w{} shared words {}\"}}\n",
                i % 7,
                i % 131,
                i,
                "x ".repeat(i % 5)
            )
        })
        .collect();
    std::fs::write(dir.path().join("in.jsonl"), lines).unwrap();
    for codec in Codec::ALL {
        for order in [None, Some(0.0)] {
            let original = dir.path().join(format!("orig-{codec}-{order:?}"));
            let mut opts = BuildOptions::new(writer(codec));
            opts.reorder_alpha = order;
            build_from_jsonl(&dir.path().join("in.jsonl"), &original, &opts).unwrap();
            let index = Index::open(&original).unwrap();
            for name in ["x.ciff", "x.ciff.gz", "x.ciff.zst"] {
                let file = dir.path().join(name);
                ciff::export(&index, &file).unwrap();
                let back = dir.path().join(format!("back-{codec}-{order:?}-{name}"));
                ciff::import(&file, &back, import_opts(codec)).unwrap();
                if order.is_none() {
                    same_files(&original, &back);
                } else {
                    // The global-score table is not part of CIFF; everything else is identical.
                    for f in warpsearch_index::format::files::REQUIRED {
                        assert!(read(&original.join(f)) == read(&back.join(f)), "{f}");
                    }
                }
            }
        }
    }
}

fn put(msg: &impl Message, out: &mut Vec<u8>) {
    msg.encode_length_delimited(out).unwrap();
}

/// A CIFF as another engine would write it: no warpsearch description, terms out of order.
fn foreign_ciff() -> Vec<u8> {
    let mut out = Vec::new();
    put(
        &Header {
            version: 1,
            num_postings_lists: 3,
            num_doc_records: 4,
            total_postings_lists: 3,
            total_docs: 4,
            total_terms_in_collection: 9,
            average_doclength: 2.25,
            description: "Anserini Lucene index".into(),
        },
        &mut out,
    );
    let list = |term: &str, postings: &[(i32, i32)]| PostingsList {
        term: term.into(),
        df: postings.len() as i64,
        cf: postings.iter().map(|p| p.1 as i64).sum(),
        postings: postings
            .iter()
            .map(|&(docid, tf)| Posting { docid, tf })
            .collect(),
    };
    put(&list("zebra", &[(1, 2)]), &mut out);
    put(&list("apple", &[(0, 1), (2, 3), (1, 1)]), &mut out); // docIDs 0, 2, 3 as gaps
    put(&list("mango", &[(3, 1)]), &mut out);
    for (docid, id, len) in [(1, "B", 2), (0, "A", 1), (3, "D", 4), (2, "C", 2)] {
        put(
            &DocRecord {
                docid,
                collection_docid: id.into(),
                doclength: len,
            },
            &mut out,
        );
    }
    out
}

#[test]
fn a_ciff_from_another_tool_imports_correctly() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("foreign.ciff");
    std::fs::write(&file, foreign_ciff()).unwrap();
    let out = dir.path().join("idx");
    ciff::import(&file, &out, import_opts(Codec::Rice)).unwrap();
    let index = Index::open(&out).unwrap();
    assert_eq!(
        (
            index.num_docs(),
            index.meta().num_terms,
            index.meta().num_postings
        ),
        (4, 3, 5)
    );
    assert_eq!(
        (0..4).map(|d| index.doc_id(d)).collect::<Vec<_>>(),
        ["A", "B", "C", "D"]
    );
    assert_eq!(index.doc_lens(), &[1, 2, 2, 4]);
    assert_eq!(index.meta().avg_doc_len, 2.25);
    let list = |t: &str| index.postings(index.term_id(t).unwrap()).decode_all().unwrap();
    assert_eq!(list("apple"), (vec![0, 2, 3], vec![1, 3, 1]));
    assert_eq!(list("zebra"), (vec![1], vec![2]));
    assert_eq!(list("mango"), (vec![3], vec![1]));
    assert_eq!(
        index.terms().map(|t| t.0).collect::<Vec<_>>(),
        [b"apple".to_vec(), b"mango".to_vec(), b"zebra".to_vec()]
    );
}

#[test]
fn inconsistent_ciff_files_are_refused_with_a_reason() {
    let dir = tempfile::tempdir().unwrap();
    let good = foreign_ciff();
    let file = dir.path().join("bad.ciff");
    let out = dir.path().join("idx");
    let error = |bytes: &[u8]| {
        std::fs::write(&file, bytes).unwrap();
        let e = ciff::import(&file, &out, import_opts(Codec::PForDelta))
            .unwrap_err()
            .to_string();
        assert!(!out.exists(), "a failed import left an index behind");
        e
    };
    assert!(error(&good[..good.len() - 3]).contains("truncated"));
    assert!(error(&good[..40]).contains("truncated"));
    let mut bad_df = Vec::new();
    put(
        &Header {
            num_postings_lists: 1,
            num_doc_records: 1,
            ..Default::default()
        },
        &mut bad_df,
    );
    put(
        &PostingsList {
            term: "t".into(),
            df: 2,
            cf: 1,
            postings: vec![Posting { docid: 0, tf: 1 }],
        },
        &mut bad_df,
    );
    put(
        &DocRecord {
            docid: 0,
            collection_docid: "a".into(),
            doclength: 1,
        },
        &mut bad_df,
    );
    assert!(error(&bad_df).contains("df is 2 but it holds 1 postings"));
    let mut bad_doc = Vec::new();
    put(
        &Header {
            num_postings_lists: 1,
            num_doc_records: 1,
            ..Default::default()
        },
        &mut bad_doc,
    );
    put(
        &PostingsList {
            term: "t".into(),
            df: 1,
            cf: 1,
            postings: vec![Posting { docid: 5, tf: 1 }],
        },
        &mut bad_doc,
    );
    put(
        &DocRecord {
            docid: 0,
            collection_docid: "a".into(),
            doclength: 1,
        },
        &mut bad_doc,
    );
    assert!(error(&bad_doc).contains("docID 5 is not below the 1 documents"));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]
    /// The CIFF reader given arbitrary bytes, or a valid file with bytes changed, never panics.
    #[test]
    fn arbitrary_bytes_never_panic(noise in prop::collection::vec(any::<u8>(), 0..300), at in any::<usize>(), byte in any::<u8>()) {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("x.ciff");
        for bytes in [noise.clone(), {
            let mut b = foreign_ciff();
            let i = at % b.len();
            b[i] = byte;
            b
        }] {
            std::fs::write(&file, &bytes).unwrap();
            let _ = ciff::import(&file, &dir.path().join("idx"), import_opts(Codec::EliasFano));
            let _ = std::fs::remove_dir_all(dir.path().join("idx"));
        }
    }
}

/// An index file's bytes, build identity and checksum zeroed (two builds compare equal).
fn read(path: &std::path::Path) -> Vec<u8> {
    warpsearch_index::testdata::without_build_id(std::fs::read(path).unwrap())
}

/// `ciff` (a CIFF file's bytes) with its header's description replaced by `description`.
fn with_description(ciff: &[u8], description: &str) -> Vec<u8> {
    let mut rest = ciff;
    let mut header = Header::decode_length_delimited(&mut rest).unwrap();
    header.description = description.into();
    let mut out = Vec::new();
    put(&header, &mut out);
    out.extend_from_slice(rest);
    out
}

fn import_error(dir: &Path, bytes: &[u8]) -> String {
    let (file, out) = (dir.join("d.ciff"), dir.join("idx"));
    std::fs::write(&file, bytes).unwrap();
    let err = ciff::import(&file, &out, import_opts(Codec::PForDelta))
        .expect_err("the description must be refused")
        .to_string();
    assert!(!out.exists());
    err
}

/// A wrongly typed `warpsearch` setting in a CIFF's description was ignored silently (the whole
/// description with it): it is refused, naming the setting. Other descriptions are left alone.
#[test]
fn ciff_description_with_a_wrongly_typed_setting_is_refused_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let analyzer = serde_json::to_string(&AnalyzerConfig::whitespace()).unwrap();
    let settings = |bm25: &str, order: &str| {
        format!(r#"{{"warpsearch": {{"analyzer": {analyzer}, "bm25": {bm25}, "doc_order": {order}}}}}"#)
    };
    let good = settings(r#"{"k1": 1.2, "b": 0.75}"#, r#"{"kind": "input"}"#);
    for (description, setting) in [
        (
            settings(r#"{"k1": "1.2", "b": 0.75}"#, r#"{"kind": "input"}"#),
            "warpsearch.bm25.k1",
        ),
        (
            settings(r#"{"k1": 1.2}"#, r#"{"kind": "input"}"#),
            "warpsearch.bm25",
        ),
        (
            settings(r#"{"k1": 1.2, "b": 0.75}"#, r#""input""#),
            "warpsearch.doc_order",
        ),
        (good.replace(r#""whitespace""#, "7"), "warpsearch.analyzer"),
        (r#"{"warpsearch": 5}"#.to_owned(), "warpsearch"),
    ] {
        let err = import_error(dir.path(), &with_description(&foreign_ciff(), &description));
        assert!(
            err.contains(&format!("the header's description: {setting}")),
            "{description}: {err}"
        );
    }
    // The same settings well typed are taken; free text and another tool's JSON are not settings.
    for (description, k1) in [
        (good.as_str(), 1.2),
        ("Anserini Lucene index", 0.9),
        (r#"{"tool": "anserini", "k1": "x"}"#, 0.9),
    ] {
        let (file, out) = (dir.path().join("ok.ciff"), dir.path().join("ok"));
        std::fs::write(&file, with_description(&foreign_ciff(), description)).unwrap();
        let _ = std::fs::remove_dir_all(&out);
        ciff::import(&file, &out, import_opts(Codec::PForDelta)).unwrap();
        assert_eq!(Index::open(&out).unwrap().meta().bm25.k1, k1, "{description}");
    }
}

/// `"k1": -1` in a CIFF's description imported into an index every search refused (the build said
/// k1 > 0, search k1 ≥ 0): one rule now, and the import refuses what it refuses.
#[test]
fn ciff_description_bm25_parameters_no_search_accepts_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let analyzer = serde_json::to_string(&AnalyzerConfig::whitespace()).unwrap();
    for (k1, b) in [(-1.0, 0.4), (0.0, 0.4), (0.9, 1.5)] {
        let description = format!(
            r#"{{"warpsearch": {{"analyzer": {analyzer}, "bm25": {{"k1": {k1}, "b": {b}}}, "doc_order": {{"kind": "input"}}}}}}"#
        );
        let err = import_error(dir.path(), &with_description(&foreign_ciff(), &description));
        assert!(
            err.contains("warpsearch.bm25: BM25 needs k1 > 0 and 0 <= b <= 1"),
            "{k1} {b}: {err}"
        );
        // The rule of the import is the build's.
        assert!(Bm25Params::checked(k1, b).is_err());
    }
}
