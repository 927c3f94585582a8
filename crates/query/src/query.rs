//! Analysed queries, what they match ([`Mode`]), how documents are scored ([`Ranking`]) and a ranked
//! document ([`Scored`]).
//!
//! A [`Query`] is the analysed text: its distinct terms in order of first appearance, each with how
//! often it occurs (Anserini's bag-of-words query weights a repeated term by its count), and the terms
//! the index does not know.

use warpsearch_index::{Index, Lookup};

/// Which documents match.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    strum::Display,
    strum::EnumString,
    strum::IntoStaticStr,
    strum::VariantNames,
    serde::Serialize,
    serde::Deserialize,
)]
#[strum(serialize_all = "kebab-case")]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// Documents containing every query term (a term the index lacks matches nothing).
    And,
    /// Documents containing at least one query term.
    Or,
    /// AND; when that finds fewer than k documents, the OR result instead (docs/references.md#ding-gpu-query-processing section 8.3).
    /// Also written `andor`.
    #[strum(to_string = "and-or", serialize = "andor")]
    #[serde(alias = "andor")]
    AndOr,
}

impl Mode {
    /// Every mode, in the order the command line lists them.
    pub const ALL: [Mode; 3] = [Mode::And, Mode::Or, Mode::AndOr];

    /// The command-line name.
    pub fn name(self) -> &'static str {
        self.into()
    }
}

/// How documents are scored.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Ranking {
    /// BM25: Σ count(t) · idf(t) · tf part (crate `warpsearch_index::bm25`).
    Bm25,
    /// docs/references.md#pruned-list-caching equation (3): α · static(d) + (1 − α) · Σ w̄_t · IR(d, t), with static scores min-max
    /// normalised to [0, 1], IR(d, t) = tf part / (k1 + 1) ∈ [0, 1) and w̄_t = count(t) · idf(t) divided
    /// by the sum over the query's known terms, so both halves lie in [0, 1].
    Bm25Static {
        /// Weight of the static score, in [0, 1].
        alpha: f32,
    },
}

/// A ranked document.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Scored {
    /// Internal docID.
    pub doc: u32,
    /// Score under the query's ranking.
    pub score: f32,
}

/// The distinct terms up to which a query's terms are found by a scan; beyond, through a map (a scan
/// per term made a query of 100,000 distinct terms take seconds to analyse).
const SCAN_TERMS: usize = 32;

/// Where each distinct term of a long query sits in [`Query::terms`].
type Seen = std::collections::HashMap<u32, usize>;

/// An analysed query.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Query {
    /// Distinct known terms (ordinals) in order of first appearance, with their counts.
    pub terms: Vec<(u32, u32)>,
    /// Analysed terms the index does not contain, in order.
    pub unknown: Vec<String>,
    /// For a query sent to one shard of a sharded index: the query's terms as the whole collection
    /// knows them, in order of first appearance, so that the shard weighs its terms as the single
    /// index would (document frequencies of the collection; `bm25-static`'s sum and the fixed point
    /// over every term, those the shard lacks included). Empty for a query of one index.
    pub collection: Vec<CollectionTerm>,
}

/// A query term as the whole collection of a sharded index knows it ([`Query::collection`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CollectionTerm {
    /// The term's document frequency in the collection.
    pub df: u64,
    /// How often the query has it.
    pub count: u32,
    /// Whether the shard has the term: the shard's terms ([`Query::terms`]) are the collection
    /// terms it has, in the same order.
    pub here: bool,
}

impl Query {
    /// Analyses `text` with the index's analyzer and looks its terms up.
    pub fn parse(index: &Index, text: &str) -> Query {
        let mut query = Query::default();
        let mut seen = Seen::default();
        index.for_each_query_term(text, |term| match term {
            Lookup::Known(id) => query.add(id, &mut seen),
            Lookup::Unknown(term) => query.unknown.push(term.to_owned()),
        });
        query
    }

    /// A query of term ordinals (`None` for a term the index lacks), in order, repeats counted.
    pub fn from_ids(ids: &[Option<u32>]) -> Query {
        let mut query = Query::default();
        let mut seen = Seen::default();
        for id in ids {
            match id {
                Some(id) => query.add(*id, &mut seen),
                None => query.unknown.push(String::from("?")),
            }
        }
        query
    }

    /// Counts one more occurrence of term `id`; `seen` finds its place once the query is long.
    fn add(&mut self, id: u32, seen: &mut Seen) {
        let at = if self.terms.len() < SCAN_TERMS {
            self.terms.iter().position(|(t, _)| *t == id)
        } else {
            if seen.is_empty() {
                seen.extend(self.terms.iter().enumerate().map(|(i, &(t, _))| (t, i)));
            }
            seen.get(&id).copied()
        };
        match at {
            Some(i) => self.terms[i].1 += 1,
            None => {
                if !seen.is_empty() {
                    seen.insert(id, self.terms.len());
                }
                self.terms.push((id, 1));
            }
        }
    }

    /// The distinct known terms' ordinals, in order of first appearance.
    pub fn term_ids(&self) -> Vec<u32> {
        self.terms.iter().map(|&(t, _)| t).collect()
    }

    /// Whether no term survived analysis (empty text, only stopwords or punctuation).
    pub fn is_empty(&self) -> bool {
        self.terms.is_empty() && self.unknown.is_empty()
    }

    /// Whether the query can match nothing under `mode`: no known term, or (AND) an unknown one.
    pub fn matches_nothing(&self, mode: Mode) -> bool {
        self.terms.is_empty() || (mode == Mode::And && !self.unknown.is_empty())
    }
}
