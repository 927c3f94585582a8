//! Building an index from a collection (JSON lines of any fields, or `id<TAB>text` lines; its format
//! detected from its first line, [`schema`]): lines read on a thread of their own, each batch parsed and
//! analysed on every core ([`mod@analyze`]) and inverted on every core, one task per partition of the terms
//! ([`invert`]), within a memory budget (spilling sorted runs); documents optionally stored and
//! renumbered by global score; the lists made from the partitions' tuples on the CPU or a device
//! ([`device`]), or merged from the runs, then encoded on every core and written in order ([`lists`]).
//! The files are the same whatever the number of threads, partitions and runs, and whoever inverts.

pub mod analyze;
pub mod device;
pub mod input;
pub mod invert;
pub mod lists;
pub mod runs;
pub mod schema;
mod shard;

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};
use rayon::prelude::*;
use rustc_hash::FxHashMap;

use crate::error::{IndexError, IoContext, Result};
use crate::format::{DocOrder, IndexMeta};
use crate::order::{check_alpha, global_order, permuted};
use crate::shards::ShardPart;
use crate::store::StoreWriter;
use crate::writer::{check_output, DocIds, DocTable, IndexWriter, WriterOptions};
use analyze::{analyze, Chunk};
pub use device::{
    invert_in_passes, BuildOn, DeviceInverter, EncodedLists, InvertJob, Inverted, InvertedPasses, NewTuples,
    TupleSlices, TupleStream,
};
use invert::Partitions;

/// The least memory for postings the command line accepts, in MiB: below it a build spills a run every
/// few documents.
pub const MIN_MEMORY_MB: usize = 16;

/// Longest document, in tokens: a block's frequencies must sum below 2^32.
pub const MAX_DOC_LEN: u32 = u32::MAX / warpsearch_codec::BLOCK_LEN as u32;

/// How to build.
#[derive(Debug, Clone)]
pub struct BuildOptions {
    /// Codec, analyzer, BM25 parameters, force; `doc_order` is set from `reorder_alpha`.
    pub writer: WriterOptions,
    /// Index the `title` field before the text field (Pyserini indexes `contents` only).
    pub include_title: bool,
    /// The id field of JSON lines (`--id-field`); detected among [`schema::ID_FIELDS`] when `None`.
    pub id_field: Option<String>,
    /// The text fields of JSON lines, indexed in this order (`--fields`); detected when `None`.
    pub fields: Option<Vec<String>>,
    /// Keep every document's input line, compressed, in `docs.bin` (`--store`).
    pub store: bool,
    /// Counters the caller can read while the build runs (for a progress display of its own).
    pub watch: Option<Arc<BuildProgress>>,
    /// Memory for postings before a run is spilled to disk, in bytes. Any budget works; a small one
    /// costs many runs (the command line asks for [`MIN_MEMORY_MB`] at least).
    pub memory_budget: usize,
    /// Most spilled runs the merge reads at once (at least 2; [`runs::MAX_OPEN_RUNS`] by default).
    pub max_open_runs: usize,
    /// Skip bad lines (counted) instead of failing.
    pub skip_bad: bool,
    /// The longest input line, in bytes; a longer one is an error naming its file and line.
    pub max_line_bytes: usize,
    /// A `docid<TAB>score` file of static scores.
    pub static_scores: Option<PathBuf>,
    /// Renumber documents by descending global score with this α (docs/references.md#pruned-list-caching eq. 4).
    pub reorder_alpha: Option<f32>,
    /// Draw progress bars on stderr (they hide themselves when stderr is not a terminal).
    pub progress: bool,
    /// Write a sharded index (`--shards N`, [`crate::shards`]) instead of one index.
    pub shards: Option<crate::shards::Sharding>,
    /// Where the postings are inverted (`--build-on`): the CPU, the [`BuildOptions::device`], or the
    /// device where it pays.
    pub build_on: BuildOn,
    /// The device that inverts where [`BuildOptions::build_on`] asks for it (None: there is none).
    /// One that cannot invert says why through [`DeviceInverter::ready`], in the report's notes.
    pub device: Option<Arc<dyn DeviceInverter>>,
}

