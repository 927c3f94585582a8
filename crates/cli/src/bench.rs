//! `warpsearch bench`: an engine's closed-loop throughput (every query available at once) and its latency
//! under open-loop Poisson arrivals at given rates (docs/references.md#ding-gpu-query-processing section 9: queries arrive at a rate and have
//! a deadline; the report counts those that missed it). Prints a table and optionally writes JSON.
//!
//! Open loop: each query is submitted to the engine at its arrival time, as a server's client would;
//! latency runs from arrival to answer, so queueing behind busy workers (or a GPU batch) counts. The
//! engine schedules them as it schedules a server's: the CPU's threads take them in arrival order, the
//! GPU's thread sends every query that has arrived (up to a batch) as soon as its last call is back,
//! and the hybrid routes each by its predicted cost and deadline.

use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use rayon::prelude::*;
use serde_json::{json, Value};
use std::sync::Arc;
use warpsearch_engine::{Collect, Done, Engine, ServedBy};
use warpsearch_index::queries::QueryLine;
use warpsearch_index::Index;
use warpsearch_query::{Answer, Query, Request};

use crate::args::{BenchArgs, BenchPlotArgs, QueryArgs};
use crate::shared::early::Stops;
use crate::shared::engine::{answer_batch, open_engine};
use crate::shared::output::Output;
use crate::shared::provenance;
use crate::shared::queries::load_queries;
use crate::shared::report::{
    cache_json, cache_stats_line, gpu_json, gpu_stats_line, gpu_thread_json, gpu_thread_line, hybrid_json,
    hybrid_stats_line, warmup_line, DeviceTimes,
};
use crate::shared::stats::{request_arrivals, request_latencies, Latency};

