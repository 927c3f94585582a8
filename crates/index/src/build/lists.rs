//! The build's last step: every term's list, in byte order of the terms, encoded on every core and
//! written in order. The lists come from the partitions' counting sorts, from a device, or from the
//! merge of spilled runs; each path hands over the same lists, so the files are the same.

use crate::error::{IndexError, Result};
use crate::writer::{IndexWriter, WINDOW};
use crate::BLOCK_LEN;

use super::device::InvertedPasses;
use super::invert::{Lists, Partitions};
use super::runs::{self, Posting};

/// Postings of merged lists gathered before they are encoded at once (or a window of lists,
/// [`WINDOW`], where fewer).
const MERGED_WINDOW: usize = 1 << 22;

/// A list's docIDs (renumbered by `new_id` and sorted again where given) and frequencies.
fn split(postings: &[Posting], new_id: Option<&[u32]>) -> (Vec<u32>, Vec<u32>) {
    match new_id {
        None => postings.iter().copied().unzip(),
        Some(new_id) => {
            let mut renumbered: Vec<Posting> =
                postings.iter().map(|&(d, f)| (new_id[d as usize], f)).collect();
            renumbered.sort_unstable();
            renumbered.into_iter().unzip()
        }
    }
}

/// Writes the lists of partitions inverted on the CPU (`lists[p]` of partition p), terms in `order`.
pub fn write_partitions(
    writer: &mut IndexWriter,
    partitions: &Partitions,
    lists: &[Lists],
    order: &[(u32, u32)],
    new_id: Option<&[u32]>,
    written: impl FnMut(u64),
) -> Result<()> {
    writer.push_all(
        order.len(),
        |encoder, i| {
            let (p, t) = order[i];
            let name = &partitions.parts[p as usize].names()[t as usize];
            let (docs, freqs) = split(lists[p as usize].of(t), new_id);
            encoder.encode(name.as_bytes(), &docs, &freqs)
        },
        written,
    )
}

/// Writes the lists a device inverted (in one pass or several), terms in `order` (rank r is
/// `order[r]`): each pass's encoded lists as they are, its others encoded here with its bounds; an
/// error where their shape is not that of `order`'s lists.
pub fn write_inverted(
    writer: &mut IndexWriter,
    partitions: &Partitions,
    order: &[(u32, u32)],
    inv: &InvertedPasses,
    written: impl FnMut(u64),
) -> Result<()> {
    let bad = |what: &str| IndexError::Invalid(format!("the device's inverted lists are malformed: {what}"));
    if inv.at.len() != order.len() {
        return Err(bad("ranks"));
    }
    // Each pass's terms, and the first block of each of its lists.
    let mut terms = vec![0usize; inv.passes.len()];
    for &(pass, _) in &inv.at {
        *terms.get_mut(pass as usize).ok_or_else(|| bad("passes"))? += 1;
    }
    let mut block_starts = Vec::with_capacity(inv.passes.len());
    for (pass, &t) in inv.passes.iter().zip(&terms) {
        let n = pass.starts.last().copied().unwrap_or(0);
        if pass.starts.len() != t + 1
            || pass.starts.first() != Some(&0)
            || pass.starts.windows(2).any(|w| w[0] >= w[1])
        {
            return Err(bad("list offsets"));
        }
        let mut starts = Vec::with_capacity(t + 1);
        starts.push(0usize);
        for w in pass.starts.windows(2) {
            let blocks = ((w[1] - w[0]) as usize).div_ceil(BLOCK_LEN);
            starts.push(starts.last().unwrap() + blocks);
        }
        let blocks = *starts.last().unwrap();
        let shaped = match &pass.encoded {
            Some(e) => {
                e.blocks.len() == blocks
                    && e.cf.len() == t
                    && e.word_starts.len() == t + 1
                    && e.word_starts.first() == Some(&0)
                    && e.word_starts.last() == Some(&(e.words.len() as u64))
                    && e.word_starts.windows(2).all(|w| w[0] < w[1])
            }
            None => {
                pass.docs.len() as u64 == n && pass.tfs.len() as u64 == n && pass.block_max.len() == blocks
            }
        };
        if !shaped {
            return Err(bad("lists or blocks"));
        }
        block_starts.push(starts);
    }
    writer.push_all(
        order.len(),
        |encoder, r| {
            let (p, t) = order[r];
            let name = partitions.parts[p as usize].names()[t as usize].as_bytes();
            let (pass, j) = (inv.at[r].0 as usize, inv.at[r].1 as usize);
            let (lists, blocks) = (&inv.passes[pass], &block_starts[pass]);
            let (s, e) = (lists.starts[j] as usize, lists.starts[j + 1] as usize);
            match &lists.encoded {
                Some(enc) => {
                    let words = &enc.words[enc.word_starts[j] as usize..enc.word_starts[j + 1] as usize];
                    let metas = &enc.blocks[blocks[j]..blocks[j + 1]];
                    let df = u32::try_from(e - s).map_err(|_| bad("a list too long"))?;
                    encoder.assemble(name, df, enc.cf[j], words, metas).map(Some)
                }
                None => {
                    let bounds = &lists.block_max[blocks[j]..blocks[j + 1]];
                    encoder.encode_with_bounds(name, &lists.docs[s..e], &lists.tfs[s..e], bounds)
                }
            }
        },
        written,
    )
}

/// Spills what the partitions still hold, merges every run and writes the lists (renumbered by
/// `new_id` where given); returns the number of runs.
pub fn write_spilled(
    writer: &mut IndexWriter,
    partitions: &mut Partitions,
    max_open: usize,
    new_id: Option<&[u32]>,
    written: impl FnMut(u64),
) -> Result<usize> {
    let runs = partitions.spill_all()?;
    write_merged(writer, &runs, max_open, new_id, written)?;
    Ok(runs.len())
}

/// Merges spilled `runs` and writes their lists, encoded on every core a window of lists at a time.
pub fn write_merged(
    writer: &mut IndexWriter,
    runs: &[std::path::PathBuf],
    max_open: usize,
    new_id: Option<&[u32]>,
    mut written: impl FnMut(u64),
) -> Result<()> {
    let mut pending: Vec<(Vec<u8>, Vec<Posting>)> = Vec::new();
    let mut held = 0usize;
    let mut flush = |writer: &mut IndexWriter, pending: &mut Vec<(Vec<u8>, Vec<Posting>)>| {
        let lists = std::mem::take(pending);
        writer.push_all(
            lists.len(),
            |encoder, i| {
                let (term, postings) = &lists[i];
                let (docs, freqs) = split(postings, new_id);
                encoder.encode(term, &docs, &freqs)
            },
            &mut written,
        )
    };
    runs::merge(runs, max_open, |term, list| {
        held += list.len();
        pending.push((term.to_vec(), std::mem::take(list)));
        if held >= MERGED_WINDOW || pending.len() >= WINDOW {
            held = 0;
            flush(writer, &mut pending)?;
        }
        Ok(())
    })?;
    flush(writer, &mut pending)?;
    Ok(())
}
