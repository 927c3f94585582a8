//! Through the binary: a torn index is an error (never a wrong run with exit 0), a build
//! killed at any fsync/rename point leaves the old or the new complete index and no lasting
//! leftovers, and the messages the issue names say the right thing.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use warpsearch_index::replace::FAIL_POINTS;
use warpsearch_index::Index;

fn warpsearch(args: &[&str], env: &[(&str, &str)]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_warpsearch"))
        .args(args)
        .envs(env.iter().copied())
        .output()
        .unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// `n` documents about cats and dogs; `reversed` puts the lines in the opposite order.
fn collection(path: &Path, n: usize, reversed: bool) {
    let mut lines: Vec<String> = (0..n)
        .map(|d| {
            let words = ["cat", "dog", "bird", "fish", "tree"];
            let text: Vec<&str> = (0..(d % 7 + 2)).map(|i| words[(d * 3 + i) % 5]).collect();
            format!("{{\"id\": \"d{d}\", \"contents\": \"{}\"}}", text.join(" "))
        })
        .collect();
    if reversed {
        lines.reverse();
    }
    std::fs::write(path, lines.join("\n") + "\n").unwrap();
}

fn index(input: &Path, output: &Path, force: bool, env: &[(&str, &str)]) -> Output {
    let mut args = vec![
        "index",
        "--input",
        s(input),
        "-o",
        s(output),
        "--analyzer",
        "whitespace",
    ];
    if force {
        args.push("--force");
    }
    warpsearch(&args, env)
}

fn setup(dir: &Path) -> (PathBuf, PathBuf) {
    let (a, b) = (dir.join("a.jsonl"), dir.join("b.jsonl"));
    collection(&a, 200, false);
    collection(&b, 150, true);
    std::fs::write(dir.join("q.tsv"), "1\tcat dog\n2\tfish\n").unwrap();
    (a, b)
}

/// Files of another build copied
/// into an index make `search` fail instead of printing another index's results.
#[test]
fn torn_index_search_fails_instead_of_answering() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = setup(dir.path());
    let (ia, ib) = (dir.path().join("ia"), dir.path().join("ib"));
    assert!(index(&a, &ia, false, &[]).status.success());
    assert!(index(&b, &ib, false, &[]).status.success());
    for f in ["docids.bin", "doclens.bin", "postings.bin"] {
        let mixed = dir.path().join(format!("mixed-{f}"));
        std::fs::create_dir(&mixed).unwrap();
        for e in std::fs::read_dir(&ia).unwrap() {
            let e = e.unwrap();
            std::fs::copy(e.path(), mixed.join(e.file_name())).unwrap();
        }
        warpsearch_index::testdata::replace_file(&mixed.join(f), &std::fs::read(ib.join(f)).unwrap());
        let q = dir.path().join("q.tsv");
        let out = warpsearch(
            &[
                "search",
                "--index",
                s(&mixed),
                "--queries",
                s(&q),
                "--backend",
                "cpu",
            ],
            &[],
        );
        assert!(!out.status.success(), "{f}: a torn index answered");
        assert!(
            text(&out.stderr).contains("another build"),
            "{f}: {}",
            text(&out.stderr)
        );
    }
}

/// The hidden leftovers beside `out` (temporaries, old indexes, run folders).
fn leftovers(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with('.'))
        .collect()
}

