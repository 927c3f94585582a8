//! Where a build inverts its postings: on the CPU cores, or on another processor (a GPU) that takes the
//! analysed (term, doc, tf) tuples and gives back the lists sorted by term with their block-max bounds.
//! This crate knows no GPU: the GPU crate implements [`DeviceInverter`], and the caller (the command line,
//! Python) hands it over in [`super::BuildOptions::device`].
//!
//! Whoever inverts, the index is the same file for file: a device must return exactly the lists and
//! the bounds the CPU computes ([`crate::writer::ListEncoder::encode`]), and the builder encodes and
//! writes them the same way; or, for a codec it encodes, exactly the encoded blocks, which the builder
//! writes as they are.

use std::fmt;
use std::time::{Duration, Instant};

use super::invert::Partitions;
use crate::bm25::Bm25;
use crate::format::BlockMeta;
use warpsearch_codec::Codec;

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
    /// The index's codec: a device may encode the lists' blocks itself where it can encode this one
    /// ([`Inverted::encoded`]), as [`crate::ListEncoder::encode`] would.
    pub codec: Codec,
}

/// Lists by rank, as a device returns them: their postings, or their encoded blocks.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Inverted {
    /// `num_terms + 1` offsets: the list of rank r has `starts[r + 1] - starts[r]` postings, which are
    /// `docs[starts[r]..starts[r + 1]]` where the device did not encode them.
    pub starts: Vec<u64>,
    /// Final docIDs, list after list, increasing within each (empty where `encoded` holds the lists).
    pub docs: Vec<u32>,
    /// Frequencies, beside `docs`.
    pub tfs: Vec<u32>,
    /// Per block of 128 postings, list after list: the block's bound (empty where `encoded` holds the
    /// lists: each block's metadata carries it).
    pub block_max: Vec<f32>,
    /// The lists encoded with the job's codec, where the device encoded them.
    pub encoded: Option<EncodedLists>,
    /// Where the device's time went, phase by phase (e.g. the copies up, the sort, the bounds, the
    /// copies back), for the build's report.
    pub phases: Vec<(&'static str, std::time::Duration)>,
}

/// Lists encoded on a device, as [`crate::ListEncoder::encode`] encodes them, list after list in rank
/// order: list r's words are `words[word_starts[r]..word_starts[r + 1]]`, and its blocks' metadata
/// (offsets from its first word, bounds) the `n.div_ceil(128)` entries of `blocks` after those of the
/// lists before it, n its postings.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EncodedLists {
    /// The lists' words, list after list.
    pub words: Vec<u32>,
    /// `num_terms + 1` offsets of the lists in `words`.
    pub word_starts: Vec<u64>,
    /// Every block's metadata, list after list.
    pub blocks: Vec<BlockMeta>,
    /// Per list: its frequencies' sum.
    pub cf: Vec<u64>,
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

    /// Waits until the device can invert (one opened beside the analysis), or says why it cannot; the
    /// build then inverts on the CPU with a note saying so.
    fn ready(&self) -> Result<(), String> {
        Ok(())
    }

    /// Postings one [`DeviceInverter::invert`] of a job like `job` (its terms and documents) can take
    /// now; a job with more is inverted in passes over whole partitions ([`invert_in_passes`]). None:
    /// no limit.
    fn max_postings(&self, _job: &InvertJob<'_>) -> Option<u64> {
        None
    }

    /// A stream that takes the tuples of a build of `parts` partitions while the build gathers them,
    /// so that they are on the device when the inversion starts; None where the device cannot take
    /// one now (it is not ready yet: it is not waited for, the build asks again after its next batch)
    /// or never (the default: the tuples go to the device at [`DeviceInverter::invert`]).
    fn stream(&self, _parts: usize) -> Option<Box<dyn TupleStream>> {
        None
    }
}

/// A partition's tuples gathered since a [`TupleStream`] last took them: the partition, and the
/// tuples' term numbers, documents and frequencies.
pub type NewTuples<'a> = (usize, &'a [u32], &'a [u32], &'a [u32]);

