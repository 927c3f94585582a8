//! warpsearch's inverted index: what every query backend reads.
//!
//! - [`analyzer`]: text to terms, shared by documents and queries.
//! - [`build`]: a collection (JSON lines of any fields, or `id<TAB>text`) to index, memory-bounded,
//!   multi-threaded.
//! - [`writer`] / [`reader`]: the on-disk format (`docs/format.md`), written atomically and
//!   read-only, read into memory (postings memory-mapped).
//! - [`meta`]: `meta.json`, the metadata as plain JSON.
//! - [`store`]: stored documents (`index --store`), compressed in blocks, read by docID.
//! - [`shards`]: sharded indexes, one set of collection statistics for every shard.
//! - [`replace`]: atomic replacement of an output, failure injection, cleanup of killed runs' leftovers.
//! - [`ciff`]: import and export of the Common Index File Format.
//! - [`pisa`]: export to PISA's binary collection, so PISA can index exactly our postings.
//! - [`lookup`]: query terms looked up through a per-thread cache of tokens.
//! - [`queries`]: query files (`qid<TAB>text` lines, TREC topics, JSON lines).
//! - [`eval`]: a TREC run scored against qrels with trec_eval's measures.
//! - [`inspect`]: statistics and a per-codec size and speed comparison.
//! - [`synth`]: a synthetic collection of any size generated as posting lists from a real sample.
//! - [`bm25`]: the ranking function whose upper bounds the index stores.
//! - [`order`]: the global-score docID order (docs/references.md#pruned-list-caching eq. 4), for early termination.
//!
//! This part knows nothing of query processing; the CPU and GPU engines depend on it, never the reverse.

#![warn(missing_docs)]

pub mod analyzer;
pub mod bm25;
pub mod build;
pub mod ciff;
pub mod container;
pub mod error;
pub mod eval;
pub mod format;
pub mod inspect;
pub mod lookup;
pub mod meta;
mod open;
pub mod order;
pub mod pisa;
pub mod queries;
pub mod reader;
pub mod replace;
pub mod shards;
pub mod store;
pub(crate) mod strmap;
pub mod synth;
pub mod termdict;
#[doc(hidden)]
#[cfg(any(test, feature = "testing"))]
pub mod testdata;
pub(crate) mod words;
pub mod writer;

pub use analyzer::AnalyzerConfig;
pub use bm25::{Bm25, Bm25Params};
pub use error::{IndexError, Result};
pub use format::{BlockMeta, CollectionStats, DocOrder, IndexMeta, ShardEntry, ShardOf, TermRecord};
pub use lookup::Lookup;
pub use reader::{Index, PostingList};
pub use warpsearch_codec::{Codec, BLOCK_LEN};
pub use writer::{DocIds, DocTable, EncodedList, IndexWriter, ListEncoder, WriterOptions};
