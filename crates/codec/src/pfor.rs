//! PForDelta with one bit width per list and recursively compressed exceptions (docs/references.md#ding-gpu-query-processing §6.2).
//!
//! Block layout (`n` postings, list widths `bd` for docs and `bf` for frequencies):
//!
//! ```text
//! word 0            header: bits 0..8 = docID exception count, bits 8..16 = frequency exception count
//! docs              n slots of bd bits (the low bits of every gap value)
//!                   if exceptions: array(positions), array(high bits)    -- see below
//! freqs (freq_off)  n slots of bf bits (the low bits of tf - 1)
//!                   if exceptions: array(positions), array(high bits)
//! ```
//!
//! A value `v` is an exception when `v >> b != 0`. Its low `b` bits stay in its slot; its position
//! (as gaps between consecutive exception positions) and its high part (`(v >> b) - 1`) go into two
//! separate arrays. Each array is itself PForDelta-compressed with its own width:
//!
//! ```text
//! array(m values):  header word: bits 0..8 = width w, bits 8..16 = exception count e
//!                   m slots of w bits
//!                   if e > 0: array(positions), array(high bits)   -- one level deeper
//! ```
//!
//! Recursion stops at [`MAX_DEPTH`]: there the width is the largest value's, so there are no
//! exceptions. Keeping one `b` for the whole list gives every block the same slot width, which is
//! what lets a GPU decode any block with one shift per thread (docs/references.md#ding-gpu-query-processing keeps one `b` per list for
//! the same reason); the recursive exception arrays win back the compression a single `b` loses.

use crate::bits::{bit_width, pack, unpack};
use crate::{add_one, doc_gap_values, prefix_docs, CodecError, ListParams, BLOCK_LEN};

/// Depth of the deepest exception array (the block's own slots are depth 0).
pub const MAX_DEPTH: u32 = 2;

/// Bits charged per exception besides its high part: a position gap and array overhead.
const EXCEPTION_COST: u64 = 8;

/// The width minimising the estimated size of `values` with exceptions.
fn best_width(histogram: &[u64; 33]) -> u8 {
    let n: u64 = histogram.iter().sum();
    let cost = |w: u32| -> u64 {
        let exceptions: u64 = (w as usize + 1..=32)
            .map(|bits| histogram[bits] * (bits as u64 - w as u64 + EXCEPTION_COST))
            .sum();
        n * w as u64 + exceptions
    };
    (0..=32).min_by_key(|&w| cost(w)).unwrap_or(0) as u8
}

fn histogram(values: impl Iterator<Item = u32>) -> [u64; 33] {
    let mut h = [0u64; 33];
    for v in values {
        h[bit_width(v) as usize] += 1;
    }
    h
}

/// Chooses the one slot width of a list from all of its values.
pub fn choose_list_width(values: impl Iterator<Item = u32>) -> u8 {
    best_width(&histogram(values))
}

pub(crate) fn encode_block(p: ListParams, docs: &[u32], freqs: &[u32], out: &mut Vec<u32>) -> u32 {
    let header = out.len();
    out.push(0);
    let gaps: Vec<u32> = doc_gap_values(docs).collect();
    let doc_exceptions = encode_slots(&gaps, p.doc as u32, 1, out);
    let freq_off = out.len() as u32;
    let tfs: Vec<u32> = freqs.iter().map(|&f| f - 1).collect();
    let freq_exceptions = encode_slots(&tfs, p.freq as u32, 1, out);
    out[header] = doc_exceptions | freq_exceptions << 8;
    freq_off
}

/// Writes the slots of `values` at width `b`, then their exception arrays; returns the exception count.
fn encode_slots(values: &[u32], b: u32, depth: u32, out: &mut Vec<u32>) -> u32 {
    pack(values, b, out);
    let mut positions = Vec::new();
    let mut highs = Vec::new();
    let mut previous: Option<usize> = None;
    for (i, &v) in values.iter().enumerate() {
        if b < 32 && v >> b != 0 {
            positions.push(previous.map_or(i, |p| i - p - 1) as u32);
            highs.push((v >> b) - 1);
            previous = Some(i);
        }
    }
    if !positions.is_empty() {
        encode_array(&positions, depth, out);
        encode_array(&highs, depth, out);
    }
    positions.len() as u32
}

fn encode_array(values: &[u32], depth: u32, out: &mut Vec<u32>) {
    let width = if depth >= MAX_DEPTH {
        values.iter().map(|&v| bit_width(v)).max().unwrap_or(0) as u8
    } else {
        best_width(&histogram(values.iter().copied()))
    };
    let header = out.len();
    out.push(0);
    let exceptions = encode_slots(values, width as u32, depth + 1, out);
    out[header] = width as u32 | exceptions << 8;
}

