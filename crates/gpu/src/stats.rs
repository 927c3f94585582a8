//! What a GPU searcher counts of its work ([`GpuStats`]), and the kernel's timed phases.

/// Phases the kernel times when instrumented, in the order of their counters
/// ([`crate::abi::PH_SELECT`] to [`crate::abi::PH_TOPK`]).
pub const PHASES: [&str; 5] = ["block selection", "decode", "intersect", "score", "top-k"];
const _: () = assert!(PHASES.len() == crate::abi::PH_BLOCKS);

/// Counters of a searcher's work since it was made (or since [`crate::GpuSearcher::take_stats`]).
#[derive(Debug, Clone, Default)]
pub struct GpuStats {
    /// Kernel launches.
    pub batches: u64,
    /// Queries sent to the GPU.
    pub queries: u64,
    /// Bytes copied host to device (query descriptors).
    pub h2d_bytes: u64,
    /// Bytes copied device to host (results).
    pub d2h_bytes: u64,
    /// Device time of host-to-device copies, kernels and device-to-host copies, in ms (CUDA events).
    pub h2d_ms: f64,
    /// Kernel time, in ms.
    pub kernel_ms: f64,
    /// Device-to-host time, in ms.
    pub d2h_ms: f64,
    /// Host time preparing descriptors, in ms.
    pub prepare_ms: f64,
    /// Host time gathering staged blocks into pinned memory, in ms.
    pub stage_ms: f64,
    /// Host time waiting for batches to finish, in ms: near zero when the host, not the GPU, sets
    /// the pace.
    pub wait_ms: f64,
    /// Clock cycles per kernel phase, summed over CTAs ([`PHASES`]); zero unless instrumented.
    pub phase_cycles: [u64; 5],
    /// Blocks the kernel decoded, summed over CTAs; zero unless instrumented. Exhaustive evaluation
    /// decodes [`GpuStats::query_blocks`].
    pub decoded_blocks: u64,
    /// Queries the GPU failed (returned as errors, for the caller to answer elsewhere).
    pub failed_queries: u64,
    /// Blocks of the queries' docID ranges read from the list cache.
    pub cached_blocks: u64,
    /// Blocks of the queries' docID ranges copied with their batch (per query term).
    pub staged_blocks: u64,
    /// Bytes of postings and skip data copied with batches (each staged span once per batch).
    pub staged_bytes: u64,
    /// Bytes copied into the list cache by plan changes.
    pub cache_fill_bytes: u64,
    /// Queries answered while the rest of their batch still ran ([`crate::GpuOptions::map_answers`]).
    pub answered_early: u64,
    /// Where each query's time on the device went, query by query (the first [`QUERY_TIMES_KEPT`]);
    /// empty unless instrumented.
    pub query_times: Vec<QueryTimes>,
    /// Where the host thread that feeds the GPU spent its time (the engine's executor fills it; zero
    /// for calls run on the caller's thread).
    pub thread: ThreadTimes,
}

/// Where the thread that feeds a GPU spent its time, in ms, and the calls it handed over: a thread
/// busy nearly all the time sets the pace, not the GPU.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ThreadTimes {
    /// Looking at the calls on the GPU (their events, their answers in host memory) and collecting
    /// what it found; a look that finds nothing counts as the wait after it (`full_ms`, `idle_ms`),
    /// or as this where a call is then taken.
    pub collect_ms: f64,
    /// Handing answers over (on this thread, or to the delivering one).
    pub answer_ms: f64,
    /// Taking the next call's queries from the queue.
    pub take_ms: f64,
    /// Handing calls to the GPU: their preparation, staging, copies and launch.
    pub submit_ms: f64,
    /// Waiting for a pipeline slot, every one busy.
    pub full_ms: f64,
    /// With nothing to take while calls are on the GPU (a wait with nothing on it is not counted).
    pub idle_ms: f64,
    /// Calls handed to the GPU.
    pub calls: u64,
    /// Their queries.
    pub call_queries: u64,
}

impl ThreadTimes {
    /// The parts of the thread's time, named, in ms.
    pub fn parts(&self) -> [(&'static str, f64); 6] {
        [
            ("collecting", self.collect_ms),
            ("answers", self.answer_ms),
            ("taking", self.take_ms),
            ("submitting", self.submit_ms),
            ("slots full", self.full_ms),
            ("idle", self.idle_ms),
        ]
    }

    /// All of its time, in ms.
    pub fn total_ms(&self) -> f64 {
        self.parts().iter().map(|(_, ms)| ms).sum()
    }

    /// Adds `other`'s to these.
    pub fn add(&mut self, other: &ThreadTimes) {
        self.collect_ms += other.collect_ms;
        self.answer_ms += other.answer_ms;
        self.take_ms += other.take_ms;
        self.submit_ms += other.submit_ms;
        self.full_ms += other.full_ms;
        self.idle_ms += other.idle_ms;
        self.calls += other.calls;
        self.call_queries += other.call_queries;
    }
}

/// The most queries' times a [`GpuStats`] keeps: some 80 MB.
pub const QUERY_TIMES_KEPT: usize = 1 << 22;

/// Where one query's time on the device went (instrumented runs), in µs: read from the device's
/// clock as each of its batch's tasks was taken and answered, and from the events around the kernel.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct QueryTimes {
    /// From the kernel's launch to its batch's first task taken: the launch, and SMs that earlier
    /// batches' CTAs still held.
    pub launch_us: f32,
    /// From then to the query's first part taken: behind the batch's other tasks.
    pub queued_us: f32,
    /// From its first part taken to its last part's answer written: its own run.
    pub run_us: f32,
    /// From then to the batch's last answer: waiting for the batch's slowest task.
    pub behind_us: f32,
    /// Tasks in its batch (a query cut into parts has one per part).
    pub batch_tasks: u32,
    /// The parts it was cut into (docID ranges, one CTA each; 1: not cut).
    pub parts: u32,
}

