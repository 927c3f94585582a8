//! The `warpsearch` command: index, inspect, export, search, bench, synth, demo.

mod args;
mod bench;
mod config_file;
mod demo;
mod evaluate;
mod gpu;
mod load;
mod search;
mod serve;
mod shared;
mod synth;

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{Context, Result};
use warpsearch_index::build::{build_from_jsonl, BuildOptions};
use warpsearch_index::shards::{ShardSplit, Sharding};
use warpsearch_index::{ciff, inspect, Index};

use args::{Cli, Command, ExportArgs, IndexArgs, InspectArgs};

fn main() -> ExitCode {
    // A damaged term dictionary can make the `fst` crate panic; the index crate contains that panic and
    // reports the file as damaged, so its message would only be noise before the real error.
    warpsearch_index::termdict::quiet_fst_panics();
    let cli = parse_command_line();
    // The server logs start-up, shutdown and errors; every command shows the libraries' warnings, and
    // --gpu-trace the GPU's and the engine's per-batch timeline.
    let trace = match &cli.command {
        Command::Search(a) => a.engine.gpu.trace,
        Command::Bench(a) => a.engine.gpu.trace,
        Command::Serve(a) => a.engine.gpu.trace,
        _ => false,
    };
    let level = if matches!(cli.command, Command::Serve(_)) {
        "info"
    } else {
        "warn"
    };
    init_logging(level, trace);
    if let Some(threads) = cli.threads {
        // Only fails if a pool exists already, which cannot happen this early.
        let _ = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build_global();
    }
    let result = match cli.command {
        Command::Index(a) => run_index(a),
        Command::Inspect(a) => run_inspect(a),
        Command::Export(a) => run_export(a),
        Command::Search(a) => search::run(a),
        Command::Doc(a) => run_doc(a),
        Command::Evaluate(a) => evaluate::run(a),
        Command::Analyze(a) => search::analyze(a),
        Command::Demo(a) => demo::run(a),
        Command::Synth(a) => synth::run(a),
        Command::SynthCheck(a) => synth::check(a),
        Command::GpuCheck(a) => gpu::gpu_check(a),
        Command::Serve(a) => serve::run(a),
        Command::Load(a) => load::run(a),
        Command::Bench(a) => bench::run(a),
        Command::BenchPlot(a) => bench::plot_reports(a),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Logs on standard error: RUST_LOG's filter, else `default` (`debug` adds a line per server request);
/// with `trace`, also the GPU's and the engine's per-batch timeline.
fn init_logging(default: &str, trace: bool) {
    use std::io::IsTerminal;
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| {
        let extra = if trace {
            ",warpsearch_gpu=debug,warpsearch_engine=debug"
        } else {
            ""
        };
        tracing_subscriber::EnvFilter::new(format!("{default}{extra}"))
    });
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .try_init();
}

/// The command line, with the options of `--config FILE` as defaults.
fn parse_command_line() -> Cli {
    use clap::{CommandFactory, FromArgMatches};
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let mut cmd = Cli::command();
    if let Some(file) = config_file::path(&args) {
        match config_file::apply(cmd, &file, &args) {
            Ok(c) => cmd = c,
            Err(e) => {
                eprintln!("error: {e:#}");
                std::process::exit(2);
            }
        }
    }
    let matches = cmd.get_matches_from(args);
    Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit())
}

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

