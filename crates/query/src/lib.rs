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
//! - [`shard`]: a sharded index's query as each shard answers it (in the shard's term ordinals, weighed
//!   with the collection's statistics).
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
pub mod shard;
pub mod topk;

pub use fixed::Fixed;
pub use merge::{keep_top_k, merge_top_k};
pub use options::{Algorithm, Answer, Request, SearchOptions, MAX_K};
pub use plan::{DocRange, Part, Plan, PlanTerm, Prior};
pub use query::{CollectionTerm, Mode, Query, Ranking, Scored};
pub use scorer::{Scorer, DEFAULT_MAX_QUERY_TERMS};
pub use topk::TopK;

/// The choice called `name` among `T`'s names (a mode, an algorithm, a backend…), or an error that
/// names `what` was asked for and every choice: "unknown mode 'xor': expected and, or or and-or".
pub fn named<T: std::str::FromStr + strum::VariantNames>(what: &str, name: &str) -> Result<T, String> {
    name.parse().map_err(|_| {
        let names = T::VARIANTS;
        let list = match names.split_last() {
            Some((last, [])) => last.to_string(),
            Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
            None => String::new(),
        };
        format!("unknown {what} '{name}': expected {list}")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn choices_parse_by_name_and_errors_list_every_name() {
        assert_eq!(named::<Mode>("mode", "and-or"), Ok(Mode::AndOr));
        assert_eq!(named::<Mode>("mode", "andor"), Ok(Mode::AndOr));
        assert_eq!(Mode::AndOr.to_string(), "and-or");
        assert_eq!(
            named::<Mode>("mode", "xor").unwrap_err(),
            "unknown mode 'xor': expected and, or or and-or"
        );
        assert_eq!(
            named::<Algorithm>("algorithm", "bmw"),
            Ok(Algorithm::BlockMaxWand)
        );
        assert_eq!(Algorithm::EarlyTermination.name(), "early");
        assert!(named::<Algorithm>("algorithm", "wand")
            .unwrap_err()
            .ends_with("expected auto, exhaustive, daat, maxscore, bmw or early"));
    }
}
