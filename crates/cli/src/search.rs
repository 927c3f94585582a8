//! `warpsearch search`: a query file in, a TREC run or JSON lines out, optional speed statistics.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use rayon::prelude::*;
use std::sync::Arc;
use warpsearch_engine::Engine;
use warpsearch_index::Index;
use warpsearch_query::{Query, Request, Scored};

use crate::args::SearchArgs;
use crate::shared::early::Stops;
use crate::shared::engine::{answer_batch, open_engine_with};
use crate::shared::output::Output;
use crate::shared::queries::{load_queries, read_query_file, QueryReport, Warnings};
use crate::shared::report::{cache_stats_line, gpu_stats_line, hybrid_stats_line, DeviceTimes};
use crate::shared::stats::Latency;
use warpsearch_server::{JsonHits, JsonHitsWithDocs};

pub use warpsearch_index::queries::QueryLine;

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

pub fn run(a: SearchArgs) -> Result<()> {
    // Before any work: an existing --output without --force is refused at once.
    Output::check(a.output.as_deref(), a.force)?;
    let index = Arc::new(crate::open(&a.input.index)?);
    if a.docs && (a.format != "json" || index.store().is_none()) {
        anyhow::bail!(
            "--docs adds stored documents to --format json output, from an index built with \
             `warpsearch index --store`{}",
            if index.store().is_none() {
                " (this one stores none)"
            } else {
                ""
            }
        );
    }
    // The backend choice is a statistic: printed with --stats, not before every run.
    let engine = open_engine_with(&a.engine, index.clone(), a.input.mode, a.input.k, a.stats)?;
    let chunk = engine.batch_hint();
    // A query file streams unless --warmup or --stats measure it as one batch, read first.
    if let (Some(path), 0, false) = (&a.input.queries, a.warmup, a.stats) {
        return stream(&a, path, &index, &engine, chunk);
    }
    let (lines, queries) = load_queries(&a.input, &index)?;

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
            a.input.mode.name(),
            a.input.k,
            a.engine.scoring.algorithm.name(),
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
            if let Some(times) = DeviceTimes::of(stats) {
                eprintln!("{}", times.line());
            }
        }
        if let Some(c) = engine.take_cache_stats() {
            eprintln!("{}", cache_stats_line(&c, gpu.as_ref(), n));
        }
        if let Some(stats) = engine.take_hybrid_stats() {
            eprintln!("{}", hybrid_stats_line(&stats));
        }
        if let Some(stops) = Stops::of(&engine, &queries)? {
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
                .map(|q| Request::new(q, a.input.mode, a.input.k))
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
    report.finish(a.input.mode, &mut warnings);
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
        /// One query's answer as the server writes an element of its `results` (`id`, `hits`, each
        /// hit with its stored `doc` where asked for), so one parser reads both.
        #[derive(serde::Serialize)]
        struct Line<'a, H> {
            id: &'a str,
            hits: H,
        }
        match (a.docs, index.store()) {
            (true, Some(store)) => {
                let docs = store.get_many(&hits.iter().map(|h| h.doc).collect::<Vec<u32>>())?;
                let hits = JsonHitsWithDocs {
                    index,
                    hits,
                    docs: &docs,
                };
                serde_json::to_writer(&mut *w, &Line { id: qid, hits })?;
            }
            _ => serde_json::to_writer(
                &mut *w,
                &Line {
                    id: qid,
                    hits: JsonHits { index, hits },
                },
            )?,
        }
        writeln!(w)?;
    }
    Ok(())
}
