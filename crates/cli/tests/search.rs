//! `warpsearch search` and `evaluate` end to end through the binary: odd queries, bad options, output
//! formats, and CACM quality against the bm25s reference of `../shared/data/README.md`.

mod common;

use std::path::{Path, PathBuf};

use common::{text, warpsearch};

/// A small English collection indexed with the default analyzer.
fn small_index(dir: &Path) -> PathBuf {
    common::index_of(
        dir,
        &[
            "The quick brown fox jumps over the lazy dog",
            "A fox and a dog are friends",
            "Brown bears eat fish in the river",
            "Quick thinking saves the day",
            "Dogs dogs dogs everywhere",
        ],
    )
}

#[test]
fn odd_queries_are_answered_with_warnings_never_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let index = small_index(dir.path());
    let long: Vec<&str> = std::iter::repeat_n(["fox", "dog", "zebra", "the"], 250)
        .flatten()
        .collect();
    let mut queries = b"q1\tquick fox\n\nthe and of\nzebra\nfox fox fox dog\n".to_vec();
    queries.extend_from_slice(b"caf\xe9 fox\n");
    queries.extend_from_slice(format!("long\t{}\n", long.join(" ")).as_bytes());
    let qfile = dir.path().join("q.txt");
    std::fs::write(&qfile, queries).unwrap();
    for mode in ["and", "or", "and-or"] {
        let run = dir.path().join(format!("{mode}.run"));
        let out = common::search(&index, &qfile, mode, 3, "auto", &["-o", run.to_str().unwrap()]);
        let err = text(&out.stderr);
        assert!(out.status.success(), "{err}");
        assert!(!err.contains("panicked"), "{err}");
        assert!(err.contains("q.txt:6: not valid UTF-8"), "{err}");
        assert!(
            err.contains("no searchable terms") && err.contains("(line 2)"),
            "{err}"
        );
        assert!(err.contains("terms the index does not have"), "{err}");
        let run = std::fs::read_to_string(run).unwrap();
        let mut last: Option<(String, f64)> = None;
        for line in run.lines() {
            let f: Vec<&str> = line.split(' ').collect();
            assert_eq!(f.len(), 6, "{line}");
            assert_eq!((f[1], f[5]), ("Q0", "warpsearch"));
            let score: f64 = f[4].parse().unwrap();
            let rank: usize = f[3].parse().unwrap();
            assert!((1..=3).contains(&rank));
            if let Some((q, s)) = &last {
                assert!(
                    q != f[0] || *s >= score,
                    "scores must not increase within a query: {run}"
                );
            }
            last = Some((f[0].to_owned(), score));
        }
        let qids: std::collections::BTreeSet<&str> =
            run.lines().map(|l| l.split(' ').next().unwrap()).collect();
        // The stopword-only (3) and empty (2) queries find nothing; "zebra" (4) finds nothing.
        assert!(
            !qids.contains("2") && !qids.contains("3") && !qids.contains("4"),
            "{run}"
        );
        assert!(qids.contains("q1") && qids.contains("5"), "{run}");
        // The long query holds "zebra": AND finds nothing, OR and and-or find documents.
        assert_eq!(qids.contains("long"), mode != "and", "{run}");
    }
}