impl std::fmt::Debug for dyn DeviceInverter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.describe())
    }
}

impl BuildOptions {
    /// Defaults with the given writer options.
    pub fn new(writer: WriterOptions) -> Self {
        BuildOptions {
            writer,
            include_title: false,
            id_field: None,
            fields: None,
            store: false,
            watch: None,
            memory_budget: 2 << 30,
            max_open_runs: runs::MAX_OPEN_RUNS,
            skip_bad: false,
            max_line_bytes: input::DEFAULT_MAX_LINE,
            static_scores: None,
            reorder_alpha: None,
            progress: false,
            shards: None,
            build_on: BuildOn::Cpu,
            device: None,
        }
    }
}

/// How far a build is, for a caller's own progress display; read any time from another thread.
#[derive(Debug, Default)]
pub struct BuildProgress {
    /// Bytes of input files in all (0 for documents given as lines).
    pub total_bytes: AtomicU64,
    /// Bytes of input files read so far.
    pub read_bytes: AtomicU64,
    /// Documents read so far.
    pub docs: AtomicU64,
    /// Terms whose lists are written, once the input is read.
    pub terms_written: AtomicU64,
    /// Whether the input is read and the lists are being written.
    pub writing: std::sync::atomic::AtomicBool,
}

/// What a build did.
#[derive(Debug)]
pub struct BuildReport {
    /// The written index's metadata.
    pub meta: IndexMeta,
    /// How the lines were read (detected from the first one).
    pub schema: schema::Schema,
    /// Lines skipped with `skip_bad`, and the first few reasons.
    pub skipped: u64,
    /// Up to ten skip reasons.
    pub skip_reasons: Vec<String>,
    /// Files of a directory input that were not read (their names are not `.jsonl`/`.json`, plain,
    /// `.zst` or `.gz`).
    pub skipped_files: Vec<std::path::PathBuf>,
    /// Documents with no indexable token (kept; they never match).
    pub empty_docs: u64,
    /// Sorted runs spilled to disk (0: the postings stayed in memory).
    pub runs: usize,
    /// Documents without a line in the static-score file (score 0).
    pub static_missing: u64,
    /// Lines of the static-score file naming unknown documents.
    pub static_unknown: u64,
    /// Wall time of reading, analysing and gathering the postings by partition (spilled runs
    /// included).
    pub invert_time: Duration,
    /// The part of `invert_time` the build waited for its input to be read: where it is most of it,
    /// reading (decompressing, cutting lines) bounds the build, not the cores' analysis.
    pub input_wait: Duration,
    /// Wall time of making lists of the partitions' postings (a counting sort on the CPU, or the
    /// device's sort and bounds), within `write_time`.
    pub lists_time: Duration,
    /// Wall time of the rest: the document table, the lists, encoding and writing (merging runs
    /// included).
    pub write_time: Duration,
    /// The part of `write_time` spent completing the files (the term dictionary, the document table)
    /// and syncing them to disk before the index is put in place.
    pub sync_time: Duration,
    /// The device that inverted the postings (its [`DeviceInverter::describe`]); None: the CPU did.
    pub device: Option<String>,
    /// The device's time, phase by phase ([`Inverted::phases`]); empty where the CPU inverted.
    pub device_phases: Vec<(&'static str, Duration)>,
    /// Passes the device inverted the postings in (more than one where they outgrew what it takes at
    /// once, [`DeviceInverter::max_postings`]); 0 where the CPU inverted.
    pub device_passes: usize,
    /// Where the CPU inverted although [`BuildOptions::build_on`] named a device, why.
    pub notes: Vec<String>,
}

/// Lines read into one batch: every core waits for a batch's slowest chunk before the next batch
/// starts, so a batch holds many chunks a thread.
const BATCH_LINES: usize = 65_536;

/// Lines a task analyses at once ([`analyze::Chunk`]): a batch is cut into several chunks a thread,
/// so that the threads share it evenly however long its lines.
fn chunk_len(batch: usize) -> usize {
    batch.div_ceil(8 * rayon::current_num_threads()).max(16)
}

/// Builds an index at `output` from the collection at `input` (a file or a directory of them): JSON
/// lines or `id<TAB>text` lines, plain or compressed, their format detected from the first line.
pub fn build_from_jsonl(input: &Path, output: &Path, opts: &BuildOptions) -> Result<BuildReport> {
    check_alpha(opts.reorder_alpha)?;
    check_target(output, opts)?;
    let input::Inputs {
        files,
        skipped: skipped_files,
    } = input::list_inputs(input)?;
    crate::writer::check_inputs_outside(&files, output)?;
    let total_bytes: u64 = files
        .iter()
        .map(|f| std::fs::metadata(f).map(|m| m.len()).unwrap_or(0))
        .sum();
    let read_bytes = Arc::new(AtomicU64::new(0));
    let (tx, rx) = crossbeam_channel::bounded::<Vec<input::Line>>(4);
    let reader = {
        let (files, read_bytes, max_line) = (files.clone(), read_bytes.clone(), opts.max_line_bytes);
        std::thread::spawn(move || {
            input::read_batches(&files, BATCH_LINES, max_line, read_bytes, |batch| {
                tx.send(batch).is_ok()
            })
        })
    };
    let source = Source {
        names: files,
        batches: rx,
        total_bytes,
        read_bytes,
        // What the reader failed at (a line too long, a file unreadable) stops the build before
        // anything is written.
        finished: Box::new(move || {
            reader
                .join()
                .map_err(|_| IndexError::Invalid("the input reader thread panicked".into()))?
        }),
    };
    let mut report = build_from(source, output, opts)?;
    report.skipped_files = skipped_files;
    Ok(report)
}

/// Builds an index at `output` from documents given as lines (JSON objects or `id<TAB>text`, as a
/// collection file holds them), in batches: the format is detected from the first. Errors name a line
/// as `name:N`, N counting the lines from 1. The batches are pulled on another thread than the caller's.
pub fn build_from_lines(
    name: &str,
    batches: impl Iterator<Item = Result<Vec<Vec<u8>>>> + Send,
    output: &Path,
    opts: &BuildOptions,
) -> Result<BuildReport> {
    check_alpha(opts.reorder_alpha)?;
    check_target(output, opts)?;
    let (tx, rx) = crossbeam_channel::bounded::<Vec<input::Line>>(4);
    std::thread::scope(|scope| {
        let producer = scope.spawn(move || -> Result<()> {
            let mut number = 0u64;
            for batch in batches {
                let lines = batch?
                    .into_iter()
                    .map(|bytes| {
                        number += 1;
                        input::Line {
                            file: 0,
                            line: number,
                            bytes,
                        }
                    })
                    .collect();
                if tx.send(lines).is_err() {
                    break;
                }
            }
            Ok(())
        });
        let source = Source {
            names: vec![PathBuf::from(name)],
            batches: rx,
            total_bytes: 0,
            read_bytes: Arc::new(AtomicU64::new(0)),
            // A batch that failed (the caller's iterator raised) stops the build before anything is
            // written.
            finished: Box::new(move || {
                producer
                    .join()
                    .map_err(|_| IndexError::Invalid("the document reader thread panicked".into()))?
            }),
        };
        build_from(source, output, opts)
    })
}

/// Where a build's lines come from: batches of lines, the names of the files they are in, and how much
/// of them was read.
struct Source<'a> {
    names: Vec<PathBuf>,
    batches: crossbeam_channel::Receiver<Vec<input::Line>>,
    total_bytes: u64,
    read_bytes: Arc<AtomicU64>,
    /// Waits for the producer of the batches (after they are all taken, or the receiver dropped) and
    /// says whether it read everything.
    finished: Box<dyn FnOnce() -> Result<()> + 'a>,
}

