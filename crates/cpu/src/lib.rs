//! Exact query processing on the CPU.
//!
//! For now this part holds the exhaustive evaluator, the oracle every fast path (CPU DAAT, MaxScore,
//! block-max WAND, every GPU kernel) is checked against: it decodes every posting of the query's
//! lists, scores every matching document with BM25 and sorts them all.

#![warn(missing_docs)]

pub mod exhaustive;

pub use exhaustive::{exhaustive, Mode, Scored};