#[test]
fn bad_options_are_refused_with_a_reason() {
    let dir = tempfile::tempdir().unwrap();
    let index = small_index(dir.path());
    let qfile = dir.path().join("q.txt");
    std::fs::write(&qfile, "fox\n").unwrap();
    let (i, q) = (index.to_str().unwrap(), qfile.to_str().unwrap());
    // The cache's options are checked before a GPU is looked for.
    let cache = |option: &'static str, value: &'static str| {
        let gpu = ["--backend", "gpu", "--gpu-cache", "vfb", "--gpu-memory", "1G"];
        [&gpu[..], &["--gpu-cache-train", "/dev/null", option, value]].concat()
    };
    let (chunks, ratio_0, ratio_2) = (
        cache("--gpu-cache-chunks", "0"),
        cache("--gpu-cache-ratio", "0"),
        cache("--gpu-cache-ratio", "1.5"),
    );
    let cases: [(&[&str], &str); 10] = [
        (&chunks, "--gpu-cache-chunks must be at least 1"),
        (&ratio_0, "--gpu-cache-ratio must be above 0 and at most 1, not 0"),
        (&ratio_2, "not 1.5"),
        (&["--k", "0"], "k = 0 is out of range"),
        (&["--k", "1000000000"], "out of range"),
        (
            &["--mode", "or", "--algorithm", "daat"],
            "daat evaluates AND queries",
        ),
        (
            &["--mode", "and", "--algorithm", "bmw"],
            "bmw evaluates OR queries",
        ),
        (&["--ranking", "bm25-static"], "--static-scores"),
        (&["--algorithm", "early"], "global-score"),
        (&["--hybrid-hedge=-1"], "--hybrid-hedge is -1: give 0 (never)"),
    ];
    for (extra, message) in cases {
        let mut args = vec!["search", "--index", i, "--queries", q];
        args.extend_from_slice(extra);
        let out = warpsearch(&args);
        let err = text(&out.stderr);
        assert!(!out.status.success(), "{extra:?} should fail");
        assert!(err.contains(message), "{extra:?}: {err}");
    }
    let run = dir.path().join("r.txt");
    std::fs::write(&run, "keep me").unwrap();
    let out = warpsearch(&[
        "search",
        "--index",
        i,
        "--queries",
        q,
        "-o",
        run.to_str().unwrap(),
    ]);
    assert!(!out.status.success() && text(&out.stderr).contains("--force"));
    assert_eq!(std::fs::read_to_string(&run).unwrap(), "keep me");
    let out = warpsearch(&["search", "--index", i, "--queries", "/nonexistent/q.txt"]);
    assert!(text(&out.stderr).contains("/nonexistent/q.txt"));
}

#[test]
fn json_output_and_other_bm25_parameters() {
    let dir = tempfile::tempdir().unwrap();
    let index = small_index(dir.path());
    let qfile = dir.path().join("q.txt");
    std::fs::write(&qfile, "7\tbrown dog\n").unwrap();
    let (i, q) = (index.to_str().unwrap(), qfile.to_str().unwrap());
    let run = |extra: &[&str]| {
        let mut args = vec!["search", "--index", i, "--queries", q, "--format", "json"];
        args.extend_from_slice(extra);
        let out = warpsearch(&args);
        assert!(out.status.success(), "{}", text(&out.stderr));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        (v, text(&out.stderr))
    };
    let (v, _) = run(&[]);
    assert_eq!(v["id"], "7");
    let hits = v["hits"].as_array().unwrap();
    assert_eq!(hits.len(), 4, "{v}");
    assert_eq!(hits[0]["rank"], 1);
    let (other, err) = run(&["--k1", "1.2", "--b", "0.75"]);
    assert!(err.contains("recomputed"), "{err}");
    assert_ne!(v, other, "other BM25 parameters must change the scores");
}