/// The schema of a collection, detected from the first line of its first batch; an error names that
/// line.
fn detect_schema(
    batch: &[input::Line],
    choice: &schema::FieldChoice,
    names: &[PathBuf],
) -> Result<schema::Schema> {
    schema::Schema::detect(batch.first().map(|l| &l.bytes[..]), choice).map_err(|what| {
        let (file, line) = batch.first().map_or((0, 1), |l| (l.file, l.line));
        IndexError::Input {
            path: names[file as usize].clone(),
            line,
            what,
        }
    })
}

/// Threads up to which `--build-on auto` inverts on the device: from two on, the CPU build was the
/// faster in every measurement (bench/RESULTS.md, "Building an index").
const AUTO_MAX_THREADS: usize = 1;

/// Lines the build skipped (`--skip-bad`): how many, and the first ten, each with what is wrong.
#[derive(Default)]
struct Skipped {
    count: u64,
    reasons: Vec<String>,
}

impl Skipped {
    /// A line the build cannot take (`what` is wrong with line `line` of `path`): with `skip_bad`,
    /// counted; else the error that stops the build, naming the line.
    fn line(&mut self, skip_bad: bool, path: PathBuf, line: u64, what: &str) -> Option<IndexError> {
        if !skip_bad {
            return Some(IndexError::Input {
                path,
                line,
                what: format!("{what} (or pass --skip-bad to skip such lines)"),
            });
        }
        self.count += 1;
        if self.reasons.len() < 10 {
            self.reasons.push(format!("{}:{line}: {what}", path.display()));
        }
        None
    }
}

