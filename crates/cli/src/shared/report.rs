//! An engine's counters for people and for JSON reports: the GPU's, the list cache's, the hybrid
//! scheduler's, and where early termination stopped.

use std::time::Duration;

use serde_json::{json, Value};
use warpsearch_engine::{CacheStats, GpuStats, HybridStats, QueryTimes, ThreadTimes};

use super::stats::Latency;

/// One line of GPU counters for --stats.
pub fn gpu_stats_line(s: &GpuStats) -> String {
    let mut line = format!(
        "GPU: {} batches, {} queries; host→device {:.2} MiB in {:.2} ms, kernels {:.2} ms, device→host \
         {:.2} MiB in {:.2} ms, host preparation {:.2} ms, staging {:.2} ms, waiting {:.2} ms; {} queries answered before their batch ended; {} queries answered by the CPU after a GPU failure",
        s.batches,
        s.queries,
        s.h2d_bytes as f64 / (1u64 << 20) as f64,
        s.h2d_ms,
        s.kernel_ms,
        s.d2h_bytes as f64 / (1u64 << 20) as f64,
        s.d2h_ms,
        s.prepare_ms,
        s.stage_ms,
        s.wait_ms,
        s.answered_early,
        s.failed_queries
    );
    if let Some(shares) = s.phase_shares() {
        let parts: Vec<String> = shares
            .iter()
            .map(|(name, share)| format!("{name} {:.1}%", 100.0 * share))
            .collect();
        let all = s.query_blocks();
        line.push_str(&format!(
            "; kernel phases (share of CTA cycles): {}; blocks decoded {} of the queries' {all} ({:.1}%)",
            parts.join(", "),
            s.decoded_blocks,
            100.0 * s.decoded_blocks as f64 / all.max(1) as f64
        ));
    }
    line
}

/// Where the threads that feed the GPUs spent their time, in a line (their times summed); None where
/// none was timed (a closed loop's calls run on the caller's thread, and with a list cache each call
/// runs whole, untimed).
pub fn gpu_thread_line(t: &ThreadTimes) -> Option<String> {
    let total = t.total_ms();
    if total <= 0.0 {
        return None;
    }
    let parts: Vec<String> = t
        .parts()
        .iter()
        .map(|(name, ms)| format!("{name} {:.1}%", 100.0 * ms / total))
        .collect();
    Some(format!(
        "GPU feeding threads, {:.0} ms in all: {}; {} calls of {:.1} queries on average",
        total,
        parts.join(", "),
        t.calls,
        t.call_queries as f64 / t.calls.max(1) as f64
    ))
}

/// [`gpu_thread_line`]'s figures (ms), for JSON; None where it has none.
pub fn gpu_thread_json(t: &ThreadTimes) -> Option<Value> {
    (t.total_ms() > 0.0).then(|| {
        json!({"collect_ms": t.collect_ms, "answer_ms": t.answer_ms, "take_ms": t.take_ms,
               "submit_ms": t.submit_ms, "full_ms": t.full_ms, "idle_ms": t.idle_ms,
               "calls": t.calls, "call_queries": t.call_queries})
    })
}

pub fn gpu_json(s: &GpuStats) -> Value {
    // Zero shares when the kernel was not instrumented.
    let phases: serde_json::Map<String, Value> = s
        .phase_shares()
        .unwrap_or_else(|| GpuStats::PHASES.iter().map(|&name| (name, 0.0)).collect())
        .into_iter()
        .map(|(name, share)| (name.to_string(), json!(share)))
        .collect();
    json!({"batches": s.batches, "queries": s.queries, "h2d_bytes": s.h2d_bytes, "d2h_bytes": s.d2h_bytes,
           "h2d_ms": s.h2d_ms, "kernel_ms": s.kernel_ms, "d2h_ms": s.d2h_ms, "prepare_ms": s.prepare_ms,
           "stage_ms": s.stage_ms, "wait_ms": s.wait_ms, "phase_share": phases, "decoded_blocks": s.decoded_blocks, "query_blocks": s.query_blocks(),
           "answered_early": s.answered_early, "cpu_fallback_queries": s.failed_queries})
}

