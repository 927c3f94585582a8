//! What the CLI's end-to-end tests share: running the binary, building a small index with it, and a
//! running `warpsearch serve`.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use serde_json::Value;

/// Runs the `warpsearch` binary with `args`.
pub fn warpsearch(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_warpsearch"))
        .args(args)
        .output()
        .unwrap()
}

/// `warpsearch search` of `queries` over `index` in `mode` at depth `k` on `backend`, then `extra`.
pub fn search(index: &Path, queries: &Path, mode: &str, k: usize, backend: &str, extra: &[&str]) -> Output {
    let k = k.to_string();
    let mut args = vec![
        "search",
        "--index",
        index.to_str().unwrap(),
        "--queries",
        queries.to_str().unwrap(),
        "--mode",
        mode,
        "--k",
        &k,
        "--backend",
        backend,
    ];
    args.extend_from_slice(extra);
    warpsearch(&args)
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
    index_with(input, index, &[])
}

/// The JSONL collection `input` indexed into `index` with the further options `extra`.
pub fn index_with(input: &Path, index: &Path, extra: &[&str]) -> PathBuf {
    let mut args = vec![
        "index",
        "--input",
        input.to_str().unwrap(),
        "-o",
        index.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let out = warpsearch(&args);
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

/// A running `warpsearch serve`, killed when dropped.
pub struct Server {
    pub child: Child,
    pub addr: String,
    pub log: PathBuf,
}

impl Server {
    /// Starts `serve` on 127.0.0.1, any free port, and reads the address it prints.
    pub fn start(index: &Path, extra: &[&str]) -> Server {
        let log = index.with_extension(format!("serve-{}.log", extra.join("_").replace('/', "")));
        let mut child = Command::new(env!("CARGO_BIN_EXE_warpsearch"))
            .args([
                "serve",
                "--index",
                index.to_str().unwrap(),
                "--addr",
                "127.0.0.1:0",
            ])
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let Some(addr) = line.trim().strip_prefix("listening on http://") else {
            let _ = child.wait();
            panic!("serve did not start: {}", std::fs::read_to_string(&log).unwrap());
        };
        Server {
            addr: addr.to_owned(),
            child,
            log,
        }
    }

    /// Sends SIGTERM and waits (at most a minute) for the server to exit: its status, the time from
    /// the signal, and its log.
    pub fn terminate(&mut self) -> (std::process::ExitStatus, Duration, String) {
        let pid = self.child.id().to_string();
        assert!(Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success());
        let started = std::time::Instant::now();
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "serve did not stop on SIGTERM within a minute"
            );
            std::thread::sleep(Duration::from_millis(10));
        };
        let took = started.elapsed();
        (status, took, std::fs::read_to_string(&self.log).unwrap())
    }

    /// One HTTP/1.1 request (Connection: close): status, headers, body.
    pub fn request(&self, method: &str, path: &str, body: &str) -> (u16, String, String) {
        let mut s = TcpStream::connect(&self.addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(120))).unwrap();
        write!(
            s,
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\n\r\n{body}",
            self.addr,
            body.len()
        )
        .unwrap();
        let mut response = String::new();
        s.read_to_string(&mut response).unwrap();
        let (head, body) = response.split_once("\r\n\r\n").unwrap();
        let status = head.split(' ').nth(1).unwrap().parse().unwrap();
        (status, head.to_ascii_lowercase(), body.to_owned())
    }

    /// Asserts that `GET /metrics` answers with each of `lines` as a line of its own.
    pub fn assert_metrics(&self, lines: &[&str]) {
        let (status, _, metrics) = self.request("GET", "/metrics", "");
        assert_eq!(status, 200, "{metrics}");
        assert_lines(&metrics, lines);
    }

    pub fn json(&self, method: &str, path: &str, body: &str) -> (u16, Value) {
        let (status, _, body) = self.request(method, path, body);
        (
            status,
            serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}")),
        )
    }

    /// The value of a counter or gauge of `/metrics` (a line `NAME VALUE`).
    pub fn metric(&self, name: &str) -> u64 {
        let (_, _, text) = self.request("GET", "/metrics", "");
        let line = text.lines().find(|l| l.split(' ').next() == Some(name));
        let value = line.and_then(|l| l.rsplit(' ').next()?.parse().ok());
        value.unwrap_or_else(|| panic!("no {name} in /metrics:\n{text}"))
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Asserts that `text` has each of `lines` as a line of its own.
pub fn assert_lines(text: &str, lines: &[&str]) {
    for line in lines {
        assert!(text.lines().any(|l| l == *line), "{line} missing:\n{text}");
    }
}
