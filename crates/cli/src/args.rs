//! Command-line options, defined once.

use std::path::PathBuf;

use anyhow::{bail, Result};
use clap::{Args, Parser, Subcommand};
use warpsearch_engine::{BackendChoice, CacheOptions};
use warpsearch_index::build::MIN_MEMORY_MB;
use warpsearch_index::{AnalyzerConfig, Bm25Params, Codec, DocOrder, WriterOptions};
use warpsearch_query::{Algorithm, Mode};

/// warpsearch: exact top-k BM25 search over a compressed inverted index, on GPUs and CPUs.
#[derive(Parser)]
#[command(version, about)]
pub struct Cli {
    /// Worker threads (default: all cores).
    #[arg(long, global = true)]
    pub threads: Option<usize>,
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Subcommand)]
pub enum Command {
    /// Build an index from a JsonCollection (JSONL, JSONL.zst, or a directory of them) or a CIFF file.
    Index(IndexArgs),
    /// Print an index's statistics; --codecs compares codec sizes and decode speeds.
    Inspect(InspectArgs),
    /// Write an index as a CIFF file.
    Export(ExportArgs),
    /// Run a file of queries against an index; write a TREC run or JSON lines.
    Search(SearchArgs),
    /// Score a TREC run against TREC qrels: nDCG@10, MAP, P@10, recall@1000 (trec_eval's definitions).
    Evaluate(EvaluateArgs),
    /// Print queries as the index's analyzer sees them: `qid<TAB>term term …` (for other engines, or to
    /// debug a query).
    Analyze(AnalyzeArgs),
    /// Generate a collection, index it, run a batch of queries and report speed (no download, no GPU).
    Demo(DemoArgs),
    /// Answer queries over HTTP (JSON): POST/GET /search, /health, /metrics (docs/openapi.yaml).
    Serve(ServeArgs),
    /// Load-test a running `warpsearch serve`: closed and open loop over HTTP, 429s, errors, its memory.
    Load(crate::load::LoadArgs),
    /// Measure an engine: closed-loop throughput and open-loop latency under Poisson arrivals (JSON report).
    Bench(BenchArgs),
    /// Draw the closed-loop throughput of several `bench --json` reports side by side (SVG).
    BenchPlot(BenchPlotArgs),
    /// Generate a synthetic collection of any size (e.g. GOV2's 25M documents) as posting lists, calibrated
    /// on a real sample index: its co-occurrence, document lengths and Heaps' law (docs/synth.md).
    Synth(SynthArgs),
    /// Compare a synthetic index with a real one: intersection sizes of query term pairs, vocabulary,
    /// list lengths and bits per docID.
    SynthCheck(SynthCheckArgs),
    /// Check the GPU: open it, compile the kernels, upload an index and measure block decode throughput
    /// against the device's copy bandwidth.
    GpuCheck(GpuCheckArgs),
}