pub fn run(a: BenchArgs) -> Result<()> {
    if a.rates.iter().any(|&r| !(r.is_finite() && r > 0.0)) {
        bail!("--rates must be positive numbers of queries per second, e.g. --rates 1000,10000");
    }
    if a.loads.iter().any(|&l| !(l.is_finite() && l > 0.0)) {
        bail!("--loads must be positive fractions of the closed loop's throughput, e.g. --loads 0.3,0.7");
    }
    if !(a.open.duration.is_finite()
        && a.open.duration > 0.0
        && a.open.deadline_ms.is_finite()
        && a.open.deadline_ms > 0.0)
    {
        bail!("--duration and --deadline-ms must be positive");
    }
    // Where the report and plots go is checked before the run, not after it.
    for path in [a.json.as_deref(), a.svg.as_deref()].into_iter().flatten() {
        let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
        if let Some(dir) = dir.filter(|d| !d.is_dir()) {
            bail!(
                "{}: the folder {} does not exist: create it, or choose another path",
                path.display(),
                dir.display()
            );
        }
    }
    let index = Arc::new(crate::open(&a.input.index)?);
    let engine = open_engine(&a.engine, index.clone(), a.input.mode, a.input.k)?;
    let (lines, queries) = load_queries(&a.input, &index)?;
    if queries.is_empty() {
        bail!("{} holds no queries", queries_name(&a.input));
    }
    let backend = engine.describe();
    let warm = engine.warm_up(&queries, a.warmup)?.filter(|_| a.warmup > 0);

    // Closed loop: every query available at once, `passes` times over.
    let passes = a.passes as usize;
    let batch = a.batch as usize;
    let (answers, wall) = if a.text {
        let lines = repeat(&lines, passes);
        closed_from_text(&engine, &index, &lines, &a.input)
    } else {
        let queries = repeat(&queries, passes);
        let started = Instant::now();
        (answer_batch(&engine, &queries), started.elapsed())
    };
    let closed_queries = answers.len();
    let mut latencies = Vec::with_capacity(answers.len());
    for r in answers {
        latencies.push(r?.latency);
    }
    // A postings file truncated or rewritten under the open index is an error, never a timed run of
    // wrong answers (one look a run, off the timed path).
    index.check_unchanged()?;
    let gpu = engine.take_gpu_stats();
    let cache = engine.take_cache_stats();
    let closed_qps = closed_queries as f64 / wall.as_secs_f64();
    let mut curves: Vec<(String, Vec<Duration>)> = vec![("closed loop".into(), latencies.clone())];
    let closed = Latency::of(latencies);
    println!(
        "bench: {} queries{}, mode {}, k {}, backend {backend}{}{}",
        queries.len(),
        match passes {
            1 => String::new(),
            n => format!(" ({n} passes in the closed loop)"),
        },
        a.input.mode.name(),
        a.input.k,
        if a.text { ", from text" } else { "" },
        match batch {
            1 => String::new(),
            b => format!("; the open loop's latencies are of requests of {b} queries"),
        }
    );
    println!(
        "{:<14} {:>12} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>8}",
        "load", "queries/s", "mean_ms", "p50_ms", "p95_ms", "p99_ms", "p99.9_ms", "max_ms", "missed"
    );
    let row = |load: &str, qps: f64, l: &Latency, missed: &str| {
        println!(
            "{load:<14} {qps:>12.0} {:>9.3} {:>9.3} {:>9.3} {:>9.3} {:>9.3} {:>9.3} {missed:>8}",
            l.mean, l.p50, l.p95, l.p99, l.p999, l.max
        )
    };
    row("closed", closed_qps, &closed, "-");
    let closed_times = gpu.as_ref().and_then(DeviceTimes::of);
    if let Some(s) = &gpu {
        println!("{}", gpu_stats_line(s));
        if let Some(times) = &closed_times {
            println!("{}", times.line());
        }
    }
    if let Some(c) = &cache {
        println!("{}", cache_stats_line(c, gpu.as_ref(), closed_queries));
        if let Some(w) = &warm {
            println!("{}", warmup_line(w, a.warmup));
        }
    }
    let closed_hybrid = engine.take_hybrid_stats();
    if let Some(h) = &closed_hybrid {
        println!("{}", hybrid_stats_line(h));
    }
    // After the timed run: the queries run again on the CPU to find where they stop.
    let stops = Stops::of(&engine, &queries)?;
    if let Some(s) = &stops {
        println!("{}", s.line());
    }

    let mut open = Vec::new();
    let mut by_rate = Vec::new();
    let runs = a.rates.iter().map(|&r| (r, None));
    let runs = runs.chain(a.loads.iter().map(|&l| (l * closed_qps, Some(l))));
    for (rate, load) in runs.collect::<Vec<_>>() {
        // At least 1,000 arrivals (queries, or requests of `batch`), so that the tail percentiles
        // rest on more than a few of them; the query log repeats if it is shorter than the run.
        let n = ((rate * a.open.duration) as usize).max(1000 * batch);
        let log: Vec<Request> = queries.iter().cycle().take(n).cloned().collect();
        let arrivals = request_arrivals(n, batch, rate, a.open.seed);
        // Drawn on stderr only when it is a terminal (indicatif hides it otherwise).
        let bar = ProgressBar::new(n as u64).with_style(
            ProgressStyle::with_template("{msg} {bar:40} {pos}/{len} queries, {elapsed}")
                .expect("a valid template"),
        );
        bar.set_message(format!("{rate:.0}/s"));
        let deadline = Duration::from_secs_f64(a.open.deadline_ms / 1e3);
        engine.take_hybrid_stats();
        engine.take_gpu_stats();
        let (lat, served, span) = open_loop(&engine, &log, &arrivals, deadline, &bar)?;
        let lat = request_latencies(&lat, batch);
        bar.finish_and_clear();
        index.check_unchanged()?;
        let hybrid = engine.take_hybrid_stats();
        let on_gpu = engine.take_gpu_stats();
        let times = on_gpu.as_ref().and_then(DeviceTimes::of);
        let early = on_gpu.as_ref().map(|g| g.answered_early);
        let thread = on_gpu.as_ref().map(|g| g.thread);
        // The queries of the requests answered late, as `load` counts them.
        let missed: usize = (lat.iter().enumerate())
            .filter(|&(_, &d)| d > deadline)
            .map(|(r, _)| batch.min(n - r * batch))
            .sum();
        let requests = lat.len();
        let achieved = n as f64 / span.as_secs_f64();
        let label = match load {
            Some(l) => format!("{:.0}% {rate:.0}/s", l * 100.0),
            None => format!("{rate:.0}/s"),
        };
        curves.push((label.clone(), lat.clone()));
        let l = Latency::of(lat);
        by_rate.push((achieved, l.p50, l.p99));
        row(&label, achieved, &l, &missed.to_string());
        println!("  {}", served.line());
        if let Some(h) = &hybrid {
            println!("  {}", hybrid_stats_line(h));
        }
        if let Some(early) = early {
            println!("  GPU: {early} of {n} queries answered before the rest of their GPU batch");
        }
        if let Some(line) = thread.as_ref().and_then(gpu_thread_line) {
            println!("  {line}");
        }
        if let Some(times) = &times {
            println!("  {}", times.line());
        }
        open.push(
            json!({"rate": rate, "load": load, "queries": n, "requests": requests, "achieved_qps": achieved,
                   "latency_ms": l.json(), "deadline_ms": a.open.deadline_ms, "missed": missed,
                   "served": served.json(), "hybrid": hybrid.as_ref().map(hybrid_json),
                   "gpu_answered_early": early,
                   "gpu_thread": thread.as_ref().and_then(gpu_thread_json),
                   "gpu_times": times.as_ref().map(DeviceTimes::json)}),
        );
    }

    if let Some(prefix) = &a.svg {
        let title = format!("{} top-{}, {backend}", a.input.mode.name(), a.input.k);
        let cdf = prefix.with_file_name(format!("{}-latency-cdf.svg", file_stem(prefix)));
        let counted = match batch {
            1 => "fraction of queries".to_string(),
            b => format!("fraction of queries (open loop: of requests of {b})"),
        };
        plot_cdf(&cdf, &title, &counted, &curves)?;
        if !by_rate.is_empty() {
            let rates = prefix.with_file_name(format!("{}-latency-vs-rate.svg", file_stem(prefix)));
            plot_rates(&rates, &title, &by_rate)?;
        }
    }
    if let Some(path) = &a.json {
        let report = json!({
            "command": provenance::command(),
            "date": provenance::utc_date(),
            "machine": provenance::machine(),
            "index": a.input.index.display().to_string(),
            "queries": queries_name(&a.input),
            "num_queries": queries.len(),
            "mode": a.input.mode.name(),
            "k": a.input.k,
            "backend": backend,
            "from_text": a.text,
            "passes": passes,
            "batch": batch,
            "closed_loop": {"qps": closed_qps, "queries": closed_queries, "latency_ms": closed.json(),
                            "gpu": gpu.as_ref().map(gpu_json),
                            "gpu_times": closed_times.as_ref().map(DeviceTimes::json),
                            "cache": cache.as_ref().map(|c| cache_json(c, gpu.as_ref(), closed_queries)),
                            "warmup_cache": warm.as_ref().map(|c| cache_json(c, None, queries.len() * a.warmup)),
                            "hybrid": closed_hybrid.as_ref().map(hybrid_json),
                            "early_termination": stops.as_ref().map(Stops::json)},
            "open_loop": open,
        });
        Output::json_report(path, &report)?;
    }
    Ok(())
}