/// Fails early where the build may not write `output`: a shard's part writes into a head that
/// must exist (its own directory is checked when it is created); anything else replaces `output` only
/// with `force`.
fn check_target(output: &Path, opts: &BuildOptions) -> Result<()> {
    match opts.shards.as_ref().map(|s| s.part) {
        Some(ShardPart::Shard(_)) => Ok(()),
        _ => check_output(output, opts.writer.force),
    }
}

fn build_from(source: Source<'_>, output: &Path, opts: &BuildOptions) -> Result<BuildReport> {
    if let Some(sharding) = &opts.shards {
        if let ShardPart::Shard(i) = sharding.part {
            return shard::build_shard(source, output, opts, sharding, i);
        }
    }
    let Source {
        names,
        batches: rx,
        total_bytes,
        read_bytes,
        finished,
    } = source;
    let static_map = opts
        .static_scores
        .as_deref()
        .map(read_static_scores)
        .transpose()?;
    let parent = output
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent).at(parent)?;
    // The process id in the name lets a later build remove what a killed one left (crate::replace).
    let work = tempfile::Builder::new()
        .prefix(&format!(".warpsearch-runs-{}-", std::process::id()))
        .tempdir_in(parent)
        .at(parent)?;
    crate::replace::fail_point("runs-created", work.path())?;

    let started = Instant::now();
    let watch = opts.watch.clone().unwrap_or_default();
    watch.total_bytes.store(total_bytes, Ordering::Relaxed);
    let bar = match total_bytes {
        0 => progress_bar(opts.progress, 0, "{elapsed_precise} {msg}"),
        n => progress_bar(
            opts.progress,
            n,
            "{elapsed_precise} [{bar:30}] {bytes}/{total_bytes} {msg}",
        ),
    };
    let choice = schema::FieldChoice {
        id_field: opts.id_field.clone(),
        fields: opts.fields.clone(),
        title: opts.include_title,
    };
    let mut schema: Option<schema::Schema> = None;
    let store = if opts.store {
        Some(StoreWriter::create(&work.path().join("docs.scratch"))?)
    } else {
        None
    };

    let analyzer = opts.writer.analyzer;
    // Partitions: a few per thread, so that a partition's share of a batch stays small whatever the
    // skew of its terms; their number changes no file.
    let mut partitions = Partitions::new(4 * rayon::current_num_threads(), opts.memory_budget, work.path());
    let parts = partitions.count();
    let mut ingest = Ingest {
        store,
        ids: DocIds::default(),
        seen_ids: FxHashMap::default(),
        lens: Vec::new(),
        max_tfs: Vec::new(),
        skipped: Skipped::default(),
        empty_docs: 0,
    };
    let mut failure: Option<IndexError> = None;
    // A GPU that inverts takes the tuples while they are gathered, from the batch after which it is
    // ready (it opens beside the analysis); sharded builds invert on the CPU.
    let streams_to = match (opts.build_on, &opts.device) {
        _ if opts.shards.is_some() => None,
        (BuildOn::Gpu, Some(d)) => Some(d.as_ref()),
        (BuildOn::Auto, Some(d)) if rayon::current_num_threads() <= AUTO_MAX_THREADS => Some(d.as_ref()),
        _ => None,
    };
    let mut feed = device::Feed::new(streams_to, parts);
    // Three batches at once: batch i is analysed while batch i − 1's documents are numbered (on one
    // thread: ids checked, lines stored) and batch i − 2's postings are added to the partitions, so
    // that the numbering, which cannot be shared out, runs beside the cores' work, not before it.
    let mut analyzed: Option<(Vec<input::Line>, Vec<Chunk>)> = None;
    let mut numbered: Option<(Vec<Chunk>, Vec<u32>)> = None;
    let mut batches = rx.iter();
    let mut input_wait = Duration::ZERO;
    loop {
        let waiting = Instant::now();
        let next = batches.next();
        input_wait += waiting.elapsed();
        if next.is_none() && analyzed.is_none() && numbered.is_none() {
            break;
        }
        if let (None, Some(batch)) = (&schema, &next) {
            match detect_schema(batch, &choice, &names) {
                Ok(s) => schema = Some(s),
                Err(e) => {
                    failure = Some(e);
                    break;
                }
            }
        }
        let schema = schema.as_ref();
        let (now_analyzed, (now_numbered, added)) = rayon::join(
            || {
                next.map(|batch| {
                    let schema = schema.expect("detected from the first batch");
                    let analyzed: Vec<Chunk> = batch
                        .par_chunks(chunk_len(batch.len()))
                        .map(|lines| analyze(&analyzer, schema, lines, parts))
                        .collect();
                    (batch, analyzed)
                })
            },
            || {
                rayon::join(
                    || {
                        analyzed
                            .take()
                            .map(|(batch, chunks)| {
                                let docs = ingest.number(&batch, &chunks, opts, &names)?;
                                Ok((chunks, docs))
                            })
                            .transpose()
                    },
                    || match numbered.take() {
                        Some((chunks, docs)) => {
                            partitions.add(&chunks, &docs)?;
                            feed.send(&partitions);
                            Ok(())
                        }
                        None => Ok(()),
                    },
                )
            },
        );
        match (now_numbered, added) {
            (Err(e), _) | (_, Err(e)) => {
                failure = Some(e);
                break;
            }
            (Ok(now_numbered), Ok(())) => numbered = now_numbered,
        }
        analyzed = now_analyzed;
        let read = read_bytes.load(Ordering::Relaxed);
        watch.read_bytes.store(read, Ordering::Relaxed);
        watch.docs.store(ingest.lens.len() as u64, Ordering::Relaxed);
        bar.set_position(read);
        bar.set_message(format!("{} docs, {} runs", ingest.lens.len(), partitions.runs()));
    }
    analyze::release_vocabularies();
    drop(rx);
    // The producer's failure is the cause of what the loop saw (input cut short).
    finished()?;
    if let Some(e) = failure {
        return Err(e);
    }
    let Ingest {
        store,
        ids,
        lens,
        max_tfs,
        skipped,
        empty_docs,
        ..
    } = ingest;
    let schema = match schema {
        Some(s) => s,
        None => schema::Schema::detect(None, &choice).map_err(IndexError::Invalid)?,
    };
    bar.finish_and_clear();
    let invert_time = started.elapsed();
    watch.writing.store(true, Ordering::Relaxed);

    // Document table, static scores and the docID order.
    let write_started = Instant::now();
    let n = lens.len();
    let (mut static_missing, mut static_unknown) = (0u64, 0u64);
    let static_scores = static_map.map(|map| {
        let mut scores = vec![0f32; n];
        let mut found = 0u64;
        for (d, score) in scores.iter_mut().enumerate() {
            if let Some(&s) = map.get(ids.get(d)) {
                *score = s;
                found += 1;
            }
        }
        static_missing = n as u64 - found;
        static_unknown = map.len() as u64 - found;
        scores
    });
    let (table, new_id, doc_order, order) = match opts.reorder_alpha {
        None => (
            DocTable {
                ids,
                lens,
                static_scores,
                global_scores: None,
            },
            None,
            DocOrder::Input,
            None,
        ),
        Some(alpha) => {
            let g = global_order(alpha, opts.writer.bm25, &lens, &max_tfs, static_scores.as_deref());
            let table = DocTable {
                ids: ids.permuted(&g.order),
                lens: permuted(&lens, &g.order),
                static_scores: static_scores.as_deref().map(|s| permuted(s, &g.order)),
                global_scores: Some(g.scores),
            };
            (
                table,
                Some(g.new_id),
                DocOrder::GlobalScore { alpha },
                Some(g.order),
            )
        }
    };

    let mut writer_opts = opts.writer;
    writer_opts.doc_order = doc_order;
    if let Some(sharding) = &opts.shards {
        // The shards' writer takes each term's list, cut at the shard boundaries, from the merge of
        // the sorted runs where the partitions spilled, else from the partitions themselves.
        let spilled = partitions.spilled();
        let (runs, term_order, lists): (_, _, Vec<invert::Lists>) = match spilled {
            true => (partitions.spill_all()?, Vec::new(), Vec::new()),
            false => (Vec::new(), partitions.term_order().0, partitions.take_lists()),
        };
        let source = match spilled {
            true => crate::shards::ListSource::Runs {
                runs: &runs,
                max_open: opts.max_open_runs,
            },
            false => crate::shards::ListSource::Memory {
                partitions: &partitions,
                lists: &lists,
                order: &term_order,
            },
        };
        let meta = crate::shards::write(crate::shards::ShardedOutput {
            output,
            writer: writer_opts,
            table,
            stored: store.map(|s| s.finish(order)).transpose()?,
            lists: source,
            new_id: new_id.as_deref(),
            sharding,
            terms_written: &watch.terms_written,
        })?;
        let shards = meta.shards.as_ref().map_or(0, |s| s.len());
        return Ok(BuildReport {
            meta,
            schema,
            skipped: skipped.count,
            skip_reasons: skipped.reasons,
            skipped_files: Vec::new(),
            empty_docs,
            runs: runs.len(),
            static_missing,
            static_unknown,
            invert_time,
            input_wait,
            lists_time: Duration::ZERO,
            write_time: write_started.elapsed(),
            sync_time: Duration::ZERO,
            device: None,
            device_phases: Vec::new(),
            device_passes: 0,
            notes: {
                let mut notes = match opts.build_on {
                    BuildOn::Cpu => Vec::new(),
                    _ => vec!["a sharded index is inverted on the CPU".into()],
                };
                if sharding.part == ShardPart::Head {
                    notes.push(format!(
                        "the head alone: build shards 0 to {} with --part i (the same --input, \
                         --output, --shards and options), then open {}",
                        shards.saturating_sub(1),
                        output.display()
                    ));
                }
                notes
            },
        });
    }
    let mut writer = IndexWriter::create(output, writer_opts, table)?;
    if let Some(store) = store {
        // Documents are stored in input order; a renumbered index reads them through its order.
        writer.set_stored_docs(store.finish(order)?);
    }
    let bar = progress_bar(
        opts.progress,
        0,
        "{elapsed_precise} writing postings: {pos} terms",
    );
    let written = |terms: u64| {
        bar.inc(terms);
        watch.terms_written.fetch_add(terms, Ordering::Relaxed);
    };
    let mut runs = 0;
    let mut notes = Vec::new();
    let mut device_used = None;
    let mut device_phases = Vec::new();
    let mut device_passes = 0;
    let lists_started = Instant::now();
    let mut lists_time = Duration::ZERO;
    if partitions.spilled() {
        if opts.build_on != BuildOn::Cpu && opts.device.is_some() {
            notes.push(
                "the postings outgrew the memory budget (--memory-mb) and were spilled to disk: they \
                 were merged on the CPU, not the device"
                    .into(),
            );
        }
        runs = lists::write_spilled(
            &mut writer,
            &mut partitions,
            opts.max_open_runs,
            new_id.as_deref(),
            written,
        )?;
    } else {
        let (term_order, ranks) = partitions.term_order();
        let postings: u64 = partitions.parts.iter().map(|p| p.postings() as u64).sum();
        let device = match (&opts.device, opts.build_on) {
            (_, BuildOn::Cpu) => None,
            (None, _) => {
                notes.push("no GPU to build on (no device was given): inverted on the CPU".into());
                None
            }
            (Some(d), BuildOn::Auto) if postings < d.min_postings() => {
                notes.push(format!(
                    "{postings} postings are fewer than the {} from which the GPU pays: inverted on the CPU",
                    d.min_postings()
                ));
                None
            }
            (Some(_), BuildOn::Auto) if rayon::current_num_threads() > AUTO_MAX_THREADS => {
                notes.push(format!(
                    "on {} threads the cores invert faster than the GPU: inverted on the CPU",
                    rayon::current_num_threads()
                ));
                None
            }
            (Some(d), _) => match d.ready() {
                Ok(()) => Some(d),
                Err(why) => {
                    notes.push(format!("no GPU to build on ({why}): inverted on the CPU"));
                    None
                }
            },
        };
        let streamed = feed.take();
        if let Some(why) = &feed.failed {
            notes.push(format!(
                "copying the postings to the GPU during the analysis failed ({why}): they were copied after it"
            ));
        }
        let inverted = device.and_then(|d| {
            let job = InvertJob {
                parts: partitions
                    .parts
                    .iter()
                    .zip(&ranks)
                    .map(|(p, rank)| TupleSlices {
                        term: &p.term,
                        doc: &p.doc,
                        tf: &p.tf,
                        rank,
                    })
                    .collect(),
                num_terms: term_order.len() as u32,
                num_postings: postings,
                new_id: new_id.as_deref(),
                lens: writer.doc_lens(),
                bm25: *writer.bm25(),
                codec: writer_opts.codec,
            };
            if let Some(stream) = streamed {
                match stream.invert(&job) {
                    Ok(inv) => {
                        let at = (0..job.num_terms).map(|r| (0, r)).collect();
                        let passes = vec![inv];
                        return Some((d.describe(), InvertedPasses { passes, at }, true));
                    }
                    Err(e) => notes.push(format!(
                        "the postings the GPU took during the analysis were not inverted there ({e}): \
                         they were copied again"
                    )),
                }
            }
            match invert_in_passes(d.as_ref(), &job) {
                Ok(inv) => Some((d.describe(), inv, false)),
                Err(e) => {
                    notes.push(format!("the GPU build failed ({e}): inverted on the CPU instead"));
                    None
                }
            }
        });
        match inverted {
            Some((name, inv, streamed)) => {
                lists_time = lists_started.elapsed();
                device_used = Some(name);
                device_phases = inv.phases();
                if streamed {
                    device_phases.insert(0, ("copy up beside the analysis", feed.time));
                }
                device_passes = inv.passes.len();
                lists::write_inverted(&mut writer, &partitions, &term_order, &inv, written)?;
            }
            None => {
                let lists = partitions.take_lists();
                lists_time = lists_started.elapsed();
                lists::write_partitions(
                    &mut writer,
                    &partitions,
                    &lists,
                    &term_order,
                    new_id.as_deref(),
                    written,
                )?;
            }
        }
    }
    let finishing = Instant::now();
    let meta = writer.finish()?;
    let sync_time = finishing.elapsed();
    bar.finish_and_clear();
    Ok(BuildReport {
        meta,
        schema,
        skipped: skipped.count,
        skip_reasons: skipped.reasons,
        skipped_files: Vec::new(),
        empty_docs,
        runs,
        static_missing,
        static_unknown,
        invert_time,
        input_wait,
        lists_time,
        write_time: write_started.elapsed(),
        sync_time,
        device: device_used,
        device_phases,
        device_passes,
        notes,
    })
}

