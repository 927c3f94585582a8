//! `IndexWriter::push_all`, which appends a window of lists while the next is encoded, writes the index
//! that adding the lists one at a time writes: over several windows, with empty lists among them; and a
//! list that fails to encode fails the whole write.

use std::path::Path;

use warpsearch_index::testdata::same_index_files;
use warpsearch_index::{
    AnalyzerConfig, Bm25Params, Codec, DocIds, DocOrder, DocTable, Index, IndexError, IndexWriter,
    WriterOptions,
};

const DOCS: u32 = 300;
/// More terms than three windows of `push_all` hold.
const TERMS: usize = 20_000;

fn writer(path: &Path) -> IndexWriter {
    let mut ids = DocIds::default();
    (0..DOCS).for_each(|d| ids.push(&format!("d{d}")));
    let table = DocTable {
        ids,
        lens: (0..DOCS).map(|d| 50 + d % 7).collect(),
        static_scores: None,
        global_scores: None,
    };
    let opts = WriterOptions {
        codec: Codec::SimdBp,
        analyzer: AnalyzerConfig::whitespace(),
        bm25: Bm25Params::default(),
        doc_order: DocOrder::Input,
        force: true,
    };
    IndexWriter::create(path, opts, table).unwrap()
}

fn name(i: usize) -> String {
    format!("t{i:06}")
}

/// Term i's list: every document whose number meets its rule, none for every 97th term, frequencies
/// 1 to 3; some lists longer than a block.
fn list(i: usize) -> (Vec<u32>, Vec<u32>) {
    if i.is_multiple_of(97) {
        return (Vec::new(), Vec::new());
    }
    let step = 1 + (i % 40) as u32;
    let docs: Vec<u32> = (0..DOCS)
        .filter(|d| (d + i as u32).is_multiple_of(step))
        .collect();
    let freqs = docs.iter().map(|d| 1 + (d + i as u32) % 3).collect();
    (docs, freqs)
}

#[test]
fn lists_pushed_a_window_at_a_time_are_the_lists_added_one_by_one() {
    let dir = tempfile::tempdir().unwrap();
    let (one, all) = (dir.path().join("one"), dir.path().join("all"));
    let mut w = writer(&one);
    for i in 0..TERMS {
        let (docs, freqs) = list(i);
        w.add_term(name(i).as_bytes(), &docs, &freqs).unwrap();
    }
    w.finish().unwrap();
    let mut w = writer(&all);
    let mut written = 0;
    w.push_all(
        TERMS,
        |encoder, i| {
            let (docs, freqs) = list(i);
            encoder.encode(name(i).as_bytes(), &docs, &freqs)
        },
        |n| written += n,
    )
    .unwrap();
    w.finish().unwrap();
    assert_eq!(written, TERMS as u64, "every term counted once");
    same_index_files(&one, &all);
    // And against the lists themselves.
    let index = Index::open(&all).unwrap();
    assert_eq!(index.meta().num_terms, (TERMS - TERMS.div_ceil(97)) as u64);
    for i in [1, 96, 98, 8191, 8192, 8193, 16_384, TERMS - 1] {
        let id = index.term_id(&name(i)).unwrap_or_else(|| panic!("{}", name(i)));
        assert_eq!(index.postings(id).decode_all().unwrap(), list(i), "{}", name(i));
    }
    assert_eq!(index.term_id(&name(97)), None, "an empty list is no term");
}

#[test]
fn a_list_that_fails_to_encode_fails_the_write() {
    let dir = tempfile::tempdir().unwrap();
    let mut w = writer(&dir.path().join("bad"));
    let result = w.push_all(
        TERMS,
        |encoder, i| {
            let (mut docs, freqs) = list(i);
            if i == 12_345 {
                docs.reverse();
            }
            encoder.encode(name(i).as_bytes(), &docs, &freqs)
        },
        |_| {},
    );
    match result {
        Err(IndexError::Invalid(what)) => assert!(what.contains(&name(12_345)), "{what}"),
        other => panic!("expected the bad list's error, got {:?}", other.err()),
    }
}
