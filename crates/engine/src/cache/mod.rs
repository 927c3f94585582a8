//! The GPU list cache's policy, for indexes larger than GPU memory (docs/references.md#pruned-list-caching sections 3.1–3.4):
//! which list prefixes the GPU keeps ([`policy`], from a training log or the live stream, [`usage`],
//! [`observer`]) and how far into its docID range the GPU answers each query ([`CacheCtl::split`]).
//! It runs nothing: the backends run the [`Split`]s it decides ([`crate::split`], the CPU's exact
//! completion of the rest included). The GPU crate holds the cache and stages what it lacks.

pub mod choice;
pub mod observer;
pub mod policy;
pub mod usage;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use rayon::prelude::*;
use warpsearch_cpu::CpuSearcher;
use warpsearch_gpu::cache::PlanFeed;
use warpsearch_gpu::residency::Applied;
use warpsearch_gpu::{CachePlan, CacheView, GpuError, GpuSearcher};
use warpsearch_index::{Index, Result};
use warpsearch_query::{DocRange, Request, Scored, Scorer};

use crate::split::Split;
pub use choice::CacheChoice;
use observer::{Observer, Planning, Seen};
pub use policy::Policy;
use usage::Usage;

/// How the GPU's part of a query is chosen when the cache lacks blocks it needs.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Default,
    strum::Display,
    strum::EnumString,
    strum::IntoStaticStr,
    strum::VariantNames,
    serde::Serialize,
    serde::Deserialize,
)]
#[strum(serialize_all = "lowercase")]
#[serde(rename_all = "lowercase")]
pub enum Completion {
    /// `cpu` on a global-score-ordered index with early termination, else `transfer`.
    #[default]
    Auto,
    /// The paper's rule: the GPU answers up to where the cached prefixes reach; the CPU completes.
    Cpu,
    /// The batch carries every block the query needs; the CPU completes only what exceeds a batch's
    /// staging space.
    Transfer,
}

impl Completion {
    /// The name on the command line.
    pub fn name(self) -> &'static str {
        self.into()
    }
}

/// How the list cache is filled.
#[derive(Debug, Clone)]
pub struct CacheOptions {
    /// The admission policy.
    pub policy: Policy,
    /// The training log (static policies need it; the dynamic one starts from it when given).
    pub train: Vec<Request>,
    /// The maximum admission ratio λ: the largest share of a list's blocks cached (None:
    /// [`CacheOptions::ratio_for`]'s default).
    pub ratio: Option<f64>,
    /// VFB's block size, in index blocks (docs/references.md#pruned-list-caching uses 256 docIDs: two of our 128-posting blocks).
    pub group: u32,
    /// How the GPU's part is chosen.
    pub completion: Completion,
    /// The dynamic policy replans after this many queries.
    pub epoch: usize,
    /// The weight the dynamic policy keeps of older queries at each replan.
    pub decay: f64,
    /// The dynamic policy applies a new plan only where the bytes it saves batches over an epoch are
    /// at least this many times the bytes it copies ([`policy::worth_changing`]); 0: every plan.
    pub min_gain: f64,
    /// The share of the cache the dynamic policy leaves free, for lists to grow into while their old
    /// prefixes are still in place (a list that finds no room keeps its old prefix).
    pub headroom: f64,
    /// The GPU backend sends a call's queries in this many chunks (of at least 256
    /// queries and at most a GPU batch, so a call longer than a batch has more): chunk i+1 is split
    /// and sent while chunk i computes, and chunk i's partial answers are completed on the CPU while
    /// chunk i+1 computes (docs/references.md#pruned-list-caching section 3.1). 1: a call of at most a batch is one chunk, its
    /// completions after its GPU work. The hybrid backend has its own pipeline and ignores it.
    pub chunks: usize,
    /// The GPU's pipeline slots, each staging a batch (0: [`warpsearch_gpu::DEFAULT_CACHE_SLOTS`]).
    pub slots: usize,
}

/// λ where none is given, for VFB and the dynamic policy when the CPU completes on a global-score
/// order: the tails of the lists it leaves out are where early termination has stopped, so caching
/// half of each list serves more lists (docs/decisions/015-list-cache-admission.md).
pub const EARLY_RATIO: f64 = 0.5;

