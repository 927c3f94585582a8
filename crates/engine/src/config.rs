//! [`EngineConfig`]: everything an engine is made from, typed and in one place — how documents are
//! scored, which backend runs, and the GPU's, the hybrid scheduler's and the list cache's settings —
//! with one constructor from an index ([`EngineConfig::open`]). The CLI's options are this struct's
//! (clap derive, expert settings under help headings), a configuration file sets the same options by
//! their long names, and Python's keywords fill it field by field; serde gives it to reports.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use clap::builder::{PossibleValuesParser, TypedValueParser};
use serde::{Deserialize, Serialize};
use warpsearch_gpu::{CacheBudget, GpuOptions, KernelOptions};
use warpsearch_index::queries::read_queries;
use warpsearch_index::{Bm25Params, DocOrder, Index};
use warpsearch_query::{
    Algorithm, Mode, Query, Ranking, Request, Scorer, SearchOptions, DEFAULT_MAX_QUERY_TERMS,
};

use crate::backend::BackendChoice;
use crate::cache::{CacheChoice, CacheOptions, Completion, Policy};
use crate::engine::{Engine, EngineOptions};
use crate::gpus::{place_shards, GpuSet};
use crate::hybrid::HybridOptions;
use crate::replicas::side_by_side;
use crate::EngineError;

/// A clap value parser for a choice among `T`'s names (listed in `--help` and in errors).
pub fn choice<T>() -> impl TypedValueParser<Value = T>
where
    T: std::str::FromStr + strum::VariantNames + Clone + Send + Sync + 'static,
{
    PossibleValuesParser::new(T::VARIANTS).map(|s| s.parse::<T>().ok().expect("a listed name parses"))
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

/// The ranking function, by name.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Default,
    strum::Display,
    strum::EnumString,
    strum::IntoStaticStr,
    strum::VariantNames,
    Serialize,
    Deserialize,
)]
#[strum(serialize_all = "kebab-case")]
#[serde(rename_all = "kebab-case")]
pub enum RankingChoice {
    /// BM25 (Anserini's).
    #[default]
    Bm25,
    /// α·static(d) + (1 − α)·BM25 with normalised idf weights (docs/references.md#pruned-list-caching
    /// equation 3; an index built with static scores).
    Bm25Static,
}

/// A share from 0 to 1, or `model`: the engine decides.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Share {
    /// This share.
    Fixed(f64),
    /// Decided by the engine's model (`model`).
    Model(ModelWord),
}

/// The word `model`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ModelWord {
    /// `model`.
    Model,
}

impl Share {
    /// The share, or None for `model`.
    pub fn fixed(self) -> Option<f64> {
        match self {
            Share::Fixed(x) => Some(x),
            Share::Model(_) => None,
        }
    }
}

impl std::str::FromStr for Share {
    type Err = String;

    fn from_str(s: &str) -> Result<Share, String> {
        if s == "model" {
            return Ok(Share::Model(ModelWord::Model));
        }
        match s.parse::<f64>() {
            Ok(x) if (0.0..=1.0).contains(&x) => Ok(Share::Fixed(x)),
            _ => Err(format!("'{s}': give a share from 0 to 1, or model")),
        }
    }
}

impl std::fmt::Display for Share {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Share::Fixed(x) => write!(f, "{x}"),
            Share::Model(_) => f.write_str("model"),
        }
    }
}

/// How documents are scored and which CPU algorithm finds the top k.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, clap::Args)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct ScoringConfig {
    /// bm25, or bm25-static (an index built with --static-scores).
    #[arg(long, default_value_t, value_parser = choice::<RankingChoice>())]
    pub ranking: RankingChoice,
    /// α of bm25-static (default: the index's global-score α, else 0.5).
    #[arg(long)]
    pub alpha: Option<f32>,
    /// BM25 k1 (default: the index's; others make block bounds be recomputed per query).
    #[arg(long)]
    pub k1: Option<f32>,
    /// BM25 b (default: the index's).
    #[arg(long)]
    pub b: Option<f32>,
    /// auto, exhaustive, daat (AND), maxscore or bmw (OR), early (bm25-static, global-score order).
    #[arg(long, default_value_t, value_parser = choice::<Algorithm>())]
    pub algorithm: Algorithm,
    /// The most distinct terms a query may have; a longer query is refused, named (a bound on the
    /// work one query asks for).
    #[arg(long, default_value_t = DEFAULT_MAX_QUERY_TERMS as u32,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub max_query_terms: u32,
}

impl Default for ScoringConfig {
    fn default() -> Self {
        ScoringConfig {
            ranking: RankingChoice::Bm25,
            alpha: None,
            k1: None,
            b: None,
            algorithm: Algorithm::Auto,
            max_query_terms: DEFAULT_MAX_QUERY_TERMS as u32,
        }
    }
}

