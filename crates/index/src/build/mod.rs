//! Building an index from a collection (JSON lines of any fields, or `id<TAB>text` lines; its format
//! detected from its first line, [`schema`]): parse and analyse in parallel, invert within a memory
//! budget (spilling sorted runs), optionally store the documents and renumber them by global score,
//! merge and write.

pub mod input;
pub mod runs;
pub mod schema;

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};
use rayon::prelude::*;
use rustc_hash::FxHashMap;

use crate::analyzer::AnalyzerConfig;
use crate::error::{IndexError, IoContext, Result};
use crate::format::{DocOrder, IndexMeta};
use crate::order::{check_alpha, global_order, permuted};
use crate::store::StoreWriter;
use crate::writer::{check_output, DocIds, DocTable, IndexWriter, WriterOptions};
use runs::{Inverter, Posting};

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
    /// Sorted runs spilled to disk.
    pub runs: usize,
    /// Documents without a line in the static-score file (score 0).
    pub static_missing: u64,
    /// Lines of the static-score file naming unknown documents.
    pub static_unknown: u64,
    /// Wall time of the parse-and-invert phase.
    pub invert_time: Duration,
    /// Wall time of the merge-and-write phase.
    pub write_time: Duration,
}

/// A document after analysis: external id, (term, tf) pairs sorted by term, length in tokens.
type AnalyzedDoc = (String, Vec<(String, u32)>, u32);

struct Analyzed {
    file: u32,
    line: u64,
    doc: std::result::Result<AnalyzedDoc, String>,
}

fn analyze(
    analyzer: &AnalyzerConfig,
    schema: &schema::Schema,
    bytes: &[u8],
) -> std::result::Result<AnalyzedDoc, String> {
    let raw = schema.parse(bytes)?;
    let mut tokens: Vec<String> = Vec::new();
    for text in &raw.texts {
        analyzer.for_each_term(text, |t| tokens.push(t.to_owned()));
    }
    if tokens.len() > MAX_DOC_LEN as usize {
        return Err(format!(
            "document has {} tokens; at most {MAX_DOC_LEN} are supported: split it",
            tokens.len()
        ));
    }
    let len = tokens.len() as u32;
    tokens.sort_unstable();
    let mut terms: Vec<(String, u32)> = Vec::new();
    for t in tokens {
        match terms.last_mut() {
            Some((last, n)) if *last == t => *n += 1,
            _ => terms.push((t, 1)),
        }
    }
    Ok((raw.id, terms, len))
}