impl QueryTimes {
    /// The parts of these times, named.
    pub const PARTS: [&'static str; 4] = ["launch", "queued", "run", "behind"];

    /// The four times, in the order of [`QueryTimes::PARTS`].
    pub fn times(&self) -> [f32; 4] {
        [self.launch_us, self.queued_us, self.run_us, self.behind_us]
    }
}

/// The times of one batch's queries: `ns` holds, per task in out_slot order, the device clock when it
/// was taken and when it was answered; `slots` each task's query (a query's parts adjacent);
/// `kernel_ms` the kernel's time between its events.
pub(crate) fn batch_times(ns: &[u64], slots: &[usize], kernel_ms: f64) -> Vec<QueryTimes> {
    let tasks = slots.len();
    let taken = |t: usize| ns[2 * t];
    let answered = |t: usize| ns[2 * t + 1];
    let (Some(first), Some(last)) = ((0..tasks).map(taken).min(), (0..tasks).map(answered).max()) else {
        return Vec::new();
    };
    let us = |a: u64, b: u64| b.saturating_sub(a) as f32 / 1e3;
    let launch_us = (kernel_ms * 1e3 - f64::from(us(first, last))).max(0.0) as f32;
    let mut out = Vec::new();
    let mut t = 0;
    while t < tasks {
        let end = t + slots[t..].iter().take_while(|&&q| q == slots[t]).count();
        let start = (t..end).map(taken).min().expect("a part");
        let done = (t..end).map(answered).max().expect("a part");
        out.push(QueryTimes {
            launch_us,
            queued_us: us(first, start),
            run_us: us(start, done),
            behind_us: us(done, last),
            batch_tasks: tasks as u32,
            parts: (end - t) as u32,
        });
        t = end;
    }
    out
}

impl GpuStats {
    /// Adds `other`'s counters to these.
    pub fn add(&mut self, other: &GpuStats) {
        self.batches += other.batches;
        self.queries += other.queries;
        self.h2d_bytes += other.h2d_bytes;
        self.d2h_bytes += other.d2h_bytes;
        self.h2d_ms += other.h2d_ms;
        self.kernel_ms += other.kernel_ms;
        self.d2h_ms += other.d2h_ms;
        self.prepare_ms += other.prepare_ms;
        self.stage_ms += other.stage_ms;
        self.wait_ms += other.wait_ms;
        for (t, x) in self.phase_cycles.iter_mut().zip(other.phase_cycles) {
            *t += x;
        }
        self.decoded_blocks += other.decoded_blocks;
        self.failed_queries += other.failed_queries;
        self.cached_blocks += other.cached_blocks;
        self.staged_blocks += other.staged_blocks;
        self.staged_bytes += other.staged_bytes;
        self.cache_fill_bytes += other.cache_fill_bytes;
        self.answered_early += other.answered_early;
        self.thread.add(&other.thread);
        self.keep_times(other.query_times.iter().copied());
    }

    /// Adds queries' times, up to [`QUERY_TIMES_KEPT`] in all (a server's, never taken, stays bounded).
    pub(crate) fn keep_times(&mut self, times: impl IntoIterator<Item = QueryTimes>) {
        let room = QUERY_TIMES_KEPT.saturating_sub(self.query_times.len());
        self.query_times.extend(times.into_iter().take(room));
    }

    /// Blocks of the queries' docID ranges, per query term: what exhaustive evaluation decodes.
    pub fn query_blocks(&self) -> u64 {
        self.cached_blocks + self.staged_blocks
    }

    /// Share of the blocks queries needed that the cache held (None before any).
    pub fn hit_rate(&self) -> Option<f64> {
        let all = self.query_blocks();
        (all > 0).then(|| self.cached_blocks as f64 / all as f64)
    }

    /// The kernel phases [`GpuStats::phase_shares`] names, in order.
    pub const PHASES: [&'static str; 5] = PHASES;

    /// Each kernel phase's share of the timed CTA cycles ([`PHASES`]), or `None` when not instrumented.
    pub fn phase_shares(&self) -> Option<Vec<(&'static str, f64)>> {
        let total: u64 = self.phase_cycles.iter().sum();
        (total > 0).then(|| {
            PHASES
                .iter()
                .zip(self.phase_cycles)
                .map(|(&name, c)| (name, c as f64 / total as f64))
                .collect()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batchs_times_split_each_querys_wait_run_and_wait_for_the_slowest() {
        // Three queries: 0 (one task), 1 (two parts), 2 (one task); clocks in ns.
        let ns = [
            1_000, 5_000, // query 0
            3_000, 9_000, // query 1, part 0
            2_000, 21_000, // query 1, part 1: the batch's last answer
            4_000, 6_000, // query 2
        ];
        let got = batch_times(&ns, &[0, 1, 1, 2], 0.025);
        let want = |queued, run, behind, parts| QueryTimes {
            launch_us: 5.0, // 25 µs of kernel, 20 µs from the first task taken to the last answer
            queued_us: queued,
            run_us: run,
            behind_us: behind,
            batch_tasks: 4,
            parts,
        };
        assert_eq!(
            got,
            vec![
                want(0.0, 4.0, 16.0, 1),
                want(1.0, 19.0, 0.0, 2),
                want(3.0, 2.0, 15.0, 1)
            ]
        );
        assert!(batch_times(&[], &[], 1.0).is_empty());
        // Events that time the kernel shorter than its tasks (their clocks differ) give no launch.
        assert_eq!(batch_times(&ns, &[0, 1, 1, 2], 0.001)[0].launch_us, 0.0);
    }
}