/// `warpsearch index`.
#[derive(Args)]
pub struct IndexArgs {
    /// JsonCollection input: a .jsonl / .jsonl.zst file or a directory of them.
    #[arg(long, conflicts_with = "ciff")]
    pub input: Option<PathBuf>,
    /// A CIFF file to import (.ciff, .ciff.gz or .ciff.zst).
    #[arg(long)]
    pub ciff: Option<PathBuf>,
    /// The index directory to create.
    #[arg(long, short)]
    pub output: PathBuf,
    /// Replace the output directory if it holds an index.
    #[arg(long)]
    pub force: bool,
    /// Posting-list codec: simdbp (SIMD-BP128, the fastest to decode on the CPU and the GPU), pfor, ef or
    /// rice.
    #[arg(long, default_value = "simdbp")]
    pub codec: Codec,
    /// Analyzer: english (Anserini's default) or whitespace (pre-tokenized text).
    #[arg(long)]
    pub analyzer: Option<String>,
    /// Stemmer for the english analyzer: porter (Lucene's), porter2 or none.
    #[arg(long, default_value = "porter")]
    pub stemmer: String,
    /// Keep stopwords (the english analyzer removes Lucene's 33 English stopwords).
    #[arg(long)]
    pub keep_stopwords: bool,
    /// Index the "title" field before "contents".
    #[arg(long)]
    pub title: bool,
    /// BM25 k1 for the stored block-max bounds.
    #[arg(long, default_value_t = 0.9)]
    pub k1: f32,
    /// BM25 b for the stored block-max bounds.
    #[arg(long, default_value_t = 0.4)]
    pub b: f32,
    #[command(flatten)]
    pub order: OrderArgs,
    /// Memory for in-memory postings before spilling a sorted run to disk, in MiB (at least 16).
    #[arg(long, default_value_t = 2048, value_parser = parse_memory_mb)]
    pub memory_mb: usize,
    /// Skip (and count) bad input lines instead of stopping at the first.
    #[arg(long)]
    pub skip_bad: bool,
    /// The longest input line (one JSON document) read, in MiB; a longer line stops the build with
    /// its file and line named.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u64).range(1..=1 << 20))]
    pub max_line_mb: u64,
}

impl IndexArgs {
    /// The analyzer these options describe.
    pub fn analyzer(&self) -> Result<AnalyzerConfig> {
        AnalyzerConfig::with_options(
            self.analyzer.as_deref().unwrap_or("english"),
            &self.stemmer,
            self.keep_stopwords,
        )
        .map_err(anyhow::Error::msg)
    }

    /// Writer options from these flags.
    pub fn writer_options(&self) -> Result<WriterOptions> {
        let bm25 = Bm25Params::checked(self.k1, self.b).map_err(anyhow::Error::msg)?;
        self.order.reorder_alpha()?;
        let o = &self.order;
        if self.ciff.is_some() && (o.static_scores.is_some() || o.doc_order != "input" || self.title) {
            bail!(
                "--static-scores, --doc-order and --title apply to --input only: a CIFF file's postings are \
                 imported as they are; build from the JSONL collection for static scores or a global-score order"
            );
        }
        Ok(WriterOptions {
            codec: self.codec,
            analyzer: self.analyzer()?,
            bm25,
            doc_order: DocOrder::Input,
            force: self.force,
        })
    }
}

/// Static scores and the docID order, for `index` and `synth`.
#[derive(Args)]
pub struct OrderArgs {
    /// Static document scores: lines of `docid<TAB>score` (for `synth`, of the sample's documents: a
    /// synthetic document takes its first template's).
    #[arg(long)]
    pub static_scores: Option<PathBuf>,
    /// Renumber documents by descending global score (needed for early termination).
    #[arg(long, value_parser = ["input", "global-score"], default_value = "input")]
    pub doc_order: String,
    /// Weight α of the static score in the global score.
    #[arg(long, default_value_t = 0.5)]
    pub alpha: f32,
}

impl OrderArgs {
    /// The α of a global-score order, if chosen; an error if α is outside [0, 1].
    pub fn reorder_alpha(&self) -> Result<Option<f32>> {
        if !(0.0..=1.0).contains(&self.alpha) {
            bail!("--alpha must lie in [0, 1] (got {})", self.alpha);
        }
        Ok((self.doc_order == "global-score").then_some(self.alpha))
    }

    /// Says on standard error when the options make an order nothing can use: early termination
    /// needs `bm25-static`, which needs static scores.
    pub fn note(&self) {
        if self.doc_order == "global-score" && self.static_scores.is_none() {
            eprintln!(
                "note: without --static-scores the global-score order follows term frequencies alone, \
                 and early termination (bm25-static) needs static scores"
            );
        }
    }
}