/// The GPU engine's settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, clap::Args)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct GpuConfig {
    /// GPUs to run on: auto (every device), a count (the first N), or device numbers (0,2). One index
    /// is placed whole on each (queries spread over them); a sharded index's shards are spread over
    /// them (shard i on GPU i mod N; with more GPUs than shards, each shard on several).
    #[arg(long, default_value_t, value_parser = clap::value_parser!(GpuSet))]
    pub gpus: GpuSet,
    /// GPU memory the index may take, e.g. 40G or 512M (default: 90% of the free memory).
    #[arg(id = "gpu-memory", long = "gpu-memory", value_parser = parse_bytes)]
    pub memory: Option<usize>,
    /// Queries per GPU kernel launch.
    #[arg(id = "gpu-batch", long = "gpu-batch", default_value_t = GpuOptions::default().batch_size)]
    pub batch: usize,
    /// GPU batches in flight at once, each on a stream of its own (at least 2; with a list cache,
    /// --gpu-cache-slots): queries are handed to the GPU as they arrive while earlier batches compute.
    #[arg(id = "gpu-slots", long = "gpu-slots", default_value_t = GpuOptions::default().slots)]
    pub slots: usize,
    /// OR accumulator window of the GPU kernel, in documents (power of two, 256 to 32768; 0: the largest
    /// whose shared memory costs no resident thread blocks, 16384 on an H100 for simdbp indexes).
    #[arg(id = "gpu-window", long = "gpu-window", default_value_t = 0)]
    pub window: u32,
    /// Cut an OR query whose cost (postings of all its lists) exceeds this into docID ranges, one GPU
    /// thread block each (0: never); also the cut of AND queries in batches that --gpu-split-waves
    /// leaves as they are.
    #[arg(id = "gpu-split-or", long = "gpu-split-or", default_value_t = GpuOptions::default().split_cost)]
    pub split_or: u64,
    /// In a batch of few queries, queries (cost: postings of the shortest list for AND and and-or, of
    /// all lists for OR) are cut so that its largest part takes at most 1/W of each GPU thread
    /// block's average share of the batch (0: AND is cut at --gpu-split-and, OR at --gpu-split-or).
    #[arg(id = "gpu-split-waves", long = "gpu-split-waves", default_value_t = GpuOptions::default().split_waves)]
    pub split_waves: u32,
    /// The least cost of a part of an AND query; with --gpu-split-waves 0, the cost above which it is
    /// cut (0: never).
    #[arg(id = "gpu-split-and", long = "gpu-split-and", default_value_t = GpuOptions::default().and_split_cost)]
    pub split_and: u64,
    /// The least cost (postings) of a part of an OR query in a batch that --gpu-split-waves cuts (0:
    /// OR batches are never cut that way).
    #[arg(id = "gpu-split-or-floor", long = "gpu-split-or-floor", default_value_t = GpuOptions::default().or_split_floor)]
    pub split_or_floor: u64,
    /// In an OR batch that --gpu-split-waves cuts, the least average cost (postings) of its parts (0:
    /// any): each part costs the host the same work, whatever its size.
    #[arg(id = "gpu-split-or-task", long = "gpu-split-or-task", default_value_t = GpuOptions::default().or_task_cost)]
    pub split_or_task: u64,
    /// Most parts (GPU thread blocks) a query is cut into in a batch that --gpu-split-waves cuts (at
    /// least the 16 of full batches, at most --gpu-batch).
    #[arg(id = "gpu-split-waves-parts", long = "gpu-split-waves-parts",
          default_value_t = GpuOptions::default().wave_parts, value_parser = clap::value_parser!(u32).range(1..))]
    pub split_waves_parts: u32,
    /// OR queries of at most this many postings are scored by sorting their postings rather than with
    /// dense accumulators (0: never; at most 4096).
    #[arg(id = "gpu-small-or", long = "gpu-small-or", default_value_t = GpuOptions::default().small_or)]
    pub small_or: u32,
    /// An AND step merges (merge-find of blocks, merge-path intersection) when the next list holds at
    /// most this many postings per candidate in the candidates' range, else it binary-searches (0:
    /// never merge).
    #[arg(id = "gpu-merge-ratio", long = "gpu-merge-ratio", default_value_t = GpuOptions::default().merge_ratio)]
    pub merge_ratio: u32,
    /// Host threads that feed each GPU (one index, not the hybrid), each with its own pipeline and
    /// copy of the index on the device: queries go to the one with the fewest in flight. More than
    /// one where a GPU thread's host work, not the GPU, sets the pace.
    #[arg(id = "gpu-feeders", long = "gpu-feeders", default_value_t = 1,
          value_parser = clap::value_parser!(u32).range(1..=16))]
    pub feeders: u32,
    /// Time the GPU kernel's phases, and each query's wait, run and wait for its batch on the
    /// device (reported by --stats and bench; slightly slower).
    #[arg(id = "gpu-profile", long = "gpu-profile")]
    pub profile: bool,
    /// How the kernels are compiled.
    #[command(flatten)]
    pub kernels: KernelConfig,
    /// Gather the blocks a batch carries into pinned memory on the host, even where they could be
    /// copied from the page-locked index.
    #[arg(
        id = "gpu-host-gather",
        long = "gpu-host-gather",
        env = "WARPSEARCH_GPU_GATHER"
    )]
    pub host_gather: bool,
    /// Time every GPU batch and plan change, reported as debug events on standard error.
    #[arg(id = "gpu-trace", long = "gpu-trace", env = "WARPSEARCH_CACHE_TRACE")]
    pub trace: bool,
}

