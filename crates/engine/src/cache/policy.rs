//! Admission policies of the GPU list cache (docs/references.md#pruned-list-caching sections 3.3 and 4.3): which leading blocks of
//! which lists fill a cache of given space.
//! - **Qtf**: lists by how many queries of the log use them;
//! - **QtfDf**: lists by that count over their length (document frequency);
//! - **VFB**: blocks (of `group` postings) by visiting frequency, ties to the term queries use more.
//!
//! All cache at most the share λ of each list's blocks (the maximum admission ratio), always as a
//! prefix of the list.

use std::cmp::Ordering;

use warpsearch_gpu::cache::prefix_need;
use warpsearch_gpu::{CachePlan, Capacity};
use warpsearch_index::Index;

use super::usage::Usage;

/// An admission policy.
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
pub enum Policy {
    /// Lists by query-term frequency.
    Qtf,
    /// Lists by query-term frequency over document frequency.
    QtfDf,
    /// Blocks by visiting frequency (docs/references.md#pruned-list-caching's VFB).
    #[default]
    Vfb,
    /// VFB over the live query stream, replanned as it drifts (ours).
    Dynamic,
}

impl Policy {
    /// The policy's name on the command line.
    pub fn name(self) -> &'static str {
        self.into()
    }
}

/// A plan filled by admitting list prefixes under a capacity.
struct Filler<'a> {
    index: &'a Index,
    cap: Capacity,
    bytes: u64,
    used: Capacity,
    plan: CachePlan,
    ratio: f64,
}