/// What the build keeps of the documents numbered so far: the store of their lines, the document
/// table's columns, and the lines skipped (their postings go to the partitions).
struct Ingest {
    store: Option<StoreWriter>,
    ids: DocIds,
    seen_ids: FxHashMap<u64, u32>,
    lens: Vec<u32>,
    max_tfs: Vec<u32>,
    skipped: Skipped,
    empty_docs: u64,
}

impl Ingest {
    /// Numbers the documents of an analysed batch (a duplicate id, or a line that failed, is an error
    /// unless `skip_bad`) and stores their lines; the docID of each line of each chunk, chunk after
    /// chunk ([`invert::NO_DOC`] for a line that is no document), for [`Partitions::add`].
    fn number(
        &mut self,
        batch: &[input::Line],
        chunks: &[Chunk],
        opts: &BuildOptions,
        names: &[PathBuf],
    ) -> Result<Vec<u32>> {
        let mut kept: Vec<&[u8]> = Vec::new();
        let mut numbers: Vec<u32> = Vec::with_capacity(batch.len());
        let mut failure = None;
        let docs = chunks.iter().flat_map(|c| &c.docs);
        for (a, l) in docs.zip(batch) {
            let problem = match a {
                Err(what) => Some(what.clone()),
                Ok(None) => unreachable!("every id is kept"),
                Ok(Some((_, analyze::Doc { id, len, max_tf }))) => {
                    let key = {
                        let mut h = DefaultHasher::new();
                        id.hash(&mut h);
                        h.finish()
                    };
                    // A 64-bit hash can collide; only an equal id is a duplicate.
                    match self.seen_ids.get(&key) {
                        Some(&first) if self.ids.get(first as usize) == id => Some(format!(
                            "duplicate document id '{id}' (first used by document #{first}): ids must be unique"
                        )),
                        _ => {
                            let doc = self.lens.len() as u32;
                            self.seen_ids.entry(key).or_insert(doc);
                            self.ids.push(id);
                            self.lens.push(*len);
                            self.max_tfs.push(*max_tf);
                            self.empty_docs += (*len == 0) as u64;
                            kept.push(&l.bytes);
                            numbers.push(doc);
                            None
                        }
                    }
                }
            };
            if let Some(what) = problem {
                numbers.push(invert::NO_DOC);
                let path = names[l.file as usize].clone();
                failure = self.skipped.line(opts.skip_bad, path, l.line, &what);
                if failure.is_some() {
                    break;
                }
            }
        }
        if let Some(e) = failure {
            return Err(e);
        }
        if let Some(store) = &mut self.store {
            store.add(&kept)?;
        }
        Ok(numbers)
    }
}