/// `items` `times` times over (a clone only where there is more than one pass).
fn repeat<T: Clone>(items: &[T], times: usize) -> std::borrow::Cow<'_, [T]> {
    match times {
        1 => std::borrow::Cow::Borrowed(items),
        n => std::borrow::Cow::Owned(items.iter().cycle().take(items.len() * n).cloned().collect()),
    }
}

/// The query file's name, or `--query` for one query given on the command line.
fn queries_name(a: &QueryArgs) -> String {
    a.queries
        .as_ref()
        .map_or_else(|| "--query".to_string(), |p| p.display().to_string())
}

/// `bench --text`'s closed loop and its wall time: every query's text analysed (on all threads), the
/// queries answered, and their hits' document ids looked up (on all threads). The analysis runs once
/// before the clock too, as the server's warm-up pass does, so each thread's cache of tokens is warm.
fn closed_from_text(
    engine: &Engine,
    index: &Index,
    lines: &[QueryLine],
    a: &QueryArgs,
) -> (Vec<warpsearch_index::Result<Answer>>, Duration) {
    let analyse = || -> Vec<Request> {
        lines
            .par_iter()
            .with_max_len(64)
            .map(|l| Request::new(Query::parse(index, &l.text), a.mode, a.k))
            .collect()
    };
    drop(analyse());
    let started = Instant::now();
    let answers = answer_batch(engine, &analyse());
    let id_bytes: usize = answers
        .par_iter()
        .flatten()
        .map(|answer| {
            // As the server's responses look them up (`JsonHits`).
            let mut bytes = 0;
            let docs = answer.hits.iter().map(|h| h.doc);
            let looked_up = index.try_for_each_doc_id(docs, |id| {
                bytes += id.len();
                Ok::<(), std::convert::Infallible>(())
            });
            let Ok(()) = looked_up;
            bytes
        })
        .sum();
    std::hint::black_box(id_bytes);
    (answers, started.elapsed())
}