/// Builds an index at `output` from the collection at `input` (a file or a directory of them): JSON
/// lines or `id<TAB>text` lines, plain or compressed, their format detected from the first line.
pub fn build_from_jsonl(input: &Path, output: &Path, opts: &BuildOptions) -> Result<BuildReport> {
    check_alpha(opts.reorder_alpha)?;
    check_output(output, opts.writer.force)?;
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
            input::read_batches(&files, 4096, max_line, read_bytes, |batch| tx.send(batch).is_ok())
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
    check_output(output, opts.writer.force)?;
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

fn build_from(source: Source<'_>, output: &Path, opts: &BuildOptions) -> Result<BuildReport> {
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
    let mut store = if opts.store {
        Some(StoreWriter::create(&work.path().join("docs.scratch"))?)
    } else {
        None
    };

    let analyzer = opts.writer.analyzer;
    let mut inverter = Inverter::new(work.path());
    let mut ids = DocIds::default();
    let mut seen_ids: FxHashMap<u64, u32> = FxHashMap::default();
    let mut lens: Vec<u32> = Vec::new();
    let mut max_tfs: Vec<u32> = Vec::new();
    let (mut skipped, mut skip_reasons, mut empty_docs) = (0u64, Vec::new(), 0u64);
    let mut failure: Option<IndexError> = None;
    'batches: for batch in rx.iter() {
        let schema = match (&schema, batch.first()) {
            (Some(s), _) => s,
            (None, first) => match schema::Schema::detect(first.map(|l| &l.bytes[..]), &choice) {
                Ok(s) => schema.insert(s),
                Err(what) => {
                    let (file, line) = first.map_or((0, 1), |l| (l.file, l.line));
                    failure = Some(IndexError::Input {
                        path: names[file as usize].clone(),
                        line,
                        what,
                    });
                    break 'batches;
                }
            },
        };
        let analyzed: Vec<Analyzed> = batch
            .par_iter()
            .map(|l| Analyzed {
                file: l.file,
                line: l.line,
                doc: analyze(&analyzer, schema, &l.bytes),
            })
            .collect();
        let mut kept: Vec<&[u8]> = Vec::new();
        for (a, l) in analyzed.into_iter().zip(&batch) {
            let problem = match a.doc {
                Err(what) => Some(what),
                Ok((id, terms, len)) => {
                    let key = {
                        let mut h = DefaultHasher::new();
                        id.hash(&mut h);
                        h.finish()
                    };
                    // A 64-bit hash can collide; only an equal id is a duplicate.
                    match seen_ids.get(&key) {
                        Some(&first) if ids.get(first as usize) == id => Some(format!(
                            "duplicate document id '{id}' (first used by document #{first}): ids must be unique"
                        )),
                        _ => {
                            let doc = lens.len() as u32;
                            seen_ids.entry(key).or_insert(doc);
                            ids.push(&id);
                            lens.push(len);
                            max_tfs.push(terms.iter().map(|t| t.1).max().unwrap_or(0));
                            empty_docs += (len == 0) as u64;
                            kept.push(&l.bytes);
                            inverter.add(doc, &terms);
                            if inverter.bytes() > opts.memory_budget {
                                if let Err(e) = inverter.spill() {
                                    failure = Some(e);
                                    break 'batches;
                                }
                            }
                            None
                        }
                    }
                }
            };
            if let Some(what) = problem {
                let path = names[a.file as usize].clone();
                if !opts.skip_bad {
                    failure = Some(IndexError::Input {
                        path,
                        line: a.line,
                        what: format!("{what} (or pass --skip-bad to skip such lines)"),
                    });
                    break 'batches;
                }
                skipped += 1;
                if skip_reasons.len() < 10 {
                    skip_reasons.push(format!("{}:{}: {what}", path.display(), a.line));
                }
            }
        }
        if let Some(store) = &mut store {
            if let Err(e) = store.add(&kept) {
                failure = Some(e);
                break 'batches;
            }
        }
        let read = read_bytes.load(Ordering::Relaxed);
        watch.read_bytes.store(read, Ordering::Relaxed);
        watch.docs.store(lens.len() as u64, Ordering::Relaxed);
        bar.set_position(read);
        bar.set_message(format!("{} docs, {} runs", lens.len(), inverter.runs()));
    }
    drop(rx);
    // The producer's failure is the cause of what the loop saw (input cut short).
    finished()?;
    if let Some(e) = failure {
        return Err(e);
    }
    let schema = match schema {
        Some(s) => s,
        None => schema::Schema::detect(None, &choice).map_err(IndexError::Invalid)?,
    };
    bar.finish_and_clear();
    let runs = inverter.finish()?;
    let invert_time = started.elapsed();
    watch.writing.store(true, Ordering::Relaxed);

    // Document table, static scores and the docID order.
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

    let write_started = Instant::now();
    let mut writer_opts = opts.writer;
    writer_opts.doc_order = doc_order;
    if let Some(sharding) = &opts.shards {
        let meta = crate::shards::write(crate::shards::ShardedOutput {
            output,
            writer: writer_opts,
            table,
            stored: store.map(|s| s.finish(order)).transpose()?,
            runs: &runs,
            max_open_runs: opts.max_open_runs,
            new_id: new_id.as_deref(),
            sharding,
            terms_written: &watch.terms_written,
        })?;
        return Ok(BuildReport {
            meta,
            schema,
            skipped,
            skip_reasons,
            skipped_files: Vec::new(),
            empty_docs,
            runs: runs.len(),
            static_missing,
            static_unknown,
            invert_time,
            write_time: write_started.elapsed(),
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
    let (mut docs, mut freqs) = (Vec::new(), Vec::new());
    runs::merge(&runs, opts.max_open_runs, |term, list: &mut Vec<Posting>| {
        if let Some(new_id) = &new_id {
            for p in list.iter_mut() {
                p.0 = new_id[p.0 as usize];
            }
            list.sort_unstable();
        }
        docs.clear();
        freqs.clear();
        docs.extend(list.iter().map(|p| p.0));
        freqs.extend(list.iter().map(|p| p.1));
        bar.inc(1);
        watch.terms_written.fetch_add(1, Ordering::Relaxed);
        writer.add_term(term, &docs, &freqs)
    })?;
    let meta = writer.finish()?;
    bar.finish_and_clear();
    Ok(BuildReport {
        meta,
        schema,
        skipped,
        skip_reasons,
        skipped_files: Vec::new(),
        empty_docs,
        runs: runs.len(),
        static_missing,
        static_unknown,
        invert_time,
        write_time: write_started.elapsed(),
    })
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
