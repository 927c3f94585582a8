//! `warpsearch search`: a query file in, a TREC run or JSON lines out, optional speed statistics.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use rayon::prelude::*;
use serde_json::{json, Value};
use std::sync::Arc;
use warpsearch_engine::Engine;
use warpsearch_index::{Bm25Params, DocOrder, Index};
use warpsearch_query::{Mode, Query, Ranking, Request, Scored, Scorer, SearchOptions};

use crate::args::{EngineArgs, ScorerArgs, SearchArgs};
use crate::gpu::{engine_options, gpu_stats_line};
use warpsearch_server::JsonHits;

pub use warpsearch_index::queries::{read_queries, QueryLine};

/// [`read_queries`] from a file, or standard input for `-`.
pub fn read_query_file(path: &Path, warnings: &mut Vec<String>) -> Result<Vec<QueryLine>> {
    if path == Path::new("-") {
        Ok(read_queries(std::io::stdin().lock(), "<stdin>", warnings)?)
    } else {
        let file = File::open(path).with_context(|| format!("opening {}", path.display()))?;
        Ok(read_queries(file, &path.display().to_string(), warnings)?)
    }
}

/// `warpsearch analyze`: every query's terms after the index's analysis.
pub fn analyze(a: crate::args::AnalyzeArgs) -> Result<()> {
    let index = crate::open(&a.index)?;
    let mut warnings = Vec::new();
    let lines = read_query_file(&a.queries, &mut warnings)?;
    for w in &warnings {
        eprintln!("warning: {w}");
    }
    let mut out = BufWriter::new(std::io::stdout().lock());
    for l in &lines {
        writeln!(
            out,
            "{}\t{}",
            l.qid,
            index.meta().analyzer.terms(&l.text).join(" ")
        )?;
    }
    out.flush()?;
    Ok(())
}

/// The nearest-rank quantile `q` (in [0, 1]) of `sorted`; `None` when it is empty.
pub fn nearest_rank<T: Copy>(sorted: &[T], q: f64) -> Option<T> {
    let n = sorted.len();
    (n > 0).then(|| sorted[((q * n as f64).ceil() as usize).clamp(1, n) - 1])
}

/// Nearest-rank percentile of sorted durations, in milliseconds (0 for none).
pub fn percentile_ms(sorted: &[Duration], p: f64) -> f64 {
    nearest_rank(sorted, p / 100.0).map_or(0.0, |d| d.as_secs_f64() * 1e3)
}

/// The search options that `a` asks for on `index` (the index's k1, b and α unless given).
pub fn search_options(a: &ScorerArgs, index: &Index) -> SearchOptions {
    let meta = index.meta();
    let ranking = match a.ranking.as_str() {
        "bm25" => Ranking::Bm25,
        _ => Ranking::Bm25Static {
            alpha: a.alpha.unwrap_or(match meta.doc_order {
                DocOrder::GlobalScore { alpha } => alpha,
                DocOrder::Input => 0.5,
            }),
        },
    };
    SearchOptions {
        ranking,
        bm25: Bm25Params {
            k1: a.k1.unwrap_or(meta.bm25.k1),
            b: a.b.unwrap_or(meta.bm25.b),
        },
        algorithm: a.algorithm,
    }
}

/// The engine `a` asks for on `index` (options validated before any query runs, the backend chosen and
/// the choice printed), with a note when k1/b make it slow.
pub fn open_engine(a: &EngineArgs, index: Arc<Index>) -> Result<Engine> {
    open_scorer_engine(&a.scorer, index, a.mode, a.k)
}

/// The engine `a` asks for on `index`, checked for requests of `mode` and up to `max_k` results.
pub fn open_scorer_engine(a: &ScorerArgs, index: Arc<Index>, mode: Mode, max_k: usize) -> Result<Engine> {
    let options = search_options(a, &index);
    let scorer = Scorer::new(index.clone(), options)
        .context("invalid search options")?
        .with_max_query_terms(a.max_query_terms as usize);
    scorer
        .check(&Request::new(Query::default(), mode, max_k))
        .context("invalid search options")?;
    let mut eopts = engine_options(a, max_k);
    if let Some((budget, cache)) = crate::cache::cache_options(&a.gpu, &index, mode, max_k)? {
        eopts.gpu.cache = Some(budget);
        eopts.cache = Some(cache);
    }
    let engine = Engine::new(Arc::new(scorer), eopts)?;
    if let Some(choice) = engine.choice() {
        eprintln!("{choice}");
    }
    let meta = index.meta();
    if options.bm25 != meta.bm25 {
        eprintln!(
            "note: k1 {} b {} differ from the index's ({} {}): block bounds are recomputed for every query, \
             which is slower; rebuild the index with these values for full speed",
            options.bm25.k1, options.bm25.b, meta.bm25.k1, meta.bm25.b
        );
    }
    Ok(engine)
}