impl Default for GpuConfig {
    fn default() -> Self {
        let g = GpuOptions::default();
        GpuConfig {
            gpus: GpuSet::Auto,
            memory: None,
            batch: g.batch_size,
            slots: g.slots,
            window: 0,
            split_or: g.split_cost,
            split_waves: g.split_waves,
            split_and: g.and_split_cost,
            split_or_floor: g.or_split_floor,
            split_or_task: g.or_task_cost,
            split_waves_parts: g.wave_parts,
            small_or: g.small_or,
            merge_ratio: g.merge_ratio,
            feeders: 1,
            profile: false,
            kernels: KernelConfig::default(),
            host_gather: false,
            trace: false,
        }
    }
}

/// How the GPU's kernels are compiled when it is opened.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, clap::Args)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct KernelConfig {
    /// Threads per CTA of every kernel: 128 or 256.
    #[arg(id = "gpu-threads", long = "gpu-threads", env = "WARPSEARCH_GPU_THREADS",
          default_value_t = KernelOptions::default().threads)]
    pub threads: u32,
    /// Resident CTAs per SM the query kernel is compiled for (1 to 8; default: each entry point's own).
    #[arg(id = "gpu-min-ctas", long = "gpu-min-ctas", env = "WARPSEARCH_GPU_MIN_CTAS")]
    pub min_ctas: Option<u32>,
    /// Compile the kernel files of this directory (the names of crates/gpu/kernels) instead of the
    /// built-in ones.
    #[arg(id = "gpu-kernels", long = "gpu-kernels", env = "WARPSEARCH_GPU_KERNELS")]
    pub source_dir: Option<PathBuf>,
}

impl Default for KernelConfig {
    fn default() -> Self {
        KernelConfig {
            threads: KernelOptions::default().threads,
            min_ctas: None,
            source_dir: None,
        }
    }
}

impl KernelConfig {
    /// The GPU's kernel options.
    pub fn options(&self) -> KernelOptions {
        KernelOptions {
            threads: self.threads,
            min_ctas: self.min_ctas,
            // Named once by a program: the options keep it as a `'static` path.
            source_dir: self
                .source_dir
                .as_ref()
                .map(|d| &*Box::leak(d.clone().into_boxed_path()) as &'static Path),
        }
    }
}

/// The hybrid scheduler's settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, clap::Args)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct HybridConfig {
    /// CPU worker threads (default: every core but one and the host threads with a GPU, else every
    /// core; `serve` with a GPU on a machine of 8 cores or more: a quarter of them with the whole index
    /// on the GPU, half with `--gpu-cache`, leaving the rest to its HTTP handlers).
    #[arg(id = "hybrid-workers", long = "hybrid-workers")]
    pub workers: Option<usize>,
    /// CPU workers when a GPU takes part, unless `workers` is given (a server's default).
    #[arg(skip)]
    pub gpu_workers: Option<usize>,
    /// Threads of the GPU's own for its batches' host work, taken from the CPU workers' cores
    /// (default: a quarter of the cores; 0: none, the GPU's dispatcher prepares alone).
    #[arg(id = "hybrid-host-threads", long = "hybrid-host-threads")]
    pub host_threads: Option<usize>,
    /// The GPU batch's latency target in ms (a batch of queries with deadlines grows until its
    /// predicted time reaches it, or half of what its oldest query's deadline has left if that is longer).
    #[arg(id = "hybrid-batch-ms", long = "hybrid-batch-ms", default_value_t = 20.0)]
    pub batch_ms: f64,
    /// Split a query predicted to take longer than this many ms on one core into docID ranges run on
    /// the GPU and idle CPU workers at once (0: never split).
    #[arg(id = "hybrid-split-ms", long = "hybrid-split-ms", default_value_t = 5.0)]
    pub split_ms: f64,
    /// Most CPU parts of a split query.
    #[arg(id = "hybrid-split-parts", long = "hybrid-split-parts", default_value_t = 16)]
    pub split_parts: usize,
    /// The GPU's share of a split query's documents, 0 to 1, or `model` (from the measured GPU latency
    /// and the predicted CPU time).
    #[arg(
        id = "hybrid-split-gpu-share",
        long = "hybrid-split-gpu-share",
        default_value = "0.3"
    )]
    pub split_gpu_share: Share,
    /// Send a query the CPU has not answered within this multiple of the GPU's predicted time for it
    /// to the GPU as well, keeping the first answer (0: never).
    #[arg(id = "hybrid-hedge", long = "hybrid-hedge", default_value_t = 0.5)]
    pub hedge: f64,
}

impl Default for HybridConfig {
    fn default() -> Self {
        HybridConfig {
            workers: None,
            gpu_workers: None,
            host_threads: None,
            batch_ms: 20.0,
            split_ms: 5.0,
            split_parts: 16,
            split_gpu_share: Share::Fixed(0.3),
            hedge: 0.5,
        }
    }
}