/// `index --force` killed at every fsync/rename point (`WARPSEARCH_FAIL_AT`) leaves
/// the old or the new complete index at the output path, and the next run cleans up what it left.
#[test]
fn force_crash_window_leaves_old_or_new_index() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = setup(dir.path());
    let out = dir.path().join("idx");
    for point in FAIL_POINTS.iter().filter(|p| **p != "file-written") {
        if out.exists() {
            std::fs::remove_dir_all(&out).unwrap();
        }
        assert!(index(&a, &out, false, &[]).status.success());
        let killed = index(&b, &out, true, &[("WARPSEARCH_FAIL_AT", point)]);
        assert!(!killed.status.success(), "{point}: the build was not stopped");
        // What an open sees right after the kill: one whole index, old (200) or new (150).
        let n = Index::open(&out)
            .unwrap_or_else(|e| panic!("{point}: no index after the kill: {e}"))
            .num_docs();
        assert!(n == 200 || n == 150, "{point}: {n} documents");
        assert!(index(&b, &out, true, &[]).status.success(), "{point}: rerun");
        assert_eq!(Index::open(&out).unwrap().num_docs(), 150, "{point}");
        assert_eq!(
            leftovers(dir.path()),
            Vec::<String>::new(),
            "{point}: leftovers after the rerun"
        );
        // The same point as an error (a full disk, say) cleans up at once.
        let failed = index(
            &a,
            &out,
            true,
            &[("WARPSEARCH_FAIL_AT", &format!("{point}:error"))],
        );
        if !failed.status.success() {
            assert!(
                text(&failed.stderr).contains("injected failure"),
                "{}",
                text(&failed.stderr)
            );
        }
        assert_eq!(
            leftovers(dir.path()),
            Vec::<String>::new(),
            "{point}: leftovers after an error"
        );
        assert!(Index::open(&out).is_ok(), "{point}");
    }
}

