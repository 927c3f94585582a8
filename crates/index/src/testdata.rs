//! Helpers for the test suites of every crate (not part of the API).
//!
//! - [`shared_data`]: where tests find `../shared/data`, and whether its absence skips or fails a test.
//! - [`without_build_id`]: an index file's bytes with its build identity and checksum zeroed, to compare
//!   two builds byte for byte.
//! - [`replace_file`] and [`write_in_place`]: damage to an index file, whose files are read-only.
//! - [`edge_collection`] and [`same_index_files`]: a random collection with a build's edge cases, and
//!   two builds compared file by file (every build's thread count, processor and codec must agree).
//! - [`same_lists_in_shards`]: a sharded index's shards hold, together, the one index's lists.

use std::path::{Path, PathBuf};

/// `../shared/data/REL` (from the workspace root) when it exists. When it does not: `None`, after
/// printing `skipped: …` (a test then returns early), unless `WARPSEARCH_REQUIRE_DATA=1` is set (as
/// `.ci/run` does), where it panics: where CI runs, a missing data set is a failure, not a skip.
pub fn shared_data(rel: &str) -> Option<PathBuf> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data");
    let path = root.join(rel);
    if path.exists() {
        return Some(path);
    }
    if std::env::var("WARPSEARCH_REQUIRE_DATA").is_ok_and(|v| v == "1") {
        panic!(
            "{} is absent and WARPSEARCH_REQUIRE_DATA=1: this test must run here",
            path.display()
        );
    }
    eprintln!("skipped: {} is absent", path.display());
    None
}

/// The bytes of an index file with its build identities zeroed: a binary file's header identity and
/// footer checksum, `meta.json`'s `build_id`, a shard's `set` (the head's identity) and the `checksum`
/// over them, each in place,
/// so that two builds of the same input compare equal byte for byte.
pub fn without_build_id(mut bytes: Vec<u8>) -> Vec<u8> {
    let n = bytes.len();
    if bytes.starts_with(crate::container::MAGIC) {
        if n >= crate::container::HEADER_LEN + crate::container::FOOTER_LEN {
            bytes[20..28].fill(0);
            bytes[n - 16..n - 12].fill(0);
        }
        return bytes;
    }
    for (key, digits) in [
        (&b"\"build_id\": \""[..], 16),
        (b"\"set\": \"", 16),
        (b"\"checksum\": \"", 8),
    ] {
        let mut from = 0;
        while let Some(at) = bytes[from..].windows(key.len()).position(|w| w == key) {
            let start = from + at + key.len();
            let end = (start + digits).min(n);
            bytes[start..end].fill(b'0');
            from = end;
        }
    }
    bytes
}

/// Makes `bytes` the contents of the (read-only) index file `path` as a new file: the old one is
/// removed, so an index that has it open keeps the old contents.
pub fn replace_file(path: &Path, bytes: &[u8]) {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => panic!("{}: {e}", path.display()),
        _ => {}
    }
    std::fs::write(path, bytes).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
}

/// Writes `bytes` over the (read-only) index file `path` in place, as someone who overrides its
/// permissions would: made writable, truncated to their length, written. An index that has the file
/// open sees the change.
pub fn write_in_place(path: &Path, bytes: &[u8]) {
    use std::io::Write;
    fn fail<T>(path: &Path) -> impl FnOnce(std::io::Error) -> T + '_ {
        move |e| panic!("{}: {e}", path.display())
    }
    #[cfg(unix)]
    let permissions = std::os::unix::fs::PermissionsExt::from_mode(0o644);
    #[cfg(not(unix))]
    let permissions = {
        let mut p = std::fs::metadata(path).unwrap_or_else(fail(path)).permissions();
        #[allow(clippy::permissions_set_readonly_false)]
        p.set_readonly(false);
        p
    };
    std::fs::set_permissions(path, permissions).unwrap_or_else(fail(path));
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .unwrap_or_else(fail(path));
    file.set_len(bytes.len() as u64).unwrap_or_else(fail(path));
    file.write_all(bytes).unwrap_or_else(fail(path));
}

