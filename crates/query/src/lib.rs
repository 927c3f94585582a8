//! The backend-neutral query layer every backend depends on, and nothing else.
//!
//! - [`query`]: analysed queries, matching [`Mode`], [`Ranking`], ranked documents ([`Scored`]).
//! - [`options`]: a searcher's [`SearchOptions`] and a query's [`Request`] (mode and k per query), the
//!   [`Answer`] a backend gives.
//! - [`fixed`]: the fixed point in which contributions are summed, exactly and in any order.
//! - [`norms`]: the per-document length norms, in huge pages where the system has them.
//! - [`scorer`]: an index under one ranking, shared by every backend ([`Scorer`]).
//! - [`plan`]: the per-query [`Plan`] (terms, weights, upper bounds, a docID range and a starting
//!   threshold) whose scoring every backend follows, so all of them return bit-identical scores.
//! - [`topk`]: the top-k collector; [`merge`]: the exact merge of partial top-k lists.
//!
//! Lifetime of a query: text → [`Query`] (analysed) → [`Request`] (mode, k) → [`Plan`] (bound to the
//! index, one [`Part`] of the work) → a backend's top k → [`merge::merge_top_k`] of the parts.

#![warn(missing_docs)]

pub mod fixed;
pub mod merge;
pub mod norms;
pub mod options;
pub mod plan;
pub mod query;
pub mod scorer;
pub mod topk;

pub use fixed::Fixed;
pub use merge::merge_top_k;
pub use options::{Algorithm, Answer, Request, SearchOptions, MAX_K};
pub use plan::{DocRange, Part, Plan, PlanTerm, Prior};
pub use query::{Mode, Query, Ranking, Scored};
pub use scorer::Scorer;
pub use topk::TopK;
