//! A sharded index written from a build: the build's one pass (read, analyse, invert) gives the
//! collection's statistics (document count and lengths, and each term's whole list, hence its
//! document frequency); the merge of its runs then cuts each term's list at the shards' docID
//! boundaries and hands each part to its shard's writer, which encodes it with the collection's
//! statistics. Shards are written one after another or each on a thread of its own, with the same
//! bytes (but for each file's random build identity).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::bm25::mean_doc_len;
use crate::build::invert::{Lists, Partitions};
use crate::build::runs::{self, Posting};
use crate::error::{IndexError, Result};
use crate::format::{files, CollectionStats, IndexMeta, ShardEntry, ShardOf, StaticRange};
use crate::store::StoredDocs;
use crate::writer::{DocIds, DocTable, IndexWriter, WriterOptions};

/// How a collection is cut into shards of contiguous docID ranges.
#[derive(Debug, Clone, PartialEq)]
pub enum ShardSplit {
    /// This many shards of nearly equal document counts: shard i starts at ⌊i · N / n⌋.
    Count(usize),
    /// Shards starting at these docIDs: the first 0, increasing, each below the number of documents.
    Starts(Vec<u64>),
}

/// A sharded build's choices (`index --shards N`).
#[derive(Debug, Clone, PartialEq)]
pub struct Sharding {
    /// Where the shards start.
    pub split: ShardSplit,
    /// Write the shards each on a thread of its own, in parallel; else one after another on the
    /// build's thread. Both write the same bytes.
    pub parallel: bool,
    /// The part of the sharded index this build writes (`index --part`).
    pub part: ShardPart,
}

/// The part of a sharded index a build writes: all of it, or one part, so that several processes
/// or hosts build it (the head first, then each shard, in any order and at once), with the same bytes
/// as one build (build identities aside).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ShardPart {
    /// The head and every shard.
    #[default]
    All,
    /// The head alone (`--part head`): one pass over the collection for its statistics, dictionary
    /// and documents. The index opens once every shard it lists is built.
    Head,
    /// Shard i into the head's directory (`--part i`): its documents only are analysed, found by id
    /// in the head's table.
    Shard(usize),
}

impl std::str::FromStr for ShardPart {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "all" => Ok(ShardPart::All),
            "head" => Ok(ShardPart::Head),
            n => n.parse().map(ShardPart::Shard).map_err(|_| {
                format!("'{s}' is not a part of a sharded index: use head, a shard's number (from 0), or all")
            }),
        }
    }
}

impl std::fmt::Display for ShardPart {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ShardPart::All => f.write_str("all"),
            ShardPart::Head => f.write_str("head"),
            ShardPart::Shard(i) => write!(f, "{i}"),
        }
    }
}

impl Sharding {
    /// `n` shards of nearly equal document counts, written in parallel.
    pub fn count(n: usize) -> Sharding {
        Sharding {
            split: ShardSplit::Count(n),
            parallel: true,
            part: ShardPart::All,
        }
    }
}

impl ShardSplit {
    /// The first docID of each shard of a collection of `num_docs` documents, or why the split does
    /// not fit it (no shard may be empty).
    pub fn starts(&self, num_docs: u64) -> Result<Vec<u64>> {
        let starts = match self {
            ShardSplit::Count(0) => {
                return Err(IndexError::Invalid(
                    "--shards 0: a sharded index has at least one shard".into(),
                ))
            }
            &ShardSplit::Count(n) if n as u64 > num_docs => {
                return Err(IndexError::Invalid(format!(
                    "--shards {n} for {num_docs} documents: every shard holds at least one document; ask \
                     for at most {num_docs} shards"
                )))
            }
            &ShardSplit::Count(n) => (0..n as u64).map(|i| i * num_docs / n as u64).collect(),
            ShardSplit::Starts(s) => s.clone(),
        };
        let ok = starts.first() == Some(&0)
            && starts.windows(2).all(|w| w[0] < w[1])
            && starts.last().is_some_and(|&l| l < num_docs);
        if !ok {
            return Err(IndexError::Invalid(format!(
                "shard starts {starts:?} do not cut {num_docs} documents into non-empty ranges: the first \
                 must be 0 and each one larger than the one before and below {num_docs}"
            )));
        }
        Ok(starts)
    }
}

/// What a build hands over to write a sharded index: the collection's document table (in final
/// docID order), its stored documents, its sorted runs and the docID renumbering to apply to them.
pub(crate) struct ShardedOutput<'a> {
    pub output: &'a Path,
    pub writer: WriterOptions,
    pub table: DocTable,
    pub stored: Option<StoredDocs>,
    pub lists: ListSource<'a>,
    pub new_id: Option<&'a [u32]>,
    pub sharding: &'a Sharding,
    pub terms_written: &'a AtomicU64,
}

