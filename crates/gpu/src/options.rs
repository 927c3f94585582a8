//! The GPU engine's tunables ([`GpuOptions`]; how its kernels are compiled: [`KernelOptions`]) and how a
//! memory budget divides between the list cache and the batches' staging ([`CacheBudget`]).

use std::path::Path;

use crate::abi::MAX_K;
use crate::cache::Capacity;
use crate::error::GpuError;

/// Tunables of the GPU engine.
#[derive(Debug, Clone, Copy)]
pub struct GpuOptions {
    /// Queries per kernel launch.
    pub batch_size: usize,
    /// Pipeline slots of a searcher that holds the whole index (at least 2; fewer where the device
    /// has no room for more): batches on the GPU at once, each on its own stream. A batch's kernel
    /// takes the SMs its predecessors' last CTAs free, so several small batches in flight answer
    /// queries as they arrive, none waiting for a full one; a batch holds its slot until its slowest
    /// query ends, so that queries arriving meanwhile need another slot.
    pub slots: usize,
    /// OR accumulator window in documents (a power of two from 256 to 32768), or 0 (the default): the
    /// largest whose shared memory costs no resident CTAs (16,384 on an H100 or H200 for SIMD-BP128 and
    /// Elias-Fano lists, 8,192 for PForDelta and Rice, whose decoders take shared scratch; see
    /// [`crate::device::DEFAULT_MIN_CTAS`]). It also bounds the sort path's queries (`small_or`).
    pub window: u32,
    /// Device memory the index may take, in bytes; `None`: 90% of what is free.
    pub memory_budget: Option<usize>,
    /// Time the kernel's phases with clock counters (slightly slower).
    pub instrument: bool,
    /// An OR query whose cost (postings of all its lists) exceeds this is cut into docID ranges, one
    /// CTA each, up to `max_parts`; with `split_waves`, also the cut of AND queries in full batches.
    pub split_cost: u64,
    /// For AND and and-or (whose cost is the postings of the shortest list): with `split_waves` 0,
    /// the cost above which a query is cut; else the least cost a part may have.
    pub and_split_cost: u64,
    /// In a batch with fewer than [`crate::batch::FULL_WAVES`] tasks per CTA,
    /// queries are cut so that the largest task takes at most 1/`split_waves` of each CTA's average
    /// share of the batch (0: cut at `and_split_cost`). An AND task takes a CTA milliseconds on a
    /// large collection, and a batch of a few hundred queries (one that carries uncached lists) is
    /// otherwise a single wave of tasks waiting for its longest: 1.7x the throughput with a quarter
    /// of the 25M collection cached (bench/RESULTS.md). Every batch cut at 5,000 postings cost the
    /// passages' batches of 8,192 tasks 25–39%, so fuller batches are left as they are.
    pub split_waves: u32,
    /// The least cost of a part of an OR query in a batch that `split_waves` cuts (`u64::MAX`: OR
    /// batches are never cut that way). A call of a few OR queries otherwise takes as long as its
    /// longest query on one CTA, its windows one after another.
    pub or_split_floor: u64,
    /// In an OR batch that `split_waves` cuts, the least average cost of its tasks, where the coarse
    /// split allows (0: any; [`crate::batch::WaveCut::task_cost`]).
    pub or_task_cost: u64,
    /// Most parts a query is cut into in a full batch (`split_cost`).
    pub max_parts: u32,
    /// Most parts a query is cut into in a batch that `split_waves` cuts (at least `max_parts`). Under
    /// load a batch holds the few queries that arrived meanwhile, and a long query's answer waits for
    /// its longest part, so there the GPU's spare CTAs take more parts. Full batches keep `max_parts`:
    /// there every CTA is busy and more parts only add their fixed costs (docs/decisions/042).
    pub wave_parts: u32,
    /// OR queries of at most this many postings are scored by sorting their postings instead of dense
    /// accumulators (0: never; rounded down to a power of two that fits the OR launch's shared memory).
    pub small_or: u32,
    /// An AND step merges (Parallel Merge Find of the candidates against the list's block last docIDs,
    /// then merge-path intersection with the decoded blocks) when the list holds at most this many
    /// postings per candidate in the candidates' docID range; else it binary-searches (docs/references.md#griffin
    /// section 3.1.2 chooses by length ratio the same way). 0: always binary search.
    pub merge_ratio: u32,
    /// Largest k a request may ask for (result buffers are sized for it), at most 1,000.
    pub max_k: usize,
    /// Cache part of the index ([`CacheBudget`]) instead of uploading all of it; the cache starts
    /// empty and holds what [`crate::GpuSearcher::set_plan`] gives it.
    pub cache: Option<CacheBudget>,
    /// Build a batch's descriptors on all cores (rayon's pool). Off where other threads already keep
    /// the cores busy (the hybrid's CPU workers): the pool's threads would then be time-sliced with
    /// them, and the hybrid on the passages measured 27–32% slower with it on.
    pub parallel_host: bool,
    /// Fail every batch before launch (tests of the engine's CPU fallback).
    #[doc(hidden)]
    pub fail_batches: bool,
    /// How the kernels are compiled, where a GPU is opened with these options
    /// ([`crate::Gpu::open_with`]); a searcher runs the kernels of the [`crate::Gpu`] it is given.
    pub kernels: KernelOptions,
    /// Gather staged words into pinned memory on the host even where the index's words could be
    /// page-locked and copied from directly (to compare the two).
    pub host_gather: bool,
    /// Time each batch (its host work and its copies, kernel and answers on the device, after the
    /// searcher was made) and each plan change, and report them as `tracing` events at debug level.
    pub trace: bool,
    /// In a call handed over and polled ([`crate::GpuSearcher::submit_polled_in`],
    /// [`crate::GpuSearcher::poll`]), the kernel writes each query's answer straight into host memory
    /// as soon as it is done, so that it leaves before the rest of its batch
    /// ([`crate::GpuSearcher::take_early`]). False, and in calls waited for whole: answers go to
    /// device memory and are copied back after each kernel.
    pub map_answers: bool,
}

