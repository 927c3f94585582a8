//! Command-line options, defined once.

use std::path::PathBuf;

use anyhow::{bail, Result};
use clap::{Args, Parser, Subcommand};
use warpsearch_engine::{EngineConfig, KernelConfig};
use warpsearch_index::build::MIN_MEMORY_MB;
use warpsearch_index::{AnalyzerConfig, Bm25Params, Codec, DocOrder, WriterOptions};
use warpsearch_query::Mode;

/// warpsearch: exact top-k BM25 search over a compressed inverted index, on GPUs and CPUs. Build an
/// index (`index`), run queries (`search`, `serve`), score runs (`evaluate`), read stored documents
/// (`doc`), look inside (`inspect`, `analyze`, `export`), measure (`bench`, `load`, `demo`); every
/// command below.
#[derive(Parser)]
#[command(version)]
pub struct Cli {
    /// Worker threads (default: all cores).
    // Listed after each command's own everyday options: it applies to every command.
    #[arg(long, global = true, display_order = 900)]
    pub threads: Option<usize>,
    /// Options from a TOML file, by their long names (`gpu-batch = 4096`, `backend = "gpu"`; a table
    /// `[gpu]` holding `batch` is `gpu-batch`); options on the command line override it.
    #[arg(long, global = true, value_name = "FILE", display_order = 901)]
    pub config: Option<PathBuf>,
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Subcommand)]
pub enum Command {
    /// Build an index from a collection (JSON lines such as Pyserini's or BEIR's, or MS MARCO's
    /// `id<TAB>text`; plain, .gz or .zst; or a directory of them) or a CIFF file.
    Index(IndexArgs),
    /// Print an index's statistics; --codecs compares codec sizes and decode speeds.
    Inspect(InspectArgs),
    /// Write an index as a CIFF file.
    Export(ExportArgs),
    /// Run a file of queries against an index; write a TREC run or JSON lines.
    Search(SearchArgs),
    /// Print stored documents (`index --store`) by their ids.
    Doc(DocArgs),
    /// Score a TREC run against TREC qrels with trec_eval's measures (-m map, ndcg_cut.10, P.10,
    /// recall.1000, recip_rank, RR@10, ...).
    Evaluate(EvaluateArgs),
    /// Print queries as the index's analyzer sees them: `qid<TAB>term term …` (for other engines, or to
    /// debug a query).
    Analyze(AnalyzeArgs),
    /// Generate a collection, index it, run a batch of queries and report speed (no download, no GPU).
    Demo(DemoArgs),
    /// Answer queries over HTTP (JSON): POST/GET /search, /health, /metrics (docs/openapi.yaml).
    Serve(ServeArgs),
    /// Load-test a running `warpsearch serve`: closed and open loop over HTTP, 429s, errors, its memory.
    Load(LoadArgs),
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
    /// The collection: a .jsonl, .json or .tsv file (plain, .gz or .zst) or a directory of them. Its
    /// format is read from its first line: JSON objects (Pyserini's {"id", "contents"}, BEIR's
    /// {"_id", "title", "text"}, {"id", "text"}, or fields named by --id-field and --fields) or
    /// `id<TAB>text` lines (MS MARCO's collection.tsv).
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
    /// Index the "title" field (where a line has one) before the text field.
    #[arg(long)]
    pub title: bool,
    /// The JSON field holding each document's id (default: the first of id, _id, docno, docid the
    /// first line has).
    #[arg(long, value_name = "FIELD")]
    pub id_field: Option<String>,
    /// The JSON fields to index, comma-separated, in this order (e.g. title,text); a line must hold one
    /// at least (default: contents or text).
    #[arg(long, value_name = "FIELDS", value_delimiter = ',')]
    pub fields: Option<Vec<String>>,
    /// Keep every document's input line, compressed, in the index (docs.bin), for `warpsearch doc`,
    /// Python's `Index.doc` and the server's `docs` option.
    #[arg(long)]
    pub store: bool,
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
    /// Where the postings are inverted: cpu (every core, --threads), gpu (the first GPU sorts them by
    /// term and computes the block bounds while the cores analyse and encode; the CPU, with a note,
    /// where there is no GPU, the postings were spilled past --memory-mb, or the GPU fails), or auto
    /// (the GPU where there is one, the collection has 20 million postings or more and the build runs
    /// on one thread: on two or more the cores were the faster in every measurement). The index is the
    /// same, byte for byte, whichever builds it.
    #[arg(long, value_enum, default_value_t = BuildOnArg::Cpu)]
    pub build_on: BuildOnArg,
    /// GPU memory the build's inversion may take, in MiB (default: 90% of what is free); postings
    /// beyond it are inverted in several passes, each over whole partitions of the terms.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub gpu_memory_mb: Option<u64>,
    /// Skip (and count) bad input lines instead of stopping at the first.
    #[arg(long)]
    pub skip_bad: bool,
    /// The longest input line (one JSON document) read, in MiB; a longer line stops the build with
    /// its file and line named.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u64).range(1..=1 << 20))]
    pub max_line_mb: u64,
    /// Write N shards of contiguous document ranges under the output directory, every one scoring
    /// with the collection's statistics: `search`, `bench`, `serve` and Python take the directory and
    /// answer exactly as one index (from --input only).
    #[arg(long, value_name = "N", conflicts_with = "ciff", value_parser = clap::value_parser!(u32).range(1..))]
    pub shards: Option<u32>,
    /// Write the shards one after another instead of each on a thread of its own (the same bytes).
    #[arg(long, requires = "shards")]
    pub shards_sequential: bool,
    /// Build one part of the sharded index, so that processes or hosts share the work: `head` first
    /// (one pass over the collection for its statistics, dictionary and documents), then each shard
    /// `0` to `N-1` into the head's --output (each analyses its own documents only; in any order, at
    /// once), every part from the same --input and options; the files are one build's. `all`: the
    /// whole index.
    #[arg(long, requires = "shards", default_value = "all",
          value_parser = clap::value_parser!(warpsearch_index::shards::ShardPart))]
    pub part: warpsearch_index::shards::ShardPart,
}