/// Where a sharded build's lists come from, each term's in input docID order, terms in byte order:
/// the runs the partitions spilled, merged; or, where nothing was spilled, the partitions' own lists
/// (no run written and read back).
pub(crate) enum ListSource<'a> {
    /// Sorted runs on disk, merged at most `max_open` at once.
    Runs { runs: &'a [PathBuf], max_open: usize },
    /// `lists[p]` of partition p, terms in `order` (partition, term number).
    Memory {
        partitions: &'a Partitions,
        lists: &'a [Lists],
        order: &'a [(u32, u32)],
    },
}

impl ListSource<'_> {
    /// Calls `emit` with every term and its list, in byte order of the terms.
    fn for_each(&self, mut emit: impl FnMut(&[u8], &mut Vec<Posting>) -> Result<()>) -> Result<()> {
        match self {
            ListSource::Runs { runs, max_open } => runs::merge(runs, *max_open, emit),
            ListSource::Memory {
                partitions,
                lists,
                order,
            } => {
                let mut list = Vec::new();
                for &(p, t) in order.iter() {
                    list.clear();
                    list.extend_from_slice(lists[p as usize].of(t));
                    emit(
                        partitions.parts[p as usize].names()[t as usize].as_bytes(),
                        &mut list,
                    )?;
                }
                Ok(())
            }
        }
    }
}

/// One term's part of a list, for a shard's writer: the term, docIDs from the shard's first, and
/// frequencies.
type Part = (Vec<u8>, Vec<u32>, Vec<u32>);

/// A sharded index being written: its head, the docID range of each shard, and the writers of the
/// shards this build writes, each inside the head's temporary directory.
pub(crate) struct ShardWriters {
    pub head: IndexWriter,
    pub ranges: Vec<(u64, u64)>,
    pub writers: Vec<IndexWriter>,
}

impl ShardWriters {
    /// Starts the head at `output` with the collection's whole document table, and a writer for each
    /// shard of `split` (none where `head_only`: later builds write them). Each shard scores with the
    /// collection's statistics.
    pub(crate) fn create(
        output: &Path,
        opts: WriterOptions,
        table: DocTable,
        split: &ShardSplit,
        head_only: bool,
    ) -> Result<ShardWriters> {
        let n = table.lens.len() as u64;
        let starts = split.starts(n)?;
        let ranges: Vec<(u64, u64)> = starts
            .iter()
            .zip(starts[1..].iter().chain([&n]))
            .map(|(&a, &b)| (a, b))
            .collect();
        let total: u64 = table.lens.iter().map(|&l| l as u64).sum();
        let collection = CollectionStats {
            num_docs: n,
            total_doc_len: total,
            avg_doc_len: mean_doc_len(total, n),
            static_scores: table.static_scores.as_deref().map(StaticRange::of),
        };
        let tables: Vec<DocTable> = if head_only {
            Vec::new()
        } else {
            ranges.iter().map(|&(a, b)| slice(&table, a, b)).collect()
        };
        let head = IndexWriter::create(output, opts, table)?;
        let shard_opts = WriterOptions { force: false, ..opts };
        let count = ranges.len() as u32;
        let mut writers = Vec::with_capacity(tables.len());
        for (i, (table, &(first_doc, _))) in tables.into_iter().zip(&ranges).enumerate() {
            let shard = ShardOf {
                shard: i as u32,
                shards: count,
                first_doc,
                set: head.build_id(),
                collection,
            };
            let dir = head.tmp_dir().join(files::shard_dir(i));
            writers.push(IndexWriter::create_shard(&dir, shard_opts, table, shard)?);
        }
        Ok(ShardWriters {
            head,
            ranges,
            writers,
        })
    }
}

/// The parts of a list whose docIDs `docs` ascend, cut at the shards' docID `ranges` (`[a, b)`):
/// for each shard that holds any of it, its number, its part's positions in `docs`, and the shard's
/// first docID, from which the part's docIDs are counted.
pub(crate) fn cut<'a>(
    ranges: &'a [(u64, u64)],
    docs: &'a [u32],
) -> impl Iterator<Item = (usize, std::ops::Range<usize>, u32)> + 'a {
    ranges.iter().enumerate().filter_map(move |(s, &(a, b))| {
        let lo = docs.partition_point(|&d| (d as u64) < a);
        let hi = docs.partition_point(|&d| (d as u64) < b);
        (lo < hi).then_some((s, lo..hi, a as u32))
    })
}