/// How many queries of a run each processor answered.
#[derive(Default)]
struct Served {
    gpu: usize,
    cpu: usize,
    both: usize,
}

impl Served {
    fn of(by: impl Iterator<Item = ServedBy>) -> Served {
        let mut s = Served::default();
        for b in by {
            *match b {
                ServedBy::Gpu => &mut s.gpu,
                ServedBy::Cpu => &mut s.cpu,
                ServedBy::Both => &mut s.both,
            } += 1;
        }
        s
    }

    fn line(&self) -> String {
        let n = (self.gpu + self.cpu + self.both).max(1) as f64;
        let pc = |x: usize| 100.0 * x as f64 / n;
        format!(
            "served by the GPU {:.1}%, the CPU {:.1}%, both (a split query) {:.1}%",
            pc(self.gpu),
            pc(self.cpu),
            pc(self.both)
        )
    }

    fn json(&self) -> Value {
        json!({"gpu": self.gpu, "cpu": self.cpu, "both": self.both})
    }
}

/// Submits `queries[i]` to the engine at `arrivals[i]` after the start, with the deadline (every backend
/// the same way: a server's clients do no more); returns each query's latency from its arrival to the
/// moment the engine handed over its answer, which processor answered them, and the time until the
/// last answer.
fn open_loop(
    engine: &Engine,
    queries: &[Request],
    arrivals: &[Duration],
    deadline: Duration,
    bar: &ProgressBar,
) -> Result<(Vec<Duration>, Served, Duration)> {
    let start = Instant::now();
    let tick = bar.clone();
    // Stamped on the engine's thread as it answers, so that handing the answer over is not counted.
    let answered = Arc::new(Collect::with(queries.len(), move |done: Done| {
        tick.inc(1);
        (start.elapsed(), done.served_by)
    }));
    // Every query that has arrived goes in one submission, so that the generator keeps up at a
    // million queries a second; each query's latency still runs from its own arrival.
    let mut next = 0;
    while next < queries.len() {
        wait_until(start, arrivals[next]);
        let now = start.elapsed();
        let end = next + arrivals[next..].partition_point(|&a| a <= now).max(1);
        // Errors of single queries are the search command's business; here they count as answered.
        let batch = queries[next..end].to_vec();
        engine.submit(next as u64, batch, Some(deadline), answered.clone());
        next = end;
    }
    let answers = answered
        .wait_for()
        .into_iter()
        .collect::<Option<Vec<(Duration, ServedBy)>>>()
        .context("the engine lost a query of the open loop")?;
    let served = Served::of(answers.iter().map(|&(_, by)| by));
    let lat = answers
        .iter()
        .zip(arrivals)
        .map(|(&(t, _), &arrival)| t.saturating_sub(arrival))
        .collect();
    Ok((lat, served, start.elapsed()))
}

/// Waits until `at` after `start`: sleeps while far from it, then yields the core until then, so that
/// the generator's own wake-up delay (tens of microseconds for a sleeping thread) does not count as the
/// engine's latency, and the engine's threads, which may want every core, get it meanwhile.
fn wait_until(start: Instant, at: Duration) {
    const SPIN: Duration = Duration::from_micros(200);
    let now = start.elapsed();
    if at > now + SPIN {
        std::thread::sleep(at - now - SPIN);
    }
    while start.elapsed() < at {
        std::thread::yield_now();
    }
}

fn file_stem(p: &std::path::Path) -> String {
    p.file_name()
        .map_or_else(|| "bench".into(), |n| n.to_string_lossy().into_owned())
}