fn run_index(a: IndexArgs) -> Result<()> {
    let writer = a.writer_options()?;
    a.order.note();
    let started = Instant::now();
    match (&a.input, &a.ciff) {
        (Some(input), None) => {
            let mut opts = BuildOptions::new(writer);
            opts.include_title = a.title;
            opts.id_field = a.id_field.clone();
            opts.fields = a.fields.clone();
            opts.store = a.store;
            opts.memory_budget = a.memory_mb.saturating_mul(1 << 20);
            opts.skip_bad = a.skip_bad;
            opts.max_line_bytes = (a.max_line_mb << 20) as usize;
            opts.static_scores = a.order.static_scores.clone();
            opts.reorder_alpha = a.order.reorder_alpha()?;
            opts.progress = true;
            opts.shards = a.shards.map(|n| Sharding {
                split: ShardSplit::Count(n as usize),
                parallel: !a.shards_sequential,
                part: a.part,
            });
            opts.build_on = a.build_on.into();
            if a.gpu_memory_mb.is_some() && a.build_on == args::BuildOnArg::Cpu {
                anyhow::bail!("--gpu-memory-mb bounds the GPU build: use it with --build-on gpu or auto");
            }
            if a.build_on != args::BuildOnArg::Cpu {
                opts.device = Some(warpsearch_engine::devices::build_device(0, a.gpu_memory_mb));
            }
            let report = build_from_jsonl(input, &a.output, &opts)?;
            let m = &report.meta;
            if let Some(shards) = &m.shards {
                eprintln!(
                    "{} shards of {} documents",
                    shards.len(),
                    shards
                        .iter()
                        .map(|s| s.num_docs.to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                );
            }
            eprintln!(
                "indexed {} documents, {} terms, {} postings into {} in {:.1} s (read and analyse {:.1} s, \
                 {:.1} s of it waiting for the input, {} runs; lists {:.1} s on {}; lists, encode and \
                 write {:.1} s, {:.1} s of it completing and syncing the files)",
                m.num_docs,
                m.num_terms,
                m.num_postings,
                a.output.display(),
                started.elapsed().as_secs_f64(),
                report.invert_time.as_secs_f64(),
                report.input_wait.as_secs_f64(),
                report.runs,
                report.lists_time.as_secs_f64(),
                report.device.as_deref().unwrap_or("the CPU"),
                report.write_time.as_secs_f64(),
                report.sync_time.as_secs_f64()
            );
            if !report.device_phases.is_empty() {
                let phases: Vec<String> = report
                    .device_phases
                    .iter()
                    .map(|(name, t)| format!("{name} {:.2} s", t.as_secs_f64()))
                    .collect();
                let passes = match report.device_passes {
                    1 => String::new(),
                    n => format!(" in {n} passes"),
                };
                eprintln!("on the GPU{passes}: {}", phases.join(", "));
            }
            for note in &report.notes {
                eprintln!("note: {note}");
            }
            eprintln!(
                "read {}{}",
                report.schema.describe(),
                if a.store { "; documents stored" } else { "" }
            );
            if report.skipped > 0 {
                eprintln!(
                    "skipped {} bad lines (--skip-bad); the first ones:",
                    report.skipped
                );
                report.skip_reasons.iter().for_each(|r| eprintln!("  {r}"));
            }
            if !report.skipped_files.is_empty() {
                eprintln!(
                    "note: {} files of {} were not read (not .jsonl/.json, plain, .zst or .gz), e.g. {}",
                    report.skipped_files.len(),
                    input.display(),
                    report.skipped_files[0].display()
                );
            }
            if report.empty_docs > 0 {
                eprintln!(
                    "note: {} documents have no indexable terms; they are kept and never match",
                    report.empty_docs
                );
            }
            if a.order.static_scores.is_some() && (report.static_missing > 0 || report.static_unknown > 0) {
                eprintln!(
                    "note: {} documents had no static score (0 used); {} static-score lines named unknown documents",
                    report.static_missing, report.static_unknown
                );
            }
        }
        (None, Some(path)) => {
            let opts = ciff::ImportOptions {
                writer,
                analyzer_override: a.analyzer.is_some(),
            };
            let m = ciff::import(path, &a.output, opts)?;
            eprintln!(
                "imported {} documents, {} terms, {} postings from {} in {:.1} s",
                m.num_docs,
                m.num_terms,
                m.num_postings,
                path.display(),
                started.elapsed().as_secs_f64()
            );
        }
        _ => anyhow::bail!("give exactly one of --input <jsonl|dir> or --ciff <file>"),
    }
    Ok(())
}

/// `warpsearch doc`: each stored document, one a line, in the order asked.
fn run_doc(a: args::DocArgs) -> Result<()> {
    let index = open(&a.index)?;
    if index.store().is_none() {
        anyhow::bail!(
            "{} stores no documents: build it with `warpsearch index --store` to read them back",
            a.index.display()
        );
    }
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    for id in &a.ids {
        let doc = if a.number {
            let n = id
                .parse::<u32>()
                .ok()
                .filter(|&n| n < index.num_docs())
                .with_context(|| {
                    format!(
                        "'{id}' is not a document number of this index (0 to {})",
                        i64::from(index.num_docs()) - 1
                    )
                })?;
            n
        } else {
            index
                .find_doc(id)
                .with_context(|| format!("no document has the id '{id}' in {}", a.index.display()))?
        };
        let text = index.doc(doc)?.expect("the index stores documents");
        writeln!(out, "{text}")?;
    }
    out.flush()?;
    Ok(())
}

fn run_inspect(a: InspectArgs) -> Result<()> {
    let index = open(a.index())?;
    let s = inspect::stats(&index, a.top)?;
    if a.codecs && index.is_sharded() {
        anyhow::bail!(
            "--codecs re-encodes one index's lists; {} is a sharded index: inspect one shard's lists \
             by building the collection without --shards",
            a.index().display()
        );
    }
    let codecs = if a.codecs {
        Some(inspect::compare_codecs(&index, 3)?)
    } else {
        None
    };
    let mut out = std::io::stdout().lock();
    if a.json {
        let v = serde_json::json!({ "meta": index.meta(), "stats": s, "codecs": codecs });
        writeln!(out, "{}", serde_json::to_string_pretty(&v)?)?;
        return Ok(());
    }
    let m = index.meta();
    writeln!(out, "index        {}", a.index().display())?;
    writeln!(out, "documents    {}", s.docs)?;
    writeln!(out, "terms        {}", s.terms)?;
    writeln!(out, "postings     {}", s.postings)?;
    writeln!(out, "avg length   {:.2} tokens", s.avg_doc_len)?;
    writeln!(out, "analyzer     {}", m.analyzer)?;
    writeln!(out, "bm25         k1 {} b {}", m.bm25.k1, m.bm25.b)?;
    writeln!(out, "doc order    {:?}", m.doc_order)?;
    if let Some(shards) = &m.shards {
        writeln!(out, "shards       {}", shards.len())?;
        for s in shards {
            writeln!(
                out,
                "  {:<12} documents {} to {}",
                s.dir,
                s.first_doc,
                s.first_doc + s.num_docs - 1
            )?;
        }
    }
    writeln!(
        out,
        "static       {}",
        if m.static_scores.is_some() { "yes" } else { "no" }
    )?;
    writeln!(
        out,
        "codec        {}: {:.2} bits/docID, {:.2} bits/freq, {:.2} bits/posting of skip data",
        s.codec, s.doc_bits_per_posting, s.freq_bits_per_posting, s.skip_bits_per_posting
    )?;
    writeln!(out, "files")?;
    for (name, bytes) in &s.files {
        writeln!(out, "  {name:<14} {bytes:>14} bytes")?;
    }
    writeln!(out, "largest lists")?;
    for (term, df) in &s.largest_lists {
        writeln!(out, "  {term:<24} {df:>10}")?;
    }
    if let Some(codecs) = codecs {
        writeln!(
            out,
            "codecs (all lists re-encoded; decode on one thread, median of 3 passes)"
        )?;
        writeln!(
            out,
            "  {:<6} {:>10} {:>10} {:>16} {:>20}",
            "codec", "bits/doc", "bits/freq", "M docIDs/s", "M postings/s"
        )?;
        for c in codecs {
            writeln!(
                out,
                "  {:<6} {:>10.2} {:>10.2} {:>16.0} {:>20.0}",
                c.codec,
                c.doc_bits_per_posting,
                c.freq_bits_per_posting,
                c.doc_decode_mints_per_s,
                c.posting_decode_mints_per_s
            )?;
        }
    }
    Ok(())
}

fn run_export(a: ExportArgs) -> Result<()> {
    let index = open(a.index())?;
    if index.is_sharded() {
        anyhow::bail!(
            "{} is a sharded index ({} shards): CIFF and PISA's collection describe one index; build \
             the collection without --shards to export it",
            a.index().display(),
            index.shards().len()
        );
    }
    let Some(ciff_path) = &a.ciff else {
        return export_pisa(&a, &index);
    };
    if ciff_path.exists() && !a.force {
        anyhow::bail!(
            "{} already exists: choose another path or pass --force",
            ciff_path.display()
        );
    }
    if index.static_scores().is_some() {
        eprintln!("note: CIFF has no field for static scores; they are not exported");
    }
    ciff::export(&index, ciff_path)?;
    eprintln!(
        "wrote {} ({} lists, {} documents)",
        ciff_path.display(),
        index.meta().num_terms,
        index.meta().num_docs
    );
    Ok(())
}

fn export_pisa(a: &ExportArgs, index: &Index) -> Result<()> {
    let dir = a.pisa.as_deref().expect("clap requires --ciff or --pisa");
    if dir.exists() {
        if !a.force {
            anyhow::bail!(
                "{} already exists: choose another directory or pass --force",
                dir.display()
            );
        }
        if !dir.join("fwd.terms").exists() {
            anyhow::bail!(
                "{} is not a PISA export (no fwd.terms): --force only replaces one; remove it yourself",
                dir.display()
            );
        }
        std::fs::remove_dir_all(dir).with_context(|| format!("removing {}", dir.display()))?;
    }
    let terms = match &a.terms_from {
        None => None,
        Some(path) => {
            let mut warnings = Vec::new();
            let lines = shared::queries::read_query_file(path, &mut warnings)?;
            for w in &warnings {
                eprintln!("warning: {w}");
            }
            let analyzer = &index.meta().analyzer;
            let ids: Vec<u32> = lines
                .iter()
                .flat_map(|l| analyzer.terms(&l.text))
                .filter_map(|t| index.term_id(&t))
                .collect();
            Some(ids)
        }
    };
    let started = Instant::now();
    let report = warpsearch_index::pisa::export(index, dir, terms.as_deref())
        .with_context(|| format!("exporting {} for PISA", dir.display()))?;
    eprintln!(
        "wrote {} ({} of {} lists, {} postings, {} documents) in {:.1} s",
        dir.display(),
        report.terms,
        index.meta().num_terms,
        report.postings,
        report.docs,
        started.elapsed().as_secs_f64()
    );
    if index.static_scores().is_some() {
        eprintln!("note: PISA's collection has no static scores; they are not exported");
    }
    Ok(())
}

pub(crate) fn open(path: &Path) -> Result<Index> {
    Index::open(path).with_context(|| format!("opening index {}", path.display()))
}

/// mimalloc for every allocation of the binary (why: `crates/cli/Cargo.toml`).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;
