//! The engine: the one part that knows both backends, and the one front door for queries. It chooses
//! the backend, takes requests from any thread ([`Engine::submit`]), hands each answer to the caller's
//! [`Reply`] as soon as it is ready, and answers on the CPU whatever the GPU fails, so that no query is
//! lost.
//!
//! - [`backend`]: which backend runs ([`Backend`]) and what the user asked for ([`BackendChoice`]).
//! - [`engine`]: [`Engine`], over one shared [`warpsearch_query::Scorer`]; [`reply`]: where answers go.
//! - The backends' threads: the CPU's workers, the GPU's dispatcher, and the hybrid scheduler; the
//!   GPU's failures become notes in one place (every backend answers them on the CPU).
//! - [`cache`]: the GPU list cache's policy (what it keeps, how far the GPU answers each query);
//!   [`split`]: a query cut between the GPU's part and the CPU's exact completion, which the GPU backend
//!   and the hybrid run.
//! - The shards' engines of a sharded index: every request sent to each shard, the answers merged
//!   exactly; replicas: the same index on several GPUs as one engine; [`gpus`]: which GPUs
//!   (`--gpus`) and where shards go on them.
//! - [`hybrid`]: the scheduler that runs one query stream on the CPU and the GPU together (queues,
//!   stealing, deadlines, GPU batch sizing, queries split by docID range); [`cost`]: the per-query
//!   cost prediction it schedules by, learned online.
//!
//! - [`devices`]: the GPUs outside answering queries (how many, the index build's device, `gpu-check`).
//!
//! The engine never prints: what a user should hear of (the automatic choice, a fallback) comes back as
//! text from [`Engine::choice`] and [`Engine::take_notes`], for the binary to show.

#![warn(missing_docs)]

pub mod backend;
pub mod cache;
pub mod config;
pub mod cost;
pub mod devices;
pub mod engine;
mod exec;
pub mod gpus;
pub mod hybrid;
mod notes;
mod replicas;
pub mod reply;
pub mod scheduler;
mod shards;
pub mod split;

pub use backend::{Backend, BackendChoice};
pub use cache::{CacheChoice, CacheOptions, CacheStats, Completion, Policy};
pub use config::{
    CacheConfig, EngineConfig, GpuConfig, HybridConfig, KernelConfig, RankingChoice, ScoringConfig, Share,
    TrainLog,
};
pub use engine::{Engine, EngineOptions};
pub use gpus::GpuSet;
pub use hybrid::{HybridOptions, HybridStats};
pub use reply::{Collect, Done, Reply, ServedBy, Slots};
pub use scheduler::Scheduler;
pub use warpsearch_gpu::{CacheBudget, GpuMemory, GpuOptions, GpuStats, QueryTimes, ThreadTimes};

/// What can go wrong when an engine is made.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// `--backend gpu` was asked for and the GPU cannot serve these options.
    #[error("--backend gpu: {0}")]
    GpuRequired(warpsearch_gpu::GpuError),
    /// A setting is out of range or inconsistent (the message names it).
    #[error("{0}")]
    Config(String),
    /// The CPU backend's threads could not be started.
    #[error("starting the CPU engine's threads: {0}")]
    Threads(std::io::Error),
    /// The index or the options are unusable.
    #[error(transparent)]
    Index(#[from] warpsearch_index::IndexError),
}