impl<'a> Filler<'a> {
    fn new(index: &'a Index, cap: Capacity, bytes: u64, ratio: f64) -> Filler<'a> {
        Filler {
            index,
            cap,
            bytes,
            used: Capacity::default(),
            plan: CachePlan::empty(index),
            ratio: ratio.clamp(0.0, 1.0),
        }
    }

    /// The most blocks of term `t` λ allows.
    fn limit(&self, t: u32) -> u32 {
        let n = self.index.term_records()[t as usize].num_blocks() as f64;
        ((n * self.ratio).ceil() as u32).max(1)
    }

    /// Grows term `t`'s cached prefix towards `blocks` (capped by λ) as far as the space allows, or
    /// only all the way when `whole`; returns whether it reached it.
    fn grow(&mut self, t: u32, blocks: u32, whole: bool) -> bool {
        let want = blocks.min(self.limit(t));
        let have = self.plan.blocks[t as usize];
        if want <= have {
            return true;
        }
        let before = prefix_need(self.index, t, have);
        let extra = |b: u32| {
            let n = prefix_need(self.index, t, b);
            Capacity {
                words: n.words - before.words,
                blocks: n.blocks - before.blocks,
            }
        };
        let fits = |b: u32| {
            let total = self.used.plus(extra(b));
            self.cap.holds(total) && total.bytes() <= self.bytes
        };
        let reach = if fits(want) {
            want
        } else if whole {
            return false;
        } else {
            // The longest prefix that fits (the need grows with it).
            let (mut lo, mut hi) = (have, want);
            while lo < hi {
                let mid = lo + (hi - lo).div_ceil(2);
                if fits(mid) {
                    lo = mid;
                } else {
                    hi = mid - 1;
                }
            }
            lo
        };
        self.used = self.used.plus(extra(reach));
        self.plan.blocks[t as usize] = reach;
        reach == want
    }
}

/// The plan `policy` admits into `cap` (and at most its bytes) from the use `usage` records; `group` is
/// VFB's block size in index blocks, `ratio` the maximum admission ratio λ.
pub fn plan(
    index: &Index,
    usage: &Usage,
    policy: Policy,
    cap: Capacity,
    ratio: f64,
    group: u32,
) -> CachePlan {
    plan_bytes(index, usage, policy, cap, cap.bytes(), ratio, group)
}

/// [`plan`] within `bytes` of device memory however they divide between words and blocks.
pub fn plan_in_bytes(
    index: &Index,
    usage: &Usage,
    policy: Policy,
    bytes: u64,
    ratio: f64,
    group: u32,
) -> CachePlan {
    let any = Capacity {
        words: bytes / 4,
        blocks: bytes / warpsearch_gpu::cache::META_BYTES,
    };
    plan_bytes(index, usage, policy, any, bytes, ratio, group)
}

fn plan_bytes(
    index: &Index,
    usage: &Usage,
    policy: Policy,
    cap: Capacity,
    bytes: u64,
    ratio: f64,
    group: u32,
) -> CachePlan {
    let mut fill = Filler::new(index, cap, bytes, ratio);
    let records = index.term_records();
    let qtf = |t: u32| usage.qtf.get(&t).copied().unwrap_or(0.0);
    let desc = |a: f64, b: f64| b.partial_cmp(&a).unwrap_or(Ordering::Equal);
    match policy {
        Policy::Qtf | Policy::QtfDf => {
            let key = |t: u32| match policy {
                Policy::Qtf => qtf(t),
                _ => qtf(t) / records[t as usize].df as f64,
            };
            let mut terms: Vec<u32> = usage.qtf.keys().copied().collect();
            terms.sort_by(|&a, &b| desc(key(a), key(b)).then(a.cmp(&b)));
            for t in terms {
                // Whole (λ-pruned) lists: one that does not fit leaves the space to shorter ones.
                fill.grow(t, records[t as usize].num_blocks() as u32, true);
            }
        }
        Policy::Vfb | Policy::Dynamic => {
            let group = group.max(1);
            // Runs of equal visiting frequency; a list's runs have falling frequency, so admitting runs
            // by frequency grows each list as a prefix.
            let mut runs: Vec<(f64, f64, u32, u32)> = Vec::new();
            for &t in usage.ends.keys() {
                for (blocks, vf) in usage.runs(t) {
                    // VFB blocks are `group` index blocks: a partly visited group counts as visited.
                    let upto = blocks.div_ceil(group) * group;
                    runs.push((vf, qtf(t), t, upto));
                }
            }
            runs.sort_by(|a, b| {
                desc(a.0, b.0)
                    .then(desc(a.1, b.1))
                    .then(a.2.cmp(&b.2))
                    .then(a.3.cmp(&b.3))
            });
            for (_, _, t, upto) in runs {
                fill.grow(t, upto, false);
            }
        }
    }
    fill.plan
}

/// Whether changing the cache from `current` to `next` pays: the bytes that `next` would save
/// batches from carrying over the coming `epoch` queries, if they use the lists as `usage` records,
/// against `min_gain` times the bytes the change copies into the cache (a change stalls the GPU, where
/// carried bytes overlap its kernels). On a steady stream a new plan differs from the last mostly by
/// noise, and its copies cost more than it saves; under drift it saves more. `min_gain` 0: always.
pub fn worth_changing(
    index: &Index,
    usage: &Usage,
    current: &CachePlan,
    next: &CachePlan,
    epoch: usize,
    min_gain: f64,
) -> bool {
    if min_gain <= 0.0 {
        return true;
    }
    let bytes = |t: u32, b: u32| {
        let n = prefix_need(index, t, b);
        n.words * 4 + n.blocks * warpsearch_gpu::cache::META_BYTES
    };
    let (mut saved, mut copied) = (0.0f64, 0u64);
    for (&t, _) in usage.ends.iter() {
        let (have, want) = (current.blocks[t as usize], next.blocks[t as usize]);
        if have == want {
            continue;
        }
        if want > have {
            copied += bytes(t, want) - bytes(t, have);
        }
        // Blocks between the two prefixes, run by run of equal visiting frequency: saved where the
        // next plan caches them, lost where it drops them.
        let (lo, hi, sign) = if want > have {
            (have, want, 1.0)
        } else {
            (want, have, -1.0)
        };
        let mut from = 0;
        for (end, vf) in usage.runs(t) {
            let (a, b) = (from.max(lo), end.min(hi));
            if a < b {
                saved += sign * vf * (bytes(t, b) - bytes(t, a)) as f64;
            }
            from = end;
        }
    }
    let per_query = saved / usage.queries.max(1e-9);
    per_query * epoch as f64 >= min_gain * copied as f64
}