impl CacheOptions {
    /// The λ plans use: the one given, else [`EARLY_RATIO`] for VFB and the dynamic policy where the
    /// CPU completes what the cached prefixes leave with early termination on a global-score order
    /// (`early`), else 1 (without early termination a query visits its lists to their ends; Qtf
    /// and QtfDf admit whole lists, as in docs/references.md#pruned-list-caching).
    pub fn ratio_for(&self, early: bool) -> f64 {
        self.ratio.unwrap_or(match self.policy {
            Policy::Vfb | Policy::Dynamic if early => EARLY_RATIO,
            _ => 1.0,
        })
    }
}

impl Default for CacheOptions {
    fn default() -> CacheOptions {
        CacheOptions {
            policy: Policy::Vfb,
            train: Vec::new(),
            ratio: None,
            group: 2,
            completion: Completion::Auto,
            epoch: 4096,
            // Chosen by measurement on stationary and drifting streams
            // (docs/decisions/016-dynamic-cache-policy.md).
            decay: 0.8,
            min_gain: 1.0,
            headroom: 0.05,
            // More chunks measured no faster, so a call stays one chunk
            // (docs/decisions/017-list-cache-pipeline.md).
            chunks: 1,
            slots: 0,
        }
    }
}

/// Counters of the cache's work.
#[derive(Debug, Clone, Default)]
pub struct CacheStats {
    /// Queries the GPU answered whole.
    pub gpu_whole: u64,
    /// Of them, queries run as two ranges: where the cached prefixes reach, and the rest with its
    /// blocks staged ([`Split::Two`]).
    pub two_ranges: u64,
    /// Queries the GPU answered in part, the CPU completing them.
    pub partial: u64,
    /// Queries left to the CPU entirely.
    pub cpu_only: u64,
    /// Seconds the CPU spent completing.
    pub completion_seconds: f64,
    /// Plan changes applied (the dynamic policy's replans, and the first plan).
    pub replans: u64,
    /// Lists whose cached prefix changed in them.
    pub lists_changed: u64,
    /// Seconds the GPU's thread spent on the dynamic policy's plan changes (while the batches in
    /// flight computed): placing lists, gathering their blocks and queueing their copies (which run
    /// behind the batches in flight and are not waited for: since 62ce44a they are not in this).
    pub replan_seconds: f64,
    /// The dynamic policy's plans left unapplied, as saving less than their copies cost.
    pub plans_skipped: u64,
    /// Queries the dynamic policy did not learn from, its thread being too far behind.
    pub unobserved: u64,
}

impl CacheStats {
    /// Adds `other`'s counts (several GPUs' caches as one).
    pub fn add(&mut self, other: &CacheStats) {
        self.gpu_whole += other.gpu_whole;
        self.two_ranges += other.two_ranges;
        self.partial += other.partial;
        self.cpu_only += other.cpu_only;
        self.completion_seconds += other.completion_seconds;
        self.replans += other.replans;
        self.lists_changed += other.lists_changed;
        self.replan_seconds += other.replan_seconds;
        self.plans_skipped += other.plans_skipped;
        self.unobserved += other.unobserved;
    }
}

#[derive(Default)]
struct Counters {
    gpu_whole: AtomicU64,
    two_ranges: AtomicU64,
    partial: AtomicU64,
    cpu_only: AtomicU64,
    completion_us: AtomicU64,
    replans: AtomicU64,
    lists_changed: AtomicU64,
    replan_us: AtomicU64,
    plans_skipped: AtomicU64,
}

/// The cache's policy at run time, shared by whatever drives the GPU.
pub struct CacheCtl {
    scorer: Arc<Scorer>,
    policy: Policy,
    ratio: f64,
    /// [`CacheOptions::headroom`].
    headroom: f64,
    /// [`CacheOptions::chunks`].
    chunks: usize,
    /// The device cache the dynamic policy asks for (its words and block slots).
    dynamic_shape: warpsearch_gpu::Capacity,
    prune: bool,
    /// The dynamic policy's observations and plans, on a thread of their own; the plans fill the
    /// GPU's cache less headroom (from the budget, then from the GPU's cache once the first plan is
    /// installed), and the GPU applies each behind the last batch of a call after it is made, if it
    /// is worth its copies ([`PlanFeed::ready`]).
    dynamic: Option<Observer>,
    counters: Counters,
}

