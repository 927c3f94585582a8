//! What the CLI's end-to-end tests share: running the binary and building a small index with it.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Runs the `warpsearch` binary with `args`.
pub fn warpsearch(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_warpsearch"))
        .args(args)
        .output()
        .unwrap()
}

/// Bytes as text, invalid UTF-8 replaced.
pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// `docs` (one text each, ids doc0, doc1, …) written as JSONL into `dir` and indexed with the default
/// analyzer into `dir/idx`.
pub fn index_of(dir: &Path, docs: &[&str]) -> PathBuf {
    let lines: String = docs
        .iter()
        .enumerate()
        .map(|(i, t)| format!("{{\"id\": \"doc{i}\", \"contents\": \"{t}\"}}\n"))
        .collect();
    std::fs::write(dir.join("in.jsonl"), lines).unwrap();
    index_jsonl(&dir.join("in.jsonl"), &dir.join("idx"))
}

/// The JSONL collection `input` indexed with the default analyzer into `index`.
pub fn index_jsonl(input: &Path, index: &Path) -> PathBuf {
    let out = warpsearch(&[
        "index",
        "--input",
        input.to_str().unwrap(),
        "-o",
        index.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    index.to_owned()
}

/// The CACM data folder (`../shared/data/cacm`) and its documents indexed into `dir/idx`; None (a
/// printed skip) where the shared data is absent, a failure under WARPSEARCH_REQUIRE_DATA=1.
pub fn cacm_index(dir: &Path) -> Option<(PathBuf, PathBuf)> {
    let data = warpsearch_index::testdata::shared_data("cacm")?;
    let index = index_jsonl(&data.join("docs.jsonl"), &dir.join("idx"));
    Some((data, index))
}