/// The GPU list cache's settings: part of the index in GPU memory for indexes larger than it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, clap::Args)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct CacheConfig {
    /// Cache part of the index in GPU memory, admitted by qtf, qtfdf, vfb or dynamic (VFB over the live
    /// stream); blocks the cache lacks travel with each batch, and the CPU completes what the GPU
    /// leaves, exactly. Needs --gpu-memory. Default: the whole index on the GPU.
    #[arg(id = "gpu-cache", long = "gpu-cache", value_parser = choice::<Policy>())]
    pub policy: Option<Policy>,
    /// The training query log of the cache's policy (one query per line, as --queries).
    #[arg(id = "gpu-cache-train", long = "gpu-cache-train")]
    pub train: Option<PathBuf>,
    /// The maximum admission ratio λ: the largest share of a list's blocks cached (0 to 1). Default:
    /// 0.5 for vfb and dynamic where the CPU completes on a global-score order, else 1.
    #[arg(id = "gpu-cache-ratio", long = "gpu-cache-ratio")]
    pub ratio: Option<f64>,
    /// VFB's block, in postings (a multiple of the index's 128-posting blocks).
    #[arg(id = "gpu-cache-block", long = "gpu-cache-block", default_value_t = 256)]
    pub block: u32,
    /// The batches' staging buffers S_b, e.g. 256M (default: a quarter of --gpu-memory, 64 MiB to
    /// 4 GiB); the cache S_c takes the rest of --gpu-memory.
    #[arg(id = "gpu-cache-buffer", long = "gpu-cache-buffer", value_parser = parse_bytes)]
    pub buffer: Option<usize>,
    /// How far the GPU answers a query whose blocks the cache lacks: cpu (where the cached prefixes
    /// reach; the CPU completes), transfer (everything, the batch carries the blocks), auto (cpu on a
    /// global-score-ordered index with early termination, else transfer).
    #[arg(id = "gpu-cache-complete", long = "gpu-cache-complete", default_value_t, value_parser = choice::<Completion>())]
    pub complete: Completion,
    /// The dynamic policy replans the cache after this many queries.
    #[arg(id = "gpu-cache-epoch", long = "gpu-cache-epoch", default_value_t = CacheOptions::default().epoch)]
    pub epoch: usize,
    /// The dynamic policy applies a new plan only where the bytes it saves the batches of an epoch are
    /// at least this many times the bytes it copies into the cache (0: every plan).
    #[arg(id = "gpu-cache-min-gain", long = "gpu-cache-min-gain", default_value_t = CacheOptions::default().min_gain)]
    pub min_gain: f64,
    /// The weight the dynamic policy keeps of what it has seen at each replan (0–1: lower follows a
    /// drifting stream sooner, higher estimates a steady one better).
    #[arg(id = "gpu-cache-decay", long = "gpu-cache-decay", default_value_t = CacheOptions::default().decay)]
    pub decay: f64,
    /// The share of the cache the dynamic policy leaves free for lists to grow into while their old
    /// prefixes are still in place (0–0.9).
    #[arg(id = "gpu-cache-headroom", long = "gpu-cache-headroom", default_value_t = CacheOptions::default().headroom)]
    pub headroom: f64,
    /// The GPU backend (not the hybrid) sends a call's queries in this many chunks, each split and
    /// sent while the previous one computes and completed on the CPU while the next one does.
    #[arg(id = "gpu-cache-chunks", long = "gpu-cache-chunks", default_value_t = CacheOptions::default().chunks)]
    pub chunks: usize,
    /// Pipeline slots of a GPU that caches part of the index: each stages a batch in its own share of
    /// --gpu-cache-buffer, so that a batch's copies overlap the kernels of those before it (at least 2;
    /// each holds about 0.85 GiB of per-CTA scratch outside --gpu-memory on an H100).
    #[arg(id = "gpu-cache-slots", long = "gpu-cache-slots", default_value_t = warpsearch_gpu::DEFAULT_CACHE_SLOTS)]
    pub slots: usize,
}

impl Default for CacheConfig {
    fn default() -> Self {
        let c = CacheOptions::default();
        CacheConfig {
            policy: None,
            train: None,
            ratio: None,
            block: 256,
            buffer: None,
            complete: Completion::Auto,
            epoch: c.epoch,
            min_gain: c.min_gain,
            decay: c.decay,
            headroom: c.headroom,
            chunks: c.chunks,
            slots: warpsearch_gpu::DEFAULT_CACHE_SLOTS,
        }
    }
}

/// Everything an engine is made from.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, clap::Args)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct EngineConfig {
    /// cpu, gpu, hybrid (CPU and GPU together; the CPU alone without a GPU), or auto (gpu when a GPU is
    /// usable for these options, else the CPU; says which and why).
    #[arg(long, default_value_t, value_parser = choice::<BackendChoice>())]
    pub backend: BackendChoice,
    /// Threads of the CPU backend (0: as many as the current rayon pool has, which `--threads` sets).
    #[arg(skip)]
    pub threads: usize,
    /// Of a sharded index, the shards (numbered from 0) this engine answers for, with the collection's
    /// statistics and docIDs (None: every shard). Engines over disjoint sets of shards, one per host,
    /// give answers whose merge (score descending, ties to the smaller docID) is the whole index's
    /// for AND and OR; and-or is the kept shards' own, so such a caller runs its steps itself (AND
    /// everywhere, then OR everywhere where the merged AND has fewer than k).
    #[arg(skip)]
    pub shards: Option<Vec<usize>>,
    /// Ranking and algorithm.
    #[command(flatten)]
    pub scoring: ScoringConfig,
    /// The GPU engine.
    #[command(flatten, next_help_heading = "GPU")]
    pub gpu: GpuConfig,
    /// The hybrid scheduler.
    #[command(flatten, next_help_heading = "Hybrid scheduler (--backend hybrid)")]
    pub hybrid: HybridConfig,
    /// The GPU list cache.
    #[command(
        flatten,
        next_help_heading = "GPU list cache (indexes larger than GPU memory)"
    )]
    pub cache: CacheConfig,
}