/// Answers `requests` on `engine` and prints what the engine says happened (fallbacks to the CPU).
pub fn answer_batch(
    engine: &Engine,
    requests: &[Request],
) -> Vec<warpsearch_index::Result<warpsearch_query::Answer>> {
    let answers = engine.search_batch(requests);
    for note in engine.take_notes() {
        eprintln!("warpsearch: {note}");
    }
    answers
}

/// The query file of `a` (or its one `--query`), analysed into requests of `a`'s mode and k, with its
/// warnings printed (at most ten, then a count).
pub fn load_queries(a: &EngineArgs, index: &Index) -> Result<(Vec<QueryLine>, Vec<Request>)> {
    let mut warnings = Vec::new();
    let lines = match (&a.query, &a.queries) {
        (Some(text), _) => vec![QueryLine {
            qid: "1".into(),
            text: text.clone(),
            line: 1,
            numbered: true,
        }],
        (None, Some(path)) => read_query_file(path, &mut warnings)?,
        (None, None) => bail!("give --queries FILE or --query TEXT"),
    };
    let queries: Vec<Query> = lines.iter().map(|l| Query::parse(index, &l.text)).collect();
    let mut shown = Warnings::default();
    warnings.into_iter().for_each(|w| shown.push(w));
    let mut report = QueryReport::default();
    report.add(&lines, &queries);
    report.finish(a.mode, &mut shown);
    shown.print();
    let requests = queries
        .into_iter()
        .map(|q| Request::new(q, a.mode, a.k))
        .collect();
    Ok((lines, requests))
}

/// Latency percentiles of one run, in ms.
pub struct Latency {
    pub mean: f64,
    pub p50: f64,
    pub p90: f64,
    pub p95: f64,
    pub p99: f64,
    pub p999: f64,
    pub max: f64,
}

impl Latency {
    /// The percentiles of `v` (nearest rank).
    pub fn of(mut v: Vec<Duration>) -> Latency {
        v.sort_unstable();
        let n = v.len().max(1) as f64;
        Latency {
            mean: v.iter().map(Duration::as_secs_f64).sum::<f64>() / n * 1e3,
            p50: percentile_ms(&v, 50.0),
            p90: percentile_ms(&v, 90.0),
            p95: percentile_ms(&v, 95.0),
            p99: percentile_ms(&v, 99.0),
            p999: percentile_ms(&v, 99.9),
            max: v.last().map_or(0.0, |d| d.as_secs_f64() * 1e3),
        }
    }

    /// As a JSON object (keys mean, p50, p90, p95, p99, p99.9, max).
    pub fn json(&self) -> Value {
        json!({"mean": self.mean, "p50": self.p50, "p90": self.p90, "p95": self.p95, "p99": self.p99,
               "p99.9": self.p999, "max": self.max})
    }
}