/// `index --build-on`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum BuildOnArg {
    /// Every core of the CPU.
    Cpu,
    /// The first GPU (the CPU where it cannot).
    Gpu,
    /// The GPU where there is one and the collection is large enough to pay.
    Auto,
}

impl From<BuildOnArg> for warpsearch_index::build::BuildOn {
    fn from(a: BuildOnArg) -> Self {
        match a {
            BuildOnArg::Cpu => Self::Cpu,
            BuildOnArg::Gpu => Self::Gpu,
            BuildOnArg::Auto => Self::Auto,
        }
    }
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
        let fields = self.id_field.is_some() || self.fields.is_some() || self.store;
        if self.ciff.is_some()
            && (o.static_scores.is_some() || o.doc_order != "input" || self.title || fields)
        {
            bail!(
                "--static-scores, --doc-order, --title, --id-field, --fields and --store apply to --input \
                 only: a CIFF file's postings are imported as they are (it holds no document text); build \
                 from the collection for these"
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
    /// Write N shards of contiguous document ranges under the output directory, every one scoring
    /// with the collection's statistics, as `index --shards N` does (for collections larger than
    /// one GPU: one shard a GPU).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub shards: Option<u32>,
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
    /// The index directory (`--index DIR`, as the other commands take it, or the first argument).
    #[arg(
        value_name = "INDEX",
        required_unless_present = "index_flag",
        conflicts_with = "index_flag"
    )]
    index_arg: Option<PathBuf>,
    /// The index directory.
    #[arg(long = "index", id = "index_flag", value_name = "INDEX")]
    index_flag: Option<PathBuf>,
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
    /// The index directory (`--index DIR`, as the other commands take it, or the first argument).
    #[arg(
        value_name = "INDEX",
        required_unless_present = "index_flag",
        conflicts_with = "index_flag"
    )]
    index_arg: Option<PathBuf>,
    /// The index directory.
    #[arg(long = "index", id = "index_flag", value_name = "INDEX")]
    index_flag: Option<PathBuf>,
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