/// A killed `export --ciff` and `search --output` leave a
/// temporary that the next run to the same path removes.
#[test]
fn killed_file_writes_are_cleaned_up_by_the_next_run() {
    let dir = tempfile::tempdir().unwrap();
    let (a, _) = setup(dir.path());
    let idx = dir.path().join("idx");
    assert!(index(&a, &idx, false, &[]).status.success());
    let ciff = dir.path().join("x.ciff");
    let kill = [("WARPSEARCH_FAIL_AT", "file-written")];
    assert!(!warpsearch(&["export", s(&idx), "--ciff", s(&ciff)], &kill)
        .status
        .success());
    assert!(!ciff.exists());
    assert_eq!(leftovers(dir.path()).len(), 1, "{:?}", leftovers(dir.path()));
    assert!(warpsearch(&["export", s(&idx), "--ciff", s(&ciff)], &[])
        .status
        .success());
    assert_eq!(leftovers(dir.path()), Vec::<String>::new());
    // A stale temporary of a search run (a pid that cannot be running) goes too.
    let stale = dir.path().join(format!(".run.txt.tmp-{}", u32::MAX - 1));
    std::fs::write(&stale, "half a run").unwrap();
    let (q, run) = (dir.path().join("q.tsv"), dir.path().join("run.txt"));
    let out = warpsearch(
        &[
            "search",
            "--index",
            s(&idx),
            "--queries",
            s(&q),
            "--backend",
            "cpu",
            "--output",
            s(&run),
        ],
        &[],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(leftovers(dir.path()), Vec::<String>::new());
}

/// An existing `--output` is refused before the queries' warm-up (before any work).
#[test]
fn existing_output_is_refused_before_the_warmup() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run.txt");
    std::fs::write(&run, "keep me").unwrap();
    // The index does not even exist: the output check comes first.
    let q = dir.path().join("q.tsv");
    std::fs::write(&q, "1\tcat\n").unwrap();
    let missing = dir.path().join("no-index");
    let out = warpsearch(
        &[
            "search",
            "--index",
            s(&missing),
            "--queries",
            s(&q),
            "--output",
            s(&run),
        ],
        &[],
    );
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("pass --force"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(std::fs::read_to_string(&run).unwrap(), "keep me");
}

/// A missing `static.bin` is damage, not an index "built without" static scores;
/// a wrong-sized `postings.bin` is named as such; causes are not repeated.
#[test]
fn messages_name_the_right_file_once() {
    let dir = tempfile::tempdir().unwrap();
    let (a, _) = setup(dir.path());
    let scores = dir.path().join("scores.tsv");
    std::fs::write(&scores, "d1\t2.5\nd2\t1.0\n").unwrap();
    let idx = dir.path().join("idx");
    let out = warpsearch(
        &[
            "index",
            "--input",
            s(&a),
            "-o",
            s(&idx),
            "--static-scores",
            s(&scores),
        ],
        &[],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let q = dir.path().join("q.tsv");
    let search = |idx: &Path| {
        warpsearch(
            &[
                "search",
                "--index",
                s(idx),
                "--queries",
                s(&q),
                "--backend",
                "cpu",
            ],
            &[],
        )
    };
    std::fs::remove_file(idx.join("static.bin")).unwrap();
    let err = text(&search(&idx).stderr);
    assert!(err.contains("static.bin") && err.contains("missing"), "{err}");
    assert!(!err.contains("without"), "{err}");

    let idx2 = dir.path().join("idx2");
    assert!(index(&a, &idx2, false, &[]).status.success());
    // Cut one word off postings.bin's payload and fix its footer so only the size is wrong.
    let path = idx2.join("postings.bin");
    let bytes = std::fs::read(&path).unwrap();
    let n = bytes.len();
    let mut cut = bytes[..n - 24 - 2].to_vec();
    let len = (cut.len() - 32) as u64;
    let mut footer = [0u8; 24];
    footer[..8].copy_from_slice(&len.to_le_bytes());
    footer[8..12].copy_from_slice(&crc32fast_hash(&cut).to_le_bytes());
    footer[16..].copy_from_slice(b"WSFOOTER");
    cut.extend_from_slice(&footer);
    warpsearch_index::testdata::replace_file(&path, &cut);
    let err = text(&search(&idx2).stderr);
    assert!(
        err.contains("postings.bin") && !err.contains("blocks.bin"),
        "{err}"
    );
    // No cause is printed twice ("x: y: y").
    std::fs::remove_file(idx2.join("doclens.bin")).unwrap();
    let err = text(&search(&idx2).stderr);
    let parts: Vec<&str> = err.trim().split(": ").collect();
    for w in parts.windows(2) {
        assert_ne!(w[0], w[1], "{err}");
    }
}

/// CRC-32 (IEEE), bitwise: the container's checksum, without a dependency for one test.
fn crc32fast_hash(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in bytes {
        crc ^= b as u32;
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

/// A CIFF import cannot reorder or attach static scores: asking for it is an error, not silently ignored.
#[test]
fn ciff_import_refuses_build_only_options() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("o");
    for extra in [
        &["--doc-order", "global-score"][..],
        &["--static-scores", "s.tsv"][..],
        &["--title"][..],
    ] {
        let mut args = vec!["index", "--ciff", "a.ciff", "--output", s(&out)];
        args.extend_from_slice(extra);
        let o = warpsearch(&args, &[]);
        assert!(!o.status.success(), "{extra:?} accepted");
        assert!(
            text(&o.stderr).contains("apply to --input only"),
            "{extra:?}: {}",
            text(&o.stderr)
        );
    }
}

/// A line longer than `--max-line-mb` stops `index` with its file and line named, before it is read
/// whole (a compressed input of gigabytes without a newline aborted the build).
#[test]
fn index_line_longer_than_max_line_mb_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("long.jsonl");
    let long = format!(
        "{{\"id\": \"a\", \"contents\": \"x\"}}\n{{\"id\": \"b\", \"contents\": \"{}\"}}\n",
        "word ".repeat(300_000)
    );
    std::fs::write(&input, long).unwrap();
    let out = dir.path().join("idx");
    let o = warpsearch(
        &["index", "--input", s(&input), "-o", s(&out), "--max-line-mb", "1"],
        &[],
    );
    assert!(!o.status.success());
    assert!(
        text(&o.stderr).contains("long.jsonl:2: the line is longer than 1 MiB"),
        "{}",
        text(&o.stderr)
    );
    assert!(!out.exists());
    let o = warpsearch(
        &["index", "--input", s(&input), "-o", s(&out), "--max-line-mb", "0"],
        &[],
    );
    assert!(!o.status.success(), "--max-line-mb 0 accepted");
    let o = warpsearch(&["index", "--input", s(&input), "-o", s(&out)], &[]);
    assert!(o.status.success(), "{}", text(&o.stderr));
}

/// `index --force` onto an index directory that also holds `notes.txt`, a `backup/` folder and the
/// very input being read deleted them all: it now refuses, naming them, and the old index stays.
#[test]
fn index_force_refuses_to_delete_files_it_did_not_write() {
    let dir = tempfile::tempdir().unwrap();
    let (a, _) = setup(dir.path());
    let out = dir.path().join("idx");
    assert!(index(&a, &out, false, &[]).status.success());
    std::fs::write(out.join("notes.txt"), "keep me").unwrap();
    std::fs::create_dir(out.join("backup")).unwrap();
    let input = out.join("b.jsonl");
    collection(&input, 150, true);
    let o = index(&input, &out, true, &[]);
    assert!(!o.status.success());
    let err = text(&o.stderr);
    assert!(
        err.contains("b.jsonl, backup/, notes.txt") && err.contains("move it elsewhere"),
        "{err}"
    );
    assert!(out.join("notes.txt").exists() && out.join("backup").is_dir() && input.exists());
    assert_eq!(Index::open(&out).unwrap().num_docs(), 200);
}

/// `--memory-mb 0` was accepted (then gigabytes of read buffers, "Too many open files", or an abort):
/// below the floor it is refused with the reason.
#[test]
fn index_memory_mb_below_the_floor_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (a, _) = setup(dir.path());
    let out = dir.path().join("idx");
    for mb in ["0", "15", "lots"] {
        let o = warpsearch(
            &["index", "--input", s(&a), "-o", s(&out), "--memory-mb", mb],
            &[],
        );
        assert!(!o.status.success(), "--memory-mb {mb} accepted");
        assert!(
            text(&o.stderr).contains("give at least 16"),
            "{mb}: {}",
            text(&o.stderr)
        );
        assert!(!out.exists());
    }
    let o = warpsearch(
        &["index", "--input", s(&a), "-o", s(&out), "--memory-mb", "16"],
        &[],
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
}

/// A FIFO in place of `meta.json` or `blocks.bin` blocked `inspect` and `search` forever: both fail at
/// once, naming it (a run still going after 20 s is killed and fails the test).
#[cfg(target_os = "linux")]
#[test]
fn fifo_in_place_of_an_index_file_fails_inspect_and_search_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let (a, _) = setup(dir.path());
    let idx = dir.path().join("idx");
    assert!(index(&a, &idx, false, &[]).status.success());
    let q = dir.path().join("q.tsv");
    for name in ["meta.json", "blocks.bin"] {
        let path = idx.join(name);
        let good = std::fs::read(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        let made = Command::new("mkfifo").arg(&path).status().unwrap();
        assert!(made.success());
        for args in [
            &["inspect", s(&idx)][..],
            &[
                "search",
                "--index",
                s(&idx),
                "--queries",
                s(&q),
                "--backend",
                "cpu",
            ],
        ] {
            let mut child = Command::new(env!("CARGO_BIN_EXE_warpsearch"))
                .args(args)
                .stderr(std::process::Stdio::piped())
                .stdout(std::process::Stdio::null())
                .spawn()
                .unwrap();
            let started = std::time::Instant::now();
            let status = loop {
                if let Some(status) = child.try_wait().unwrap() {
                    break status;
                }
                if started.elapsed() > std::time::Duration::from_secs(20) {
                    let _ = child.kill();
                    panic!("{args:?} with a FIFO as {name} still waits");
                }
                std::thread::sleep(std::time::Duration::from_millis(20));
            };
            let mut err = String::new();
            std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
            assert!(!status.success(), "{args:?}");
            assert!(
                err.contains(name) && err.contains("not a regular file"),
                "{args:?}: {err}"
            );
        }
        warpsearch_index::testdata::replace_file(&path, &good);
    }
}