/// The latency CDF of every run (log-scale milliseconds).
fn plot_cdf(
    path: &std::path::Path,
    title: &str,
    counted: &str,
    curves: &[(String, Vec<Duration>)],
) -> Result<()> {
    use plotters::prelude::*;
    let ms = |d: &Duration| (d.as_secs_f64() * 1e3).max(1e-4);
    let lo = curves
        .iter()
        .flat_map(|c| c.1.iter().map(ms))
        .fold(f64::INFINITY, f64::min);
    let hi = curves.iter().flat_map(|c| c.1.iter().map(ms)).fold(0.0, f64::max);
    let root = SVGBackend::new(path, (720, 440)).into_drawing_area();
    root.fill(&WHITE).map_err(plot_err)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(format!("latency CDF: {title}"), ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(48)
        .build_cartesian_2d((lo * 0.9..hi * 1.1).log_scale(), 0f64..1f64)
        .map_err(plot_err)?;
    chart
        .configure_mesh()
        .x_desc("latency (ms, log scale)")
        .y_desc(counted)
        .draw()
        .map_err(plot_err)?;
    for (i, (name, lat)) in curves.iter().enumerate() {
        let mut v: Vec<f64> = lat.iter().map(ms).collect();
        v.sort_by(f64::total_cmp);
        let n = v.len().max(1) as f64;
        // At most about 1,000 points a curve, the last always kept, so that the file stays small.
        let step = v.len().div_ceil(1000).max(1);
        let points: Vec<(f64, f64)> = v
            .iter()
            .enumerate()
            .filter(|(j, _)| j % step == 0 || j + 1 == v.len())
            .map(|(j, &x)| (x, (j + 1) as f64 / n))
            .collect();
        let color = Palette99::pick(i).to_rgba();
        chart
            .draw_series(LineSeries::new(points, color.stroke_width(2)))
            .map_err(plot_err)?
            .label(name.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2)));
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .position(SeriesLabelPosition::LowerRight)
        .draw()
        .map_err(plot_err)?;
    root.present().map_err(plot_err)?;
    Ok(())
}

/// p50 and p99 latency against the achieved rate of each open-loop run.
fn plot_rates(path: &std::path::Path, title: &str, runs: &[(f64, f64, f64)]) -> Result<()> {
    use plotters::prelude::*;
    let x_hi = runs.iter().map(|r| r.0).fold(0.0, f64::max) * 1.1;
    let y_hi = runs.iter().map(|r| r.2).fold(0.0, f64::max).max(1e-3) * 1.2;
    let root = SVGBackend::new(path, (720, 440)).into_drawing_area();
    root.fill(&WHITE).map_err(plot_err)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(format!("latency vs arrival rate: {title}"), ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(48)
        .build_cartesian_2d(0f64..x_hi.max(1.0), 0f64..y_hi)
        .map_err(plot_err)?;
    chart
        .configure_mesh()
        .x_desc("achieved queries/s")
        .y_desc("latency (ms)")
        .draw()
        .map_err(plot_err)?;
    for (i, (name, pick)) in [("p50", 1usize), ("p99", 2)].into_iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        let pts: Vec<(f64, f64)> = runs
            .iter()
            .map(|r| (r.0, if pick == 1 { r.1 } else { r.2 }))
            .collect();
        chart
            .draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))
            .map_err(plot_err)?
            .label(name)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2)));
        chart
            .draw_series(pts.into_iter().map(|p| Circle::new(p, 3, color.filled())))
            .map_err(plot_err)?;
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(plot_err)?;
    root.present().map_err(plot_err)?;
    Ok(())
}

fn plot_err<E: std::fmt::Display>(e: E) -> anyhow::Error {
    anyhow::anyhow!("drawing the plot failed: {e}")
}

