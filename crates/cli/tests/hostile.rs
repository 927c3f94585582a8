//! Hostile clients against `warpsearch serve` over loopback, all at once: slow headers (a byte at a
//! time), stalled bodies, half-closed requests, heavy requests abandoned, heavy responses never read,
//! and a flood of connections beyond `--max-connections`. The server must keep answering `/health`,
//! answer the half-closed requests, keep its memory within what its limits allow (its peak resident
//! set, VmHWM), and stop within its shutdown grace with such clients still connected. Figures go to
//! standard error (`cargo test --release -p warpsearch --test hostile -- --nocapture`) for
//! bench/RESULTS.md. No timing is checked: the bounds on waits catch a hang.

mod clients;
mod common;

use std::io::Write;
use std::net::TcpStream;
use std::thread;
use std::time::{Duration, Instant};

use clients::{final_response, heavy_body, heavy_index, post_raw, read_to_close, wait_for_metric};
use common::Server;
use serde_json::Value;

/// A field of /proc/PID/status in MiB (VmRSS: resident now, VmHWM: its peak).
fn memory_mib(pid: u32, field: &str) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kb: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().strip_suffix("kB")?.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"));
    kb / 1024.0
}

/// A header sent a byte every 200 ms, never finished.
fn slow_header(addr: &str) -> thread::JoinHandle<()> {
    let addr = addr.to_owned();
    thread::spawn(move || {
        let Ok(mut s) = TcpStream::connect(&addr) else {
            return;
        };
        for b in b"POST /search HTTP/1.1\r\nHost: slow\r\nContent-Length: 10\r\nX-Slow: "
            .iter()
            .cycle()
        {
            if s.write_all(&[*b]).is_err() {
                return;
            }
            thread::sleep(Duration::from_millis(200));
        }
    })
}

/// A request whose body stops after a few bytes, held open until the server closes it.
fn stalled_body(addr: &str) -> thread::JoinHandle<()> {
    let addr = addr.to_owned();
    thread::spawn(move || {
        let Ok(mut s) = TcpStream::connect(&addr) else {
            return;
        };
        let _ =
            s.write_all(b"POST /search HTTP/1.1\r\nHost: x\r\nContent-Length: 500000\r\n\r\n{\"queries\": [");
        read_to_close(&mut s);
    })
}