/// A list cache's training log given as texts, weighed as queries of this mode and k.
#[derive(Debug, Clone)]
pub struct TrainLog {
    /// The queries' texts.
    pub texts: Vec<String>,
    /// Their mode.
    pub mode: Mode,
    /// Their k.
    pub k: usize,
}

/// How a configuration error names a setting: `--gpu-cache-buffer` on the command line,
/// `gpu_cache_buffer` in Python.
pub type Namer<'a> = &'a dyn Fn(&str) -> String;

/// The command line's names: `--name`.
pub fn flag(name: &str) -> String {
    format!("--{name}")
}

impl EngineConfig {
    /// The search options on `index`: the index's k1, b and global-score α unless given.
    pub fn search_options(&self, index: &Index) -> SearchOptions {
        let meta = index.meta();
        let s = &self.scoring;
        let ranking = match s.ranking {
            RankingChoice::Bm25 => Ranking::Bm25,
            RankingChoice::Bm25Static => Ranking::Bm25Static {
                alpha: s.alpha.unwrap_or(match meta.doc_order {
                    DocOrder::GlobalScore { alpha } => alpha,
                    DocOrder::Input => 0.5,
                }),
            },
        };
        SearchOptions {
            ranking,
            bm25: Bm25Params {
                k1: s.k1.unwrap_or(meta.bm25.k1),
                b: s.b.unwrap_or(meta.bm25.b),
            },
            algorithm: s.algorithm,
        }
    }

    /// Where the BM25 parameters differ from the index's (a slower engine), a note that says so.
    pub fn bm25_note(&self, index: &Index) -> Option<String> {
        let options = self.search_options(index);
        let meta = index.meta();
        (options.bm25 != meta.bm25).then(|| {
            format!(
                "k1 {} b {} differ from the index's ({} {}): block bounds are recomputed for every query, \
                 which is slower; rebuild the index with these values for full speed",
                options.bm25.k1, options.bm25.b, meta.bm25.k1, meta.bm25.b
            )
        })
    }

    /// The GPU's options, its result buffers sized for `max_k`.
    pub fn gpu_options(&self, max_k: usize) -> GpuOptions {
        let g = &self.gpu;
        GpuOptions {
            batch_size: g.batch,
            slots: g.slots,
            window: g.window,
            memory_budget: g.memory,
            instrument: g.profile,
            split_cost: never_if_zero(g.split_or),
            and_split_cost: never_if_zero(g.split_and),
            or_split_floor: never_if_zero(g.split_or_floor),
            or_task_cost: g.split_or_task,
            split_waves: g.split_waves,
            wave_parts: g.split_waves_parts,
            small_or: g.small_or,
            merge_ratio: g.merge_ratio,
            max_k,
            kernels: g.kernels.options(),
            host_gather: g.host_gather,
            trace: g.trace,
            ..GpuOptions::default()
        }
    }

    /// The hybrid scheduler's options (0 workers: the engine's default for the machine).
    pub fn hybrid_options(&self) -> HybridOptions {
        let h = &self.hybrid;
        HybridOptions {
            cpu_workers: h.workers.unwrap_or(0),
            gpu_cpu_workers: h.gpu_workers,
            host_threads: h.host_threads,
            max_batch: self.gpu.batch.max(1),
            batch_target: std::time::Duration::from_secs_f64(h.batch_ms.max(0.0) / 1e3),
            split_above: (h.split_ms > 0.0).then(|| std::time::Duration::from_secs_f64(h.split_ms / 1e3)),
            split_parts: h.split_parts.max(1),
            split_gpu_share: h.split_gpu_share.fixed(),
            hedge_after: (h.hedge > 0.0).then_some(h.hedge),
            ..HybridOptions::default()
        }
    }

    /// The list cache's memory split and options (None: the whole index on the GPU), with `train` (or
    /// the training log file named in the configuration, as requests of `mode` and `k`) analysed for
    /// `index`; errors name each setting as `name` spells it.
    pub fn cache_options(
        &self,
        index: &Index,
        mode: Mode,
        k: usize,
        train: Option<TrainLog>,
        name: Namer,
    ) -> Result<Option<(CacheBudget, CacheOptions)>, EngineError> {
        let c = &self.cache;
        let Some(policy) = c.policy else {
            if c.train.is_some() || train.is_some() {
                return Err(EngineError::Config(format!(
                    "{} needs {} (qtf, qtfdf, vfb or dynamic)",
                    name("gpu-cache-train"),
                    name("gpu-cache")
                )));
            }
            return Ok(None);
        };
        let log = match (train, &c.train) {
            (Some(log), _) => Some(log),
            (None, Some(path)) => {
                let file = std::fs::File::open(path).map_err(|cause| {
                    EngineError::Index(warpsearch_index::IndexError::Io {
                        path: path.clone(),
                        cause,
                    })
                })?;
                let mut warnings = Vec::new();
                let lines = read_queries(file, &path.display().to_string(), &mut warnings)?;
                let texts = lines.into_iter().map(|l| l.text).collect();
                Some(TrainLog { texts, mode, k })
            }
            (None, None) => None,
        };
        let train = log.map(|log| {
            log.texts
                .iter()
                .map(|t| Request::new(Query::parse(index, t), log.mode, log.k))
                .collect()
        });
        let choice = CacheChoice {
            policy: policy.name().to_owned(),
            memory: self.gpu.memory,
            buffer: c.buffer,
            train,
            block: c.block,
            completion: c.complete.name().to_owned(),
            tuning: CacheOptions {
                ratio: c.ratio,
                epoch: c.epoch,
                min_gain: c.min_gain,
                headroom: c.headroom,
                decay: c.decay,
                chunks: c.chunks,
                slots: c.slots,
                ..CacheOptions::default()
            },
        };
        choice.resolve(name).map(Some).map_err(EngineError::Config)
    }

