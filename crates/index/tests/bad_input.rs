//! Bad input gets a clear error naming the file and line; nothing is half-written.

use std::path::Path;

use warpsearch_index::build::{build_from_jsonl, BuildOptions};
use warpsearch_index::testdata::replace_file;
use warpsearch_index::{AnalyzerConfig, Bm25Params, Codec, DocOrder, Index, WriterOptions};

fn options() -> BuildOptions {
    BuildOptions::new(WriterOptions {
        codec: Codec::PForDelta,
        analyzer: AnalyzerConfig::english(),
        bm25: Bm25Params::default(),
        doc_order: DocOrder::Input,
        force: false,
    })
}

fn build(
    dir: &Path,
    content: &[u8],
    opts: &BuildOptions,
) -> Result<warpsearch_index::build::BuildReport, String> {
    let input = dir.join("in.jsonl");
    std::fs::write(&input, content).unwrap();
    build_from_jsonl(&input, &dir.join("out"), opts).map_err(|e| e.to_string())
}

/// Nothing but the input is left in `dir`: no output, no temporary directory, no runs.
fn assert_nothing_written(dir: &Path) {
    let left: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left, vec![std::ffi::OsString::from("in.jsonl")]);
}

#[test]
fn each_bad_line_is_named_with_its_line_number() {
    let good = r#"{"id": "a", "contents": "alpha beta"}"#;
    let cases: [(&[u8], &str); 5] = [
        (b"{\"id\": \"x\", \"contents\": ", "in.jsonl:2: invalid JSON"),
        (br#"{"id": "x"}"#, "in.jsonl:2: missing field \"contents\""),
        (br#"{"contents": "x"}"#, "in.jsonl:2: missing field \"id\""),
        (
            b"{\"id\": \"x\", \"contents\": \"caf\xe9\"}",
            "in.jsonl:2: invalid UTF-8",
        ),
        (
            br#"{"id": "a", "contents": "again"}"#,
            "in.jsonl:2: duplicate document id 'a'",
        ),
    ];
    for (bad, expected) in cases {
        let dir = tempfile::tempdir().unwrap();
        let mut content = format!("{good}\n").into_bytes();
        content.extend_from_slice(bad);
        content.extend_from_slice(b"\n{\"id\": \"z\", \"contents\": \"zeta\"}\n");
        let err = build(dir.path(), &content, &options()).unwrap_err();
        assert!(err.contains(expected), "{err}");
        assert!(err.contains("--skip-bad"), "{err}");
        assert_nothing_written(dir.path());
        // With --skip-bad the line is counted and the rest indexed.
        let mut skip = options();
        skip.skip_bad = true;
        let report = build(dir.path(), &content, &skip).unwrap();
        assert_eq!((report.skipped, report.meta.num_docs), (1, 2));
        assert!(report.skip_reasons[0].contains(expected.split_once(": ").unwrap().1));
    }
}

#[test]
fn blank_lines_and_empty_documents_are_fine() {
    let dir = tempfile::tempdir().unwrap();
    let content = b"\n{\"id\": \"a\", \"contents\": \"\"}\n   \n{\"id\": \"b\", \"contents\": \"the of\"}\n{\"id\": 3, \"contents\": \"word\"}";
    let report = build(dir.path(), content, &options()).unwrap();
    assert_eq!(
        (report.meta.num_docs, report.empty_docs, report.meta.num_terms),
        (3, 2, 1)
    );
    let index = Index::open(dir.path().join("out")).unwrap();
    assert_eq!(index.doc_id(2), "3");
}

#[test]
fn an_existing_output_is_never_overwritten_without_force() {
    let dir = tempfile::tempdir().unwrap();
    let content = br#"{"id": "a", "contents": "alpha"}"#;
    build(dir.path(), content, &options()).unwrap();
    let err = build(dir.path(), content, &options()).unwrap_err();
    assert!(err.contains("already exists") && err.contains("--force"), "{err}");
    let mut force = options();
    force.writer.force = true;
    build(dir.path(), br#"{"id": "b", "contents": "beta gamma"}"#, &force).unwrap();
    assert_eq!(Index::open(dir.path().join("out")).unwrap().meta().num_terms, 2);
    // A directory that is not an index is refused even with --force.
    std::fs::create_dir(dir.path().join("photos")).unwrap();
    let err = build_from_jsonl(&dir.path().join("in.jsonl"), &dir.path().join("photos"), &force).unwrap_err();
    assert!(err.to_string().contains("not a warpsearch index"), "{err}");
}

#[test]
fn damaged_index_files_are_refused_at_open() {
    let dir = tempfile::tempdir().unwrap();
    let lines: String = (0..300)
        .map(|i| {
            format!(
                "{{\"id\": \"d{i}\", \"contents\": \"w{} w{} common\"}}\n",
                i % 7,
                i % 13
            )
        })
        .collect();
    build(dir.path(), lines.as_bytes(), &options()).unwrap();
    let out = dir.path().join("out");
    for file in warpsearch_index::format::files::REQUIRED {
        let path = out.join(file);
        let good = std::fs::read(&path).unwrap();
        let mut flipped = good.clone();
        let middle = flipped.len() / 2;
        flipped[middle] ^= 1;
        replace_file(&path, &flipped);
        let err = Index::open(&out)
            .err()
            .unwrap_or_else(|| panic!("{file}: damage went unnoticed"))
            .to_string();
        // meta.json is JSON: a flipped byte is bad JSON, a key misspelt or a value off its checksum.
        assert!(
            err.contains(file) && (err.contains("checksum") || file == "meta.json"),
            "{err}"
        );
        replace_file(&path, &good[..good.len() - 10]);
        assert!(Index::open(&out).is_err(), "{file}: truncation went unnoticed");
        replace_file(&path, &good);
    }
    std::fs::remove_file(out.join("postings.bin")).unwrap();
    assert!(Index::open(&out)
        .err()
        .unwrap()
        .to_string()
        .contains("postings.bin"));
    assert!(Index::open(dir.path())
        .err()
        .unwrap()
        .to_string()
        .contains("not a warpsearch index"));
}

#[test]
fn missing_input_and_bad_static_scores_are_explained() {
    let dir = tempfile::tempdir().unwrap();
    let err = build_from_jsonl(
        &dir.path().join("nope.jsonl"),
        &dir.path().join("out"),
        &options(),
    )
    .unwrap_err();
    assert!(err.to_string().contains("nope.jsonl"), "{err}");
    std::fs::write(dir.path().join("s.tsv"), "a\t1.0\nb\tlots\n").unwrap();
    let mut opts = options();
    opts.static_scores = Some(dir.path().join("s.tsv"));
    let err = build(dir.path(), br#"{"id": "a", "contents": "x"}"#, &opts).unwrap_err();
    assert!(err.contains("s.tsv:2") && err.contains("not a number"), "{err}");
}

/// A small `.jsonl.zst` that expands to a line of hundreds of MiB of zero bytes (no newline) is an
/// error naming the file and line once the line passes the limit, never a line read whole (a 135 KB
/// file of 4 GiB of zeros aborted the build on a failed allocation).
#[test]
fn zst_of_zero_bytes_without_newline_is_refused_at_the_line_limit() {
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("zeros.jsonl.zst");
    let mut z = zstd::Encoder::new(std::fs::File::create(&input).unwrap(), 3).unwrap();
    z.write_all(b"{\"id\": \"a\", \"contents\": \"alpha\"}\n")
        .unwrap();
    let zeros = vec![0u8; 1 << 20];
    for _ in 0..(warpsearch_index::build::input::DEFAULT_MAX_LINE >> 20) + 16 {
        z.write_all(&zeros).unwrap();
    }
    z.finish().unwrap();
    assert!(std::fs::metadata(&input).unwrap().len() < 1 << 20);
    let err = build_from_jsonl(&input, &dir.path().join("out"), &options())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("zeros.jsonl.zst:2: the line is longer than 64 MiB") && err.contains("--max-line-mb"),
        "{err}"
    );
    assert!(!dir.path().join("out").exists());
    // The limit is the caller's: a line of 40 bytes under a 32-byte limit is named with its line.
    let mut opts = options();
    opts.max_line_bytes = 32;
    let short = br#"{"id": "a", "contents": "x"}"#;
    let long = br#"{"id": "b", "contents": "a longer one"}"#;
    let content = [&short[..], b"\n", short, b"\n", long, b"\n"].concat();
    let err = build(dir.path(), &content, &opts).unwrap_err();
    assert!(
        err.contains("in.jsonl:3: the line is longer than 32 bytes"),
        "{err}"
    );
    // A line of exactly the limit, with or without its newline, is read.
    opts.max_line_bytes = short.len();
    let content = [&short[..], b"\n", br#"{"id": "b", "contents": "y"}"#].concat();
    assert_eq!(build(dir.path(), &content, &opts).unwrap().meta.num_docs, 2);
}

/// `--force` onto an index directory that also holds a note, a folder and the very input being read
/// deleted them all with the old index: now it refuses, naming them, and deletes nothing.
#[test]
fn force_onto_index_directory_holding_other_files_refuses_and_deletes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    build(dir.path(), br#"{"id": "a", "contents": "alpha"}"#, &options()).unwrap();
    std::fs::write(out.join("notes.txt"), "keep me").unwrap();
    std::fs::create_dir(out.join("backup")).unwrap();
    std::fs::write(out.join("backup").join("old.jsonl"), "keep me too").unwrap();
    let input = out.join("docs.jsonl");
    std::fs::write(&input, br#"{"id": "b", "contents": "beta gamma"}"#).unwrap();
    let mut force = options();
    force.writer.force = true;
    let err = build_from_jsonl(&input, &out, &force).unwrap_err().to_string();
    assert!(
        err.contains("backup/, docs.jsonl, notes.txt") && err.contains("would delete"),
        "{err}"
    );
    assert_eq!(std::fs::read_to_string(out.join("notes.txt")).unwrap(), "keep me");
    assert!(out.join("backup").join("old.jsonl").exists() && input.exists());
    assert_eq!(Index::open(&out).unwrap().meta().num_terms, 1);
    // The input alone inside the output (the note and folder moved out) is still refused.
    std::fs::remove_file(out.join("notes.txt")).unwrap();
    std::fs::remove_dir_all(out.join("backup")).unwrap();
    let err = build_from_jsonl(&input, &out, &force).unwrap_err().to_string();
    assert!(err.contains("docs.jsonl"), "{err}");
    assert!(input.exists());
    // Even an input named like an index file.
    let disguised = out.join("static.bin");
    std::fs::rename(&input, &disguised).unwrap();
    let err = build_from_jsonl(&disguised, &out, &force)
        .unwrap_err()
        .to_string();
    assert!(err.contains("lies inside the output"), "{err}");
    std::fs::rename(&disguised, &input).unwrap();
    // With the directory holding only the index, --force replaces it.
    let outside = dir.path().join("docs.jsonl");
    std::fs::rename(&input, &outside).unwrap();
    build_from_jsonl(&outside, &out, &force).unwrap();
    assert_eq!(Index::open(&out).unwrap().meta().num_terms, 2);
}

/// A FIFO in place of `meta.json` or `blocks.bin` made opening the index wait forever for a writer:
/// it is refused at once, named. (Opened on a thread, so that a wait fails the test instead of
/// hanging it.)
#[cfg(target_os = "linux")]
#[test]
fn fifo_in_place_of_an_index_file_is_refused_not_waited_on() {
    let dir = tempfile::tempdir().unwrap();
    build(dir.path(), br#"{"id": "a", "contents": "alpha"}"#, &options()).unwrap();
    let out = dir.path().join("out");
    for name in ["meta.json", "blocks.bin", "postings.bin"] {
        let path = out.join(name);
        let good = std::fs::read(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        rustix::fs::mknodat(
            rustix::fs::CWD,
            &path,
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o644),
            0,
        )
        .unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let dir = out.clone();
        std::thread::spawn(move || tx.send(Index::open(&dir).err().map(|e| e.to_string())));
        let err = rx
            .recv_timeout(std::time::Duration::from_secs(20))
            .unwrap_or_else(|_| panic!("opening an index with a FIFO as {name} still waits"))
            .expect("an index with a FIFO must not open");
        assert!(err.contains(name) && err.contains("not a regular file"), "{err}");
        replace_file(&path, &good);
        Index::open(&out).unwrap();
    }
}

/// Duplicates and broken lines in later batches (a batch is 65,536 lines; three are in flight at once:
/// one analysed, one numbered, one inverted): with `skip_bad` the index is that of the input without
/// them, and without it the error names the first bad line.
#[test]
fn bad_lines_across_batches_are_numbered_as_if_absent() {
    let dir = tempfile::tempdir().unwrap();
    let line = |i: usize| {
        format!(
            "{{\"id\": \"d{i}\", \"contents\": \"w{} w{} common\"}}\n",
            i % 1000,
            i % 37
        )
    };
    let lines = 3 * 65_536 + 1_000;
    // (line number, its replacement): a duplicate of a line of the batch before, a duplicate within
    // its batch, a broken line, and a duplicate of the first batch's line in the last.
    let bad: [(usize, String); 4] = [
        (70_001, line(5).replace("w5 ", "other ")),
        (70_010, line(70_003)),
        (140_000, "{\"id\": \"broken\", \n".into()),
        (196_700, line(65_535)),
    ];
    let (mut with, mut without) = (String::new(), String::new());
    for i in 1..=lines {
        match bad.iter().find(|(at, _)| *at == i) {
            Some((_, replacement)) => with.push_str(replacement),
            None => {
                with.push_str(&line(i));
                without.push_str(&line(i));
            }
        }
    }
    let pool = rayon::ThreadPoolBuilder::new().num_threads(4).build().unwrap();
    let err = pool
        .install(|| build(dir.path(), with.as_bytes(), &options()))
        .unwrap_err();
    assert!(
        err.contains("in.jsonl:70001: duplicate document id 'd5'"),
        "{err}"
    );
    assert_nothing_written(dir.path());
    let mut skip = options();
    skip.skip_bad = true;
    let report = pool
        .install(|| build(dir.path(), with.as_bytes(), &skip))
        .unwrap();
    assert_eq!((report.skipped, report.meta.num_docs), (4, (lines - 4) as u64));
    let clean = tempfile::tempdir().unwrap();
    pool.install(|| build(clean.path(), without.as_bytes(), &skip))
        .unwrap();
    warpsearch_index::testdata::same_index_files(&dir.path().join("out"), &clean.path().join("out"));
}
