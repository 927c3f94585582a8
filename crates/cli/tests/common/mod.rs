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
    let index = dir.join("idx");
    let out = warpsearch(&[
        "index",
        "--input",
        dir.join("in.jsonl").to_str().unwrap(),
        "-o",
        index.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    index
}