    /// The engine this configuration describes on `index`, checked for requests of `mode` and up to
    /// `max_k` results before any query runs; errors name settings as the command line does.
    pub fn open(&self, index: Arc<Index>, mode: Mode, max_k: usize) -> Result<Engine, EngineError> {
        self.open_with(index, mode, max_k, None, &flag)
    }

    /// [`EngineConfig::open`] with the cache's training log given as texts (`train`, over the
    /// configuration's file) and settings named by `name`.
    pub fn open_with(
        &self,
        index: Arc<Index>,
        mode: Mode,
        max_k: usize,
        train: Option<TrainLog>,
        name: Namer,
    ) -> Result<Engine, EngineError> {
        let options = self.search_options(&index);
        // A configuration file reaches this without the command line's parser.
        if self.scoring.max_query_terms == 0 {
            return Err(EngineError::Config(format!(
                "{} must be at least 1",
                name("max-query-terms")
            )));
        }
        self.check_feeders(&index, name)?;
        let hedge = self.hybrid.hedge;
        if !(hedge.is_finite() && hedge >= 0.0) {
            return Err(EngineError::Config(format!(
                "{} is {hedge}: give 0 (never) or a multiple of the GPU's predicted time, such as 1",
                name("hybrid-hedge")
            )));
        }
        if index.is_sharded() {
            return self.open_sharded(index, options, mode, max_k, train, name);
        }
        if self.shards.is_some() {
            return Err(EngineError::Config(format!(
                "{} applies to a sharded index; {} is one index (built without --shards)",
                name("shards"),
                index.dir().display()
            )));
        }
        let scorer =
            Scorer::new(index.clone(), options)?.with_max_query_terms(self.scoring.max_query_terms as usize);
        scorer.check(&Request::new(Query::default(), mode, max_k))?;
        // Each GPU once per thread that feeds it: replicas on one device share its SMs.
        let feeders = self.gpu.feeders as usize;
        let devices: Vec<usize> = self
            .devices(name)?
            .into_iter()
            .flat_map(|d| std::iter::repeat_n(d, feeders))
            .collect();
        let mut eopts = EngineOptions {
            backend: self.backend,
            cpu_threads: self.threads,
            gpu: self.gpu_options(max_k),
            hybrid: Some(self.hybrid_options()),
            cache: None,
            device: devices.first().copied().unwrap_or(0),
        };
        if let Some((budget, cache)) = self.cache_options(&index, mode, max_k, train, name)? {
            eopts.gpu.cache = Some(budget);
            eopts.cache = Some(cache);
        }
        let scorer = Arc::new(scorer);
        // The hybrid schedules one GPU beside the cores: it takes the first of several.
        if self.backend == BackendChoice::Hybrid {
            return Engine::new(scorer, eopts);
        }
        on_devices(&scorer, &eopts, &devices)
    }

    /// `--gpu-feeders`: 1 to 16, and above 1 only where each feeder can hold a whole copy of one
    /// index (not a sharded one, not with a list cache, whose budget is the device's) and the backend
    /// feeds its GPUs alone (not the hybrid).
    fn check_feeders(&self, index: &Index, name: Namer) -> Result<(), EngineError> {
        let feeders = self.gpu.feeders;
        let flag = name("gpu-feeders");
        if !(1..=16).contains(&feeders) {
            return Err(EngineError::Config(format!("{flag} is {feeders}: give 1 to 16")));
        }
        if feeders == 1 {
            return Ok(());
        }
        let against = if index.is_sharded() {
            Some(format!("a sharded index ({})", index.dir().display()))
        } else if self.cache.policy.is_some() {
            Some(format!(
                "{} (each feeder would take the cache's memory)",
                name("gpu-cache")
            ))
        } else if self.backend == BackendChoice::Hybrid {
            Some(format!("{} hybrid", name("backend")))
        } else {
            None
        };
        match against {
            Some(what) => Err(EngineError::Config(format!(
                "{flag} {feeders} does not apply to {what}: leave it at 1"
            ))),
            None => Ok(()),
        }
    }

    /// The GPUs `--gpus` names among those present (none for the CPU backend, or where there are
    /// none and `auto` was asked for).
    fn devices(&self, name: Namer) -> Result<Vec<usize>, EngineError> {
        if self.backend == BackendChoice::Cpu {
            return Ok(Vec::new());
        }
        self.gpu
            .gpus
            .devices(warpsearch_gpu::device_count())
            .map_err(|e| EngineError::Config(format!("{} {}: {e}", name("gpus"), self.gpu.gpus)))
    }
}