/// Writes `n` documents (JSON lines with `id`, `title` and `contents`) of seeded random text to `path`,
/// with the cases a build must get right: empty documents, one-term documents, a term in every document
/// (`every`), documents longer than a block of postings, a list longer than many blocks, non-ASCII
/// text, repeated terms; and a `docid<TAB>score` static-score file beside it (`path` + `.static`), with
/// a document missing and one unknown. Returns the static-score file's path.
pub fn edge_collection(path: &Path, n: usize, seed: u64) -> PathBuf {
    use rand::{Rng, SeedableRng};
    let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(seed);
    let words = [
        "alpha",
        "beta",
        "gamma",
        "delta",
        "épée",
        "straße",
        "東京",
        "naïve",
        "zoë",
        "ünïcödé",
        "running",
        "runs",
        "ran",
        "the",
        "of",
        "x",
    ];
    let mut lines = String::new();
    let mut scores = String::new();
    for d in 0..n {
        let kind = rng.random_range(0..10);
        let len = match kind {
            0 => 0,                          // empty
            1 => 1,                          // one term
            2 => rng.random_range(130..400), // longer than a block
            _ => rng.random_range(2..40),
        };
        let mut text: Vec<String> = vec!["every".into()];
        if kind == 0 {
            text.clear();
        }
        for _ in 0..len {
            let r: u32 = rng.random_range(0..1000);
            text.push(match r {
                0..=399 => words[(r % words.len() as u32) as usize].to_owned(),
                400..=799 => format!("w{}", r % 97),
                _ => format!("rare{}", rng.random_range(0..5000)),
            });
        }
        if kind == 1 {
            text.truncate(1);
        }
        let title = if d % 3 == 0 {
            format!("Title {} Ω", d % 11)
        } else {
            String::new()
        };
        let line = serde_json::json!({"id": format!("d{d}"), "title": title, "contents": text.join(" ")});
        lines.push_str(&line.to_string());
        lines.push('\n');
        if d % 7 != 3 {
            scores.push_str(&format!("d{d}\t{}\n", rng.random_range(0.0f32..100.0)));
        }
    }
    scores.push_str("unknown-doc\t5\n");
    std::fs::write(path, lines).unwrap();
    let statics = PathBuf::from(format!("{}.static", path.display()));
    std::fs::write(&statics, scores).unwrap();
    statics
}

/// Panics unless the index directories `a` and `b` hold the same files with the same bytes, build
/// identities and checksums aside ([`without_build_id`]).
pub fn same_index_files(a: &Path, b: &Path) {
    let names = |p: &Path| {
        let mut v: Vec<_> = std::fs::read_dir(p)
            .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
            .map(|e| e.unwrap().file_name())
            .collect();
        v.sort();
        v
    };
    assert_eq!(
        names(a),
        names(b),
        "{} and {} hold different files",
        a.display(),
        b.display()
    );
    for name in names(a) {
        let read = |dir: &Path| without_build_id(std::fs::read(dir.join(&name)).unwrap());
        assert!(
            read(a) == read(b),
            "{} differs between {} and {}",
            name.to_string_lossy(),
            a.display(),
            b.display()
        );
    }
}

/// Panics unless the sharded index `head` holds the collection of the one index `one`: the head
/// has its terms, each with its document and collection frequencies, and each list of `one` is its
/// shards' parts put back together (each part's docIDs counted from its shard's first document).
pub fn same_lists_in_shards(one: &crate::Index, head: &crate::Index) {
    assert_eq!(head.meta().num_terms, one.meta().num_terms, "the head's terms");
    for (term, id) in one.terms() {
        let text = String::from_utf8_lossy(&term).into_owned();
        let g = head.term_id(&text).expect("the head has every term");
        let (a, b) = (&one.term_records()[id as usize], &head.term_records()[g as usize]);
        assert_eq!((a.df, a.cf), (b.df, b.cf), "term {text}: the head's frequencies");
        let (docs, freqs) = one.postings(id).decode_all().unwrap();
        let (mut got_docs, mut got_freqs) = (Vec::new(), Vec::new());
        for shard in head.shards() {
            if let Some(l) = shard.local_term(g) {
                let (d, f) = shard.index().postings(l).decode_all().unwrap();
                got_docs.extend(d.iter().map(|&d| d + shard.first_doc()));
                got_freqs.extend(f);
            }
        }
        assert_eq!((got_docs, got_freqs), (docs, freqs), "term {text}");
    }
}

/// Build options of the edge-collection tests: `codec`, the english analyzer, default BM25, input
/// order, titles indexed.
pub fn title_options(codec: crate::Codec) -> crate::build::BuildOptions {
    let mut o = crate::build::BuildOptions::new(crate::WriterOptions {
        codec,
        analyzer: crate::AnalyzerConfig::english(),
        bm25: crate::Bm25Params::default(),
        doc_order: crate::DocOrder::Input,
        force: false,
    });
    o.include_title = true;
    o
}

/// A seeded xorshift generator for the tests' random collections (the seed must not be 0).
pub struct XorShift(pub u64);

impl XorShift {
    /// The next number below `n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}