pub fn run(a: SearchArgs) -> Result<()> {
    // Before any work: an existing --output without --force is refused at once.
    Output::check(a.output.as_deref(), a.force)?;
    let index = Arc::new(crate::open(&a.engine.scorer.index)?);
    let engine = open_engine(&a.engine, index.clone())?;
    let chunk = engine.batch_hint();
    // A query file streams unless --warmup or --stats measure it as one batch, read first.
    if let (Some(path), 0, false) = (&a.engine.queries, a.warmup, a.stats) {
        return stream(&a, path, &index, &engine, chunk);
    }
    let (lines, queries) = load_queries(&a.engine, &index)?;

    engine.warm_up(&queries, a.warmup)?;
    let mut out = Output::create(a.output.as_deref(), a.force)?;
    let mut latencies = Vec::with_capacity(queries.len());
    let mut busy = Duration::ZERO;
    let started = Instant::now();
    for (chunk, chunk_lines) in queries.chunks(chunk).zip(lines.chunks(chunk)) {
        busy += answer_chunk(
            &engine,
            &index,
            &a,
            chunk_lines,
            chunk,
            &mut out.writer,
            &mut latencies,
        )?;
    }
    let total = started.elapsed();
    out.finish()?;
    if a.stats {
        let n = latencies.len();
        let l = Latency::of(latencies);
        eprintln!(
            "{n} queries, {}, mode {}, k {}, algorithm {}: {:.0} queries/s (search only {:.0}); \
             latency ms mean {:.3} p50 {:.3} p95 {:.3} p99 {:.3} p99.9 {:.3} max {:.3}",
            engine.describe(),
            a.engine.mode.name(),
            a.engine.k,
            a.engine.scorer.algorithm.name(),
            n as f64 / total.as_secs_f64(),
            n as f64 / busy.as_secs_f64(),
            l.mean,
            l.p50,
            l.p95,
            l.p99,
            l.p999,
            l.max,
        );
        let gpu = engine.take_gpu_stats();
        if let Some(stats) = &gpu {
            eprintln!("{}", gpu_stats_line(stats));
        }
        if let Some(c) = engine.take_cache_stats() {
            eprintln!("{}", crate::cache::cache_stats_line(&c, gpu.as_ref(), n));
        }
        if let Some(stats) = engine.take_hybrid_stats() {
            eprintln!("{}", crate::bench::hybrid_stats_line(&stats));
        }
        if let Some(stops) = crate::early::Stops::of(&engine, &queries)? {
            eprintln!("{}", stops.line());
        }
    }
    Ok(())
}

/// Answers one chunk of queries, checks that the index did not change under it, and writes the
/// answers to `out` in order; returns the time spent searching and adds each query's latency to
/// `latencies`.
fn answer_chunk(
    engine: &Engine,
    index: &Index,
    a: &SearchArgs,
    lines: &[QueryLine],
    chunk: &[Request],
    out: &mut dyn Write,
    latencies: &mut Vec<Duration>,
) -> Result<Duration> {
    let t = Instant::now();
    let answers = answer_batch(engine, chunk);
    let busy = t.elapsed();
    // A mapped index file written in place during the batch can have changed its answers.
    index.check_unchanged()?;
    // Results are formatted on all threads (at k = 1000 formatting costs more than searching).
    let formatted: Vec<Result<(Duration, Vec<u8>)>> = answers
        .into_par_iter()
        .zip(lines)
        .map(|(answer, line)| {
            let answer = answer.with_context(|| format!("query {} (line {})", line.qid, line.line))?;
            let mut text = Vec::new();
            write_answer(&mut text, index, &line.qid, &answer.hits, a)?;
            Ok((answer.latency, text))
        })
        .collect();
    for f in formatted {
        let (latency, text) = f?;
        latencies.push(latency);
        out.write_all(&text)?;
    }
    Ok(busy)
}

/// `search` of a query file (or standard input) as it arrives: each chunk of queries is answered and
/// written, and the output flushed, before the next is read, so that memory holds one chunk (not the
/// whole input) and a query piped in is answered without waiting for the end of the input. The
/// warnings about the queries come at the end.
fn stream(a: &SearchArgs, path: &Path, index: &Index, engine: &Engine, chunk: usize) -> Result<()> {
    let mut out = Output::create(a.output.as_deref(), a.force)?;
    let mut input = QueryStream::open(path, chunk)?;
    let mut report = QueryReport::default();
    let mut latencies = Vec::new();
    let outcome = (|| -> Result<()> {
        while let Some(lines) = input.next_chunk(chunk)? {
            let queries: Vec<Query> = lines.iter().map(|l| Query::parse(index, &l.text)).collect();
            report.add(&lines, &queries);
            let requests: Vec<Request> = queries
                .into_iter()
                .map(|q| Request::new(q, a.engine.mode, a.engine.k))
                .collect();
            answer_chunk(
                engine,
                index,
                a,
                &lines,
                &requests,
                &mut out.writer,
                &mut latencies,
            )?;
            latencies.clear();
            out.writer.flush()?;
        }
        Ok(())
    })();
    let mut warnings = std::mem::take(&mut input.warnings);
    report.finish(a.engine.mode, &mut warnings);
    warnings.print();
    outcome?;
    out.finish()
}