/// The engine with `options` on `devices`: on the one device (or, with none, as `options` say
/// without a GPU), or on each of several, as one: replicas of the index. Where the first of several
/// cannot use its GPU (`auto` fell back to the CPU), that CPU engine alone.
fn on_devices(
    scorer: &Arc<Scorer>,
    options: &EngineOptions,
    devices: &[usize],
) -> Result<Engine, EngineError> {
    if let [] | [_] = devices {
        let device = devices.first().copied().unwrap_or(options.device);
        return Engine::new(
            scorer.clone(),
            EngineOptions {
                device,
                ..options.clone()
            },
        );
    }
    // Opened side by side: each GPU takes its own copy of the index.
    let opened = side_by_side(devices, |&device| {
        Engine::new(
            scorer.clone(),
            EngineOptions {
                device,
                ..options.clone()
            },
        )
    });
    let mut engines = Vec::with_capacity(devices.len());
    for engine in opened {
        let engine = engine?;
        if !engine.has_gpu() {
            return Ok(engine);
        }
        engines.push(engine);
    }
    let choice = (options.backend == BackendChoice::Auto).then(|| {
        // A device named once per thread that feeds it, the repeats adjacent.
        let mut distinct = devices.to_vec();
        distinct.dedup();
        let feeders = devices.len() / distinct.len();
        format!(
            "backend auto: gpu on {} GPU{} ({}), the index on each{}",
            distinct.len(),
            if distinct.len() == 1 { "" } else { "s" },
            distinct
                .iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join(","),
            if feeders > 1 {
                format!(" {feeders} times, a thread feeding each copy")
            } else {
                String::new()
            }
        )
    });
    Engine::replicated(engines, choice)
}

impl EngineConfig {
    /// The engine of a sharded index (its head `index`): an engine per shard (of `shards` where
    /// given), each over the shard's scorer with `options`. On the CPU each has an equal share of the
    /// threads (at least one each); on GPUs the shards are spread over `--gpus` ([`place_shards`]),
    /// each shard's GPUs its replicas. With a list cache, each shard's engine caches its own lists in
    /// an even share of `--gpu-memory` of each GPU it is on. `hybrid` is refused.
    fn open_sharded(
        &self,
        index: Arc<Index>,
        options: warpsearch_query::SearchOptions,
        mode: Mode,
        max_k: usize,
        train: Option<TrainLog>,
        name: Namer,
    ) -> Result<Engine, EngineError> {
        let all = index.shards().len();
        let members: Vec<usize> = match &self.shards {
            None => (0..all).collect(),
            Some(list) => {
                // Each shard once: a shard answering twice would put its documents twice in the merge.
                let mut seen = vec![false; all];
                for &i in list {
                    if i >= all || std::mem::replace(&mut seen[i], true) {
                        return Err(EngineError::Config(format!(
                            "{} {list:?}: {} has shards 0 to {}, each named at most once",
                            name("shards"),
                            index.dir().display(),
                            all - 1
                        )));
                    }
                }
                if list.is_empty() {
                    return Err(EngineError::Config(format!(
                        "{} is empty: name at least one shard of {} (0 to {})",
                        name("shards"),
                        index.dir().display(),
                        all - 1
                    )));
                }
                list.clone()
            }
        };
        let count = members.len();
        if self.backend == BackendChoice::Hybrid {
            return Err(EngineError::Config(format!(
                "{} hybrid: a sharded index ({} shards, {}) is searched by an engine per shard on the \
                 CPU or the GPUs; use {} cpu, gpu or auto",
                name("backend"),
                count,
                index.dir().display(),
                name("backend")
            )));
        }
        let devices = self.devices(name)?;
        if devices.is_empty() && self.backend == BackendChoice::Gpu {
            return Err(EngineError::GpuRequired(warpsearch_gpu::GpuError::Unavailable(
                "no CUDA device for the shards".into(),
            )));
        }
        let placed = place_shards(count, &devices);
        let threads = match self.threads {
            0 => rayon::current_num_threads(),
            n => n,
        };
        let each = threads.div_ceil(count).max(1);
        let eopts = EngineOptions {
            backend: if devices.is_empty() {
                BackendChoice::Cpu
            } else {
                self.backend
            },
            cpu_threads: each,
            gpu: self.gpu_options(max_k),
            ..EngineOptions::default()
        };
        let max_terms = self.scoring.max_query_terms as usize;
        // Each shard's options: with a list cache, its own plan over its lists, in its share of the
        // memory of the GPU it is on (the shards placed there divide it evenly).
        let shard_options = |shard: &Index, on: &[usize]| -> Result<EngineOptions, EngineError> {
            let sharing = on
                .first()
                .map_or(1, |d| placed.iter().filter(|p| p.first() == Some(d)).count());
            let mut config = self.clone();
            config.gpu.memory = self.gpu.memory.map(|m| m / sharing);
            let mut eopts = eopts.clone();
            if let Some((budget, cache)) = config.cache_options(shard, mode, max_k, train.clone(), name)? {
                eopts.gpu.cache = Some(budget);
                eopts.cache = Some(cache);
            }
            Ok(eopts)
        };
        let mut engines = Vec::with_capacity(count);
        let mut first: Option<Arc<Scorer>> = None;
        for (&i, on) in members.iter().zip(&placed) {
            let shard = &index.shards()[i];
            let scorer = Scorer::new(shard.index().clone(), options)?.with_max_query_terms(max_terms);
            scorer.check(&Request::new(Query::default(), mode, max_k))?;
            let scorer = Arc::new(scorer);
            first.get_or_insert_with(|| scorer.clone());
            engines.push(on_devices(&scorer, &shard_options(shard.index(), on)?, on)?);
        }
        let first = first.expect("a sharded index has at least one shard");
        let head = Arc::new(Scorer::for_head(index, &first));
        let on_gpus = engines.iter().all(Engine::has_gpu);
        let choice = (self.backend == BackendChoice::Auto).then(|| match on_gpus {
            true => format!("backend auto: gpu, {count} shards over {} GPUs", devices.len()),
            false if devices.is_empty() => {
                format!("backend auto: CPU, {count} shards, an engine of {each} threads each")
            }
            false => format!(
                "backend auto: CPU, {count} shards, an engine of {each} threads each (the GPUs cannot \
                 serve these options)"
            ),
        });
        Ok(Engine::sharded(head, members, engines, each, choice))
    }
}