/// The tuples of a build, taken by a device while the build gathers them ([`DeviceInverter::stream`]).
pub trait TupleStream: Send {
    /// Takes the tuples the partitions gathered since the stream last took theirs (or since the build
    /// began), copying them before it returns: per partition with new tuples, `(p, term, doc, tf)`.
    /// Ok(false) where they are more than the device takes at once (the stream then takes no more,
    /// and the build inverts in passes); an error where the copy failed.
    fn add(&mut self, new: &[NewTuples<'_>]) -> Result<bool, String>;

    /// Inverts `job`, whose tuples are those taken (each partition's in the order taken), as
    /// [`DeviceInverter::invert`] does; an error where it cannot (the tuples taken are not the job's,
    /// the device is short of memory), after which the build inverts with [`DeviceInverter::invert`].
    fn invert(
        self: Box<Self>,
        job: &InvertJob<'_>,
    ) -> Result<Inverted, Box<dyn std::error::Error + Send + Sync>>;
}

/// What a device returned for a job inverted in passes: the list of rank r (among all the job's
/// terms) is pass `at[r].0`'s list of rank `at[r].1` (among that pass's terms).
#[derive(Debug, Default)]
pub struct InvertedPasses {
    /// Each pass's lists, by its own ranks.
    pub passes: Vec<Inverted>,
    /// Per rank of the job: its pass and its rank there.
    pub at: Vec<(u32, u32)>,
}

impl InvertedPasses {
    /// The device's time, phase by phase, summed over the passes (in the first pass's order).
    pub fn phases(&self) -> Vec<(&'static str, Duration)> {
        let mut sum: Vec<(&'static str, Duration)> = Vec::new();
        for (name, t) in self.passes.iter().flat_map(|p| &p.phases) {
            match sum.iter_mut().find(|(n, _)| n == name) {
                Some((_, total)) => *total += *t,
                None => sum.push((name, *t)),
            }
        }
        sum
    }
}

/// Inverts `job` on `device`: at once where it fits [`DeviceInverter::max_postings`], else in passes
/// of consecutive whole partitions, each within it. A term lies in one partition only, so the passes'
/// lists are disjoint and need no merge: each pass numbers its own terms in the job's rank order, and
/// [`InvertedPasses::at`] finds every rank's list. An error where one partition alone is over the limit.
pub fn invert_in_passes(
    device: &dyn DeviceInverter,
    job: &InvertJob<'_>,
) -> Result<InvertedPasses, Box<dyn std::error::Error + Send + Sync>> {
    let terms = job.num_terms as usize;
    let limit = device.max_postings(job).unwrap_or(u64::MAX);
    if job.num_postings <= limit {
        return Ok(InvertedPasses {
            passes: vec![device.invert(job)?],
            at: (0..job.num_terms).map(|r| (0, r)).collect(),
        });
    }
    let mut groups = Vec::new();
    let (mut start, mut held) = (0, 0u64);
    for (i, part) in job.parts.iter().enumerate() {
        let n = part.doc.len() as u64;
        if n > limit {
            return Err(format!(
                "one partition holds {n} postings, more than the {limit} the device takes in one pass"
            )
            .into());
        }
        if held + n > limit {
            groups.push(start..i);
            (start, held) = (i, 0);
        }
        held += n;
    }
    groups.push(start..job.parts.len());
    let mut out = InvertedPasses {
        passes: Vec::with_capacity(groups.len()),
        at: vec![(u32::MAX, u32::MAX); terms],
    };
    for (pass, group) in groups.into_iter().enumerate() {
        let parts = &job.parts[group];
        // The pass's terms in the job's rank order: a term's rank in the pass is its place there.
        let mut ranks: Vec<u32> = parts.iter().flat_map(|p| p.rank.iter().copied()).collect();
        ranks.sort_unstable();
        let local: Vec<Vec<u32>> = parts
            .iter()
            .map(|p| {
                p.rank
                    .iter()
                    .map(|r| ranks.binary_search(r).expect("a rank of the pass") as u32)
                    .collect()
            })
            .collect();
        let sub = InvertJob {
            parts: parts
                .iter()
                .zip(&local)
                .map(|(p, rank)| TupleSlices { rank, ..*p })
                .collect(),
            num_terms: ranks.len() as u32,
            num_postings: parts.iter().map(|p| p.doc.len() as u64).sum(),
            new_id: job.new_id,
            lens: job.lens,
            bm25: job.bm25,
            codec: job.codec,
        };
        out.passes.push(device.invert(&sub)?);
        for (j, &r) in ranks.iter().enumerate() {
            match out.at.get_mut(r as usize) {
                Some(at) if at.0 == u32::MAX => *at = (pass as u32, j as u32),
                _ => return Err(format!("rank {r} is out of range or in two partitions").into()),
            }
        }
    }
    if out.at.iter().any(|a| a.0 == u32::MAX) {
        return Err("a rank is in no partition".into());
    }
    Ok(out)
}

/// What a build sends a device's [`TupleStream`] while it gathers the tuples: each partition's
/// tuples once and in order, from the batch after which the device first takes a stream on (that
/// call sends all the partitions hold).
pub(crate) struct Feed<'d> {
    device: Option<&'d dyn DeviceInverter>,
    stream: Option<Box<dyn TupleStream>>,
    /// Per partition: its tuples the stream holds.
    sent: Vec<usize>,
    /// Wall time of the copies.
    pub time: Duration,
    /// Why the stream stopped, where a copy failed.
    pub failed: Option<String>,
}

impl<'d> Feed<'d> {
    /// A feed to `device` (None: no device takes the tuples while they are gathered).
    pub fn new(device: Option<&'d dyn DeviceInverter>, parts: usize) -> Self {
        Feed {
            device,
            stream: None,
            sent: vec![0; parts],
            time: Duration::ZERO,
            failed: None,
        }
    }

    /// Sends what the partitions gathered since the last call. A partition that spilled to disk
    /// stops the stream: spilled runs are merged on the CPU.
    pub fn send(&mut self, partitions: &Partitions) {
        let Some(device) = self.device else {
            return;
        };
        if partitions.spilled() {
            self.stop();
            return;
        }
        if self.stream.is_none() {
            self.stream = device.stream(partitions.count());
        }
        let Some(stream) = self.stream.as_mut() else {
            return;
        };
        let started = Instant::now();
        let new: Vec<NewTuples<'_>> = partitions
            .parts
            .iter()
            .enumerate()
            .filter(|(p, part)| part.postings() > self.sent[*p])
            .map(|(p, part)| {
                let from = self.sent[p];
                (p, &part.term[from..], &part.doc[from..], &part.tf[from..])
            })
            .collect();
        let taken = stream.add(&new);
        self.time += started.elapsed();
        match taken {
            Ok(true) => {
                for (p, part) in partitions.parts.iter().enumerate() {
                    self.sent[p] = part.postings();
                }
            }
            Ok(false) => self.stop(),
            Err(e) => {
                self.failed = Some(e);
                self.stop();
            }
        }
    }

    /// Sends nothing more, and frees what the device holds.
    fn stop(&mut self) {
        self.stream = None;
        self.device = None;
    }

    /// The stream, holding every tuple the partitions gathered (None where there is none).
    pub fn take(&mut self) -> Option<Box<dyn TupleStream>> {
        self.device = None;
        self.stream.take()
    }
}
