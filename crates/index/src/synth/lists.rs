//! The synthetic documents' layout over the template stream, and one term's synthetic lists.

use rand::{Rng, SeedableRng};
use rand_distr::StandardNormal;
use rand_pcg::Pcg64Mcg;
use rayon::prelude::*;

use super::fit::run_length;
use super::sample::Sample;
use super::SynthOptions;
use crate::error::Result;
use crate::shards::cut;
use crate::writer::{EncodedList, ListEncoder};

/// A stable 64-bit mix (splitmix64's finaliser) for per-(term, document) variant choices.
pub(super) fn mix(mut x: u64) -> u64 {
    x ^= x >> 30;
    x = x.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x ^= x >> 27;
    x = x.wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// The synthetic documents: for each position g of the template stream (template g mod M of pass
/// g / M), the document it belongs to.
pub(super) struct Layout {
    pub(super) doc_of: Vec<u32>,
    pub(super) lens: Vec<u32>,
}

pub(super) fn layout(sample: &Sample, opts: &SynthOptions, mu: f64) -> Layout {
    let m = sample.lens.len();
    let mut rng = Pcg64Mcg::seed_from_u64(opts.seed);
    let mut doc_of = Vec::new();
    let mut lens = Vec::with_capacity(opts.docs as usize);
    let mut g = 0usize;
    for d in 0..opts.docs {
        let r = run_length(mu, opts.length_sigma, rng.sample(StandardNormal));
        let mut len = 0u64;
        for _ in 0..r {
            len += sample.lens[g % m] as u64;
            doc_of.push(d);
            g += 1;
        }
        lens.push(len.min(u32::MAX as u64) as u32);
    }
    Layout { doc_of, lens }
}

/// One synthetic list: its term, docIDs ascending, and frequencies beside them.
pub(super) type TermList = (Vec<u8>, Vec<u32>, Vec<u32>);

/// One base term's lists: the term itself, then its variants in name order; docIDs renumbered by
/// `new_id` when given. A variant no document took is left out.
pub(super) fn generate_term(
    sample: &Sample,
    layout: &Layout,
    t: usize,
    nvar: u32,
    seed: u64,
    new_id: Option<&[u32]>,
) -> Vec<TermList> {
    let m = sample.lens.len();
    let (docs, tfs) = sample.list(t);
    let mut lists: Vec<(Vec<u32>, Vec<u32>)> = vec![(Vec::new(), Vec::new()); nvar as usize];
    let salt = mix(seed ^ (t as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15));
    for base in (0..layout.doc_of.len()).step_by(m) {
        for (&p, &tf) in docs.iter().zip(tfs) {
            let Some(&d) = layout.doc_of.get(base + p as usize) else {
                break;
            };
            let v = if nvar == 1 {
                0
            } else {
                (mix(salt ^ d as u64) % nvar as u64) as usize
            };
            let (ld, lf) = &mut lists[v];
            if ld.last() == Some(&d) {
                let last = lf.last_mut().expect("parallel to docs");
                *last = last.saturating_add(tf);
            } else {
                ld.push(d);
                lf.push(tf);
            }
        }
    }
    if let Some(new_id) = new_id {
        renumber(&mut lists, new_id);
    }
    let name = &sample.names[t];
    let mut order: Vec<(Vec<u8>, usize)> = (0..nvar as usize)
        .map(|v| {
            let mut n = name.clone();
            if v > 0 {
                n.push(1);
                n.extend_from_slice(v.to_string().as_bytes());
            }
            (n, v)
        })
        .collect();
    order.sort_unstable();
    order
        .into_iter()
        .filter_map(|(n, v)| {
            let (d, f) = std::mem::take(&mut lists[v]);
            (!d.is_empty()).then_some((n, d, f))
        })
        .collect()
}

/// `list`'s parts in the docID ranges `ranges[s]` (`[a, b)`) that hold any of it, as (s, part): each
/// numbered from its range's first document and encoded by `encs[s]`, the writer of that shard. Only
/// those parts are kept, since most lists are rare and fall in one shard.
pub(super) fn encode_parts(
    encs: &[ListEncoder<'_>],
    ranges: &[(u64, u64)],
    list: &TermList,
) -> Result<Vec<(usize, EncodedList<'static>)>> {
    let (term, docs, freqs) = list;
    let mut parts = Vec::new();
    for (s, at, first) in cut(ranges, docs) {
        let local: Vec<u32> = docs[at.clone()].iter().map(|&d| d - first).collect();
        if let Some(part) = encs[s].encode(term, &local, &freqs[at])? {
            parts.push((s, part));
        }
    }
    Ok(parts)
}

/// `lists` (docIDs ascending, frequencies beside them) renumbered by `new_id` and sorted again.
pub(super) fn renumber(lists: &mut [(Vec<u32>, Vec<u32>)], new_id: &[u32]) {
    for (docs, tfs) in lists {
        let mut pairs: Vec<u64> = docs
            .iter()
            .zip(tfs.iter())
            .map(|(&d, &f)| (new_id[d as usize] as u64) << 32 | f as u64)
            .collect();
        if pairs.len() > 1 << 20 {
            pairs.par_sort_unstable();
        } else {
            pairs.sort_unstable();
        }
        for ((d, f), p) in docs.iter_mut().zip(tfs.iter_mut()).zip(pairs) {
            *d = (p >> 32) as u32;
            *f = p as u32;
        }
    }
}