fn never_if_zero(v: u64) -> u64 {
    if v == 0 {
        u64::MAX
    } else {
        v
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        engine: EngineConfig,
    }

    #[test]
    fn defaults_agree_between_the_command_line_and_the_struct() {
        let parsed = Cli::try_parse_from(["x"]).unwrap().engine;
        assert_eq!(parsed, EngineConfig::default());
    }

    #[test]
    fn options_parse_into_typed_fields() {
        let parsed = Cli::try_parse_from([
            "x",
            "--backend",
            "hybrid",
            "--ranking",
            "bm25-static",
            "--algorithm",
            "bmw",
            "--gpu-memory",
            "2G",
            "--gpu-cache",
            "vfb",
            "--gpu-cache-complete",
            "cpu",
            "--hybrid-split-gpu-share",
            "model",
        ])
        .unwrap()
        .engine;
        assert_eq!(parsed.backend, BackendChoice::Hybrid);
        assert_eq!(parsed.scoring.ranking, RankingChoice::Bm25Static);
        assert_eq!(parsed.scoring.algorithm, Algorithm::BlockMaxWand);
        assert_eq!(parsed.gpu.memory, Some(2 << 30));
        assert_eq!(parsed.cache.policy, Some(Policy::Vfb));
        assert_eq!(parsed.cache.complete, Completion::Cpu);
        assert_eq!(parsed.hybrid.split_gpu_share.fixed(), None);
        let err = Cli::try_parse_from(["x", "--backend", "tpu"])
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("auto, cpu, gpu, hybrid"), "{err}");
    }

    #[test]
    fn the_gpu_cut_reaches_the_gpu_options() {
        let defaults = EngineConfig::default().gpu_options(10);
        let g = GpuOptions::default();
        assert_eq!(
            (
                defaults.wave_parts,
                defaults.or_task_cost,
                defaults.or_split_floor
            ),
            (g.wave_parts, g.or_task_cost, g.or_split_floor)
        );
        let parsed = Cli::try_parse_from([
            "x",
            "--gpu-split-waves-parts",
            "32",
            "--gpu-split-or-task",
            "0",
            "--gpu-split-or-floor",
            "4096",
        ])
        .unwrap()
        .engine
        .gpu_options(10);
        assert_eq!(
            (parsed.wave_parts, parsed.or_task_cost, parsed.or_split_floor),
            (32, 0, 4096)
        );
        let err = Cli::try_parse_from(["x", "--gpu-split-waves-parts", "0"])
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("--gpu-split-waves-parts"), "{err}");
    }

    #[test]
    fn a_hedge_of_zero_is_none() {
        let hedge = |args: &[&str]| {
            let args = [&["x"][..], args].concat();
            Cli::try_parse_from(args)
                .unwrap()
                .engine
                .hybrid_options()
                .hedge_after
        };
        assert_eq!(hedge(&[]), Some(0.5));
        assert_eq!(hedge(&["--hybrid-hedge", "2.5"]), Some(2.5));
        assert_eq!(hedge(&["--hybrid-hedge", "0"]), None);
    }

    #[test]
    fn max_query_terms_defaults_to_the_scorers_cap_and_refuses_zero() {
        let parsed = Cli::try_parse_from(["x"]).unwrap().engine;
        assert_eq!(parsed.scoring.max_query_terms as usize, DEFAULT_MAX_QUERY_TERMS);
        let parsed = Cli::try_parse_from(["x", "--max-query-terms", "7"])
            .unwrap()
            .engine;
        assert_eq!(parsed.scoring.max_query_terms, 7);
        assert!(Cli::try_parse_from(["x", "--max-query-terms", "0"]).is_err());
    }

    #[test]
    fn serde_round_trips_and_refuses_unknown_settings() {
        let mut c = EngineConfig::default();
        c.gpu.batch = 1024;
        c.hybrid.split_gpu_share = "model".parse().unwrap();
        let text = serde_json::to_string(&c).unwrap();
        let back: EngineConfig = serde_json::from_str(&text).unwrap();
        assert_eq!(back, c);
        let err = serde_json::from_str::<EngineConfig>(r#"{"gpu": {"bach": 3}}"#).unwrap_err();
        assert!(err.to_string().contains("bach"), "{err}");
    }
}
