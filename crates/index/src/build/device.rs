//! Where a build inverts its postings: on the CPU cores, or on another processor (a GPU) that takes the
//! analysed (term, doc, tf) tuples and gives back the lists sorted by term with their block-max bounds.
//! This crate knows no GPU: the GPU crate implements [`DeviceInverter`], and the caller (the command line,
//! Python) hands it over in [`super::BuildOptions::device`].
//!
//! Whoever inverts, the index is the same file for file: a device must return exactly the lists and
//! the bounds the CPU computes ([`crate::writer::ListEncoder::encode`]), and the builder encodes and
//! writes them the same way.

use std::fmt;

use crate::bm25::Bm25;

/// Where a build inverts (`index --build-on`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BuildOn {
    /// On the CPU cores.
    #[default]
    Cpu,
    /// On the device; on the CPU, with a note saying why, where there is none or it fails.
    Gpu,
    /// On the device where there is one and the collection has at least
    /// [`DeviceInverter::min_postings`] postings; else on the CPU.
    Auto,
}

impl BuildOn {
    /// Parses `cpu`, `gpu` or `auto`.
    pub fn by_name(name: &str) -> Result<Self, String> {
        match name {
            "cpu" => Ok(BuildOn::Cpu),
            "gpu" => Ok(BuildOn::Gpu),
            "auto" => Ok(BuildOn::Auto),
            _ => Err(format!(
                "unknown build target '{name}': expected cpu, gpu or auto"
            )),
        }
    }
}

impl fmt::Display for BuildOn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            BuildOn::Cpu => "cpu",
            BuildOn::Gpu => "gpu",
            BuildOn::Auto => "auto",
        })
    }
}

/// The tuples of one partition of the build: posting i is (`term[i]`, `doc[i]`, `tf[i]`), its term
/// numbered within the partition, whose rank among all terms in byte order is `rank[term[i]]`. Within
/// a partition, the postings of a term come in increasing `doc` order, and a term lies in one partition
/// only.
#[derive(Clone, Copy)]
pub struct TupleSlices<'a> {
    /// Per posting: the term's number in the partition.
    pub term: &'a [u32],
    /// Per posting: the document (before any renumbering).
    pub doc: &'a [u32],
    /// Per posting: the term's frequency in the document (at least 1).
    pub tf: &'a [u32],
    /// Per term number of the partition: its rank in byte order among all terms.
    pub rank: &'a [u32],
}

/// What a device inverts.
pub struct InvertJob<'a> {
    /// The tuples, partition by partition.
    pub parts: Vec<TupleSlices<'a>>,
    /// Distinct terms in all (every rank below it holds one term at least).
    pub num_terms: u32,
    /// Postings in all.
    pub num_postings: u64,
    /// `new_id[doc]`: the document's final number, where documents are renumbered (global-score
    /// order); lists are then sorted by it.
    pub new_id: Option<&'a [u32]>,
    /// Document lengths by final number.
    pub lens: &'a [u32],
    /// The function the block-max bounds bound: a block's bound is
    /// [`crate::bm25::loosen_bound`] of the largest [`Bm25::score`] of its postings, with
    /// [`Bm25::idf`] of the list's length.
    pub bm25: Bm25,
}

/// Lists by rank, as a device returns them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Inverted {
    /// `num_terms + 1` offsets: the list of rank r is `docs[starts[r]..starts[r + 1]]`.
    pub starts: Vec<u64>,
    /// Final docIDs, list after list, increasing within each.
    pub docs: Vec<u32>,
    /// Frequencies, beside `docs`.
    pub tfs: Vec<u32>,
    /// Per block of 128 postings, list after list: the block's bound.
    pub block_max: Vec<f32>,
    /// Where the device's time went, phase by phase (e.g. the copies up, the sort, the bounds, the
    /// copies back), for the build's report.
    pub phases: Vec<(&'static str, std::time::Duration)>,
}

/// A processor other than the CPU that inverts a build's tuples.
pub trait DeviceInverter: Send + Sync {
    /// The device, for notes (e.g. its name and memory).
    fn describe(&self) -> String;

    /// Postings from which `--build-on auto` uses the device: below, moving the tuples costs more than
    /// inverting them on the cores.
    fn min_postings(&self) -> u64;

    /// The job's lists sorted by rank, then final docID, with their block bounds; an error (said in a
    /// note, after which the CPU inverts) where the device cannot.
    fn invert(&self, job: &InvertJob<'_>) -> Result<Inverted, Box<dyn std::error::Error + Send + Sync>>;
}
