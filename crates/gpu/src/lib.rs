//! Exact batched query processing on an NVIDIA GPU.
//!
//! - [`abi`]: what the host shares with the kernels: the `#[repr(C)]` structs they read (layouts
//!   checked on both sides at compile time) and every shared number, given to NVRTC as `-D` defines.
//! - [`device`]: opening the GPU (never panicking where CUDA is absent) and the kernels, compiled from
//!   the files of `kernels/` (one translation unit; `nvrtc` holds the source and NVRTC's options) at
//!   start-up.
//! - [`residency`]: the index in device memory under a memory budget, behind one interface that says
//!   where each list's blocks are.
//! - [`cache`]: the list cache's host side: plans of cached list prefixes, device space, placement.
//! - [`stage`]: where a batch finds each term's blocks: the cache, or staged with the batch.
//! - [`view`]: the cache's contents as the engine reads them, on any thread, to cut queries' ranges.
//! - `testing` (with the `testing` feature, for tests): the device opened once per test process,
//!   with the kernels compiled as the test run's environment asks, and skips that say why.
//! - [`batch`]: the descriptors of a batch of queries as the kernels read them.
//! - `searcher`: [`GpuSearcher`], the batch pipeline (pipeline slots of a stream and pinned buffers
//!   each), split by job (setup, validation, calls, and-or, pipeline, collection, cache plans); what
//!   it fails it returns as [`GpuError`]s (the engine crate answers those on the CPU). It keeps the
//!   answers of the calls in flight, so that a caller may hand over its next call before the last
//!   one returns. [`options`]: its tunables; [`stats`]: what it counts.
//! - [`build`]: [`GpuBuilder`], the index build's inversion on the GPU (the tuples sorted by term, each
//!   list's offsets and every block's bound), for `warpsearch_index::build`.
//! - [`kernels`]: thin wrappers that run the decode and top-k kernels alone, for tests and benchmarks.
//! - `launch`: every kernel launch; `driver`: every other raw driver call (copies, page-locked memory,
//!   the libraries' presence). They hold all of the crate's `unsafe` code, each block with its contract.
//!
//! It plans queries through the backend-neutral `warpsearch_query` layer and knows nothing of the CPU
//! engine.
//!
//! Every result equals the CPU oracle's bit for bit: the kernels evaluate the same float operations in the
//! same order (compiled without fused multiply-add), and ties go to the smaller docID.

#![warn(missing_docs)]

pub mod abi;
pub mod batch;
pub mod build;
pub mod cache;
pub mod device;
mod driver;
mod error;
pub mod kernels;
mod launch;
mod memory;
mod nvrtc;
pub mod options;
mod registered;
pub mod residency;
mod searcher;
pub mod stage;
pub mod stats;
#[cfg(feature = "testing")]
pub mod testing;
pub mod view;

pub use build::GpuBuilder;
pub use cache::{CachePlan, Capacity};
pub use device::{device_count, Gpu};
pub use error::GpuError;
pub use memory::{GpuMemory, MemoryProbe};
pub use options::{CacheBudget, GpuOptions, KernelOptions, DEFAULT_CACHE_SLOTS};
pub use residency::DeviceIndex;
pub use searcher::{CallId, GpuSearcher};
pub use stats::{GpuStats, QueryTimes, ThreadTimes};
pub use view::CacheView;
