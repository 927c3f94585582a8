//! `warpsearch load`: a load generator for a running `warpsearch serve`, with the query files `bench`
//! reads. It measures the server as its clients see it: closed-loop throughput with C clients sending B
//! queries per `POST /search`, then open-loop latency at each arrival rate (Poisson or even arrivals,
//! the rates following one another without a pause), counting 429s and every other failure, and, given
//! the server's pid, its resident memory each second and its CPU use. Prints `bench`'s table and
//! optionally writes `bench`'s JSON (so `bench-plot` draws a server beside in-process engines).
//!
//! It is a subcommand of its own rather than `bench --url` because it shares none of `bench`'s engine
//! options (index, backend, GPU): those are the server's, given to `warpsearch serve`.

mod client;
mod drive;
mod proc;
mod report;

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::{json, Value};

pub use crate::args::LoadArgs;
use client::Target;
use drive::{Limit, Phase};
use proc::{CpuMark, RssSampler};
use report::Summary;

use crate::shared::output::Output;
use crate::shared::queries::read_query_file;

pub fn run(a: LoadArgs) -> Result<()> {
    check(&a)?;
    let origin = Instant::now();
    let mut warnings = Vec::new();
    let lines = read_query_file(&a.queries, &mut warnings)?;
    for w in warnings.iter().take(10) {
        eprintln!("warning: {w}");
    }
    if lines.is_empty() {
        bail!("{} holds no queries", a.queries.display());
    }
    let n = lines.len();
    let texts = lines.into_iter().map(|l| l.text).collect();
    let timeout = Duration::from_secs_f64(a.timeout);
    let target = Arc::new(Target::new(&a.url, texts, a.k, a.mode.name(), timeout)?);
    // As many runtime threads as `--threads` (default: all cores) to send requests and read replies.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(rayon::current_num_threads())
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let health = runtime.block_on(target.health())?;
    let backend = format!("serve: {}", health["backend"].as_str().unwrap_or("?"));
    if let Some(pid) = a.server_pid {
        if proc::rss_kib(pid).is_none() {
            bail!("--server-pid {pid}: no such process whose memory this user may read (/proc/{pid}/status)");
        }
    }
    let sampler = a.server_pid.map(|pid| RssSampler::start(pid, origin));
    let deadline = Duration::from_secs_f64(a.open.deadline_ms / 1e3);
    println!(
        "load: {n} queries, mode {}, k {}, {backend} at {}, {} per request; closed loop: {} clients; \
         open loop: {} arrivals",
        a.mode.name(),
        a.k,
        a.url,
        plural(a.batch, "query", "queries"),
        a.clients,
        a.arrivals
    );

    for pass in 0..a.warmup {
        let bar = progress(n, &format!("warm-up {}", pass + 1));
        let outcomes = drive::closed_loop(
            &runtime,
            &target,
            a.clients,
            a.batch,
            Limit::Queries(n as u64),
            origin,
            &bar,
        );
        bar.finish_and_clear();
        let s = Summary::of(&outcomes, deadline);
        if s.failed() > 0 {
            eprintln!(
                "warning: warm-up: {} queries failed: {}",
                s.failed(),
                s.errors_line()
            );
        }
    }

    println!("{}", report::header());
    let limit = match (a.closed_duration, a.closed_queries) {
        (Some(t), _) => Some(Limit::Time(Duration::from_secs_f64(t))),
        (None, Some(0)) => None,
        (None, q) => Some(Limit::Queries(q.unwrap_or(n) as u64)),
    };
    let closed = limit.map(|limit| {
        let total = match limit {
            Limit::Queries(q) => q as usize,
            Limit::Time(_) => 0,
        };
        let bar = progress(total, "closed loop");
        let before = CpuMark::now(a.server_pid);
        let outcomes = drive::closed_loop(&runtime, &target, a.clients, a.batch, limit, origin, &bar);
        let cores = before.cores_until(&CpuMark::now(a.server_pid));
        bar.finish_and_clear();
        let s = Summary::of(&outcomes, deadline);
        println!("{}", report::row("closed", &s));
        println!("{}", details(&s, cores));
        let mut v = s.json(a.open.deadline_ms);
        v["clients"] = json!(a.clients);
        v["cpu_cores"] = cores_json(cores);
        v
    });

    let phases: Vec<Phase> = a
        .rates
        .iter()
        .map(|&rate| Phase {
            rate,
            // At least 1,000 arrivals (requests of --batch), as `bench`; the query log repeats if
            // it is shorter.
            queries: ((rate * a.open.duration) as usize).max(1000 * a.batch),
        })
        .collect();
    let mut open = Vec::new();
    let mut timeline = Vec::new();
    if !phases.is_empty() {
        let total = phases.iter().map(|p| p.queries).sum();
        let bar = progress(total, "open loop");
        let how = drive::Open {
            batch: a.batch,
            connections: a.connections,
            poisson: a.arrivals == "poisson",
            seed: a.open.seed,
        };
        let (outcomes, marks) =
            drive::open_loop(&runtime, &target, &phases, &how, origin, a.server_pid, &bar);
        bar.finish_and_clear();
        for (p, phase) in phases.iter().enumerate() {
            let run: Vec<_> = outcomes.iter().filter(|o| o.0 == p).map(|o| &o.1).collect();
            let s = Summary::of(run.iter().copied(), deadline);
            let settled = report::settled_after(&run, deadline);
            let cores = marks[p].cores_until(&marks[p + 1]);
            let label = format!("{:.0}/s", phase.rate);
            println!("{}", report::row(&label, &s));
            println!("{}", details(&s, cores));
            match settled {
                Some(0) => {}
                Some(t) => {
                    println!("  settled {t} s into this rate: no 429 and p99 within the deadline since")
                }
                None => {
                    println!("  not settled at this rate: its last second had 429s, failures or a late p99")
                }
            }
            if s.waited > 0 {
                println!(
                    "  note: {} requests waited for one of the {} --connections (p99 {:.1} ms late), which \
                     the latencies include",
                    s.waited, a.connections, s.lag_p99
                );
            } else if s.lag_p99 > 1.0 {
                println!(
                    "  note: requests left up to {:.1} ms late (p99; the generator is short of CPU), which the \
                     latencies include",
                    s.lag_p99
                );
            }
            let mut v = s.json(a.open.deadline_ms);
            v["rate"] = json!(phase.rate);
            v["connections"] = json!(a.connections);
            v["achieved_qps"] = json!(s.qps());
            v["settled_after_s"] = json!(settled);
            v["cpu_cores"] = cores_json(cores);
            open.push(v);
        }
        timeline = report::timeline(&outcomes.iter().map(|o| &o.1).collect::<Vec<_>>());
    }

    let rss = match (sampler, a.server_pid) {
        (Some(sampler), Some(pid)) => {
            let samples = sampler.finish(pid, origin);
            let mib: Vec<f64> = samples.iter().map(|s| s.1 as f64 / 1024.0).collect();
            let (lo, hi) = mib
                .iter()
                .fold((f64::MAX, 0.0f64), |(lo, hi), &m| (lo.min(m), hi.max(m)));
            let (first, last) = (mib[0], mib[mib.len() - 1]);
            println!(
                "server RSS (pid {pid}): {first:.1} MiB first, {lo:.1} min, {hi:.1} max, {last:.1} last, over \
                 {:.0} s ({} samples)",
                samples[samples.len() - 1].0 - samples[0].0,
                samples.len()
            );
            let series: Vec<Value> = samples.iter().map(|&(t, kib)| json!([t, kib])).collect();
            json!({"pid": pid, "first_mib": first, "min_mib": lo, "max_mib": hi, "last_mib": last,
                   "samples_s_kib": series})
        }
        _ => Value::Null,
    };

    if let Some(path) = &a.json {
        let report = json!({
            "url": a.url,
            "queries": a.queries.display().to_string(),
            "num_queries": n,
            "mode": a.mode.name(),
            "k": a.k,
            "backend": backend,
            "batch": a.batch,
            "arrivals": a.arrivals,
            "closed_loop": closed,
            "open_loop": open,
            "timeline": timeline,
            "server_rss": rss,
        });
        Output::json_report(path, &report)?;
    }
    Ok(())
}

