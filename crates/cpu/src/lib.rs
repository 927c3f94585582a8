//! Exact ranked query processing on the CPU.
//!
//! - [`query`]: analysed queries, rankings (`bm25`, `bm25-static`) and the per-query [`Plan`] whose
//!   scoring every algorithm shares, so all of them return bit-identical scores.
//! - One algorithm per file: [`exhaustive`] (the oracle every fast path is tested against), [`and`]
//!   (DAAT ranked AND with skipping), [`maxscore`] and [`bmw`] (ranked OR with dynamic pruning),
//!   [`early`] (early termination on a global-score-ordered index, papers/000 Algorithm 1).
//! - [`cursor`]: block-skipping list cursors; [`topk`]: the top-k heap.
//! - [`engine`]: options, algorithm choice, and the batch API over all cores.

#![warn(missing_docs)]

pub mod and;
pub mod bmw;
pub mod cursor;
pub mod early;
pub mod engine;
pub mod exhaustive;
pub mod maxscore;
pub mod query;
pub mod topk;

pub use engine::{Algorithm, Answer, SearchOptions, Searcher, MAX_K};
pub use query::{Mode, Plan, Query, Ranking, Scored};
