//! Clients for the server's tests, careless and hostile: a heavy collection and heavy requests,
//! requests written raw and responses read raw (interim responses included), and a wait on a metric.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::common::{self, Server};

/// 20,000 documents of 60 words each over a vocabulary of 4,000 (skewed, so that lists run from a few
/// postings to most documents): a request of many long OR queries at k 1,000 takes the engine a while
/// and answers tens of megabytes.
pub fn heavy_index(dir: &Path) -> PathBuf {
    let mut rng = 7u64;
    let mut next = move |m: u64| {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng % m
    };
    let docs: Vec<String> = (0..20_000)
        .map(|_| {
            (0..60)
                .map(|_| {
                    let spread = 1 + next(4000);
                    format!("w{}", next(spread))
                })
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect();
    let docs: Vec<&str> = docs.iter().map(String::as_str).collect();
    common::index_of(dir, &docs)
}

/// A POST body of `n` queries of 30 words each at depth `k`.
pub fn heavy_body(n: usize, k: usize) -> String {
    let queries: Vec<Value> = (0..n)
        .map(|i| {
            let text: Vec<String> = (0..30).map(|j| format!("w{}", (i * 31 + j * 17) % 400)).collect();
            json!({"id": i, "text": text.join(" ")})
        })
        .collect();
    json!({"queries": queries, "k": k}).to_string()
}

/// `body` as a POST /search on a new connection (kept alive), its response not read.
pub fn post_raw(addr: &str, body: &str) -> TcpStream {
    let mut s = TcpStream::connect(addr).unwrap();
    write!(
        s,
        "POST /search HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    s
}

/// Everything a connection receives until the server closes it (an error, a reset, ends it too).
pub fn read_to_close(s: &mut TcpStream) -> String {
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let mut out = Vec::new();
    let mut buf = [0u8; 65536];
    loop {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => return String::from_utf8_lossy(&out).into_owned(),
            Ok(n) => out.extend_from_slice(&buf[..n]),
        }
    }
}

/// The final response of `raw` (what a connection received): its status and body, past any interim
/// 1xx response (which an HTTP/1.1 client must accept).
pub fn final_response(raw: &str) -> Option<(u16, String)> {
    let mut rest = raw;
    loop {
        let (head, body) = rest.split_once("\r\n\r\n")?;
        let status: u16 = head.split(' ').nth(1)?.parse().ok()?;
        if (100..200).contains(&status) {
            rest = body;
            continue;
        }
        return Some((status, body.to_owned()));
    }
}

/// Waits (at most a minute: the server is hung otherwise) until `ok` holds of the server's metric
/// `name`; returns its value.
pub fn wait_for_metric(server: &Server, name: &str, ok: impl Fn(u64) -> bool) -> u64 {
    let started = Instant::now();
    loop {
        let v = server.metric(name);
        if ok(v) {
            return v;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "{name} stayed at {v}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}