/// The lines of a query file read on a thread of their own, handed out in chunks: a chunk of a
/// regular file is filled, a chunk of a pipe or terminal ends when no line arrives for a millisecond
/// (so a query typed or piped in is answered at once).
struct QueryStream {
    lines: std::sync::mpsc::Receiver<Result<QueryLine>>,
    warnings_in: std::sync::mpsc::Receiver<String>,
    /// The reading thread's warnings received so far.
    warnings: Warnings,
    fill: bool,
    done: bool,
}

impl QueryStream {
    fn open(path: &Path, chunk: usize) -> Result<QueryStream> {
        let (tx, lines) = std::sync::mpsc::sync_channel(chunk);
        let (warn, warnings_in) = std::sync::mpsc::channel();
        let (input, name, fill): (Box<dyn std::io::Read + Send>, String, bool) = if path == Path::new("-") {
            (Box::new(std::io::stdin()), "<stdin>".into(), false)
        } else {
            let file = File::open(path).with_context(|| format!("opening {}", path.display()))?;
            let regular = file.metadata().is_ok_and(|m| m.is_file());
            (Box::new(file), path.display().to_string(), regular)
        };
        std::thread::spawn(move || {
            let mut reader = warpsearch_index::queries::QueryReader::new(input, &name);
            let mut warnings = Vec::new();
            loop {
                let next = reader.next_line(&mut warnings);
                for w in warnings.drain(..) {
                    let _ = warn.send(w);
                }
                let (line, end) = match next {
                    Ok(Some(line)) => (Ok(line), false),
                    Ok(None) => break,
                    Err(e) => (Err(e.into()), true),
                };
                if tx.send(line).is_err() || end {
                    break;
                }
            }
        });
        Ok(QueryStream {
            lines,
            warnings_in,
            warnings: Warnings::default(),
            fill,
            done: false,
        })
    }

    /// The next chunk of at most `max` lines; `None` at the end of the input.
    fn next_chunk(&mut self, max: usize) -> Result<Option<Vec<QueryLine>>> {
        let mut chunk = Vec::new();
        while chunk.len() < max && !self.done {
            let next = if chunk.is_empty() || self.fill {
                self.lines.recv().ok()
            } else {
                match self.lines.recv_timeout(Duration::from_millis(1)) {
                    Ok(line) => Some(line),
                    Err(std::sync::mpsc::RecvTimeoutError::Timeout) => break,
                    Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => None,
                }
            };
            match next {
                Some(line) => chunk.push(line?),
                // The reading thread ended: the input did.
                None => self.done = true,
            }
        }
        for w in self.warnings_in.try_iter() {
            self.warnings.push(w);
        }
        Ok((!chunk.is_empty()).then_some(chunk))
    }
}

/// At most ten warnings kept to print, and how many there were.
#[derive(Default)]
struct Warnings {
    first: Vec<String>,
    total: usize,
}

impl Warnings {
    fn push(&mut self, w: String) {
        if self.first.len() < 10 {
            self.first.push(w);
        }
        self.total += 1;
    }

    /// Prints the first ten, then how many more there were.
    fn print(&self) {
        for w in &self.first {
            eprintln!("warning: {w}");
        }
        if self.total > 10 {
            eprintln!("warning: … and {} more", self.total - 10);
        }
    }
}

/// Query ids remembered to find duplicates: past this many, later ids go unchecked (and a warning
/// says so), so that memory stays bounded on an endless stream.
const MAX_TRACKED_QIDS: usize = 1_000_000;

/// Warnings about queries that will match little or nothing, summarised with examples, and about
/// repeated query ids, gathered chunk by chunk in bounded memory.
#[derive(Default)]
struct QueryReport {
    /// Queries without searchable terms: how many, and the first three as `qid (line n)`.
    empty: (usize, Vec<String>),
    /// Queries with terms the index does not have.
    unknown: (usize, Vec<String>),
    /// The first line of each query id given on its line, by a 64-bit hash of the id (about 20 bytes
    /// an id; two ids of one hash, under one chance in 10^7 among a million ids, would be named as a
    /// repeat). A line without an id is numbered: it is checked against these but not kept, as no
    /// other numbered line can have its number, so that a plain query log of any length costs nothing.
    seen: std::collections::HashMap<u64, usize>,
    /// Warnings about repeated ids: the first ten, and how many.
    repeated: Warnings,
    untracked: bool,
}

