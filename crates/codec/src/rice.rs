//! Rice coding with separate unary and binary parts (docs/references.md#ding-gpu-query-processing §2 and §6.1).
//!
//! With parameter `b`, a value `v` is written as `q = v >> b` in unary (`q` one-bits then a zero-bit)
//! and `r = v mod 2^b` in `b` binary bits. As in docs/references.md#ding-gpu-query-processing, all binary parts of a block come first, in
//! fixed `b`-bit slots, then all unary parts as one bit stream, so that a GPU can decode both halves
//! with prefix sums. `b` is chosen once per list (docID gaps and frequencies separately) to minimise
//! the list's size.
//!
//! Block layout:
//!
//! ```text
//! docs              n binary slots of bd bits, then the unary stream of the gap values
//! freqs (freq_off)  n binary slots of bf bits, then the unary stream of tf - 1
//! ```

use crate::bits::{bit_width, pack, unpack, BitWriter};
use crate::{add_one, doc_gap_values, prefix_docs, CodecError, ListParams};

/// The `b` minimising `n * (b + 1) + sum(v >> b)` over the list's values.
pub fn choose_param(values: impl Iterator<Item = u32>) -> u8 {
    // cost(b) needs sum(v >> b) for every b; collect the values' widths' contributions in one pass.
    let mut sum_shifted = [0u64; 33];
    let mut n = 0u64;
    for v in values {
        n += 1;
        for (b, s) in sum_shifted.iter_mut().enumerate().take(bit_width(v) as usize) {
            *s += (v as u64) >> b;
        }
    }
    (0..=32u32)
        .min_by_key(|&b| n * (b as u64 + 1) + sum_shifted[b as usize])
        .unwrap_or(0) as u8
}

fn encode_values(values: &[u32], b: u32, out: &mut Vec<u32>) {
    pack(values, b, out);
    let mut unary = BitWriter::default();
    for &v in values {
        unary.push_unary((v as u64) >> b);
    }
    out.extend(unary.into_words());
}

fn decode_values(words: &[u32], b: u32, out: &mut [u32]) -> Result<(), CodecError> {
    let binary = unpack(words, b, out)?;
    let unary = &words[binary..];
    let mut bit = 0usize;
    for slot in out.iter_mut() {
        let mut q = 0u64;
        loop {
            let word = *unary.get(bit / 32).ok_or(CodecError::Truncated)? >> (bit % 32);
            let ones = word.trailing_ones() as usize;
            let room = 32 - bit % 32;
            q += ones.min(room) as u64;
            bit += ones.min(room);
            if ones < room {
                bit += 1; // the terminating zero
                break;
            }
        }
        if q > u32::MAX as u64 {
            return Err(CodecError::Corrupt("Rice quotient above u32::MAX"));
        }
        let value = (q << b) | *slot as u64;
        *slot = u32::try_from(value).map_err(|_| CodecError::Corrupt("Rice value above u32::MAX"))?;
    }
    Ok(())
}

pub(crate) fn encode_block(p: ListParams, docs: &[u32], freqs: &[u32], out: &mut Vec<u32>) -> u32 {
    let gaps: Vec<u32> = doc_gap_values(docs).collect();
    encode_values(&gaps, p.doc as u32, out);
    let freq_off = out.len() as u32;
    let tfs: Vec<u32> = freqs.iter().map(|&f| f - 1).collect();
    encode_values(&tfs, p.freq as u32, out);
    freq_off
}

pub(crate) fn decode_docs(
    p: ListParams,
    words: &[u32],
    first: u32,
    out: &mut [u32],
) -> Result<(), CodecError> {
    decode_values(words, p.doc as u32, out)?;
    prefix_docs(first, out)
}

pub(crate) fn decode_freqs(p: ListParams, words: &[u32], out: &mut [u32]) -> Result<(), CodecError> {
    decode_values(words, p.freq as u32, out)?;
    add_one(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameter_tracks_the_mean_gap() {
        assert_eq!(choose_param([0u32; 64].into_iter()), 0);
        let b = choose_param((0..1000).map(|i| 1000 + i % 100));
        assert!((9..=10).contains(&b), "b = {b}");
    }

    #[test]
    fn huge_values_with_small_parameter() {
        let values = [u32::MAX, 0, 7, 1 << 20];
        let mut words = Vec::new();
        encode_values(&values, 28, &mut words);
        let mut back = [0u32; 4];
        decode_values(&words, 28, &mut back).unwrap();
        assert_eq!(back, values);
    }
}
