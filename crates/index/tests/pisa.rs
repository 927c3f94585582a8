//! Export to PISA's binary collection: the files hold every list, frequency, length and id of the index
//! in PISA's layout, a subset holds exactly the asked lists, and bad requests are refused.

use std::path::Path;

use warpsearch_index::build::{build_from_jsonl, BuildOptions};
use warpsearch_index::pisa;
use warpsearch_index::{AnalyzerConfig, Bm25Params, Codec, DocOrder, Index, WriterOptions};

/// A PISA sequence file: `[len, values…]` repeated.
fn sequences(path: &Path) -> Vec<Vec<u32>> {
    let bytes = std::fs::read(path).unwrap();
    assert_eq!(bytes.len() % 4, 0, "{} is not whole u32s", path.display());
    let words: Vec<u32> = bytes
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < words.len() {
        let n = words[i] as usize;
        assert!(i + 1 + n <= words.len(), "a sequence runs past the end");
        out.push(words[i + 1..i + 1 + n].to_vec());
        i += 1 + n;
    }
    out
}

fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// 1,000 documents: "common" in all, "even" in every other, "rare" in document 777 only, and a
/// per-document word; lists of 1, 500 and 1,000 postings (none a multiple of the block).
fn build(dir: &Path, codec: Codec) -> Index {
    let jsonl: String = (0..1000)
        .map(|i| {
            let even = if i % 2 == 0 { "even even" } else { "" };
            let rare = if i == 777 { "rare" } else { "" };
            format!("{{\"id\": \"doc-{i}\", \"contents\": \"common {even} {rare} only{i}\"}}\n")
        })
        .collect();
    std::fs::write(dir.join("in.jsonl"), jsonl).unwrap();
    let writer = WriterOptions {
        codec,
        analyzer: AnalyzerConfig::english(),
        bm25: Bm25Params::default(),
        doc_order: DocOrder::Input,
        force: false,
    };
    let out = dir.join(format!("index-{codec}"));
    build_from_jsonl(&dir.join("in.jsonl"), &out, &BuildOptions::new(writer)).unwrap();
    Index::open(&out).unwrap()
}

#[test]
fn the_whole_index_is_written_in_pisa_layout() {
    for codec in Codec::ALL {
        whole_index(codec);
    }
}

fn whole_index(codec: Codec) {
    let dir = tempfile::tempdir().unwrap();
    let index = build(dir.path(), codec);
    let out = dir.path().join("pisa");
    let report = pisa::export(&index, &out, None).unwrap();
    assert_eq!(report.terms, index.meta().num_terms);
    assert_eq!(report.postings, index.meta().num_postings);
    assert_eq!(report.docs, 1000);

    let docs = sequences(&out.join("inv.docs"));
    let freqs = sequences(&out.join("inv.freqs"));
    let terms = lines(&out.join("fwd.terms"));
    assert_eq!(docs[0], vec![1000], "inv.docs starts with the document count");
    assert_eq!(docs.len() - 1, terms.len());
    assert_eq!(freqs.len(), terms.len());
    let mut sorted = terms.clone();
    sorted.sort();
    assert_eq!(
        terms, sorted,
        "PISA's lexicon is searched by bisection: byte order"
    );
    for (i, term) in terms.iter().enumerate() {
        let (d, f) = index.postings(index.term_id(term).unwrap()).decode_all().unwrap();
        assert_eq!(docs[i + 1], d, "{term}");
        assert_eq!(freqs[i], f, "{term}");
    }
    // Independent of our reader: what the input says.
    let at = |t: &str| terms.iter().position(|x| x == t).unwrap();
    assert_eq!(docs[at("common") + 1], (0..1000).collect::<Vec<u32>>());
    assert_eq!(docs[at("even") + 1], (0..1000).step_by(2).collect::<Vec<u32>>());
    assert_eq!(freqs[at("even")], vec![2; 500]);
    assert_eq!(docs[at("rare") + 1], vec![777]);

    let sizes = sequences(&out.join("inv.sizes"));
    assert_eq!(sizes, vec![index.doc_lens().to_vec()]);
    assert_eq!(sizes[0][0], 4, "document 0: common even even only0");
    assert_eq!(sizes[0][1], 2, "document 1: common only1");
    let ids = lines(&out.join("fwd.documents"));
    assert_eq!(ids.len(), 1000);
    assert_eq!(ids[777], "doc-777");
}

#[test]
fn a_subset_holds_exactly_the_asked_lists_and_all_documents() {
    let dir = tempfile::tempdir().unwrap();
    let index = build(dir.path(), Codec::PForDelta);
    let rare = index.term_id("rare").unwrap();
    let common = index.term_id("common").unwrap();
    let out = dir.path().join("pisa");
    // Unsorted and repeated, as the terms of a query log come.
    let report = pisa::export(&index, &out, Some(&[rare, common, rare])).unwrap();
    assert_eq!((report.terms, report.postings, report.docs), (2, 1001, 1000));
    assert_eq!(lines(&out.join("fwd.terms")), vec!["common", "rare"]);
    let docs = sequences(&out.join("inv.docs"));
    assert_eq!(docs.len(), 3);
    assert_eq!(docs[2], vec![777]);
    assert_eq!(sequences(&out.join("inv.sizes"))[0].len(), 1000);

    let none = dir.path().join("none");
    let report = pisa::export(&index, &none, Some(&[])).unwrap();
    assert_eq!((report.terms, report.postings), (0, 0));
    assert_eq!(sequences(&none.join("inv.docs")), vec![vec![1000]]);
}

#[test]
fn bad_requests_are_refused_and_leave_nothing_behind() {
    let dir = tempfile::tempdir().unwrap();
    let index = build(dir.path(), Codec::PForDelta);
    let out = dir.path().join("pisa");
    std::fs::create_dir(&out).unwrap();
    let e = pisa::export(&index, &out, None).unwrap_err().to_string();
    assert!(e.contains("already exists"), "{e}");

    let missing = dir.path().join("missing");
    let e = pisa::export(&index, &missing, Some(&[u32::MAX]))
        .unwrap_err()
        .to_string();
    assert!(e.contains("not in the index"), "{e}");
    assert!(!missing.exists());
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("tmp"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}
