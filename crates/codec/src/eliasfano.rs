//! Partitioned Elias-Fano (docs/references.md#griffin §3.1.1, Figure 4), one partition per 128-posting block.
//!
//! A non-decreasing sequence `x_0..x_{n-1}` with upper bound `U` is split at `L = floor(log2(U / n))`
//! bits (0 when `U < n`): the low `L` bits of every element are packed in `n` fixed slots, and the high
//! part `x_i >> L` is written as bit number `(x_i >> L) + i` set in a bit vector of `n + (U >> L) + 1`
//! bits (unary-coded gaps of the high parts). A GPU decodes it as Algorithm 1 does: a popcount per
//! high word, a prefix sum, and one thread per element.
//!
//! Block layout:
//!
//! ```text
//! docs              low bits, then high bits, of x_i = d_i - first, with U = last - first
//!                   (first and last come from the skip data, so nothing else is stored)
//! freqs (freq_off)  one word U_f, then low bits, then high bits, of the running sums
//!                   y_i = sum_{j<=i} (tf_j - 1), with U_f = y_{n-1}
//! ```

use crate::bits::{pack, packed_words, unpack, BitWriter};
use crate::{CodecError, BLOCK_LEN};

/// Number of low bits for `n` elements bounded by `upper`.
pub fn low_bits(n: usize, upper: u64) -> u32 {
    let ratio = upper / n as u64;
    if ratio == 0 {
        0
    } else {
        63 - ratio.leading_zeros()
    }
}

/// Length in bits of the high-bits vector.
pub fn high_bits_len(n: usize, upper: u64, low: u32) -> usize {
    n + (upper >> low) as usize + 1
}

/// Appends the Elias-Fano code of `xs` (non-decreasing, all `<= upper`).
pub fn encode(xs: &[u32], upper: u32, out: &mut Vec<u32>) {
    let n = xs.len();
    let low = low_bits(n, upper as u64);
    let mask = if low == 0 { 0 } else { u32::MAX >> (32 - low) };
    let lows: Vec<u32> = xs.iter().map(|&x| x & mask).collect();
    pack(&lows, low, out);
    let mut high = BitWriter::with_len(high_bits_len(n, upper as u64, low));
    for (i, &x) in xs.iter().enumerate() {
        high.set((x >> low) as usize + i);
    }
    out.extend(high.into_words());
}

/// Decodes `out.len()` elements bounded by `upper`; returns the words consumed.
pub fn decode(words: &[u32], upper: u32, out: &mut [u32]) -> Result<usize, CodecError> {
    let n = out.len();
    let low = low_bits(n, upper as u64);
    let low_words = unpack(words, low, out)?;
    let high_len = high_bits_len(n, upper as u64, low);
    let high_words = high_len.div_ceil(32);
    let high = words
        .get(low_words..low_words + high_words)
        .ok_or(CodecError::Truncated)?;
    let mut i = 0usize;
    for (w, &word) in high.iter().enumerate() {
        let mut bits = word;
        while bits != 0 {
            let pos = w * 32 + bits.trailing_zeros() as usize;
            bits &= bits - 1;
            if i == n || pos >= high_len {
                return Err(CodecError::Corrupt("Elias-Fano high bits hold too many elements"));
            }
            let value = (((pos - i) as u64) << low) | out[i] as u64;
            if value > upper as u64 {
                return Err(CodecError::Corrupt("Elias-Fano element above its upper bound"));
            }
            out[i] = value as u32;
            i += 1;
        }
    }
    if i != n {
        return Err(CodecError::Corrupt("Elias-Fano high bits hold too few elements"));
    }
    Ok(low_words + high_words)
}

/// Words that [`encode`] writes for `n` elements bounded by `upper`.
pub fn encoded_words(n: usize, upper: u32) -> usize {
    let low = low_bits(n, upper as u64);
    packed_words(n, low) + high_bits_len(n, upper as u64, low).div_ceil(32)
}

pub(crate) fn encode_block(docs: &[u32], freqs: &[u32], out: &mut Vec<u32>) -> u32 {
    let first = docs[0];
    let xs: Vec<u32> = docs.iter().map(|&d| d - first).collect();
    encode(&xs, docs[docs.len() - 1] - first, out);
    let freq_off = out.len() as u32;
    let mut sum = 0u32;
    let ys: Vec<u32> = freqs
        .iter()
        .map(|&f| {
            sum = sum
                .checked_add(f - 1)
                .expect("a block's frequencies sum above u32::MAX");
            sum
        })
        .collect();
    out.push(sum);
    encode(&ys, sum, out);
    freq_off
}

pub(crate) fn decode_docs(words: &[u32], first: u32, last: u32, out: &mut [u32]) -> Result<(), CodecError> {
    let upper = last
        .checked_sub(first)
        .ok_or(CodecError::Corrupt("block's last docID below its first"))?;
    decode(words, upper, out)?;
    for x in out.iter_mut() {
        *x += first; // x <= upper = last - first, so no overflow
    }
    if out.windows(2).any(|w| w[0] >= w[1]) {
        return Err(CodecError::Corrupt("docIDs not strictly increasing"));
    }
    Ok(())
}

pub(crate) fn decode_freqs(words: &[u32], out: &mut [u32]) -> Result<(), CodecError> {
    let upper = *words.first().ok_or(CodecError::Truncated)?;
    decode(&words[1..], upper, out)?;
    let mut previous = 0u32;
    for y in out.iter_mut() {
        let sum = *y;
        *y = sum
            .checked_sub(previous)
            .and_then(|tf| tf.checked_add(1))
            .ok_or(CodecError::Corrupt("Elias-Fano frequency sums decrease"))?;
        previous = sum;
    }
    Ok(())
}

const _: () = assert!(BLOCK_LEN <= 1 << 16);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figure_4_style_example() {
        let xs = [5u32, 8, 8, 15, 32];
        let mut words = Vec::new();
        encode(&xs, 36, &mut words);
        assert_eq!(words.len(), encoded_words(5, 36));
        assert_eq!(low_bits(5, 36), 2);
        let mut back = [0u32; 5];
        assert_eq!(decode(&words, 36, &mut back).unwrap(), words.len());
        assert_eq!(back, xs);
    }

    #[test]
    fn dense_and_full_range_blocks() {
        for (xs, upper) in [
            ((0..128).collect::<Vec<u32>>(), 127u32),
            (vec![0, u32::MAX], u32::MAX),
        ] {
            let mut words = Vec::new();
            encode(&xs, upper, &mut words);
            let mut back = vec![0; xs.len()];
            decode(&words, upper, &mut back).unwrap();
            assert_eq!(back, xs);
        }
    }
}