fn check(a: &LoadArgs) -> Result<()> {
    if a.rates.iter().any(|&r| !(r.is_finite() && r > 0.0)) {
        bail!("--rates must be positive numbers of queries per second, e.g. --rates 1000,10000");
    }
    let positive = |x: f64| x.is_finite() && x > 0.0;
    if !(positive(a.open.duration) && positive(a.open.deadline_ms) && positive(a.timeout)) {
        bail!("--duration, --deadline-ms and --timeout must be positive");
    }
    if a.closed_duration.is_some_and(|t| !positive(t)) {
        bail!("--closed-duration must be a positive number of seconds");
    }
    if a.batch == 0 || a.clients == 0 || a.connections == 0 || a.k == 0 {
        bail!("--batch, --clients, --connections and --k must be at least 1");
    }
    Ok(())
}

/// The line under a row: where the time went (the server's own time per request, the rest being HTTP
/// and waiting for a worker), CPU use, and any failure.
fn details(s: &Summary, (server, generator): (Option<f64>, Option<f64>)) -> String {
    let mut line = if s.answered > 0 {
        format!(
            "  {} requests; server took p50 {:.3} ms, p99 {:.3} ms",
            s.requests, s.server.p50, s.server.p99
        )
    } else {
        format!("  {} requests, none answered", s.requests)
    };
    if let Some(c) = server {
        line += &format!("; CPU cores busy: server {c:.2}");
    }
    if let Some(c) = generator {
        line += &format!(
            "{} generator {c:.2}",
            if server.is_some() {
                ","
            } else {
                "; CPU cores busy:"
            }
        );
    }
    if s.failed() > 0 {
        line += &format!("\n  errors: {}", s.errors_line());
    }
    line
}

fn cores_json((server, generator): (Option<f64>, Option<f64>)) -> Value {
    json!({"server": server, "generator": generator})
}

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// A progress bar on standard error, drawn only when it is a terminal (as `bench`'s).
fn progress(total: usize, message: &str) -> ProgressBar {
    let template = if total > 0 {
        "{msg} {bar:40} {pos}/{len} queries, {elapsed}"
    } else {
        "{msg} {pos} queries, {elapsed}"
    };
    let bar = ProgressBar::new(total as u64)
        .with_style(ProgressStyle::with_template(template).expect("a valid template"));
    bar.set_message(message.to_string());
    bar
}