/// `warpsearch synth`.
#[derive(Args)]
pub struct SynthArgs {
    /// The real sample index to calibrate on (e.g. the Wikipedia passages).
    #[arg(long)]
    pub like: PathBuf,
    /// The index directory to create.
    #[arg(long, short)]
    pub output: PathBuf,
    /// Documents to generate (GOV2: 25,205,179).
    #[arg(long, default_value_t = 25_000_000)]
    pub docs: u32,
    /// Mean distinct terms per document (GOV2: 5.7 billion postings / 25.2M documents = 226).
    #[arg(long, default_value_t = 226.0)]
    pub terms_per_doc: f64,
    /// Fraction of the sample's documents used as templates (below 1 for a hold-out validation).
    #[arg(long, default_value_t = 1.0)]
    pub templates: f64,
    /// Spread (σ of the log) of the number of templates per document.
    #[arg(long, default_value_t = 0.8)]
    pub length_sigma: f64,
    /// Seed of every random choice: the same seed gives the same index.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Posting-list codec: simdbp (SIMD-BP128, the fastest to decode on the CPU and the GPU), pfor, ef or
    /// rice.
    #[arg(long, default_value = "simdbp")]
    pub codec: Codec,
    /// BM25 k1 for the stored block-max bounds.
    #[arg(long, default_value_t = 0.9)]
    pub k1: f32,
    /// BM25 b for the stored block-max bounds.
    #[arg(long, default_value_t = 0.4)]
    pub b: f32,
    /// Replace the output directory if it holds an index.
    #[arg(long)]
    pub force: bool,
    /// Write the generation report (fitted parameters, sizes, time) as JSON here.
    #[arg(long)]
    pub report: Option<PathBuf>,
    #[command(flatten)]
    pub order: OrderArgs,
}