fn progress_bar(enabled: bool, len: u64, template: &str) -> ProgressBar {
    if !enabled {
        return ProgressBar::hidden();
    }
    let bar = if len > 0 {
        ProgressBar::new(len)
    } else {
        ProgressBar::new_spinner()
    };
    bar.set_style(
        ProgressStyle::with_template(template)
            .expect("valid template")
            .progress_chars("=> "),
    );
    bar.enable_steady_tick(Duration::from_millis(200));
    bar
}

/// Reads `docid<TAB>score` lines (blank lines and `#` comments skipped).
pub fn read_static_scores(path: &Path) -> Result<FxHashMap<String, f32>> {
    let text = std::fs::read(path).at(path)?;
    let text = std::str::from_utf8(&text).map_err(|e| {
        IndexError::Invalid(format!(
            "{}: not UTF-8 (byte {})",
            path.display(),
            e.valid_up_to()
        ))
    })?;
    let mut map = FxHashMap::default();
    for (i, line) in text.lines().enumerate() {
        let line_no = i as u64 + 1;
        let bad = |what: String| IndexError::Input {
            path: path.to_owned(),
            line: line_no,
            what,
        };
        if line.trim().is_empty() || line.starts_with('#') {
            continue;
        }
        let (id, score) = line
            .split_once('\t')
            .ok_or_else(|| bad("expected `docid<TAB>score`".into()))?;
        let score: f32 = score
            .trim()
            .parse()
            .map_err(|_| bad(format!("score '{}' is not a number", score.trim())))?;
        if !score.is_finite() {
            return Err(bad(format!("score '{score}' is not finite")));
        }
        if map.insert(id.to_owned(), score).is_some() {
            return Err(bad(format!("document '{id}' has a second score")));
        }
    }
    Ok(map)
}
