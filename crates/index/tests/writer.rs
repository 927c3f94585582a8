//! `IndexWriter::push_all`, which appends a window of lists while the next is encoded, writes the index
//! that adding the lists one at a time writes: over several windows, with empty lists among them; and a
//! list that fails to encode fails the whole write. Lists another processor encoded
//! (`ListEncoder::assemble`) are written as they are, and refused where malformed.

use std::path::Path;

use warpsearch_index::bm25::loosen_bound;
use warpsearch_index::testdata::same_index_files;
use warpsearch_index::{
    AnalyzerConfig, BlockMeta, Bm25Params, Codec, DocIds, DocOrder, DocTable, Index, IndexError, IndexWriter,
    WriterOptions, BLOCK_LEN,
};

const DOCS: u32 = 300;
/// More terms than three windows of `push_all` hold.
const TERMS: usize = 20_000;

fn table() -> DocTable {
    let mut ids = DocIds::default();
    (0..DOCS).for_each(|d| ids.push(&format!("d{d}")));
    DocTable {
        ids,
        lens: (0..DOCS).map(|d| 50 + d % 7).collect(),
        static_scores: None,
        global_scores: None,
    }
}

fn options() -> WriterOptions {
    WriterOptions {
        codec: Codec::SimdBp,
        analyzer: AnalyzerConfig::whitespace(),
        bm25: Bm25Params::default(),
        doc_order: DocOrder::Input,
        force: true,
    }
}

fn writer(path: &Path) -> IndexWriter {
    IndexWriter::create(path, options(), table()).unwrap()
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

/// The index of every term's list, each added by `add_term`: what the other ways of writing match.
fn write_one_by_one(path: &Path) {
    let mut w = writer(path);
    for i in 0..TERMS {
        let (docs, freqs) = list(i);
        w.add_term(name(i).as_bytes(), &docs, &freqs).unwrap();
    }
    w.finish().unwrap();
}

#[test]
fn lists_pushed_a_window_at_a_time_are_the_lists_added_one_by_one() {
    let dir = tempfile::tempdir().unwrap();
    let (one, all) = (dir.path().join("one"), dir.path().join("all"));
    write_one_by_one(&one);
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

/// Term i's list as a device encodes it: its words, its blocks' metadata with their bounds, its
/// frequencies' sum.
fn encoded(w: &IndexWriter, i: usize) -> (Vec<u32>, Vec<BlockMeta>, u64) {
    let (docs, freqs) = list(i);
    let (bm25, lens) = (w.bm25(), w.doc_lens());
    let idf = bm25.idf(docs.len() as u64);
    let (mut words, mut blocks) = (Vec::new(), Vec::new());
    for (d, f) in docs.chunks(BLOCK_LEN).zip(freqs.chunks(BLOCK_LEN)) {
        let offset = words.len() as u32;
        let freq_offset = Codec::SimdBp.encode_block(Default::default(), d, f, &mut words);
        let best = d
            .iter()
            .zip(f)
            .map(|(&doc, &tf)| bm25.score(idf, tf, lens[doc as usize]))
            .fold(0f32, f32::max);
        blocks.push(BlockMeta {
            first_doc: d[0],
            last_doc: d[d.len() - 1],
            offset,
            freq_offset,
            max_score: loosen_bound(best),
        });
    }
    (words, blocks, freqs.iter().map(|&f| f as u64).sum())
}

#[test]
fn lists_assembled_from_their_blocks_are_the_lists_encoded_here() {
    let dir = tempfile::tempdir().unwrap();
    let (one, assembled) = (dir.path().join("one"), dir.path().join("assembled"));
    write_one_by_one(&one);
    let mut w = writer(&assembled);
    let terms: Vec<usize> = (0..TERMS).filter(|i| !i.is_multiple_of(97)).collect();
    let lists: Vec<_> = terms.iter().map(|&i| encoded(&w, i)).collect();
    let names: Vec<String> = terms.iter().map(|&i| name(i)).collect();
    w.push_all(
        terms.len(),
        |encoder, j| {
            let (words, blocks, cf) = &lists[j];
            let df = list(terms[j]).0.len() as u32;
            encoder
                .assemble(names[j].as_bytes(), df, *cf, words, blocks)
                .map(Some)
        },
        |_| {},
    )
    .unwrap();
    w.finish().unwrap();
    same_index_files(&one, &assembled);

    // Malformed lists are refused, naming the term.
    let w = writer(&dir.path().join("bad"));
    let (words, blocks, cf) = encoded(&w, 40);
    let df = list(40).0.len() as u32;
    assert!(blocks.len() > 1, "a list of several blocks");
    let e = w.encoder();
    assert!(e.assemble(b"t", df, cf, &words, &blocks).is_ok());
    let mut shifted = blocks.clone();
    shifted[0].offset = 1;
    let mut unordered = blocks.clone();
    unordered[1].first_doc = unordered[0].last_doc;
    let mut past = blocks.clone();
    past[1].offset = words.len() as u32;
    for (what, df, blocks) in [
        ("too many postings", df + BLOCK_LEN as u32, &blocks),
        ("no postings", 0, &blocks),
        ("first offset", df, &shifted),
        ("docIDs across blocks", df, &unordered),
        ("offset past the words", df, &past),
    ] {
        match e.assemble(b"t00040", df, cf, &words, blocks) {
            Err(IndexError::Invalid(m)) => assert!(m.contains("t00040"), "{what}: {m}"),
            Err(other) => panic!("{what}: {other}"),
            Ok(_) => panic!("{what}: accepted"),
        }
    }
    // Another codec's index takes no SIMD-BP128 lists.
    let mut opts = options();
    opts.codec = Codec::PForDelta;
    let pfor = IndexWriter::create(&dir.path().join("pfor"), opts, table()).unwrap();
    assert!(pfor.encoder().assemble(b"t", df, cf, &words, &blocks).is_err());
}
