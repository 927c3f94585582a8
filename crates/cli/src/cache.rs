//! The GPU list cache's counters, as lines for people and as JSON.

use serde_json::{json, Value};
use warpsearch_engine::{CacheStats, GpuStats};

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