impl Default for GpuOptions {
    fn default() -> Self {
        GpuOptions {
            batch_size: 8192,
            slots: 8,
            window: 0,
            memory_budget: None,
            instrument: false,
            split_cost: 200_000,
            and_split_cost: 2_000,
            split_waves: 32,
            or_split_floor: 8_192,
            or_task_cost: 65_536,
            parallel_host: true,
            max_parts: 16,
            wave_parts: 64,
            small_or: 4096,
            merge_ratio: 2,
            max_k: MAX_K,
            cache: None,
            fail_batches: false,
            kernels: KernelOptions::default(),
            host_gather: false,
            trace: false,
            map_answers: true,
        }
    }
}

/// Threads per CTA of every kernel unless [`KernelOptions::threads`] says otherwise.
pub const DEFAULT_THREADS: u32 = 256;

/// How the kernels are compiled when a GPU is opened ([`crate::Gpu::open_with`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KernelOptions {
    /// Threads per CTA of every kernel (`THREADS`): 128 or 256. An AND step holds four candidates
    /// per thread.
    pub threads: u32,
    /// Resident CTAs per SM both entry points of the query kernel are compiled for (1 to 8:
    /// `__launch_bounds__`' second argument, which caps registers per thread); `None`: each one's
    /// measured default ([`crate::device::DEFAULT_MIN_CTAS_AND`], [`crate::device::DEFAULT_MIN_CTAS`]).
    pub min_ctas: Option<u32>,
    /// Compile the files of this directory (the names of `crates/gpu/kernels`) instead of the
    /// built-in ones: a variant of the kernels with the same binary. (`'static`, so that the options
    /// stay `Copy`: a program names its directory once.)
    pub source_dir: Option<&'static Path>,
}

impl Default for KernelOptions {
    fn default() -> Self {
        KernelOptions {
            threads: DEFAULT_THREADS,
            min_ctas: None,
            source_dir: None,
        }
    }
}

impl KernelOptions {
    /// An error naming the setting out of range.
    pub fn check(&self) -> Result<(), GpuError> {
        if ![128, 256].contains(&self.threads) {
            return Err(GpuError::Unsupported(format!(
                "{} threads per CTA: the kernels are compiled for 128 or 256",
                self.threads
            )));
        }
        if let Some(n) = self.min_ctas.filter(|n| !(1..=8).contains(n)) {
            return Err(GpuError::Unsupported(format!(
                "{n} resident CTAs per SM: the kernels' register cap takes 1 to 8"
            )));
        }
        Ok(())
    }
}

/// Pipeline slots of a searcher that caches part of the index, where [`CacheBudget::slots`] is 0. A
/// batch's staged blocks can be copied only once the batch that used its slot's staging region
/// before has finished on the GPU; with two slots that was often after the kernel running beside it
/// had finished too, and the GPU idled while the copies ran; four measured fastest
/// (docs/decisions/017-list-cache-pipeline.md). Each slot holds its own per-CTA scratch outside the
/// budget (about 0.85 GiB on an H100).
pub const DEFAULT_CACHE_SLOTS: usize = 4;

/// How the device memory for the index is divided (docs/references.md#pruned-list-caching section 3.3.5): the list cache S_c and
/// the batches' staging buffers S_b (all pipeline slots together).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheBudget {
    /// Bytes for cached list prefixes (S_c).
    pub cache_bytes: u64,
    /// Bytes for the blocks batches carry (S_b), split evenly between the pipeline slots.
    pub stage_bytes: u64,
    /// Pipeline slots, each with a staging region of its own (0: [`DEFAULT_CACHE_SLOTS`]; at least 2).
    pub slots: usize,
    /// The cache's exact shape when the plan is known in advance (at most `cache_bytes`); else words
    /// and blocks in the index's proportion.
    pub shape: Option<Capacity>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_options_out_of_range_are_refused_with_the_setting_named() {
        assert!(KernelOptions::default().check().is_ok());
        let threads = KernelOptions {
            threads: 512,
            ..KernelOptions::default()
        };
        assert!(threads
            .check()
            .unwrap_err()
            .to_string()
            .contains("512 threads per CTA"));
        let ctas = KernelOptions {
            min_ctas: Some(9),
            ..KernelOptions::default()
        };
        assert!(ctas.check().unwrap_err().to_string().contains("9 resident CTAs"));
        for ok in [128, 256] {
            let k = KernelOptions {
                threads: ok,
                min_ctas: Some(1),
                ..KernelOptions::default()
            };
            assert!(k.check().is_ok(), "{ok}");
        }
    }

    #[test]
    fn defaults_are_those_of_an_unset_environment() {
        let o = GpuOptions::default();
        assert_eq!(o.kernels, KernelOptions::default());
        assert_eq!(
            (o.kernels.threads, o.kernels.min_ctas, o.kernels.source_dir),
            (256, None, None)
        );
        assert!(!o.host_gather && !o.trace);
    }
}