/// `warpsearch bench-plot`: one bar per report, its closed-loop queries/s, labelled with its mode, k and
/// backend.
pub fn plot_reports(a: BenchPlotArgs) -> Result<()> {
    use plotters::prelude::*;
    let mut bars = Vec::new();
    let mut reports = Vec::new();
    for path in &a.reports {
        let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        let r: Value =
            serde_json::from_str(&text).with_context(|| format!("{} is not JSON", path.display()))?;
        let qps = r["closed_loop"]["qps"]
            .as_f64()
            .with_context(|| format!("{} is not a `bench --json` report", path.display()))?;
        // "cpu (16 threads)" / "gpu (NVIDIA H200 …)": the backend's first word is enough under a bar.
        let backend = r["backend"].as_str().unwrap_or("?");
        let label = format!(
            "{} top-{} {}",
            r["mode"].as_str().unwrap_or("?"),
            r["k"],
            backend.split_whitespace().next().unwrap_or("?")
        );
        bars.push((label, qps));
        reports.push((file_stem(&path.with_extension("")), r));
    }
    let top = bars.iter().map(|b| b.1).fold(0.0, f64::max).max(1.0) * 1.2;
    let n = bars.len() as f64;
    let root = SVGBackend::new(&a.svg, (200 + 200 * bars.len() as u32, 460)).into_drawing_area();
    root.fill(&WHITE).map_err(plot_err)?;
    let mut chart = ChartBuilder::on(&root)
        .caption("closed-loop throughput", ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(10)
        .y_label_area_size(80)
        .build_cartesian_2d(0f64..n, 0f64..top)
        .map_err(plot_err)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .disable_x_axis()
        .y_desc("queries/s")
        .y_label_formatter(&|v| format!("{v:.0}"))
        .draw()
        .map_err(plot_err)?;
    chart
        .draw_series(bars.iter().enumerate().map(|(i, b)| {
            let x = i as f64;
            Rectangle::new(
                [(x + 0.15, 0.0), (x + 0.85, b.1)],
                Palette99::pick(i).to_rgba().filled(),
            )
        }))
        .map_err(plot_err)?;
    // Each bar's label and value above it (labels can be long: backend names carry the device).
    chart
        .draw_series(bars.iter().enumerate().flat_map(|(i, b)| {
            let x = i as f64 + 0.15;
            let style = ("sans-serif", 12).into_font();
            [
                Text::new(format!("{:.0} q/s", b.1), (x, b.1 + top * 0.07), style.clone()),
                Text::new(b.0.clone(), (x, b.1 + top * 0.03), style),
            ]
        }))
        .map_err(plot_err)?;
    root.present().map_err(plot_err)?;
    println!("{}: {} reports", a.svg.display(), bars.len());
    if let Some(path) = &a.latency {
        plot_latency(path, &reports)?;
        println!("{}: {} reports", path.display(), reports.len());
    }
    Ok(())
}

/// Each report's open-loop p50 and p99 against its achieved queries/s (both axes logarithmic).
fn plot_latency(path: &std::path::Path, reports: &[(String, Value)]) -> Result<()> {
    use plotters::prelude::*;
    // (name, [(achieved q/s, p50 ms, p99 ms)]) of each report with open-loop runs.
    type Curve = (String, Vec<(f64, f64, f64)>);
    let curves: Vec<Curve> = reports
        .iter()
        .map(|(name, r)| {
            let runs = r["open_loop"].as_array().map_or(Vec::new(), |runs| {
                runs.iter()
                    .filter_map(|o| {
                        let l = &o["latency_ms"];
                        Some((
                            o["achieved_qps"].as_f64()?,
                            l["p50"].as_f64()?,
                            l["p99"].as_f64()?,
                        ))
                    })
                    .collect()
            });
            (name.clone(), runs)
        })
        .filter(|(_, runs)| !runs.is_empty())
        .collect();
    if curves.is_empty() {
        bail!("no report has open-loop runs (bench --rates or --loads) to draw");
    }
    let points = || curves.iter().flat_map(|c| c.1.iter());
    // Logarithmic in the rate too: the CPU's and the GPU's curves lie an order of magnitude apart.
    let x_lo = points().map(|p| p.0.max(1.0)).fold(f64::INFINITY, f64::min) * 0.8;
    let x_hi = points().map(|p| p.0).fold(0.0, f64::max).max(x_lo) * 1.25;
    let y_lo = points().map(|p| p.1.max(1e-3)).fold(f64::INFINITY, f64::min) * 0.8;
    let y_hi = points().map(|p| p.2).fold(0.0, f64::max).max(1e-3) * 1.5;
    let root = SVGBackend::new(path, (900, 560)).into_drawing_area();
    root.fill(&WHITE).map_err(plot_err)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "latency against load (p99 with points, p50 thin)",
            ("sans-serif", 18),
        )
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(56)
        .build_cartesian_2d((x_lo..x_hi).log_scale(), (y_lo..y_hi).log_scale())
        .map_err(plot_err)?;
    chart
        .configure_mesh()
        .x_desc("achieved queries/s (log scale)")
        .y_desc("latency (ms, log scale)")
        .draw()
        .map_err(plot_err)?;
    for (i, (name, runs)) in curves.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        let p99: Vec<(f64, f64)> = runs.iter().map(|r| (r.0, r.2)).collect();
        let p50: Vec<(f64, f64)> = runs.iter().map(|r| (r.0, r.1.max(1e-3))).collect();
        chart
            .draw_series(LineSeries::new(p99.clone(), color.stroke_width(2)))
            .map_err(plot_err)?
            .label(name.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2)));
        chart
            .draw_series(p99.into_iter().map(|p| Circle::new(p, 3, color.filled())))
            .map_err(plot_err)?;
        chart
            .draw_series(LineSeries::new(p50, color.stroke_width(1)))
            .map_err(plot_err)?;
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperRight)
        .draw()
        .map_err(plot_err)?;
    root.present().map_err(plot_err)?;
    Ok(())
}