#[test]
fn cacm_quality_is_close_to_the_bm25s_reference() {
    let dir = tempfile::tempdir().unwrap();
    let Some((data, _)) = common::cacm_index(dir.path()) else {
        return;
    };
    let p = |name: &str| dir.path().join(name).to_str().unwrap().to_owned();
    let d = |name: &str| data.join(name).to_str().unwrap().to_owned();
    let out = warpsearch(&[
        "search",
        "--index",
        &p("idx"),
        "--queries",
        &d("topics.tsv"),
        "--mode",
        "or",
        "--k",
        "1000",
        "-o",
        &p("run"),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = warpsearch(&["evaluate", "--qrels", &d("qrels.txt"), "--run", &p("run")]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let report = text(&out.stdout);
    let measure = |name: &str| -> f64 {
        let line = report
            .lines()
            .find(|l| l.starts_with(&format!("{name}\tall\t")))
            .unwrap();
        line.rsplit('\t').next().unwrap().parse().unwrap()
    };
    assert_eq!(measure("num_q") as usize, 52, "{report}");
    // bm25s (k1 0.9, b 0.4, Porter, stopwords): nDCG@10 0.481, MAP 0.340. Tokenizers and stopword
    // lists differ, so allow a small gap, but not a broken ranking.
    assert!((measure("ndcg_cut_10") - 0.481).abs() < 0.03, "{report}");
    assert!((measure("map") - 0.340).abs() < 0.03, "{report}");
    // A run that lacks judged queries is evaluated with a warning that names them.
    let full = std::fs::read_to_string(p("run")).unwrap();
    let partial: String = full
        .lines()
        .filter(|l| !l.starts_with("10 "))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(p("partial"), partial).unwrap();
    let out = warpsearch(&["evaluate", "--qrels", &d("qrels.txt"), "--run", &p("partial")]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("judged queries have no results in the run (e.g. 10)"),
        "{}",
        text(&out.stderr)
    );
}

/// `--query TEXT` answers one query (qid 1) exactly as the same text in a query file does.
#[test]
fn one_query_on_the_command_line() {
    let dir = tempfile::tempdir().unwrap();
    let index = small_index(dir.path());
    let file = dir.path().join("q.txt");
    std::fs::write(&file, "quick brown fox\n").unwrap();
    let by_file = warpsearch(&[
        "search",
        "--index",
        index.to_str().unwrap(),
        "--queries",
        file.to_str().unwrap(),
    ]);
    let by_text = warpsearch(&[
        "search",
        "--index",
        index.to_str().unwrap(),
        "--query",
        "quick brown fox",
    ]);
    assert!(by_text.status.success(), "{}", text(&by_text.stderr));
    assert!(!by_text.stdout.is_empty());
    assert_eq!(by_file.stdout, by_text.stdout);
    let neither = warpsearch(&["search", "--index", index.to_str().unwrap()]);
    assert!(!neither.status.success());
    assert!(
        text(&neither.stderr).contains("--queries"),
        "{}",
        text(&neither.stderr)
    );
}

#[test]
fn export_for_pisa_takes_the_terms_of_a_query_log() {
    let dir = tempfile::tempdir().unwrap();
    let index = small_index(dir.path());
    let queries = dir.path().join("q.txt");
    // Analyzed as documents are: "Foxes" stems to "fox", "the" is a stopword, "zebra" is unknown.
    std::fs::write(&queries, "1\tFoxes and the zebra\n2\tdogs\n").unwrap();
    let out_dir = dir.path().join("pisa");
    let export = |extra: &[&str]| {
        let mut args = vec![
            "export",
            index.to_str().unwrap(),
            "--pisa",
            out_dir.to_str().unwrap(),
            "--terms-from",
            queries.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        warpsearch(&args)
    };
    let out = export(&[]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let terms = std::fs::read_to_string(out_dir.join("fwd.terms")).unwrap();
    assert_eq!(terms, "dog\nfox\n");
    let docs = std::fs::read_to_string(out_dir.join("fwd.documents")).unwrap();
    assert_eq!(docs.lines().count(), 5);

    let again = export(&[]);
    assert!(!again.status.success());
    assert!(text(&again.stderr).contains("--force"), "{}", text(&again.stderr));
    let forced = export(&["--force"]);
    assert!(forced.status.success(), "{}", text(&forced.stderr));

    // --force never removes a directory that is not an earlier export.
    std::fs::remove_dir_all(&out_dir).unwrap();
    std::fs::create_dir(&out_dir).unwrap();
    std::fs::write(out_dir.join("precious.txt"), "keep").unwrap();
    let refused = export(&["--force"]);
    assert!(!refused.status.success());
    assert!(out_dir.join("precious.txt").exists());

    let both = warpsearch(&[
        "export",
        index.to_str().unwrap(),
        "--pisa",
        "x",
        "--ciff",
        "y.ciff",
    ]);
    assert!(!both.status.success());
}

/// `--backend hybrid` (the CPU workers alone here; the device runs it with the GPU) writes the same run,
/// byte for byte, as `--backend cpu` for every mode, with long queries split among the workers; a share
/// outside [0, 1] is refused.
#[test]
fn hybrid_runs_equal_cpu_runs() {
    let dir = tempfile::tempdir().unwrap();
    let Some((data, _)) = common::cacm_index(dir.path()) else {
        return;
    };
    let (idx, topics) = (dir.path().join("idx"), data.join("topics.tsv"));
    for mode in ["and", "or", "and-or"] {
        let run = |backend: &str, extra: &[&str]| {
            let out = common::search(&idx, &topics, mode, 100, backend, extra);
            assert!(out.status.success(), "{}", text(&out.stderr));
            out.stdout
        };
        let cpu = run("cpu", &[]);
        assert!(!cpu.is_empty());
        let split = ["--hybrid-split-ms", "0.001", "--hybrid-workers", "3"];
        assert_eq!(cpu, run("hybrid", &split), "{mode}");
        assert_eq!(cpu, run("hybrid", &["--hybrid-split-ms", "0"]), "{mode}");
    }
    let out = common::search(
        &idx,
        &topics,
        "or",
        10,
        "hybrid",
        &["--hybrid-split-gpu-share", "1.5"],
    );
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("give a share from 0 to 1"),
        "{}",
        text(&out.stderr)
    );
}

/// An index in the SIMD-BP128 codec answers exactly as a PForDelta one (CACM topics, AND / OR / and-or at
/// k 100), on the backend `auto` picks (the GPU's decoder where one exists: `gpu-tests` checks it block by
/// block against this crate's).
#[test]
fn simdbp_index_answers_as_pfor() {
    let dir = tempfile::tempdir().unwrap();
    let Some((data, pfor)) = common::cacm_index(dir.path()) else {
        return;
    };
    let simdbp = dir.path().join("simdbp");
    common::index_with(&data.join("docs.jsonl"), &simdbp, &["--codec", "simdbp"]);
    let topics = data.join("topics.tsv");
    let search =
        |index: &Path, mode: &str, backend: &str| common::search(index, &topics, mode, 100, backend, &[]);
    for mode in ["and", "or", "and-or"] {
        let (a, b) = (search(&pfor, mode, "cpu"), search(&simdbp, mode, "auto"));
        assert!(a.status.success() && b.status.success(), "{}", text(&b.stderr));
        assert!(!a.stdout.is_empty());
        assert_eq!(a.stdout, b.stdout, "{mode}");
    }
}

/// `search` with piped standard input, and a thread collecting its standard output line by line.
struct Piped {
    child: std::process::Child,
    stdin: Option<std::process::ChildStdin>,
    lines: std::sync::mpsc::Receiver<String>,
}

impl Piped {
    fn start(index: &Path, extra: &[&str]) -> Piped {
        use std::io::BufRead;
        use std::process::{Command, Stdio};
        let mut child = Command::new(env!("CARGO_BIN_EXE_warpsearch"))
            .args(["search", "--index", index.to_str().unwrap(), "--queries", "-"])
            .args(["--backend", "cpu"])
            .args(extra)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout).lines() {
                if tx.send(line.unwrap()).is_err() {
                    break;
                }
            }
        });
        Piped {
            stdin: child.stdin.take(),
            child,
            lines,
        }
    }

    fn send(&mut self, text: &str) {
        use std::io::Write;
        let stdin = self.stdin.as_mut().unwrap();
        stdin.write_all(text.as_bytes()).unwrap();
        stdin.flush().unwrap();
    }

    /// The next line of output, within a minute (the input stays open meanwhile).
    fn line(&self) -> String {
        self.lines
            .recv_timeout(std::time::Duration::from_secs(60))
            .expect("no answer while the input stays open")
    }

    /// Closes the input and waits: the exit status and standard error.
    fn finish(mut self) -> (std::process::ExitStatus, String) {
        use std::io::Read;
        drop(self.stdin.take());
        let mut err = String::new();
        self.child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut err)
            .unwrap();
        (self.child.wait().unwrap(), err)
    }
}

