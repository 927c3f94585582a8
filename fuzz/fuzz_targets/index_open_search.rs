//! Open and search a damaged index. The input picks one of three small fixed indexes (one per codec),
//! an algorithm, a mode and one of its files (its first two bytes), then lists edits to that file
//! ((offset, xor) pairs); the harness rewrites a binary file's CRC afterwards, so the fuzzer reaches the
//! structure behind the checksum. Opening must fail or give an index four queries run on with an error
//! or an answer, never a panic. Each input runs one algorithm and mode rather than all of them: coverage
//! is the same over inputs, and an input costs a twentieth.
#![no_main]

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use warpsearch_cpu::CpuSearcher;
use warpsearch_index::build::{build_from_jsonl, BuildOptions};
use warpsearch_index::container::{FOOTER_LEN, MAGIC};
use warpsearch_index::{AnalyzerConfig, Bm25Params, Codec, DocOrder, Index, WriterOptions};
use warpsearch_query::{Algorithm, Mode, Request, Scorer, SearchOptions};

const FILES: [&str; 8] = [
    "terms.fst",
    "terms.bin",
    "blocks.bin",
    "postings.bin",
    "doclens.bin",
    "docids.bin",
    "meta.json",
    "static.bin",
];

struct Fixture {
    _dir: tempfile::TempDir,
    /// One index per codec, each with static scores; inputs damage one file of one of them in place
    /// and the harness puts the file's bytes back afterwards (copying whole indexes per input made the
    /// target ~5x slower).
    indexes: Vec<PathBuf>,
}

static FIXTURE: OnceLock<Fixture> = OnceLock::new();

fn fixture() -> &'static Fixture {
    FIXTURE.get_or_init(|| {
        // The index crate contains the `fst` crate's panics on a damaged dictionary (catch_unwind, then
        // an error); libFuzzer's hook would abort on them anyway, so they are let through here. Any
        // other panic still goes to libFuzzer's hook and is a crash.
        warpsearch_index::termdict::quiet_fst_panics();
        let dir = tempfile::tempdir().unwrap();
        let docs: String = (0..600)
            .map(|d| {
                let words: Vec<String> = (0..(d % 13 + 1))
                    .map(|i| format!("w{}", (d * 7 + i * i) % 23))
                    .collect();
                format!("{{\"id\": \"d{d}\", \"contents\": \"{}\"}}\n", words.join(" "))
            })
            .collect();
        std::fs::write(dir.path().join("docs.jsonl"), docs).unwrap();
        let scores: String = (0..600).map(|d| format!("d{d}\t{}\n", d % 17)).collect();
        std::fs::write(dir.path().join("scores.tsv"), scores).unwrap();
        let indexes = Codec::ALL
            .iter()
            .map(|&codec| {
                let out = dir.path().join(codec.name());
                let mut opts = BuildOptions::new(WriterOptions {
                    codec,
                    analyzer: AnalyzerConfig::whitespace(),
                    bm25: Bm25Params::default(),
                    doc_order: DocOrder::Input,
                    force: false,
                });
                opts.static_scores = Some(dir.path().join("scores.tsv"));
                build_from_jsonl(&dir.path().join("docs.jsonl"), &out, &opts).unwrap();
                out
            })
            .collect();
        Fixture { indexes, _dir: dir }
    })
}

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if data.len() < 2 {
        return;
    }
    let f = fixture();
    let dir = &f.indexes[data[0] as usize % 3];
    let algorithm = Algorithm::ALL[data[0] as usize / 3 % Algorithm::ALL.len()];
    let mode = [Mode::And, Mode::Or, Mode::AndOr][data[1] as usize / FILES.len() % 3];
    let path = dir.join(FILES[data[1] as usize % FILES.len()]);
    let original = std::fs::read(&path).unwrap();
    let mut bytes = original.clone();
    for edit in data[2..].chunks(5) {
        if edit.len() < 5 {
            break;
        }
        let at = u32::from_le_bytes(edit[..4].try_into().unwrap()) as usize % bytes.len();
        bytes[at] ^= edit[4];
    }
    let n = bytes.len();
    // meta.json is plain JSON, without a checksum to rewrite.
    if n >= FOOTER_LEN && original.starts_with(MAGIC) {
        let crc = crc32fast::hash(&bytes[..n - FOOTER_LEN]);
        bytes[n - 16..n - 12].copy_from_slice(&crc.to_le_bytes());
    }
    // Index files are read-only: each is replaced, never written into.
    warpsearch_index::testdata::replace_file(&path, &bytes);
    search(dir, algorithm, mode);
    warpsearch_index::testdata::replace_file(&path, &original);
});

fn search(dir: &Path, algorithm: Algorithm, mode: Mode) {
    let Ok(index) = Index::open(dir) else { return };
    let index = Arc::new(index);
    let options = SearchOptions {
        algorithm,
        ..SearchOptions::new(&index)
    };
    if let Ok(scorer) = Scorer::new(index.clone(), options) {
        let searcher = CpuSearcher::new(Arc::new(scorer));
        for q in ["w1 w2", "w3", "w4 w5 w6 w7", "w0 w22 absent"] {
            let request = Request::new(searcher.scorer().parse(q), mode, 10);
            if let Ok(hits) = searcher.search(&request) {
                for h in hits {
                    let _ = index.doc_id(h.doc);
                }
            }
        }
    }
    let _ = warpsearch_index::inspect::stats(&index, 5);
}