impl CacheCtl {
    /// The policy and its first plan within `cache_bytes` (from the training log; for the dynamic
    /// policy VFB's plan of it, empty without one), before the GPU searcher exists: a static plan
    /// fixes the cache's shape, and the dynamic policy's cache holds its first plan.
    pub fn prepare(
        cpu: &CpuSearcher,
        options: CacheOptions,
        cache_bytes: u64,
    ) -> Result<(CacheCtl, CachePlan)> {
        let scorer = cpu.scorer().clone();
        let index = scorer.index().clone();
        let stops: Vec<Option<u32>> = options
            .train
            .par_iter()
            .map(|r| cpu.stop_doc(r))
            .collect::<Result<_>>()?;
        let mut usage = Usage::default();
        for (r, stop) in options.train.iter().zip(stops) {
            usage.add(&index, &r.query, r.mode, stop, 1.0);
        }
        let prune = match options.completion {
            Completion::Auto => scorer.early_termination(),
            c => c == Completion::Cpu,
        };
        let ratio = options.ratio_for(prune && scorer.early_termination());
        let group = options.group.max(1);
        let headroom = options.headroom.clamp(0.0, 0.9);
        let dynamic = options.policy == Policy::Dynamic;
        // The dynamic policy's first plan is VFB's of the training log, the very plan VFB installs;
        // the GPU allocates the cache that holds it (with any bytes it leaves, see `dynamic_shape`),
        // and the later plans fit that cache less the room lists move through. On a stream like the
        // log, those save less than their copies cost and the cache stays as VFB's; the headroom is
        // made by the first change a drifting stream pays for, from the lists it drops. Without a
        // log, the first plan is empty and the cache takes the index's division of the budget.
        let base = if dynamic { Policy::Vfb } else { options.policy };
        let plan = policy::plan_in_bytes(&index, &usage, base, cache_bytes, ratio, group);
        let trained = dynamic && !options.train.is_empty();
        let shape = match trained {
            true => dynamic_shape(&index, plan.need(&index), cache_bytes),
            false => warpsearch_gpu::Capacity::of_bytes(&index, cache_bytes),
        };
        let epoch = options.epoch.max(1);
        // From then on, the training log weighs as one epoch of the live stream, so that the
        // stream's own queries soon outweigh it (weights that fall to 1e-3 are dropped: a log of
        // over a thousand epochs loses its rarest uses, as the first decay would drop them).
        if trained {
            usage.scale((epoch as f64 / options.train.len() as f64).min(1.0));
        }
        let planning = Planning {
            epoch,
            decay: options.decay.clamp(0.0, 1.0),
            ratio,
            group,
            min_gain: options.min_gain.max(0.0),
            early: scorer.early_termination(),
        };
        let ctl = CacheCtl {
            policy: options.policy,
            ratio,
            headroom,
            chunks: options.chunks.max(1),
            dynamic_shape: shape,
            prune,
            dynamic: dynamic.then(|| {
                let empty = CachePlan::empty(&index);
                Observer::start(
                    index.clone(),
                    usage.clone(),
                    planning,
                    empty,
                    planned(shape, headroom),
                )
            }),
            counters: Counters::default(),
            scorer,
        };
        Ok((ctl, plan))
    }

    /// The cache's shape on the device: exactly `plan`'s need for a static policy; for the dynamic
    /// one, room for its first plan (VFB's) and the bytes that plan leaves ([`dynamic_shape`]).
    pub fn shape(&self, index: &Index, plan: &CachePlan) -> warpsearch_gpu::Capacity {
        match self.policy {
            Policy::Dynamic => self.dynamic_shape,
            _ => plan.need(index),
        }
    }

    /// Fills `gpu`'s cache with `plan`; the dynamic policy then feeds it its later plans.
    pub fn install(
        self: &Arc<Self>,
        gpu: &mut GpuSearcher,
        plan: &CachePlan,
    ) -> std::result::Result<(), GpuError> {
        self.count(gpu.set_plan(plan)?);
        if let Some(d) = &self.dynamic {
            d.holds(plan.clone(), Some(planned(gpu.cache_capacity(), self.headroom)));
            gpu.set_feed(Some(self.clone()))?;
        }
        Ok(())
    }