pub(crate) fn decode_docs(
    p: ListParams,
    block: &[u32],
    freq_off: usize,
    first: u32,
    out: &mut [u32],
) -> Result<(), CodecError> {
    let header = *block.first().ok_or(CodecError::Truncated)?;
    let mut pos = 1;
    decode_slots(&block[..freq_off], &mut pos, p.doc as u32, header & 0xff, 1, out)?;
    prefix_docs(first, out)
}

pub(crate) fn decode_freqs(
    p: ListParams,
    block: &[u32],
    freq_off: usize,
    out: &mut [u32],
) -> Result<(), CodecError> {
    let header = *block.first().ok_or(CodecError::Truncated)?;
    let mut pos = freq_off;
    decode_slots(block, &mut pos, p.freq as u32, (header >> 8) & 0xff, 1, out)?;
    add_one(out)
}

/// Reads `out.len()` slots of width `b` at `*pos`, then patches in `exceptions` exceptions.
fn decode_slots(
    words: &[u32],
    pos: &mut usize,
    b: u32,
    exceptions: u32,
    depth: u32,
    out: &mut [u32],
) -> Result<(), CodecError> {
    *pos += unpack(words.get(*pos..).ok_or(CodecError::Truncated)?, b, out)?;
    if exceptions == 0 {
        return Ok(());
    }
    let e = exceptions as usize;
    if depth > MAX_DEPTH || b >= 32 || e > out.len() {
        return Err(CodecError::Corrupt("impossible PForDelta exceptions"));
    }
    let mut positions = [0u32; BLOCK_LEN];
    let mut highs = [0u32; BLOCK_LEN];
    decode_array(words, pos, depth, &mut positions[..e])?;
    decode_array(words, pos, depth, &mut highs[..e])?;
    let mut at = 0usize;
    for (k, (&gap, &high)) in positions[..e].iter().zip(&highs[..e]).enumerate() {
        at += gap as usize + (k > 0) as usize;
        let high = (high as u64 + 1) << b;
        let slot = out
            .get_mut(at)
            .ok_or(CodecError::Corrupt("PForDelta exception past the block"))?;
        *slot = u32::try_from(*slot as u64 | high)
            .map_err(|_| CodecError::Corrupt("PForDelta value above u32::MAX"))?;
    }
    Ok(())
}

fn decode_array(words: &[u32], pos: &mut usize, depth: u32, out: &mut [u32]) -> Result<(), CodecError> {
    let header = *words.get(*pos).ok_or(CodecError::Truncated)?;
    *pos += 1;
    let (width, exceptions) = (header & 0xff, (header >> 8) & 0xff);
    if header >> 16 != 0 {
        return Err(CodecError::Corrupt("PForDelta array header"));
    }
    decode_slots(words, pos, width, exceptions, depth + 1, out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn widths_follow_the_cost_model() {
        assert_eq!(choose_list_width([0u32; 100].into_iter()), 0);
        // 99 small values and one huge one: the huge one is an exception, not the width.
        let values = (0..99).map(|i| i % 8).chain([1 << 30]);
        assert_eq!(choose_list_width(values), 3);
    }

    #[test]
    fn nested_exceptions_round_trip() {
        // Mostly tiny gaps, a few mid-size ones and some enormous ones: exceptions at depth 1 and 2.
        let mut docs = vec![0u32];
        for i in 1..128u32 {
            let gap = match i % 17 {
                0 => 1 << 27,
                5 => 5000 + i,
                _ => i % 3,
            };
            docs.push(docs[i as usize - 1] + gap + 1);
        }
        let freqs: Vec<u32> = (0..128)
            .map(|i| if i % 40 == 0 { 70_000 } else { 1 + i % 2 })
            .collect();
        let p = crate::Codec::PForDelta.list_params(&docs, &freqs);
        let mut out = Vec::new();
        let freq_off = crate::Codec::PForDelta.encode_block(p, &docs, &freqs, &mut out) as usize;
        assert!(
            out[0] & 0xff > 0 && (out[0] >> 8) & 0xff > 0,
            "the test needs exceptions on both sides"
        );
        let (mut d, mut f) = ([0u32; 128], [0u32; 128]);
        crate::Codec::PForDelta
            .decode_docs(p, &out, freq_off, docs[0], docs[127], &mut d)
            .unwrap();
        crate::Codec::PForDelta
            .decode_freqs(p, &out, freq_off, &mut f)
            .unwrap();
        assert_eq!((&d[..], &f[..]), (&docs[..], &freqs[..]));
    }
}
