//! CIFF: hostile counts and lengths allocate no more than the input's
//! size, a compressed stream is read to its checked end, document ids that would corrupt a run are
//! refused. The counting allocator of this test binary measures the peak of live heap bytes.

use std::alloc::{GlobalAlloc, Layout, System};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};

use prost::Message;
use warpsearch_index::ciff::{self, DocRecord, Header, ImportOptions, Posting, PostingsList};
use warpsearch_index::{AnalyzerConfig, Bm25Params, Codec, DocOrder, WriterOptions};

struct Counting;
static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards to the system allocator unchanged; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let live = LIVE.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
        PEAK.fetch_max(live, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn opts() -> ImportOptions {
    ImportOptions {
        writer: WriterOptions {
            codec: Codec::PForDelta,
            analyzer: AnalyzerConfig::whitespace(),
            bm25: Bm25Params::default(),
            doc_order: DocOrder::Input,
            force: false,
        },
        analyzer_override: false,
    }
}

fn import(dir: &Path, name: &str, bytes: &[u8]) -> String {
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    let out = dir.join(format!("{name}.idx"));
    match ciff::import(&path, &out, opts()) {
        Ok(_) => panic!("{name}: a bad CIFF imported"),
        Err(e) => e.to_string(),
    }
}

/// The three memory bombs of the issue, each under 64 MiB of peak heap.
#[test]
fn ciff_memory_bombs_allocate_no_more_than_the_input() {
    let dir = tempfile::tempdir().unwrap();
    for (name, bytes) in [
        // 2^31 - 1 postings lists announced: was a 68 GB reservation.
        ("lists.ciff", &b"\x08\x08\x01\x10\xff\xff\xff\xff\x07"[..]),
        // 2^31 - 1 document records announced: grew to 8 GB.
        ("docs.ciff", b"\x0a\x08\x01\x10\x00\x18\xff\xff\xff\xff\x07"),
        // A length prefix of 2^31: allocated 2 GB before failing.
        ("prefix.ciff", b"\x80\x80\x80\x80\x08\x08\x01"),
    ] {
        PEAK.store(LIVE.load(Ordering::Relaxed), Ordering::Relaxed);
        let before = LIVE.load(Ordering::Relaxed);
        let err = import(dir.path(), name, bytes);
        let peak = PEAK.load(Ordering::Relaxed) - before;
        assert!(peak < 64 << 20, "{name}: peak heap {peak} bytes ({err})");
        assert!(err.contains("truncated") || err.contains("ends"), "{name}: {err}");
    }
}

fn put(msg: &impl Message, out: &mut Vec<u8>) {
    msg.encode_length_delimited(out).unwrap();
}

/// A small valid CIFF: two documents, one list.
fn small_ciff(doc_ids: [&str; 2]) -> Vec<u8> {
    let mut out = Vec::new();
    put(
        &Header {
            version: 1,
            num_postings_lists: 1,
            num_doc_records: 2,
            total_postings_lists: 1,
            total_docs: 2,
            total_terms_in_collection: 3,
            average_doclength: 1.5,
            description: String::new(),
        },
        &mut out,
    );
    put(
        &PostingsList {
            term: "cat".into(),
            df: 2,
            cf: 3,
            postings: vec![Posting { docid: 0, tf: 1 }, Posting { docid: 1, tf: 2 }],
        },
        &mut out,
    );
    for (d, id) in doc_ids.iter().enumerate() {
        put(
            &DocRecord {
                docid: d as i32,
                collection_docid: id.to_string(),
                doclength: 1 + d as i32,
            },
            &mut out,
        );
    }
    out
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(bytes).unwrap();
    e.finish().unwrap()
}

/// A `.ciff.gz` cut short or with a flipped byte only its CRC catches is refused;
/// so is anything after the last document record.
#[test]
fn unchecked_gzip_trailer_is_checked() {
    let dir = tempfile::tempdir().unwrap();
    let good = gzip(&small_ciff(["a", "b"]));
    let out = dir.path().join("good.idx");
    std::fs::write(dir.path().join("good.ciff.gz"), &good).unwrap();
    ciff::import(&dir.path().join("good.ciff.gz"), &out, opts()).unwrap();

    let n = good.len();
    let err = import(dir.path(), "cut.ciff.gz", &good[..n - 4]);
    assert!(err.contains("after the last document record"), "{err}");
    let mut crc = good.clone();
    crc[n - 8] ^= 0x01; // the trailer's CRC-32
    let err = import(dir.path(), "crc.ciff.gz", &crc);
    assert!(err.contains("after the last document record"), "{err}");
    let mut extra = small_ciff(["a", "b"]);
    extra.push(0);
    let err = import(dir.path(), "extra.ciff", &extra);
    assert!(err.contains("unexpected bytes"), "{err}");
}

/// CIFF: a collection docid that would break a TREC run line is refused.
#[test]
fn ciff_doc_ids_that_corrupt_runs_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    for (i, bad) in ["a b", "a\tb", "a\nb", ""].iter().enumerate() {
        let err = import(dir.path(), &format!("id{i}.ciff"), &small_ciff(["ok", bad]));
        assert!(err.contains("document record 1"), "{bad:?}: {err}");
    }
}

/// A CIFF whose document records give one id to two documents imported (a JSONL build refuses
/// that): a run then named one id twice. It is refused, naming the id.
#[test]
fn ciff_duplicate_document_ids_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let err = import(dir.path(), "dup.ciff", &small_ciff(["same", "same"]));
    assert!(
        err.contains("the document id 'same' is given to docids 0 and 1"),
        "{err}"
    );
    assert!(!dir.path().join("dup.ciff.idx").exists());
}