/// `search --queries -` read all of standard input before the first answer: a query piped in now
/// gets its answer while the input stays open.
#[test]
fn search_stdin_answers_each_query_before_the_end_of_input() {
    let dir = tempfile::tempdir().unwrap();
    let index = small_index(dir.path());
    let mut search = Piped::start(&index, &["--k", "1"]);
    search.send("1\tfox\n");
    assert!(search.line().starts_with("1 Q0 doc"));
    search.send("2\tbears\n");
    let answer = search.line();
    let qfile = dir.path().join("q.txt");
    std::fs::write(&qfile, "2\tbears\n").unwrap();
    let by_file = common::search(&index, &qfile, "or", 1, "cpu", &[]);
    assert_eq!(format!("{answer}\n"), text(&by_file.stdout));
    let (status, err) = search.finish();
    assert!(status.success(), "{err}");
}

/// Streaming changes no byte: a query file of three chunks (4,096 queries each on the CPU) and the same
/// queries on standard input give the output of the whole batch read first (as `--warmup` does), in
/// both formats, with the same warnings.
#[test]
fn search_stream_output_is_byte_identical_to_the_whole_batch() {
    let dir = tempfile::tempdir().unwrap();
    let index = small_index(dir.path());
    let words = [
        "fox", "dog", "brown", "quick", "the", "zebra", "bears", "river", "day",
    ];
    let mut queries = String::new();
    for i in 0..10_000usize {
        let text: Vec<&str> = (0..i % 4).map(|j| words[(i * 7 + j * 3) % words.len()]).collect();
        // Some queries repeat an id, some have none.
        match i % 5 {
            0 => queries += &format!("q{}\t{}\n", i % 2_000, text.join(" ")),
            1 => queries += &format!("{}\n", text.join(" ")),
            _ => queries += &format!("q{i}\t{}\n", text.join(" ")),
        }
    }
    let qfile = dir.path().join("q.txt");
    std::fs::write(&qfile, &queries).unwrap();
    for format in ["trec", "json"] {
        let run = |extra: &[&str]| {
            let mut args = vec!["--format", format];
            args.extend_from_slice(extra);
            let out = common::search(&index, &qfile, "or", 3, "cpu", &args);
            assert!(out.status.success(), "{}", text(&out.stderr));
            (out.stdout, text(&out.stderr))
        };
        let (whole, whole_err) = run(&["--warmup", "1"]);
        let (streamed, streamed_err) = run(&[]);
        assert!(whole.len() > 100_000);
        assert!(whole == streamed, "{format}: the streamed output differs");
        assert_eq!(whole_err, streamed_err);
        assert!(
            whole_err.contains("query id q0 appears on lines 1 and"),
            "{whole_err}"
        );
        assert!(whole_err.contains("… and "), "{whole_err}");
        // Standard input.
        let mut piped = Piped::start(&index, &["--k", "3", "--format", format]);
        let feeder = {
            let mut stdin = piped.stdin.take().unwrap();
            let queries = queries.clone();
            std::thread::spawn(move || {
                use std::io::Write;
                stdin.write_all(queries.as_bytes()).unwrap();
            })
        };
        let mut got = Vec::new();
        while got.len() < whole.len() {
            got.extend_from_slice(piped.line().as_bytes());
            got.push(b'\n');
        }
        feeder.join().unwrap();
        let (status, err) = piped.finish();
        assert!(status.success(), "{err}");
        assert!(got == whole, "{format}: the output of standard input differs");
        assert_eq!(err, whole_err.replace(qfile.to_str().unwrap(), "<stdin>"));
    }
}