/// The head's list of the shards of these docID ranges.
pub(crate) fn entries(ranges: &[(u64, u64)]) -> Vec<ShardEntry> {
    ranges
        .iter()
        .enumerate()
        .map(|(i, &(a, b))| ShardEntry {
            dir: files::shard_dir(i),
            first_doc: a,
            num_docs: b - a,
        })
        .collect()
}

/// Writes the sharded index `o` describes and returns its head's metadata.
pub(crate) fn write(o: ShardedOutput<'_>) -> Result<IndexMeta> {
    // The head alone: its shards are built by later builds (`--part i`), which read their documents'
    // rows from the head's table.
    let head_only = o.sharding.part == ShardPart::Head;
    let ShardWriters {
        mut head,
        ranges,
        mut writers,
    } = ShardWriters::create(o.output, o.writer, o.table, &o.sharding.split, head_only)?;
    if let Some(stored) = o.stored {
        head.set_stored_docs(stored);
    }
    let entries = entries(&ranges);

    // Each term's whole list, renumbered, recorded in the head and cut into the shards' parts.
    let (mut docs, mut freqs) = (Vec::new(), Vec::new());
    let writers_of = writers.len();
    let mut each_term = |term: &[u8],
                         list: &mut Vec<Posting>,
                         head: &mut IndexWriter,
                         emit: &mut dyn FnMut(usize, Part) -> Result<()>|
     -> Result<()> {
        if let Some(new_id) = o.new_id {
            for p in list.iter_mut() {
                p.0 = new_id[p.0 as usize];
            }
            list.sort_unstable();
        }
        docs.clear();
        freqs.clear();
        docs.extend(list.iter().map(|p| p.0));
        freqs.extend(list.iter().map(|p| p.1));
        if docs.is_empty() {
            return Ok(());
        }
        let cf = freqs.iter().map(|&f| f as u64).sum();
        head.push_head(term, docs.len() as u32, cf)?;
        for (s, at, first) in cut(&ranges, &docs).take_while(|&(s, ..)| s < writers_of) {
            let local = docs[at.clone()].iter().map(|&d| d - first).collect();
            emit(s, (term.to_vec(), local, freqs[at].to_vec()))?;
        }
        o.terms_written.fetch_add(1, Ordering::Relaxed);
        Ok(())
    };

    if !o.sharding.parallel {
        o.lists.for_each(|term, list| {
            each_term(term, list, &mut head, &mut |s, (term, d, f)| {
                writers[s].add_term(&term, &d, &f)
            })
        })?;
        for w in writers {
            w.finish()?;
        }
    } else {
        std::thread::scope(|scope| -> Result<()> {
            let mut senders = Vec::with_capacity(writers.len());
            let mut threads = Vec::with_capacity(writers.len());
            for mut w in writers {
                let (tx, rx) = crossbeam_channel::bounded::<Part>(256);
                senders.push(tx);
                threads.push(scope.spawn(move || -> Result<IndexMeta> {
                    for (term, d, f) in rx {
                        w.add_term(&term, &d, &f)?;
                    }
                    w.finish()
                }));
            }
            let merged = o.lists.for_each(|term, list| {
                each_term(term, list, &mut head, &mut |s, part| {
                    // A shard's writer stops taking parts only when it failed: its error is reported
                    // when it is joined below.
                    senders[s]
                        .send(part)
                        .map_err(|_| IndexError::Invalid(format!("shard {s}'s writer stopped")))
                })
            });
            drop(senders);
            let mut first: Option<IndexError> = None;
            for t in threads {
                let done = t
                    .join()
                    .unwrap_or_else(|_| Err(IndexError::Invalid("a shard's writer thread panicked".into())));
                if let Err(e) = done {
                    first.get_or_insert(e);
                }
            }
            match (first, merged) {
                (Some(e), _) | (None, Err(e)) => Err(e),
                (None, Ok(())) => Ok(()),
            }
        })?;
    }
    head.set_shards(entries);
    head.finish()
}

/// The rows `a..b` of `table`, numbered from 0.
fn slice(table: &DocTable, a: u64, b: u64) -> DocTable {
    let (a, b) = (a as usize, b as usize);
    let mut ids = DocIds::default();
    for d in a..b {
        ids.push(table.ids.get(d));
    }
    DocTable {
        ids,
        lens: table.lens[a..b].to_vec(),
        static_scores: table.static_scores.as_ref().map(|s| s[a..b].to_vec()),
        global_scores: table.global_scores.as_ref().map(|s| s[a..b].to_vec()),
    }
}