/// The index and the queries to run on it, their mode and k (shared by `search` and `bench`).
#[derive(Args)]
pub struct QueryArgs {
    /// The index directory.
    #[arg(long)]
    pub index: PathBuf,
    /// Queries: `qid<TAB>text` lines, one query per line (qid = line number), a TREC topic file
    /// (`<top>`, `<num>`, `<title>`) or JSON lines (BEIR's queries.jsonl); `-` reads stdin.
    #[arg(long, required_unless_present = "query")]
    pub queries: Option<PathBuf>,
    /// One query's text instead of a query file (its qid is 1).
    #[arg(long, conflicts_with = "queries")]
    pub query: Option<String>,
    /// and: every term; or: any term; and-or: AND, then OR when AND finds fewer than k.
    #[arg(long, default_value = "or", value_parser = parse_mode)]
    pub mode: Mode,
    /// Results per query (search: 1000 by default, as a run for evaluation needs; bench: 10).
    #[arg(long, default_value_t = 10)]
    pub k: usize,
}

/// `warpsearch search`.
#[derive(Args)]
#[command(mut_arg("k", |a| a.default_value("1000")))]
pub struct SearchArgs {
    #[command(flatten)]
    pub input: QueryArgs,
    /// trec (`qid Q0 docid rank score tag`) or json (one object per query per line).
    #[arg(long, default_value = "trec", value_parser = ["trec", "json"])]
    pub format: String,
    /// Write results here instead of standard output.
    #[arg(long, short)]
    pub output: Option<PathBuf>,
    /// With --format json: each hit's stored document too ("doc": its input line, as the server's
    /// "docs": true gives; an index built with --store).
    #[arg(long)]
    pub docs: bool,
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
    #[command(flatten)]
    pub engine: EngineConfig,
}

/// `warpsearch doc`.
#[derive(Args)]
pub struct DocArgs {
    /// The index directory (built with --store).
    #[arg(long)]
    pub index: PathBuf,
    /// Document ids (as runs name them); with --number, document numbers (0 to N - 1).
    #[arg(required = true)]
    pub ids: Vec<String>,
    /// Take the arguments as document numbers rather than ids.
    #[arg(long)]
    pub number: bool,
}

/// `warpsearch serve`.
#[derive(Args)]
pub struct ServeArgs {
    /// The index directory.
    #[arg(long)]
    pub index: PathBuf,
    /// Address to listen on (port 0: any free port; the bound address is printed on standard output).
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub addr: String,
    /// Places held by queries accepted and not yet answered (or their response not yet written) beyond
    /// which a request is refused with 429: a query holds one, and one more for each collection's worth
    /// of postings its terms have.
    #[arg(long, default_value_t = 4096)]
    pub max_in_flight: usize,
    /// Most queries in one POST /search.
    #[arg(long, default_value_t = 1024)]
    pub max_queries: usize,
    /// Largest k a request may ask for (at most 100,000; the GPU serves up to 1,000).
    #[arg(long, default_value_t = 1000)]
    pub max_k: usize,
    /// Largest request body, e.g. 1M.
    #[arg(long, default_value = "1M", value_parser = warpsearch_engine::config::parse_bytes)]
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
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    pub idle_timeout: std::time::Duration,
    /// A request body not in full this long after its header is refused (408) and its connection
    /// closed.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    pub read_timeout: std::time::Duration,
    /// A response not written this long after its first bytes (a client that reads slowly or not at
    /// all) closes its connection, and its queries stop counting in flight.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    pub write_timeout: std::time::Duration,
    /// On SIGTERM or Ctrl-C, connections still open this long after (their requests unanswered) are
    /// closed and the server stops.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub shutdown_grace: std::time::Duration,
    /// Threads that read requests, parse and analyse their queries, and write responses (the async
    /// runtime's; default: one per core). The engine's own threads are apart from these.
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..))]
    pub http_threads: Option<u16>,
    #[command(flatten)]
    pub engine: EngineConfig,
}