/// `search --queries -` held about 8 times its input in memory: now its peak resident memory does not
/// grow with the input. The peak after 54 MB of queries is that after 6 MB, within 12 MB (read while
/// the input is still open, every answer received).
#[test]
fn search_stdin_memory_does_not_grow_with_the_input() {
    let dir = tempfile::tempdir().unwrap();
    let index = small_index(dir.path());
    let peak_kb = |megabytes: usize| -> u64 {
        let mut search = Piped::start(&index, &["--k", "1"]);
        let line = "the quick brown fox jumps over the lazy dog\n";
        let blocks = (megabytes << 20) / line.len() / 1000;
        let mut stdin = search.stdin.take().unwrap();
        let feeder = std::thread::spawn(move || {
            use std::io::Write;
            let block = line.repeat(1000);
            for _ in 0..blocks {
                stdin.write_all(block.as_bytes()).unwrap();
            }
            stdin
        });
        for _ in 0..blocks * 1000 {
            search.line();
        }
        let stdin = feeder.join().unwrap();
        let status = std::fs::read_to_string(format!("/proc/{}/status", search.child.id())).unwrap();
        drop(stdin);
        let (exit, err) = search.finish();
        assert!(exit.success(), "{err}");
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .expect("VmHWM in /proc/PID/status")
    };
    // The peak varies from run to run whatever the input's size (28–38 MB after 6 to 96 MB of queries,
    // up to 48 MB on a loaded machine), upward only: the lower of two runs is each size's. 1.1 million
    // queries more holding even 12 bytes each would add 12 MB to every run.
    let least = |megabytes: usize| peak_kb(megabytes).min(peak_kb(megabytes));
    let (small, large) = (least(6), least(54));
    assert!(
        large < small + (12 << 10),
        "peak {small} kB after 6 MB of queries, {large} kB after 54 MB"
    );
}

