//! Fixed-width bit packing and a unary bit stream, both LSB-first in little-endian `u32` words.
//!
//! This is the one bit layout of the index: value `i` of width `b` occupies bits `i*b .. i*b+b` of the
//! word stream, bit 0 being the least significant bit of word 0. It is the layout of `bitpacking`'s
//! `BitPacker1x` (checked by a test below), so full groups of 32 values are unpacked by that crate's
//! width-specialised code, and it is the layout the GPU decoder reads with one shift per thread.

use bitpacking::{BitPacker, BitPacker1x};

use crate::CodecError;

/// Number of `u32` words that `n` values of `b` bits occupy.
pub fn packed_words(n: usize, b: u32) -> usize {
    (n * b as usize).div_ceil(32)
}

/// Number of bits needed to write `v` (0 for 0).
pub fn bit_width(v: u32) -> u32 {
    32 - v.leading_zeros()
}

/// Appends `values`, each truncated to its low `b` bits, to `out`.
pub fn pack(values: &[u32], b: u32, out: &mut Vec<u32>) {
    debug_assert!(b <= 32);
    let start = out.len();
    out.resize(start + packed_words(values.len(), b), 0);
    if b == 0 {
        return;
    }
    let words = &mut out[start..];
    let mask = low_mask(b);
    for (i, &v) in values.iter().enumerate() {
        let v = v & mask;
        let bit = i * b as usize;
        let (w, s) = (bit / 32, (bit % 32) as u32);
        words[w] |= v << s;
        if s + b > 32 {
            words[w + 1] |= v >> (32 - s);
        }
    }
}

/// Reads `out.len()` values of `b` bits from the start of `words`; returns the words consumed.
pub fn unpack(words: &[u32], b: u32, out: &mut [u32]) -> Result<usize, CodecError> {
    if b > 32 {
        return Err(CodecError::Corrupt("bit width above 32"));
    }
    let need = packed_words(out.len(), b);
    let words = words.get(..need).ok_or(CodecError::Truncated)?;
    if b == 0 {
        out.fill(0);
        return Ok(0);
    }
    let full = out.len() / BitPacker1x::BLOCK_LEN * BitPacker1x::BLOCK_LEN;
    let bytes: &[u8] = bytemuck::cast_slice(words);
    let packer = BitPacker1x::new();
    let mut byte_pos = 0;
    for chunk in out[..full].chunks_exact_mut(BitPacker1x::BLOCK_LEN) {
        byte_pos += packer.decompress(&bytes[byte_pos..], chunk, b as u8);
    }
    let mask = low_mask(b);
    for (i, slot) in out.iter_mut().enumerate().skip(full) {
        let bit = i * b as usize;
        let (w, s) = (bit / 32, (bit % 32) as u32);
        let mut v = words[w] >> s;
        if s + b > 32 {
            v |= words[w + 1] << (32 - s);
        }
        *slot = v & mask;
    }
    Ok(need)
}

fn low_mask(b: u32) -> u32 {
    if b >= 32 {
        u32::MAX
    } else {
        (1u32 << b) - 1
    }
}

/// Appends bits LSB-first; used for unary codes (Rice quotients, Elias-Fano high parts).
#[derive(Default)]
pub struct BitWriter {
    words: Vec<u32>,
    len: usize,
}

impl BitWriter {
    /// A writer whose stream is at least `bits` long (zero-filled).
    pub fn with_len(bits: usize) -> Self {
        BitWriter {
            words: vec![0; bits.div_ceil(32)],
            len: bits,
        }
    }

    /// Sets bit `pos`, growing the stream as needed.
    pub fn set(&mut self, pos: usize) {
        if pos >= self.len {
            self.len = pos + 1;
            self.words.resize(self.len.div_ceil(32), 0);
        }
        self.words[pos / 32] |= 1 << (pos % 32);
    }

    /// Appends `ones` one-bits then a zero-bit: the unary code of `ones`.
    pub fn push_unary(&mut self, ones: u64) {
        let end = self.len + ones as usize;
        self.words.resize((end + 1).div_ceil(32), 0);
        let mut pos = self.len;
        while pos < end {
            let take = (32 - pos % 32).min(end - pos);
            self.words[pos / 32] |= low_mask(take as u32) << (pos % 32);
            pos += take;
        }
        self.len = end + 1;
    }

    /// The words written.
    pub fn into_words(self) -> Vec<u32> {
        self.words
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_is_bitpacker1x_layout() {
        for b in 0..=32u32 {
            let values: Vec<u32> = (0..96u32)
                .map(|i| i.wrapping_mul(2654435761) & low_mask(b))
                .collect();
            let mut ours = Vec::new();
            pack(&values, b, &mut ours);
            let mut theirs = vec![0u8; 4 * 96];
            let mut len = 0;
            for chunk in values.chunks(32) {
                len += BitPacker1x::new().compress(chunk, &mut theirs[len..], b as u8);
            }
            assert_eq!(
                bytemuck::cast_slice::<u32, u8>(&ours),
                &theirs[..len],
                "width {b}"
            );
        }
    }

    #[test]
    fn pack_unpack_round_trip_all_widths_and_lengths() {
        for b in 0..=32u32 {
            for n in [0usize, 1, 31, 32, 33, 127, 128] {
                let values: Vec<u32> = (0..n as u32)
                    .map(|i| i.wrapping_mul(0x9E37_79B9) & low_mask(b))
                    .collect();
                let mut words = Vec::new();
                pack(&values, b, &mut words);
                assert_eq!(words.len(), packed_words(n, b));
                let mut back = vec![0; n];
                assert_eq!(unpack(&words, b, &mut back).unwrap(), words.len());
                assert_eq!(back, values, "b={b} n={n}");
            }
        }
    }

    #[test]
    fn unpack_reports_truncation() {
        let mut out = [0u32; 10];
        assert_eq!(unpack(&[1, 2], 7, &mut out), Err(CodecError::Truncated));
        assert!(unpack(&[1, 2], 33, &mut out).is_err());
    }

    #[test]
    fn unary_codes_are_ones_then_zero() {
        let mut w = BitWriter::default();
        w.push_unary(3);
        w.push_unary(0);
        w.push_unary(40);
        let words = w.into_words();
        assert_eq!(words[0] & 0b11111, 0b00111);
        assert_eq!((words[0] >> 5).trailing_ones() + words[1].trailing_ones(), 40);
    }
}
