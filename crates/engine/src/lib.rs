//! The engine: the one part that knows both backends. It chooses the backend, sends batches to it, and
//! answers on the CPU whatever the GPU fails, so that no query is lost.
//!
//! - [`backend`]: which backend runs ([`Backend`]) and what the user asked for ([`BackendChoice`]).
//! - [`engine`]: [`Engine`], over one shared [`warpsearch_query::Scorer`].
//! - [`hybrid`]: the scheduler that runs one query stream on the CPU and the GPU together (queues,
//!   stealing, deadlines, GPU batch sizing, queries split by docID range); [`cost`]: the per-query
//!   cost prediction it schedules by, learned online.
//!
//! The engine never prints: what a user should hear of (the automatic choice, a fallback) comes back as
//! text from [`Engine::choice`] and [`Engine::take_notes`], for the binary to show.

#![warn(missing_docs)]

pub mod backend;
pub mod cache;
pub mod cost;
pub mod engine;
pub mod hybrid;

pub use backend::{Backend, BackendChoice};
pub use cache::{CacheChoice, CacheOptions, CacheStats, Completion, Policy};
pub use engine::{Engine, EngineOptions};
pub use hybrid::{Done, Hybrid, HybridOptions, HybridStats, Reply, ServedBy, Slots};
pub use warpsearch_gpu::{CacheBudget, GpuMemory, GpuOptions, GpuStats};

/// What can go wrong when an engine is made.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// `--backend gpu` was asked for and the GPU cannot serve these options.
    #[error("--backend gpu: {0}")]
    GpuRequired(warpsearch_gpu::GpuError),
    /// The index or the options are unusable.
    #[error(transparent)]
    Index(#[from] warpsearch_index::IndexError),
}