    fn count(&self, a: Applied) {
        self.counters.replans.fetch_add(1, Ordering::Relaxed);
        self.counters.lists_changed.fetch_add(a.lists, Ordering::Relaxed);
    }

    /// The policy.
    pub fn policy(&self) -> Policy {
        self.policy
    }

    /// The maximum admission ratio λ its plans use ([`CacheOptions::ratio_for`]).
    pub fn ratio(&self) -> f64 {
        self.ratio
    }

    /// [`CacheOptions::chunks`].
    pub fn chunks(&self) -> usize {
        self.chunks
    }

    /// Where `request`'s documents in `range` run, given what the GPU caches; counts the choice.
    pub fn split(&self, gpu: &CacheView, request: &Request, range: DocRange) -> Split {
        let c = &self.counters;
        if !self.prune {
            // Staging all: cut where the cached prefixes end, when the rest fits a batch's staging.
            if let Some(m) = gpu.cover(&request.query, true) {
                if m >= range.first && m < range.last {
                    let (a, b) = cut(range, m);
                    if gpu.fits_staging(request, Some(b)) {
                        c.gpu_whole.fetch_add(1, Ordering::Relaxed);
                        c.two_ranges.fetch_add(1, Ordering::Relaxed);
                        return Split::Two(a, b);
                    }
                }
            }
        }
        let split = match gpu.cover(&request.query, self.prune) {
            Some(m) if m >= range.last => Split::Gpu,
            Some(m) if m >= range.first => {
                let (a, b) = cut(range, m);
                Split::Partial(a, b)
            }
            _ => Split::Cpu,
        };
        match split {
            Split::Gpu | Split::Two(..) => &c.gpu_whole,
            Split::Partial(..) => &c.partial,
            Split::Cpu => &c.cpu_only,
        }
        .fetch_add(1, Ordering::Relaxed);
        split
    }

    /// Counts CPU seconds spent completing.
    pub fn completed(&self, seconds: f64) {
        self.counters
            .completion_us
            .fetch_add((seconds * 1e6) as u64, Ordering::Relaxed);
    }

    /// Tells the dynamic policy of a query and the top k found (the k-th score bounds where early
    /// termination stopped it); nothing for the static policies.
    pub fn observe(&self, request: &Request, hits: Option<&[Scored]>) {
        self.observe_all([(request, kth(request, hits))]);
    }

    /// [`CacheCtl::observe`] for many queries at once, each with the k-th score of its answer when it
    /// found k documents ([`kth`]): sent to the dynamic policy's thread in one message.
    pub fn observe_all<'r>(&self, seen: impl IntoIterator<Item = (&'r Request, Option<f32>)>) {
        let Some(d) = &self.dynamic else {
            return;
        };
        let seen = seen
            .into_iter()
            .map(|(request, kth)| Seen {
                terms: request.query.term_ids(),
                mode: request.mode,
                kth,
            })
            .collect();
        d.send(seen);
    }

    /// Waits until the dynamic policy has taken in every query observed and made any plan they call
    /// for (nothing for the static policies): for tests, and for a caller that wants the plan of what
    /// it has run so far.
    pub fn settle(&self) {
        if let Some(d) = &self.dynamic {
            d.settle();
        }
    }

    /// The counters so far, resetting them.
    pub fn take_stats(&self) -> CacheStats {
        let c = &self.counters;
        let take = |a: &AtomicU64| a.swap(0, Ordering::Relaxed);
        CacheStats {
            gpu_whole: take(&c.gpu_whole),
            two_ranges: take(&c.two_ranges),
            partial: take(&c.partial),
            cpu_only: take(&c.cpu_only),
            completion_seconds: take(&c.completion_us) as f64 / 1e6,
            replans: take(&c.replans),
            lists_changed: take(&c.lists_changed),
            replan_seconds: take(&c.replan_us) as f64 / 1e6,
            plans_skipped: take(&c.plans_skipped),
            unobserved: self.dynamic.as_ref().map_or(0, Observer::take_dropped),
        }
    }
}

