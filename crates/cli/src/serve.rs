//! `warpsearch serve`: the options, the engine and the runtime around `warpsearch_server`'s application.

use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use tracing::info;
use warpsearch_query::Mode;
use warpsearch_server::ServerConfig;

use crate::args::ServeArgs;

pub fn run(a: ServeArgs) -> Result<()> {
    if !(a.deadline_ms.is_finite() && a.deadline_ms > 0.0) {
        bail!("--deadline-ms must be a positive number of milliseconds");
    }
    if a.shed_ms.is_some_and(|ms| !(ms.is_finite() && ms >= 0.0)) {
        bail!("--shed-ms must be 0 (never shed by time) or a positive number of milliseconds");
    }
    let server = ServerConfig {
        max_in_flight: a.max_in_flight,
        max_queries: a.max_queries,
        max_k: a.max_k,
        max_body: a.max_body,
        deadline: Duration::from_secs_f64(a.deadline_ms / 1e3),
        // The deadline by default: half of it keeps p99 within the deadline at 2x overload, but
        // refuses two clients' 128-query batches at capacity (docs/decisions: shedding by time).
        shed: Duration::from_secs_f64(a.shed_ms.unwrap_or(a.deadline_ms) / 1e3),
        max_connections: a.max_connections,
        idle_timeout: a.idle_timeout,
        read_timeout: a.read_timeout,
        write_timeout: a.write_timeout,
        shutdown_grace: a.shutdown_grace,
    };
    server.check().map_err(anyhow::Error::msg)?;
    let index = Arc::new(crate::open(&a.index)?);
    let mut config = a.engine;
    // The handlers need cores for HTTP, JSON and query analysis: on a machine of 8 cores or more the
    // hybrid's CPU workers take a quarter of them with the whole index on the GPU, and half with a list
    // cache (whose queries the CPU completes), unless told otherwise; without a GPU, every core
    // (bench/RESULTS.md, the server).
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    if config.hybrid.workers.is_none() && cores >= 8 {
        let share = if config.cache.policy.is_some() { 2 } else { 4 };
        config.hybrid.gpu_workers = Some(cores / share);
    }
    // and-or: a mode every algorithm takes; each request's mode is checked when it comes. The GPU
    // backend batches a stream of single queries itself: whatever has arrived goes to the GPU as soon
    // as one of its pipeline slots is free.
    let engine = crate::shared::engine::open_engine(&config, index.clone(), Mode::AndOr, a.max_k)?;
    let backend = engine.describe();
    let app = warpsearch_server::router(engine, config.scoring.ranking.into(), &server);
    let mut runtime = tokio::runtime::Builder::new_multi_thread();
    if let Some(n) = a.http_threads {
        runtime.worker_threads(n.into());
    }
    let runtime = runtime
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(&a.addr)
            .await
            .with_context(|| format!("listening on {}", a.addr))?;
        let addr = listener.local_addr()?;
        info!(%addr, backend, documents = index.num_docs(), "warpsearch serve: ready");
        // The one line a script (or a test) reads to find a port chosen by the system.
        println!("listening on http://{addr}");
        std::io::stdout().flush()?;
        warpsearch_server::serve(listener, app, &server, warpsearch_server::shutdown_signal())
            .await
            .context("serving")
    })
}