/// `warpsearch synth-check`.
#[derive(Args)]
pub struct SynthCheckArgs {
    /// The real index.
    #[arg(long)]
    pub real: PathBuf,
    /// The synthetic index (generated at the real one's scale for the intersection check).
    #[arg(long)]
    pub synth: PathBuf,
    /// Query file whose term pairs are intersected.
    #[arg(long)]
    pub queries: PathBuf,
    /// Most distinct term pairs to check.
    #[arg(long, default_value_t = 2000)]
    pub pairs: usize,
    /// Write the comparison as JSON here.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

/// `warpsearch inspect`.
#[derive(Args)]
pub struct InspectArgs {
    /// The index directory.
    pub index: PathBuf,
    /// Re-encode every list with each codec: bits per docID and decode speed.
    #[arg(long)]
    pub codecs: bool,
    /// How many of the longest lists to show.
    #[arg(long, default_value_t = 10)]
    pub top: usize,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// `warpsearch export`.
#[derive(Args)]
pub struct ExportArgs {
    /// The index directory.
    pub index: PathBuf,
    /// The CIFF file to write (.ciff, .ciff.gz or .ciff.zst).
    #[arg(long, required_unless_present = "pisa", conflicts_with = "pisa")]
    pub ciff: Option<PathBuf>,
    /// Instead, a directory to write PISA's binary collection into (`inv.docs`, `inv.freqs`,
    /// `inv.sizes`, `fwd.terms`, `fwd.documents`), from which PISA builds its own index of exactly
    /// these postings (`bench/peers/pisa_bench.py`).
    #[arg(long)]
    pub pisa: Option<PathBuf>,
    /// With --pisa: only the lists of the terms these queries use (analyzed by the index's analyzer);
    /// document count and lengths stay the whole collection's, so BM25 is unchanged.
    #[arg(long, requires = "pisa")]
    pub terms_from: Option<PathBuf>,
    /// Replace an existing file (or an earlier --pisa export).
    #[arg(long)]
    pub force: bool,
}

/// `warpsearch demo`.
#[derive(Args)]
pub struct DemoArgs {
    /// Documents to generate.
    #[arg(long, default_value_t = 200_000)]
    pub docs: u32,
    /// Queries to run.
    #[arg(long, default_value_t = 2_000)]
    pub queries: u32,
    /// Results per query.
    #[arg(long, default_value_t = 10)]
    pub k: usize,
    /// Seed of the generator.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Codec of the demo index.
    #[arg(long, default_value = "simdbp")]
    pub codec: Codec,
}

/// The index and how to search it: ranking, BM25 parameters, algorithm and backend (shared by `search`,
/// `bench` and `serve`).
#[derive(Args)]
pub struct ScorerArgs {
    /// The index directory.
    #[arg(long)]
    pub index: PathBuf,
    /// auto, exhaustive, daat (AND), maxscore or bmw (OR), early (bm25-static, global-score order).
    #[arg(long, default_value = "auto", value_parser = Algorithm::by_name)]
    pub algorithm: Algorithm,
    /// bm25, or bm25-static (docs/references.md#pruned-list-caching eq. 3; needs an index built with --static-scores).
    #[arg(long, default_value = "bm25", value_parser = ["bm25", "bm25-static"])]
    pub ranking: String,
    /// α of bm25-static (default: the index's global-score α, else 0.5).
    #[arg(long)]
    pub alpha: Option<f32>,
    /// BM25 k1 (default: the index's; others make block bounds be recomputed per query).
    #[arg(long)]
    pub k1: Option<f32>,
    /// BM25 b (default: the index's).
    #[arg(long)]
    pub b: Option<f32>,
    /// cpu, gpu, hybrid (CPU and GPU together; the CPU alone without a GPU), or auto (hybrid when a GPU
    /// is usable for these options, else the CPU; says which and why).
    #[arg(long, default_value = "auto", value_parser = BackendChoice::by_name)]
    pub backend: BackendChoice,
    /// The most distinct terms a query may have; a longer query is refused, named (a bound on the
    /// work one query asks for).
    #[arg(long, default_value_t = warpsearch_query::DEFAULT_MAX_QUERY_TERMS as u32,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub max_query_terms: u32,
    #[command(flatten)]
    pub gpu: GpuArgs,
}

/// What to search and how: the index and engine, the queries, the mode and k (shared by `search` and
/// `bench`).
#[derive(Args)]
pub struct EngineArgs {
    #[command(flatten)]
    pub scorer: ScorerArgs,
    /// Queries: `qid<TAB>text` lines, or one query per line (qid = line number); `-` reads stdin.
    #[arg(long, required_unless_present = "query")]
    pub queries: Option<PathBuf>,
    /// One query's text instead of a query file (its qid is 1).
    #[arg(long, conflicts_with = "queries")]
    pub query: Option<String>,
    /// and: every term; or: any term; and-or: AND, then OR when AND finds fewer than k.
    #[arg(long, default_value = "or", value_parser = parse_mode)]
    pub mode: Mode,
    /// Results per query.
    #[arg(long, default_value_t = 10)]
    pub k: usize,
}

/// `warpsearch search`.
#[derive(Args)]
pub struct SearchArgs {
    #[command(flatten)]
    pub engine: EngineArgs,
    /// trec (`qid Q0 docid rank score tag`) or json (one object per query per line).
    #[arg(long, default_value = "trec", value_parser = ["trec", "json"])]
    pub format: String,
    /// Write results here instead of standard output.
    #[arg(long, short)]
    pub output: Option<PathBuf>,
    /// Replace an existing output file.
    #[arg(long)]
    pub force: bool,
    /// The run tag in TREC output (no white space or control characters).
    #[arg(long, default_value = "warpsearch", value_parser = parse_tag)]
    pub tag: String,
    /// Print throughput and latency percentiles to standard error (the queries are then read whole
    /// first; without it and --warmup they stream: each chunk is answered and written as it arrives).
    #[arg(long)]
    pub stats: bool,
    /// Run the whole batch this many times before the timed run (warms caches for --stats; the queries
    /// are read whole first).
    #[arg(long, default_value_t = 0)]
    pub warmup: usize,
}

/// `warpsearch serve`.
#[derive(Args)]
pub struct ServeArgs {
    #[command(flatten)]
    pub scorer: ScorerArgs,
    /// Address to listen on (port 0: any free port; the bound address is printed on standard output).
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub addr: String,
    /// Queries accepted and not yet answered beyond which a request is refused with 429.
    #[arg(long, default_value_t = 4096)]
    pub max_in_flight: usize,
    /// Most queries in one POST /search.
    #[arg(long, default_value_t = 1024)]
    pub max_queries: usize,
    /// Largest k a request may ask for (at most 100,000; the GPU serves up to 1,000).
    #[arg(long, default_value_t = 1000)]
    pub max_k: usize,
    /// Largest request body, e.g. 1M.
    #[arg(long, default_value = "1M", value_parser = parse_bytes)]
    pub max_body: usize,
    /// Hybrid: each query's deadline from its arrival, in ms (late queries are counted in /metrics).
    #[arg(long, default_value_t = 100.0)]
    pub deadline_ms: f64,
    /// Refuse a request with 429 when the queries in flight, at the rate the engine answers them while
    /// busy, would take longer than this many ms to answer (its own would then be late); 0: never.
    /// Default: --deadline-ms (half of it keeps the p99 of accepted queries within the deadline under
    /// overload, but also refuses large batches at capacity).
    #[arg(long)]
    pub shed_ms: Option<f64>,
    /// Most client connections open at once; one more is answered 503 and closed (the system's limit
    /// on open files must allow them: `ulimit -n`).
    #[arg(long, default_value_t = 1024)]
    pub max_connections: usize,
    /// A connection waiting this long for a request's header in full (idle between requests, or
    /// sending it slowly) is closed: 30s, 500ms, 2m.
    #[arg(long, default_value = "30s", value_parser = crate::serve::parse_duration)]
    pub idle_timeout: std::time::Duration,
    /// A request body not in full this long after its header is refused (408) and its connection
    /// closed.
    #[arg(long, default_value = "30s", value_parser = crate::serve::parse_duration)]
    pub read_timeout: std::time::Duration,
    /// A response not written this long after its first bytes (a client that reads slowly or not at
    /// all) closes its connection, and its queries stop counting in flight.
    #[arg(long, default_value = "30s", value_parser = crate::serve::parse_duration)]
    pub write_timeout: std::time::Duration,
    /// On SIGTERM or Ctrl-C, connections still open this long after (their requests unanswered) are
    /// closed and the server stops.
    #[arg(long, default_value = "10s", value_parser = crate::serve::parse_duration)]
    pub shutdown_grace: std::time::Duration,
}

/// The open loop's arrivals, shared by `bench` and `load`.
#[derive(Args)]
pub struct OpenLoopArgs {
    /// Seconds of arrivals per rate (at least 1,000 queries; the query log repeats if it is shorter).
    #[arg(long, default_value_t = 5.0)]
    pub duration: f64,
    /// A query answered later than this after its arrival missed its deadline (ms).
    #[arg(long, default_value_t = 100.0)]
    pub deadline_ms: f64,
    /// Seed of the arrival times.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

/// `warpsearch bench`.
#[derive(Args)]
pub struct BenchArgs {
    #[command(flatten)]
    pub engine: EngineArgs,
    /// Passes over all queries before measuring.
    #[arg(long, default_value_t = 1)]
    pub warmup: usize,
    /// The closed loop from each query's text: analysed and its hits' document ids looked up inside
    /// the timed loop, the work of a caller with text (the server, Python's `search_batch`). Without
    /// it the queries are analysed before the clock starts and no id is looked up: the engine alone.
    #[arg(long)]
    pub text: bool,
    /// Open-loop arrival rates in queries/s (Poisson arrivals), comma-separated; none: closed loop only.
    #[arg(long, value_delimiter = ',')]
    pub rates: Vec<f64>,
    #[command(flatten)]
    pub open: OpenLoopArgs,
    /// Write the report as JSON here.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Draw plots as SVG: `<prefix>-latency-cdf.svg`, and `<prefix>-latency-vs-rate.svg` with --rates.
    #[arg(long)]
    pub svg: Option<PathBuf>,
}

/// `warpsearch bench-plot`.
#[derive(Args)]
pub struct BenchPlotArgs {
    /// `bench --json` reports.
    #[arg(required = true)]
    pub reports: Vec<PathBuf>,
    /// The SVG file to write.
    #[arg(long)]
    pub svg: PathBuf,
}

/// `warpsearch gpu-check`.
#[derive(Args)]
pub struct GpuCheckArgs {
    /// An index to upload and decode (optional: without it only the device and the compiler are checked).
    #[arg(long)]
    pub index: Option<PathBuf>,
    /// Timed repetitions (the best is reported).
    #[arg(long, default_value_t = 10)]
    pub reps: usize,
}

/// Options of the GPU engine.
#[derive(Args, Clone, Debug)]
pub struct GpuArgs {
    /// GPU memory the index may take, e.g. 40G or 512M (default: 90% of the free memory).
    #[arg(long, value_parser = parse_bytes)]
    pub gpu_memory: Option<usize>,
    /// Queries per GPU kernel launch.
    #[arg(long, default_value_t = 8192)]
    pub gpu_batch: usize,
    /// OR accumulator window of the GPU kernel, in documents (power of two, 256 to 32768; 0: the largest
    /// whose shared memory costs no resident thread blocks, 16384 on an H100 for simdbp indexes).
    #[arg(long, default_value_t = 0)]
    pub gpu_window: u32,
    /// Cut an OR query whose cost (postings of all its lists) exceeds this into docID ranges, one GPU
    /// thread block each (0: never); also the cut of AND queries in batches that --gpu-split-waves
    /// leaves as they are.
    #[arg(long, default_value_t = 200_000)]
    pub gpu_split_or: u64,
    /// AND and and-or queries (cost: postings of the shortest list) are cut so that a batch's largest
    /// part takes at most 1/W of each GPU thread block's average share of the batch (0: cut at
    /// --gpu-split-and instead).
    #[arg(long, default_value_t = 32)]
    pub gpu_split_waves: u32,
    /// The least cost of a part of an AND query; with --gpu-split-waves 0, the cost above which it is
    /// cut (0: never).
    #[arg(long, default_value_t = 2_000)]
    pub gpu_split_and: u64,
    /// OR queries of at most this many postings are scored by sorting their postings rather than with
    /// dense accumulators (0: never; at most 4096).
    #[arg(long, default_value_t = 4096)]
    pub gpu_small_or: u32,
    /// An AND step merges (merge-find of blocks, merge-path intersection) when the next list holds at most
    /// this many postings per candidate in the candidates' range, else it binary-searches (0: never merge).
    #[arg(long, default_value_t = 2)]
    pub gpu_merge_ratio: u32,
    /// Time the GPU kernel's phases (with --stats; slightly slower).
    #[arg(long)]
    pub gpu_profile: bool,
    /// Hybrid: CPU worker threads (default: every core but one and the host threads with a GPU, else
    /// every core; `serve` with a GPU on a machine of 8 cores or more: a quarter of them with the whole
    /// index on the GPU, half with `--gpu-cache`, leaving the rest to its HTTP handlers).
    #[arg(long)]
    pub hybrid_workers: Option<usize>,
    /// The hybrid's CPU workers when a GPU takes part, unless `--hybrid-workers` is given: set by
    /// `serve`, not an option.
    #[arg(skip)]
    pub hybrid_gpu_workers: Option<usize>,
    /// Hybrid: threads of the GPU's own for its batches' host work (descriptors; with a list cache,
    /// cutting queries by what it holds and gathering the blocks they carry), taken from the CPU
    /// workers' cores (default: a quarter of the cores; 0: none, the GPU's dispatcher prepares alone).
    #[arg(long)]
    pub hybrid_host_threads: Option<usize>,
    /// Hybrid: the GPU batch's latency target in ms (a batch of queries with deadlines grows until its
    /// predicted time reaches it, or half of what its oldest query's deadline has left if that is longer).
    #[arg(long, default_value_t = 20.0)]
    pub hybrid_batch_ms: f64,
    /// Hybrid: split a query predicted to take longer than this many ms on one core into docID ranges
    /// run on the GPU and idle CPU workers at once (0: never split).
    #[arg(long, default_value_t = 5.0)]
    pub hybrid_split_ms: f64,
    /// Hybrid: most CPU parts of a split query.
    #[arg(long, default_value_t = 16)]
    pub hybrid_split_parts: usize,
    /// Hybrid: the GPU's share of a split query's documents, 0 to 1, or `model` (from the measured GPU
    /// latency and the predicted CPU time). The default 0.3 measured best on the 25M collection.
    #[arg(long, default_value = "0.3", value_parser = parse_share)]
    pub hybrid_split_gpu_share: Share,
    /// Cache part of the index in GPU memory, admitted by qtf, qtfdf, vfb (docs/references.md#pruned-list-caching) or dynamic (VFB
    /// over the live stream); blocks the cache lacks travel with each batch, and the CPU completes what
    /// the GPU leaves exactly. Needs --gpu-memory. Default: the whole index on the GPU.
    #[arg(long, value_parser = ["qtf", "qtfdf", "vfb", "dynamic"])]
    pub gpu_cache: Option<String>,
    /// The training query log of the cache's policy (one query per line, as --queries).
    #[arg(long)]
    pub gpu_cache_train: Option<PathBuf>,
    /// The maximum admission ratio λ: the largest share of a list's blocks cached (0 to 1). Default:
    /// 0.5 for vfb and dynamic where the CPU completes on a global-score order, else 1.
    #[arg(long)]
    pub gpu_cache_ratio: Option<f64>,
    /// VFB's block, in postings (a multiple of the index's 128-posting blocks).
    #[arg(long, default_value_t = 256)]
    pub gpu_cache_block: u32,
    /// The batches' staging buffers S_b, e.g. 256M (default: a quarter of --gpu-memory, 64 MiB to
    /// 4 GiB); the cache S_c takes the rest of --gpu-memory.
    #[arg(long, value_parser = parse_bytes)]
    pub gpu_cache_buffer: Option<usize>,
    /// How far the GPU answers a query whose blocks the cache lacks: cpu (where the cached prefixes
    /// reach; the CPU completes), transfer (everything, the batch carries the blocks), auto (cpu on a
    /// global-score-ordered index with early termination, else transfer).
    #[arg(long, default_value = "auto", value_parser = ["auto", "cpu", "transfer"])]
    pub gpu_cache_complete: String,
    /// The dynamic policy replans the cache after this many queries.
    #[arg(long, default_value_t = 4096)]
    pub gpu_cache_epoch: usize,
    /// The dynamic policy applies a new plan only where the bytes it saves the batches of an epoch are
    /// at least this many times the bytes it copies into the cache (0: every plan).
    #[arg(long, default_value_t = 1.0)]
    pub gpu_cache_min_gain: f64,
    /// The weight the dynamic policy keeps of what it has seen at each replan (0–1: lower follows a
    /// drifting stream sooner, higher estimates a steady one better).
    #[arg(long, default_value_t = CacheOptions::default().decay)]
    pub gpu_cache_decay: f64,
    /// The share of the cache the dynamic policy leaves free for lists to grow into while their old
    /// prefixes are still in place (0–0.9).
    #[arg(long, default_value_t = CacheOptions::default().headroom)]
    pub gpu_cache_headroom: f64,
    /// The GPU backend (not the hybrid) sends a call's queries in this many chunks, each split and
    /// sent while the previous one computes and completed on the CPU while the next one does (1: one
    /// chunk per GPU batch of queries; more lowered a closed loop's median latency, not its
    /// throughput, on the 25M collection).
    #[arg(long, default_value_t = CacheOptions::default().chunks)]
    pub gpu_cache_chunks: usize,
    /// Pipeline slots of a GPU that caches part of the index: each stages a batch in its own share of
    /// --gpu-cache-buffer, so that a batch's copies overlap the kernels of those before it (at least 2;
    /// each holds about 0.85 GiB of per-CTA scratch outside --gpu-memory on an H100).
    #[arg(long, default_value_t = warpsearch_gpu::DEFAULT_CACHE_SLOTS)]
    pub gpu_cache_slots: usize,
}

/// A share in [0, 1], or none (`model`: the engine decides).
#[derive(Debug, Clone, Copy)]
pub struct Share(pub Option<f64>);

fn parse_share(s: &str) -> Result<Share, String> {
    if s == "model" {
        return Ok(Share(None));
    }
    match s.parse::<f64>() {
        Ok(x) if (0.0..=1.0).contains(&x) => Ok(Share(Some(x))),
        _ => Err(format!("'{s}': give a share from 0 to 1, or model")),
    }
}

/// Bytes from `40G`, `512M`, `100K` or a plain number of bytes.
pub fn parse_bytes(s: &str) -> Result<usize, String> {
    let t = s.trim();
    let (num, mult) = match t.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => {
            let m: u64 = match c.to_ascii_uppercase() {
                'K' => 1 << 10,
                'M' => 1 << 20,
                'G' => 1 << 30,
                'T' => 1 << 40,
                _ => return Err(format!("'{s}': use a number with K, M, G or T, e.g. 40G")),
            };
            (&t[..i], m)
        }
        _ => (t, 1),
    };
    let v: f64 = num
        .trim()
        .parse()
        .map_err(|_| format!("'{s}' is not a size: use e.g. 40G or 512M"))?;
    if !(v.is_finite() && v > 0.0) {
        return Err(format!("'{s}': the size must be positive"));
    }
    Ok((v * mult as f64) as usize)
}

/// `--tag`: the last column of every line of a TREC run, whose columns white space separates.
fn parse_tag(s: &str) -> Result<String, String> {
    if s.is_empty() {
        return Err("the run tag is empty: a TREC run's last column needs a word".into());
    }
    if let Some(c) = s.chars().find(|c| c.is_whitespace() || c.is_control()) {
        return Err(format!(
            "the run tag contains {c:?}: a TREC run separates its columns by white space, so a tag \
             holds no white space or control characters"
        ));
    }
    Ok(s.to_owned())
}

/// `--memory-mb`: a whole number of MiB, at least [`MIN_MEMORY_MB`].
fn parse_memory_mb(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(mb) if mb >= MIN_MEMORY_MB => Ok(mb),
        _ => Err(format!(
            "give at least {MIN_MEMORY_MB} (MiB of postings held in memory before a sorted run is \
             spilled to disk; less spills a run every few documents), e.g. the default 2048"
        )),
    }
}

/// A mode by its name (and, or, and-or).
pub fn parse_mode(s: &str) -> Result<Mode, String> {
    warpsearch_query::named("mode", s)
}

/// `warpsearch evaluate`.
#[derive(Args)]
pub struct EvaluateArgs {
    /// TREC qrels: `qid iter docid relevance` lines.
    #[arg(long)]
    pub qrels: PathBuf,
    /// TREC run: `qid Q0 docid rank score tag` lines.
    #[arg(long)]
    pub run: PathBuf,
    /// Average over every query of the qrels (a query without results scores 0), as trec_eval -c;
    /// by default over the queries in both files, as trec_eval.
    #[arg(long)]
    pub all_queries: bool,
    /// Also print every query's measures.
    #[arg(long)]
    pub per_query: bool,
}

/// `warpsearch analyze`.
#[derive(Args)]
pub struct AnalyzeArgs {
    /// The index directory (its analyzer is used).
    #[arg(long)]
    pub index: PathBuf,
    /// Queries, as for `search`; `-` reads stdin.
    #[arg(long)]
    pub queries: PathBuf,
}