/// `postings.bin` written in place while `search` streams (wrong hits, or a SIGBUS for a truncation,
/// before): the batch after the change is refused with an error naming the file, its answers unwritten.
#[test]
fn search_refuses_answers_once_postings_change_under_it() {
    let dir = tempfile::tempdir().unwrap();
    let index = small_index(dir.path());
    let mut search = Piped::start(&index, &["--k", "1"]);
    search.send("1\tfox\n");
    assert!(search.line().starts_with("1 Q0 "));
    // Past the file system's timestamp granularity, so that the write shows in the modification time.
    std::thread::sleep(std::time::Duration::from_millis(50));
    let postings = index.join("postings.bin");
    let mut bytes = std::fs::read(&postings).unwrap();
    let end = bytes.len() - 30;
    bytes[end] ^= 0x40;
    warpsearch_index::testdata::write_in_place(&postings, &bytes);
    search.send("2\tdog\n");
    let rest: Vec<String> =
        std::iter::from_fn(|| search.lines.recv_timeout(std::time::Duration::from_secs(5)).ok()).collect();
    let (status, err) = search.finish();
    assert!(!status.success());
    assert!(rest.is_empty(), "{rest:?}");
    assert!(
        err.contains("postings.bin") && err.contains("changed on disk while the index was open"),
        "{err}"
    );
}

/// `search --tag` took a space, tab, newline or empty tag, writing a run that `evaluate` refuses: such
/// a tag is refused before any work, and a valid one gives a run `evaluate` reads.
#[test]
fn search_tag_that_breaks_a_trec_run_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let index = small_index(dir.path());
    let qfile = dir.path().join("q.txt");
    std::fs::write(&qfile, "1\tfox\n").unwrap();
    for tag in ["my run", "a\tb", "a\nb", "", "bell\u{7}"] {
        let out = common::search(&index, &qfile, "or", 3, "cpu", &["--tag", tag]);
        assert!(!out.status.success(), "{tag:?} accepted");
        assert!(
            text(&out.stderr).contains("run tag"),
            "{tag:?}: {}",
            text(&out.stderr)
        );
        assert!(out.stdout.is_empty());
    }
    let run = dir.path().join("run.txt");
    let out = common::search(
        &index,
        &qfile,
        "or",
        3,
        "cpu",
        &["--tag", "bm25-run.1", "-o", run.to_str().unwrap()],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let qrels = dir.path().join("qrels.txt");
    std::fs::write(&qrels, "1 0 doc0 1\n").unwrap();
    let out = warpsearch(&[
        "evaluate",
        "--qrels",
        qrels.to_str().unwrap(),
        "--run",
        run.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
}

/// The BM25 parameters `index` accepts are those `search` accepts (the build said k1 > 0, search
/// k1 ≥ 0, so an index could be built that no search with its own parameters accepted): one rule, one
/// message.
#[test]
fn index_and_search_share_the_bm25_parameter_rule() {
    let dir = tempfile::tempdir().unwrap();
    let index = small_index(dir.path());
    let qfile = dir.path().join("q.txt");
    std::fs::write(&qfile, "1\tfox\n").unwrap();
    let input = dir.path().join("in.jsonl");
    for (k1, b) in [("0", "0.4"), ("-1", "0.4"), ("0.9", "1.5"), ("inf", "0.4")] {
        let k1_arg = format!("--k1={k1}");
        let b_arg = format!("--b={b}");
        let search = common::search(&index, &qfile, "or", 3, "cpu", &[&k1_arg, &b_arg]);
        let out = dir.path().join("other");
        let build = warpsearch(&[
            "index",
            "--input",
            input.to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
            &k1_arg,
            &b_arg,
        ]);
        for (what, o) in [("search", &search), ("index", &build)] {
            assert!(!o.status.success(), "{what} {k1} {b} accepted");
            assert!(
                text(&o.stderr).contains("BM25 needs k1 > 0 and 0 <= b <= 1"),
                "{what} {k1} {b}: {}",
                text(&o.stderr)
            );
        }
    }
}
