//! Exact ranked query processing on the CPU.
//!
//! It executes the backend-neutral plans of `warpsearch_query` (whose scoring every algorithm shares,
//! so all of them return bit-identical scores), and knows nothing of the GPU.
//! - One algorithm per file: [`exhaustive`] (the oracle every fast path is tested against), [`and`]
//!   (DAAT ranked AND with skipping), [`maxscore`] and [`bmw`] (ranked OR with dynamic pruning),
//!   [`early`] (early termination on a global-score-ordered index, docs/references.md#pruned-list-caching Algorithm 1).
//! - [`cursor`]: block-skipping list cursors restricted to a plan's docID range; [`frontier`]: the
//!   docID order of a long query's many cursors, through a heap.
//! - [`engine`]: algorithm choice, one query or one part of one, the batch API over all cores.

#![warn(missing_docs)]

pub mod and;
pub mod bmw;
pub mod cursor;
pub mod early;
pub mod engine;
pub mod exhaustive;
pub mod frontier;
pub mod maxscore;

pub use engine::CpuSearcher;