/// The dynamic policy's plans, applied by the GPU while its batches run: after every `epoch` observed
/// queries its thread makes a new plan from the decayed use ([`observer`]); the GPU applies it behind
/// the last batch of its next call, if it is worth its copies.
impl PlanFeed for CacheCtl {
    fn ready(&self) -> Option<CachePlan> {
        let d = self.dynamic.as_ref()?;
        let started = Instant::now();
        let made = d.ready();
        if made.is_some() {
            self.counters
                .replan_us
                .fetch_add(started.elapsed().as_micros() as u64, Ordering::Relaxed);
        }
        match made? {
            (plan, true) => Some(plan),
            (_, false) => {
                self.counters.plans_skipped.fetch_add(1, Ordering::Relaxed);
                None
            }
        }
    }

    fn applied(&self, plan: CachePlan, result: std::result::Result<Applied, &GpuError>, seconds: f64) {
        self.counters
            .replan_us
            .fetch_add((seconds * 1e6) as u64, Ordering::Relaxed);
        // A failed change leaves the cache empty.
        let holds = match result {
            Ok(a) => {
                self.count(a);
                plan
            }
            Err(_) => CachePlan::empty(self.scorer.index()),
        };
        if let Some(d) = &self.dynamic {
            d.holds(holds, None);
        }
    }
}

/// The k-th score of `hits` for `request`, when it found k documents.
pub fn kth(request: &Request, hits: Option<&[Scored]>) -> Option<f32> {
    hits.filter(|h| request.k > 0 && h.len() >= request.k)
        .map(|h| h[request.k - 1].score)
}

/// `range` cut after docID `m` (inside it).
fn cut(range: DocRange, m: u32) -> (DocRange, DocRange) {
    (
        DocRange {
            first: range.first,
            last: m,
        },
        DocRange {
            first: m + 1,
            last: range.last,
        },
    )
}

/// The dynamic policy's cache of `bytes`: room for `vfb` (the need of VFB's plan of the training log
/// for those bytes, its first plan) and, from the bytes that plan leaves, up to 5% more block slots
/// in proportion (its later plans cache other lists), the rest as words.
///
/// The division follows the log's because the blocks queries visit hold more words than the
/// index's average block (those of long lists' prefixes): with the average division
/// ([`warpsearch_gpu::Capacity::of_bytes`], also where `vfb` is empty), on the synthetic 8M
/// collection at a quarter of the index, the dynamic policy's plans filled its words and left 40% of
/// its slots empty, and read 1.2–1.6 points fewer of its blocks from the cache (an offline replay of
/// the TREC 2005 queries, `examples/cache_replay.rs`). The extra slots never come out of the words
/// VFB's plan needs, so that the dynamic policy's first plan is VFB's
/// (docs/decisions/016-dynamic-cache-policy.md).
pub fn dynamic_shape(index: &Index, vfb: warpsearch_gpu::Capacity, bytes: u64) -> warpsearch_gpu::Capacity {
    if vfb.blocks == 0 || vfb.bytes() == 0 || vfb.bytes() > bytes {
        return warpsearch_gpu::Capacity::of_bytes(index, bytes);
    }
    let meta = warpsearch_gpu::cache::META_BYTES;
    let scale = bytes as f64 / vfb.bytes() as f64;
    let wanted = (vfb.blocks as f64 * scale * 1.05) as u64;
    let spare = bytes - vfb.bytes();
    let blocks = vfb.blocks + wanted.saturating_sub(vfb.blocks).min(spare / meta);
    warpsearch_gpu::Capacity {
        words: (bytes - blocks * meta) / 4,
        blocks,
    }
}

/// The space of `c` the dynamic policy plans for, `headroom` of it left as room for lists to grow into
/// while their old prefixes are still in place (they move on the device).
fn planned(c: warpsearch_gpu::Capacity, headroom: f64) -> warpsearch_gpu::Capacity {
    let keep = |x: u64| (x as f64 * (1.0 - headroom)) as u64;
    warpsearch_gpu::Capacity {
        words: keep(c.words),
        blocks: keep(c.blocks),
    }
}