impl QueryReport {
    fn add(&mut self, lines: &[QueryLine], queries: &[Query]) {
        for (l, q) in lines.iter().zip(queries) {
            for (hit, (n, examples)) in [
                (q.is_empty(), &mut self.empty),
                (!q.unknown.is_empty(), &mut self.unknown),
            ] {
                if hit {
                    *n += 1;
                    if examples.len() < 3 {
                        examples.push(format!("{} (line {})", l.qid, l.line));
                    }
                }
            }
            let id = {
                use std::hash::{Hash, Hasher};
                let mut h = std::collections::hash_map::DefaultHasher::new();
                l.qid.hash(&mut h);
                h.finish()
            };
            if let Some(&first) = self.seen.get(&id) {
                self.repeated.push(format!(
                    "query id {} appears on lines {first} and {}; a TREC evaluation merges them",
                    l.qid, l.line
                ));
            } else if l.numbered {
                // Unique among numbered lines.
            } else if self.seen.len() < MAX_TRACKED_QIDS {
                self.seen.insert(id, l.line);
            } else {
                self.untracked = true;
            }
        }
    }

    /// Adds the summaries, then the repeated ids, to `warnings`.
    fn finish(self, mode: Mode, warnings: &mut Warnings) {
        let (empty, e) = self.empty;
        if empty > 0 {
            warnings.push(format!(
                "{empty} queries have no searchable terms after analysis (empty, only stopwords or \
                 punctuation) and return nothing, e.g. {}",
                e.join(", ")
            ));
        }
        let (unknown, e) = self.unknown;
        if unknown > 0 {
            let effect = match mode {
                Mode::Or => "they are ignored",
                _ => "AND finds nothing for them",
            };
            warnings.push(format!(
                "{unknown} queries contain terms the index does not have ({effect}), e.g. {}",
                e.join(", ")
            ));
        }
        let more = self.repeated.total - self.repeated.first.len();
        self.repeated.first.into_iter().for_each(|w| warnings.push(w));
        warnings.total += more;
        if self.untracked {
            warnings.push(format!(
                "query ids after the first {MAX_TRACKED_QIDS} distinct ones were not checked for repeats"
            ));
        }
    }
}

fn write_answer(w: &mut dyn Write, index: &Index, qid: &str, hits: &[Scored], a: &SearchArgs) -> Result<()> {
    if a.format == "trec" {
        for (rank, h) in hits.iter().enumerate() {
            writeln!(
                w,
                "{qid} Q0 {} {} {:.6} {}",
                index.doc_id(h.doc),
                rank + 1,
                h.score,
                a.tag
            )?;
        }
    } else {
        #[derive(serde::Serialize)]
        struct Line<'a> {
            qid: &'a str,
            hits: JsonHits<'a>,
        }
        let hits = JsonHits { index, hits };
        serde_json::to_writer(&mut *w, &Line { qid, hits })?;
        writeln!(w)?;
    }
    Ok(())
}

/// Standard output, or a file written under a temporary name and renamed when complete.
pub(crate) struct Output {
    pub(crate) writer: Box<dyn Write>,
    paths: Option<(PathBuf, PathBuf)>,
}

impl Output {
    pub(crate) fn create(path: Option<&Path>, force: bool) -> Result<Output> {
        let Some(path) = path else {
            return Ok(Output {
                writer: Box::new(BufWriter::new(std::io::stdout().lock())),
                paths: None,
            });
        };
        if path.exists() && !path.is_file() {
            // A device or pipe (/dev/null, a FIFO): write to it as it is, never rename over it.
            let file = std::fs::OpenOptions::new()
                .write(true)
                .open(path)
                .with_context(|| format!("opening {}", path.display()))?;
            return Ok(Output {
                writer: Box::new(BufWriter::new(file)),
                paths: None,
            });
        }
        Output::check(Some(path), force)?;
        // `.NAME.tmp-PID`: a later run removes it if this process is killed before the rename.
        warpsearch_index::replace::clean_stale(path)?;
        let tmp = warpsearch_index::replace::hidden_beside(path, "tmp");
        let file = File::create(&tmp).with_context(|| format!("creating {}", tmp.display()))?;
        Ok(Output {
            writer: Box::new(BufWriter::new(file)),
            paths: Some((tmp, path.to_owned())),
        })
    }

    /// Refuses an existing regular file at `path` unless `force`.
    pub(crate) fn check(path: Option<&Path>, force: bool) -> Result<()> {
        if let Some(path) = path {
            if path.is_file() && !force {
                bail!("{} exists: pass --force to replace it", path.display());
            }
        }
        Ok(())
    }