/// Where the GPU's queries spent their device time: each part ([`QueryTimes::PARTS`], then their
/// sum) over the queries, read once for both the line and the JSON.
pub struct DeviceTimes {
    parts: Vec<(&'static str, Latency)>,
    queries: usize,
    /// The median tasks of the queries' batches.
    batch_tasks: u32,
    /// The median parts the slowest 1% of runs were cut into.
    slowest_cut: u32,
}

impl DeviceTimes {
    /// [`DeviceTimes`] of `s`'s queries; None unless instrumented (`--gpu-profile`).
    pub fn of(s: &GpuStats) -> Option<DeviceTimes> {
        let t = &s.query_times;
        if t.is_empty() {
            return None;
        }
        let spread = |f: &dyn Fn(&QueryTimes) -> f32| {
            Latency::of(
                t.iter()
                    .map(|q| Duration::from_secs_f64(f64::from(f(q)) / 1e6))
                    .collect(),
            )
        };
        let mut parts: Vec<(&'static str, Latency)> = (0..QueryTimes::PARTS.len())
            .map(|i| (QueryTimes::PARTS[i], spread(&|q| q.times()[i])))
            .collect();
        parts.push(("all", spread(&|q| q.times().iter().sum())));
        let median = |mut v: Vec<u32>| {
            v.sort_unstable();
            v[v.len() / 2]
        };
        let mut by_run: Vec<&QueryTimes> = t.iter().collect();
        by_run.sort_by(|a, b| b.run_us.total_cmp(&a.run_us));
        let slowest = &by_run[..by_run.len().div_ceil(100)];
        Some(DeviceTimes {
            parts,
            queries: t.len(),
            batch_tasks: median(t.iter().map(|q| q.batch_tasks).collect()),
            slowest_cut: median(slowest.iter().map(|q| q.parts).collect()),
        })
    }

    /// One line: each part's p50 / p99 / p99.9 in ms (launch: until the batch's first task was
    /// taken; queued: behind the batch's other tasks; run: its own; behind: waiting for the batch's
    /// last answer), and the parts the slowest runs were cut into.
    pub fn line(&self) -> String {
        let parts: Vec<String> = self
            .parts
            .iter()
            .map(|(name, l)| format!("{name} {:.2} / {:.2} / {:.2}", l.p50, l.p99, l.p999))
            .collect();
        format!(
            "GPU time of a query, p50 / p99 / p99.9 ms: {}; {} queries, batches of {} tasks (median); the \
             slowest 1% of runs cut into {} parts (median)",
            parts.join(", "),
            self.queries,
            self.batch_tasks,
            self.slowest_cut
        )
    }

    /// As JSON: each part's percentiles (ms), the queries, the median batch's tasks, the median parts
    /// of the slowest 1% of runs.
    pub fn json(&self) -> Value {
        let parts: serde_json::Map<String, Value> = self
            .parts
            .iter()
            .map(|(name, l)| (name.to_string(), l.json()))
            .collect();
        json!({"parts_ms": parts, "queries": self.queries, "batch_tasks_p50": self.batch_tasks,
               "slowest_1pct_parts_p50": self.slowest_cut})
    }
}

/// One line of the hybrid scheduler's counters: who answered, prediction errors, steals, splits, misses.
pub fn hybrid_stats_line(h: &HybridStats) -> String {
    let total = (h.cpu_queries + h.gpu_queries + h.both_queries).max(1) as f64;
    format!(
        "hybrid: queries by CPU {:.1}%, GPU {:.1}%, split over both {:.1}%; {} splits; prediction error \
         CPU {:.0}% (per query), GPU {:.0}% (per call); the CPU took {} from the GPU's queue, the GPU {} from the CPU's; \
         {} hedged on the GPU ({} answered there first); {} GPU calls of {:.1} tasks; {} GPU failures rerun on the CPU; {} deadline misses",
        100.0 * h.cpu_queries as f64 / total,
        100.0 * h.gpu_queries as f64 / total,
        100.0 * h.both_queries as f64 / total,
        h.splits,
        100.0 * h.cpu_prediction_error,
        100.0 * h.gpu_prediction_error,
        h.steals_by_cpu,
        h.steals_by_gpu,
        h.hedges,
        h.hedges_won,
        h.gpu_batches,
        h.gpu_tasks as f64 / h.gpu_batches.max(1) as f64,
        h.gpu_fallbacks,
        h.deadline_misses
    )
}

pub fn hybrid_json(h: &HybridStats) -> Value {
    json!({"cpu_queries": h.cpu_queries, "gpu_queries": h.gpu_queries, "both_queries": h.both_queries,
           "splits": h.splits, "steals_by_cpu": h.steals_by_cpu, "steals_by_gpu": h.steals_by_gpu,
           "hedges": h.hedges, "hedges_won": h.hedges_won, "deadline_misses": h.deadline_misses, "gpu_batches": h.gpu_batches,
           "gpu_tasks": h.gpu_tasks, "gpu_fallbacks": h.gpu_fallbacks,
           "cpu_prediction_error": h.cpu_prediction_error, "gpu_prediction_error": h.gpu_prediction_error})
}

/// One line of the list cache's counters for `queries` queries: hit rate, bytes carried per query, who
/// answered, the CPU's completion time.
pub fn cache_stats_line(c: &CacheStats, g: Option<&GpuStats>, queries: usize) -> String {
    let q = queries.max(1) as f64;
    let (hit, staged, fill) = g.map_or((0.0, 0, 0), |g| {
        (g.hit_rate().unwrap_or(0.0), g.staged_bytes, g.cache_fill_bytes)
    });
    format!(
        "GPU cache: hit rate {:.3} (blocks of the GPU's ranges found in the cache); {:.1} KiB carried per \
         query; GPU whole {} ({} as two ranges), GPU part + CPU completion {}, CPU only {}; completion {:.3} s of CPU ({:.3} ms per \
         query); {} plans applied ({} left as not worth their copies), {} lists changed, {:.1} MiB copied into the \
         cache, {:.3} s replanning{}",
        hit,
        staged as f64 / q / 1024.0,
        c.gpu_whole,
        c.two_ranges,
        c.partial,
        c.cpu_only,
        c.completion_seconds,
        c.completion_seconds * 1e3 / q,
        c.replans,
        c.plans_skipped,
        c.lists_changed,
        fill as f64 / (1u64 << 20) as f64,
        c.replan_seconds,
        match c.unobserved {
            0 => String::new(),
            n => format!("; {n} queries not observed (the policy's thread was behind)"),
        }
    )
}

/// What the list cache's plans did over `passes` warm-up passes, settled after them: whether the
/// measured passes run on the first plan or on one the dynamic policy made of the warm-up.
pub fn warmup_line(c: &CacheStats, passes: usize) -> String {
    format!(
        "GPU cache over the warm-up ({passes} pass{}, then settled): {} plans applied, the first \
         included ({} left as not worth their copies), {} lists changed",
        if passes == 1 { "" } else { "es" },
        c.replans,
        c.plans_skipped,
        c.lists_changed
    )
}

/// The list cache's counters as JSON.
pub fn cache_json(c: &CacheStats, g: Option<&GpuStats>, queries: usize) -> Value {
    json!({
        "hit_rate": g.and_then(|g| g.hit_rate()),
        "staged_bytes": g.map(|g| g.staged_bytes),
        "staged_bytes_per_query": g.map(|g| g.staged_bytes as f64 / queries.max(1) as f64),
        "cache_fill_bytes": g.map(|g| g.cache_fill_bytes),
        "gpu_whole": c.gpu_whole,
        "two_ranges": c.two_ranges,
        "partial": c.partial,
        "cpu_only": c.cpu_only,
        "completion_seconds": c.completion_seconds,
        "replans": c.replans,
        "lists_changed": c.lists_changed,
        "replan_seconds": c.replan_seconds,
        "plans_skipped": c.plans_skipped,
        "unobserved": c.unobserved,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_device_times_line_reads_each_part_and_the_cut_of_the_slowest_runs() {
        assert!(
            DeviceTimes::of(&GpuStats::default()).is_none(),
            "not instrumented"
        );
        // 200 queries: runs of 1 to 200 µs; the two slowest cut into 16 parts, the others whole;
        // batches of 10 tasks, but the last 50 queries' of 300.
        let times = (1..=200u32)
            .map(|i| QueryTimes {
                launch_us: 0.0,
                queued_us: 1000.0,
                run_us: i as f32,
                behind_us: 0.0,
                batch_tasks: if i > 150 { 300 } else { 10 },
                parts: if i > 198 { 16 } else { 1 },
            })
            .collect();
        let s = GpuStats {
            query_times: times,
            ..GpuStats::default()
        };
        let d = DeviceTimes::of(&s).expect("instrumented");
        assert_eq!((d.batch_tasks, d.slowest_cut), (10, 16));
        let ms = |name: &str| d.parts.iter().find(|(n, _)| *n == name).expect(name).1.p50;
        assert_eq!((ms("queued"), ms("run")), (1.0, 0.1));
        let line = d.line();
        assert!(line.contains("queued 1.00 / 1.00 / 1.00"), "{line}");
        assert!(
            line.contains("200 queries, batches of 10 tasks (median)"),
            "{line}"
        );
        assert!(line.contains("slowest 1% of runs cut into 16 parts"), "{line}");
    }

    #[test]
    fn the_gpu_threads_time_is_shown_in_shares_only_where_calls_went_through_it() {
        assert_eq!(gpu_thread_line(&ThreadTimes::default()), None);
        assert_eq!(gpu_thread_json(&ThreadTimes::default()), None);
        let t = ThreadTimes {
            collect_ms: 10.0,
            answer_ms: 20.0,
            take_ms: 5.0,
            submit_ms: 40.0,
            full_ms: 20.0,
            idle_ms: 5.0,
            calls: 8,
            call_queries: 100,
        };
        let line = gpu_thread_line(&t).expect("calls went through it");
        assert!(
            line.starts_with("GPU feeding threads, 100 ms in all: collecting 10.0%, answers 20.0%"),
            "{line}"
        );
        assert!(
            line.contains("submitting 40.0%, slots full 20.0%, idle 5.0%"),
            "{line}"
        );
        assert!(line.ends_with("8 calls of 12.5 queries on average"), "{line}");
        let mut twice = t;
        twice.add(&t);
        assert_eq!((twice.total_ms(), twice.calls), (200.0, 16));
        assert_eq!(gpu_thread_json(&t).expect("some")["submit_ms"], 40.0);
    }
}
