//! `warpsearch load`'s options (clap derive). They live beside the load generator rather than in
//! `crate::args` because none of them is shared: a client of a server has no index, backend or GPU
//! options, and the engine's options mean nothing to it.

use std::path::PathBuf;

use clap::Args;
use warpsearch_query::Mode;

/// `warpsearch load`.
#[derive(Args)]
pub struct LoadArgs {
    /// The server, as `warpsearch serve` prints it: http://HOST:PORT.
    #[arg(long)]
    pub url: String,
    /// Queries, as `bench` reads them: `qid<TAB>text` lines, or one query per line; `-` reads stdin.
    #[arg(long)]
    pub queries: PathBuf,
    /// and, or or and-or (sent with every request).
    #[arg(long, default_value = "or", value_parser = crate::args::parse_mode)]
    pub mode: Mode,
    /// Results per query (sent with every request).
    #[arg(long, default_value_t = 10)]
    pub k: usize,
    /// Queries per `POST /search` request (at most the server's --max-queries).
    #[arg(long, default_value_t = 1)]
    pub batch: usize,
    /// Closed loop: concurrent clients, each sending its next request when the last one is answered.
    #[arg(long, default_value_t = 16)]
    pub clients: usize,
    /// Closed loop: queries to send (default: each query of the file once; 0: no closed loop).
    #[arg(long, conflicts_with = "closed_duration")]
    pub closed_queries: Option<usize>,
    /// Closed loop: send for this many seconds instead (the query file repeats).
    #[arg(long)]
    pub closed_duration: Option<f64>,
    /// Closed-loop passes over all queries before measuring.
    #[arg(long, default_value_t = 1)]
    pub warmup: usize,
    /// Open-loop arrival rates in queries/s, comma-separated; they follow one another without a pause
    /// (the load rises or drops at once, and each row counts the queries that arrived at its rate).
    #[arg(long, value_delimiter = ',')]
    pub rates: Vec<f64>,
    /// Open loop: most requests in flight (one HTTP/1.1 connection each); a request due while all are
    /// busy waits for one, and the wait counts in its latency. To make a server shed with 429, batch x
    /// connections must exceed its --max-in-flight.
    #[arg(long, default_value_t = 512)]
    pub connections: usize,
    /// poisson (exponential gaps) or fixed (even gaps) arrivals of requests.
    #[arg(long, default_value = "poisson", value_parser = ["poisson", "fixed"])]
    pub arrivals: String,
    #[command(flatten)]
    pub open: crate::args::OpenLoopArgs,
    /// A request still unanswered after this many seconds counts as an error.
    #[arg(long, default_value_t = 60.0)]
    pub timeout: f64,
    /// The server's process id: its resident memory (VmRSS) is read each second and its CPU time per run.
    #[arg(long)]
    pub server_pid: Option<u32>,
    /// Write the report as JSON here.
    #[arg(long)]
    pub json: Option<PathBuf>,
}
