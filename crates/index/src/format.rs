//! The records and metadata of an index directory (`docs/format.md` is the byte-level spec).

use bytemuck::{Pod, Zeroable};
use serde::{Deserialize, Serialize};
use warpsearch_codec::{Codec, ListParams};

use crate::analyzer::AnalyzerConfig;
use crate::bm25::Bm25Params;

/// File names and their container kinds.
pub mod files {
    /// Index metadata: plain JSON (`crate::meta`); the kind is that of format version 1's envelope.
    pub const META: (&str, &[u8; 8]) = ("meta.json", b"META\0\0\0\0");
    /// Term dictionary: an `fst` map from term bytes to term ordinal.
    pub const TERMS_FST: (&str, &[u8; 8]) = ("terms.fst", b"TERMSFST");
    /// One [`super::TermRecord`] per term ordinal.
    pub const TERMS: (&str, &[u8; 8]) = ("terms.bin", b"TERMS\0\0\0");
    /// One [`super::BlockMeta`] per block of every list (the skip data).
    pub const BLOCKS: (&str, &[u8; 8]) = ("blocks.bin", b"BLOCKS\0\0");
    /// Encoded blocks, as `u32` words.
    pub const POSTINGS: (&str, &[u8; 8]) = ("postings.bin", b"POSTINGS");
    /// Document lengths, `u32` per docID.
    pub const DOC_LENS: (&str, &[u8; 8]) = ("doclens.bin", b"DOCLENS\0");
    /// External document ids: `u64` offsets (N + 1) then UTF-8 bytes.
    pub const DOC_IDS: (&str, &[u8; 8]) = ("docids.bin", b"DOCIDS\0\0");
    /// Static document scores, `f32` per docID (optional).
    pub const STATIC: (&str, &[u8; 8]) = ("static.bin", b"STATIC\0\0");
    /// Global scores GS(d) (docs/references.md#pruned-list-caching eq. 4), `f32` per docID, non-increasing (global-score order only).
    pub const GLOBAL: (&str, &[u8; 8]) = ("global.bin", b"GLOBAL\0\0");
    /// Stored documents, zstd-compressed blocks read by docID (`index --store`; optional).
    pub const DOCS: (&str, &[u8; 8]) = ("docs.bin", b"DOCS\0\0\0\0");

    /// The names of the files every index has (the optional `static.bin`, `global.bin` and `docs.bin`
    /// aside).
    pub const REQUIRED: [&str; 7] = [
        META.0,
        TERMS_FST.0,
        TERMS.0,
        BLOCKS.0,
        POSTINGS.0,
        DOC_LENS.0,
        DOC_IDS.0,
    ];

    /// Whether `name` is the name of a file an index may hold: what replacing or removing an index
    /// removes, and nothing else.
    pub fn is_index_file(name: &str) -> bool {
        REQUIRED.contains(&name) || name == STATIC.0 || name == GLOBAL.0 || name == DOCS.0
    }

    /// The directory of shard `i` inside a sharded index.
    pub fn shard_dir(i: usize) -> String {
        format!("shard-{i:04}")
    }

    /// Whether `name` is the name of a shard's directory ([`shard_dir`]): what replacing or removing a
    /// sharded index removes with its files.
    pub fn is_shard_dir(name: &str) -> bool {
        name.strip_prefix("shard-")
            .is_some_and(|n| n.len() >= 4 && n.bytes().all(|b| b.is_ascii_digit()))
    }
}

/// Per-term record in `terms.bin` (40 bytes, little-endian).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Pod, Zeroable)]
pub struct TermRecord {
    /// Document frequency (postings in the list); at least 1.
    pub df: u32,
    /// Length of the list's encoded blocks in `u32` words.
    pub len_words: u32,
    /// Collection frequency: the sum of the list's term frequencies.
    pub cf: u64,
    /// Index of the list's first [`BlockMeta`] in `blocks.bin`.
    pub first_block: u64,
    /// Offset of the list's first block in `postings.bin`, in `u32` words.
    pub offset_words: u64,
    /// Upper bound of the term's BM25 score over the whole list (index parameters).
    pub max_score: f32,
    /// Codec parameter for docIDs (PForDelta width / Rice `b`).
    pub doc_param: u8,
    /// Codec parameter for frequencies.
    pub freq_param: u8,
    /// Zero.
    pub reserved: [u8; 2],
}

impl TermRecord {
    /// Number of blocks of the list.
    pub fn num_blocks(&self) -> usize {
        (self.df as usize).div_ceil(warpsearch_codec::BLOCK_LEN)
    }

    /// The codec parameters.
    pub fn params(&self) -> ListParams {
        ListParams {
            doc: self.doc_param,
            freq: self.freq_param,
        }
    }
}