    /// Writes `report` as pretty JSON to `path`, under a temporary name renamed when complete (it
    /// replaces an older report): `bench --json` and `load --json`.
    pub(crate) fn json_report(path: &Path, report: &serde_json::Value) -> Result<()> {
        let mut out = Output::create(Some(path), true)?;
        out.writer
            .write_all((serde_json::to_string_pretty(report)? + "\n").as_bytes())?;
        out.finish()
    }

    pub(crate) fn finish(mut self) -> Result<()> {
        self.writer.flush()?;
        // Close the file before the rename.
        self.writer = Box::new(std::io::sink());
        if let Some((tmp, path)) = self.paths.take() {
            std::fs::rename(&tmp, &path)
                .with_context(|| format!("renaming {} to {}", tmp.display(), path.display()))?;
        }
        Ok(())
    }
}

impl Drop for Output {
    /// A run that failed half-way (a full disk, a bad query) leaves no temporary file behind.
    fn drop(&mut self) {
        if let Some((tmp, _)) = self.paths.take() {
            self.writer = Box::new(std::io::sink());
            let _ = std::fs::remove_file(tmp);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_lines_with_and_without_ids_and_bad_bytes() {
        let mut warnings = Vec::new();
        let input = b"q1\tcats and dogs\r\nplain query\n\n7\t\xffbad\n";
        let lines = read_queries(&input[..], "q.txt", &mut warnings).unwrap();
        let got: Vec<(&str, &str)> = lines.iter().map(|l| (l.qid.as_str(), l.text.as_str())).collect();
        assert_eq!(
            got,
            [
                ("q1", "cats and dogs"),
                ("2", "plain query"),
                ("3", ""),
                ("7", "\u{FFFD}bad")
            ]
        );
        assert_eq!(warnings.len(), 1);
        assert!(warnings[0].starts_with("q.txt:4:"), "{warnings:?}");
        assert!(read_queries(&b"a b\tx\n"[..], "q", &mut warnings).is_err());
    }

    /// Issue #16 case 6: a UTF-8 BOM at the start of a query file is not part of the first qid.
    #[test]
    fn bom_at_start_of_query_file_is_skipped() {
        let mut warnings = Vec::new();
        let lines = read_queries(&b"\xEF\xBB\xBF301\tcats\n302\tdogs\n"[..], "q", &mut warnings).unwrap();
        assert_eq!((lines[0].qid.as_str(), lines[0].text.as_str()), ("301", "cats"));
        let lines = read_queries(&b"\xEF\xBB\xBFcats\n"[..], "q", &mut warnings).unwrap();
        assert_eq!((lines[0].qid.as_str(), lines[0].text.as_str()), ("1", "cats"));
        assert!(warnings.is_empty());
    }

    /// Repeated query ids are named in bounded memory: ids equal to their line numbers, and a numbered
    /// line whose number an earlier id took, included.
    #[test]
    fn repeated_query_ids_are_named() {
        let mut warnings = Vec::new();
        let lines = read_queries(&b"1\ta\n2\tb\n2\tc\n5\td\nplain\n"[..], "q", &mut warnings).unwrap();
        let queries = vec![Query::default(); lines.len()];
        let mut report = QueryReport::default();
        report.add(&lines, &queries);
        let mut shown = Warnings::default();
        report.finish(Mode::Or, &mut shown);
        let repeats: Vec<&String> = shown.first.iter().filter(|w| w.starts_with("query id")).collect();
        assert_eq!(repeats.len(), 2, "{:?}", shown.first);
        assert!(
            repeats[0].starts_with("query id 2 appears on lines 2 and 3"),
            "{}",
            repeats[0]
        );
        assert!(
            repeats[1].starts_with("query id 5 appears on lines 4 and 5"),
            "{}",
            repeats[1]
        );
    }

    #[test]
    fn nearest_rank_percentiles() {
        let d: Vec<Duration> = (1..=100).map(Duration::from_millis).collect();
        assert_eq!(percentile_ms(&d, 50.0), 50.0);
        assert_eq!(percentile_ms(&d, 99.0), 99.0);
        assert_eq!(percentile_ms(&d, 99.9), 100.0);
        assert_eq!(percentile_ms(&[], 50.0), 0.0);
    }
}