/// `GET /health` on a new connection: whether it answered 200 ("ready"); a connection refused at the
/// server's limit is tried again (up to 100 times).
fn healthy(addr: &str) -> bool {
    for _ in 0..100 {
        let Ok(mut s) = TcpStream::connect(addr) else {
            thread::sleep(Duration::from_millis(20));
            continue;
        };
        let _ = s.write_all(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        let got = read_to_close(&mut s);
        match final_response(&got) {
            Some((200, body)) => return body.contains("ready"),
            _ => thread::sleep(Duration::from_millis(20)),
        }
    }
    false
}

#[test]
fn hostile_clients_get_bounded_memory_and_a_bounded_shutdown() {
    let dir = tempfile::tempdir().unwrap();
    let index = heavy_index(dir.path());
    let (max_in_flight, max_k) = (2048u64, 1000u64);
    let mut server = Server::start(
        &index,
        &[
            "--backend",
            "cpu",
            "--threads",
            "2",
            "--max-connections",
            "200",
            "--max-in-flight",
            "2048",
            "--shed-ms",
            "0",
            "--idle-timeout",
            "2s",
            "--read-timeout",
            "2s",
            "--write-timeout",
            "3s",
            "--shutdown-grace",
            "2s",
        ],
    );
    let pid = server.child.id();
    let addr = server.addr.clone();
    // Warm: the index read once, the allocator's pools made.
    let (status, _, _) = server.request("POST", "/search", &heavy_body(64, 1000));
    assert_eq!(status, 200);
    let rss_before = memory_mib(pid, "VmRSS");
    let attack_started = Instant::now();

    let mut held = Vec::new();
    held.extend((0..100).map(|_| slow_header(&addr)));
    held.extend((0..20).map(|_| stalled_body(&addr)));
    // Half-closed requests, answered all the same (before the silent responses below take every place
    // in flight).
    let mut half_closed = 0;
    for _ in 0..10 {
        let mut s = post_raw(&addr, &heavy_body(32, 100));
        s.shutdown(std::net::Shutdown::Write).unwrap();
        let got = read_to_close(&mut s);
        if let Some((200, body)) = final_response(&got) {
            let v: Value = serde_json::from_str(&body).unwrap();
            half_closed += usize::from(v["results"].as_array().unwrap().len() == 32);
        }
    }
    // Heavy requests abandoned once under way.
    for _ in 0..6 {
        let s = post_raw(&addr, &heavy_body(1024, 1000));
        thread::sleep(Duration::from_millis(50));
        drop(s);
    }
    // The abandoned queries give their places back first: were the silent requests below to arrive
    // while those were held, all of them would be refused and none left for the write timeout to cut.
    wait_for_metric(&server, "warpsearch_queries_held", |v| v == 0);
    // Responses of 1,024 queries at k 1,000 (about 50 MB each) never read: at most --max-in-flight's
    // worth are accepted, the rest refused.
    let silent: Vec<TcpStream> = (0..6).map(|_| post_raw(&addr, &heavy_body(1024, 1000))).collect();
    // A flood of connections beyond the limit on its own (240 of 200), held open together, each
    // asking for /health.
    // Every thread holds its connections open until all are made, so that 240 are open at once.
    let all_made = std::sync::Arc::new(std::sync::Barrier::new(4));
    let flood: Vec<_> = (0..4)
        .map(|_| {
            let (addr, all_made) = (addr.clone(), all_made.clone());
            thread::spawn(move || {
                let mut open: Vec<TcpStream> =
                    (0..60).filter_map(|_| TcpStream::connect(&addr).ok()).collect();
                all_made.wait();
                let mut refused = 60 - open.len();
                for s in &mut open {
                    let _ = s.write_all(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
                }
                for mut s in open {
                    let got = read_to_close(&mut s);
                    refused += usize::from(!got.starts_with("HTTP/1.1 200"));
                }
                refused
            })
        })
        .collect();
    assert!(healthy(&addr), "/health did not answer under the attack");
    let refused: usize = flood.into_iter().map(|t| t.join().unwrap()).sum();
    // Every timeout has passed: the slow and stalled clients are closed, the silent responses cut.
    wait_for_metric(&server, "warpsearch_queries_held", |v| v == 0);
    wait_for_metric(&server, "warpsearch_queries_in_flight", |v| v == 0);
    for t in held {
        t.join().unwrap();
    }
    drop(silent);
    assert!(healthy(&addr), "/health did not answer after the attack");
    let attack = attack_started.elapsed();
    let peak = memory_mib(pid, "VmHWM");
    let rss_after = memory_mib(pid, "VmRSS");
    let timed_out = server.metric("warpsearch_connections_timed_out_total");
    let cancelled = server.metric("warpsearch_queries_cancelled_total");
    let refused_by_server = server.metric("warpsearch_connections_refused_total");
    assert_eq!(half_closed, 10, "half-closed requests answered");
    assert!(timed_out >= 1, "no silent response was cut by the write timeout");
    assert!(cancelled > 0, "no abandoned query was dropped");
    assert!(
        refused_by_server > 0,
        "no connection was refused at --max-connections"
    );
    // What the limits allow beyond the warm server: the answers of --max-in-flight queries at
    // --max-k (8-byte hits, about 55 bytes of JSON each), 256 KiB buffered per connection, bodies
    // and headers of the open connections, and room for the allocator's pools.
    let answers_mib = (max_in_flight * max_k * 63) as f64 / (1 << 20) as f64;
    let bound = answers_mib + 200.0 * 0.25 + 200.0;
    assert!(
        peak - rss_before <= bound,
        "peak RSS {peak:.0} MiB from {rss_before:.0} MiB: more than the {bound:.0} MiB the limits allow"
    );

    // Shutdown with stalled clients connected: done within the grace.
    let stalled: Vec<_> = (0..20).map(|_| stalled_body(&addr)).collect();
    let silent = post_raw(&addr, &heavy_body(1024, 1000));
    wait_for_metric(&server, "warpsearch_connections_open", |v| v >= 21);
    let (status, shutdown, log) = server.terminate();
    assert!(status.success(), "{status}");
    drop(silent);
    for t in stalled {
        t.join().unwrap();
    }
    assert!(log.contains("stopped"), "{log}");
    eprintln!(
        "hostile: RSS before {rss_before:.0} MiB, peak {peak:.0} MiB (bound {:.0}), after {rss_after:.0} MiB; \
         attack {:.1} s: {timed_out} connections timed out, {cancelled} queries cancelled, {refused_by_server} \
         connections refused at the limit ({refused} seen by the flood), 10 of 10 half-closed answered; \
         shutdown {:.2} s after SIGTERM (grace 2 s)",
        rss_before + bound,
        attack.as_secs_f64(),
        shutdown.as_secs_f64()
    );
}