/// The open loop's arrivals, shared by `bench` and `load`.
#[derive(Args)]
pub struct OpenLoopArgs {
    /// Seconds of arrivals per rate (at least 1,000 arrivals: queries, or requests of --batch; the
    /// query log repeats if it is shorter).
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
    pub input: QueryArgs,
    /// Passes over all queries before measuring.
    #[arg(long, default_value_t = 1)]
    pub warmup: usize,
    /// The closed loop from each query's text: analysed and its hits' document ids looked up inside
    /// the timed loop, the work of a caller with text (the server, Python's `search_batch`). Without
    /// it the queries are analysed before the clock starts and no id is looked up: the engine alone.
    #[arg(long)]
    pub text: bool,
    /// Times the closed loop answers every query, as one submission: with several passes a long run
    /// measures the engine's sustained rate rather than one batch's (whose last queries leave most of
    /// the hardware idle, a larger share of a short run and of several GPUs each taking a part).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    pub passes: u32,
    /// Open-loop arrival rates in queries/s (Poisson arrivals), comma-separated; none: closed loop only.
    #[arg(long, value_delimiter = ',')]
    pub rates: Vec<f64>,
    /// Open-loop loads as fractions of this run's closed-loop throughput, comma-separated (e.g.
    /// 0.1,0.3,0.5,0.7,0.9: a latency-against-load curve), run after --rates.
    #[arg(long, value_delimiter = ',')]
    pub loads: Vec<f64>,
    /// Open loop: queries per arrival, submitted together as a request of the server is (`load
    /// --batch`); latencies are then a request's, from its arrival to its last query's answer, and a
    /// late request's queries count as missed, as `load` counts them.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    pub batch: u32,
    #[command(flatten)]
    pub open: OpenLoopArgs,
    /// Write the report as JSON here.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Draw plots as SVG: `<prefix>-latency-cdf.svg`, and `<prefix>-latency-vs-rate.svg` with --rates or --loads.
    #[arg(long)]
    pub svg: Option<PathBuf>,
    #[command(flatten)]
    pub engine: EngineConfig,
}

/// `warpsearch bench-plot`.
#[derive(Args)]
pub struct BenchPlotArgs {
    /// `bench --json` reports.
    #[arg(required = true)]
    pub reports: Vec<PathBuf>,
    /// The SVG file to write: one bar per report, its closed-loop queries/s.
    #[arg(long)]
    pub svg: PathBuf,
    /// Also draw each report's open-loop latency against its achieved queries/s here (p99 with
    /// points, p50 thin; one colour per report, named by its file).
    #[arg(long)]
    pub latency: Option<PathBuf>,
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
    #[command(flatten)]
    pub kernels: KernelConfig,
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
    /// A measure to report, repeatable, as trec_eval's -m names it (map, ndcg_cut.10, P.5,10,
    /// recall.1000, recip_rank, map_cut.100, ndcg) or as ir_measures does (AP, nDCG@10, P@10, R@100,
    /// RR@10); default: ndcg_cut.10, map, P.10, recall.1000.
    #[arg(short = 'm', long = "measure", value_name = "MEASURE")]
    pub measures: Vec<String>,
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
    #[arg(long, default_value = "or", value_parser = parse_mode)]
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
    pub open: OpenLoopArgs,
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

impl InspectArgs {
    /// The index directory, given either way.
    pub fn index(&self) -> &std::path::Path {
        self.index_flag
            .as_deref()
            .or(self.index_arg.as_deref())
            .expect("clap requires one")
    }
}

impl ExportArgs {
    /// The index directory, given either way.
    pub fn index(&self) -> &std::path::Path {
        self.index_flag
            .as_deref()
            .or(self.index_arg.as_deref())
            .expect("clap requires one")
    }
}

/// A time given as seconds (`30`, `30s`, `0.5s`), milliseconds (`500ms`) or minutes (`2m`).
pub fn parse_duration(text: &str) -> std::result::Result<std::time::Duration, String> {
    let t = text.trim();
    let (number, scale) = if let Some(n) = t.strip_suffix("ms") {
        (n, 1e-3)
    } else if let Some(n) = t.strip_suffix('s') {
        (n, 1.0)
    } else if let Some(n) = t.strip_suffix('m') {
        (n, 60.0)
    } else {
        (t, 1.0)
    };
    match number.trim().parse::<f64>() {
        Ok(x) if x.is_finite() && x >= 0.0 && x * scale <= 1e9 => {
            Ok(std::time::Duration::from_secs_f64(x * scale))
        }
        _ => Err(format!(
            "'{text}' is not a time: write 30s, 500ms or 2m (seconds when no unit is given)"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn times_read_with_their_unit() {
        assert_eq!(parse_duration("30"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("0.25s"), Ok(Duration::from_millis(250)));
        for bad in ["", "s", "-1s", "ten", "1h", "nan"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }
}