/// Skip data of one block in `blocks.bin` (20 bytes, little-endian).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Pod, Zeroable)]
pub struct BlockMeta {
    /// The block's first docID.
    pub first_doc: u32,
    /// The block's last docID.
    pub last_doc: u32,
    /// Offset of the block from the start of its list, in `u32` words.
    pub offset: u32,
    /// Offset of the block's frequency section from the block's start, in words.
    pub freq_offset: u32,
    /// Upper bound of the term's BM25 score in this block (index parameters).
    pub max_score: f32,
}

/// How docIDs are assigned.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum DocOrder {
    /// In input order.
    Input,
    /// By descending global score GS(d) = α·static(d) + (1 − α)·max_t IR(d, t) (docs/references.md#pruned-list-caching eq. 4),
    /// with static scores min-max normalised to [0, 1] and IR(d, t) = BM25 tf part / (k1 + 1).
    GlobalScore {
        /// Weight of the static score.
        alpha: f32,
    },
}

/// Range of the raw static scores (for min-max normalisation).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct StaticRange {
    /// Smallest static score.
    pub min: f32,
    /// Largest static score.
    pub max: f32,
}

impl StaticRange {
    /// The range of `scores` (0..0 when empty).
    pub fn of(scores: &[f32]) -> Self {
        if scores.is_empty() {
            return StaticRange { min: 0.0, max: 0.0 };
        }
        let min = scores.iter().copied().fold(f32::INFINITY, f32::min);
        let max = scores.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        StaticRange { min, max }
    }

    /// A raw score mapped to [0, 1].
    pub fn normalize(&self, s: f32) -> f32 {
        if self.max > self.min {
            (s - self.min) / (self.max - self.min)
        } else {
            0.0
        }
    }
}

/// The content of `meta.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IndexMeta {
    /// Format version (also in every file header).
    pub format_version: u32,
    /// Posting-list codec.
    #[serde(with = "codec_name")]
    pub codec: Codec,
    /// Analysis used for documents; queries must use the same.
    pub analyzer: AnalyzerConfig,
    /// BM25 parameters the stored upper bounds were computed with.
    pub bm25: Bm25Params,
    /// Number of documents.
    pub num_docs: u64,
    /// Number of distinct terms.
    pub num_terms: u64,
    /// Number of postings.
    pub num_postings: u64,
    /// Sum of document lengths.
    pub total_doc_len: u64,
    /// Mean document length.
    pub avg_doc_len: f64,
    /// Present when `static.bin` exists.
    pub static_scores: Option<StaticRange>,
    /// DocID assignment.
    pub doc_order: DocOrder,
    /// Whether `docs.bin` holds every document's input line (`index --store`). Absent in indexes
    /// written before stored documents existed, which have none.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub stored_docs: bool,
    /// Present in a shard of a sharded index: where its documents sit in the collection and the
    /// collection's statistics it scores with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<ShardOf>,
    /// Present in the head of a sharded index (the directory `index --shards N` writes): its shards,
    /// in docID order. The head holds the collection's dictionary (with every term's document
    /// frequency), document table and stored documents; the shards hold the posting lists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shards: Option<Vec<ShardEntry>>,
}

/// The statistics BM25 scores with, of the whole collection: a shard scores with these, never with its
/// own, so that its scores are the single index's.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CollectionStats {
    /// Number of documents, N.
    pub num_docs: u64,
    /// Sum of document lengths.
    pub total_doc_len: u64,
    /// Mean document length.
    pub avg_doc_len: f64,
    /// Range of the static scores, where the collection has them (`bm25-static` normalises by it).
    pub static_scores: Option<StaticRange>,
}

/// What a shard's `meta.json` says of its place in the collection.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ShardOf {
    /// This shard's number, from 0.
    pub shard: u32,
    /// How many shards the collection has.
    pub shards: u32,
    /// The collection docID of this shard's document 0 (its documents are a contiguous range).
    pub first_doc: u64,
    /// The build identity of the head this shard was written with: shards of one build share it.
    #[serde(with = "crate::meta::hex_id")]
    pub set: u64,
    /// The collection's statistics, which this shard scores with.
    pub collection: CollectionStats,
}

/// One shard as the head lists it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShardEntry {
    /// Its directory, relative to the head's.
    pub dir: String,
    /// The collection docID of its document 0.
    pub first_doc: u64,
    /// Its number of documents.
    pub num_docs: u64,
}

mod codec_name {
    use serde::{Deserialize, Deserializer, Serializer};
    use warpsearch_codec::Codec;

    pub fn serialize<S: Serializer>(c: &Codec, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(c.name())
    }
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Codec, D::Error> {
        String::deserialize(d)?.parse().map_err(serde::de::Error::custom)
    }
}

const _: () = assert!(std::mem::size_of::<TermRecord>() == 40 && std::mem::size_of::<BlockMeta>() == 20);
