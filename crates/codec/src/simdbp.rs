//! SIMD-BP128 (Lemire and Boytsov, "Decoding billions of integers per second through vectorization",
//! 2015), the layout of PISA's `block_simdbp` and of tantivy's postings: a block's docIDs, and its
//! frequencies, each packed with one bit width per block by `bitpacking`'s `BitPacker4x` (four 32-bit
//! lanes, 128 values, the same bytes whether it runs with SSE3 or its scalar fallback).
//!
//! Block layout (u32 words): word 0 holds the docID width and the frequency width (`| << 8`); then
//! `4 · width` words of docIDs, then `4 · width` words of frequencies minus one (the frequency section).
//! DocIDs are stored as `e[i] = d[i] − i`, a non-decreasing sequence that `BitPacker4x`'s sorted mode
//! delta-encodes from `e[0] = first` (so its first delta is 0). Those deltas are the docID gaps minus
//! one (the first 0), as PForDelta's values: the CPU decodes them with the strictly sorted SIMD prefix
//! sum from `first − 1`, and the GPU kernel (`simdbp_decode_warp` in `crates/gpu/kernels/decode.cu`)
//! reads value `i` of a section directly (the layout test in `tests.rs` pins it).
//!
//! A block of fewer than 128 postings (a list's last, and every block of the many short lists) would
//! cost a whole 128-value section if padded: its docID gaps minus one and its frequencies minus one are
//! instead bit-packed, `n` values each, in the plain LSB-first layout of [`crate::bits`] (the same
//! header word, the same meaning of the widths).

use bitpacking::{BitPacker, BitPacker4x};

use crate::bits::{bit_width, pack, packed_words, unpack};
use crate::{doc_gap_values, prefix_docs, CodecError, BLOCK_LEN};

/// Words of a section packed with `bits` bits a value.
fn section_words(bits: u8) -> usize {
    BitPacker4x::compressed_block_size(bits) / 4
}

/// Appends the packed section (128 values, `bits` wide) produced by `pack` to `out`.
fn push_section(bits: u8, out: &mut Vec<u32>, pack: impl FnOnce(&mut [u8]) -> usize) {
    let mut bytes = [0u8; 4 * BLOCK_LEN];
    let len = pack(&mut bytes);
    debug_assert_eq!(len, 4 * section_words(bits));
    out.extend(
        bytes[..len]
            .chunks_exact(4)
            .map(|w| u32::from_le_bytes(w.try_into().expect("4 bytes"))),
    );
}

/// Appends one block; returns the position in `out` where its frequency section starts.
pub fn encode_block(docs: &[u32], freqs: &[u32], out: &mut Vec<u32>) -> u32 {
    if docs.len() < BLOCK_LEN {
        return encode_short(docs, freqs, out);
    }
    let e: [u32; BLOCK_LEN] = std::array::from_fn(|i| docs[i] - i as u32);
    let f: [u32; BLOCK_LEN] = std::array::from_fn(|i| freqs[i] - 1);
    let packer = BitPacker4x::new();
    let doc_bits = packer.num_bits_sorted(docs[0], &e);
    let freq_bits = packer.num_bits(&f);
    out.push(doc_bits as u32 | (freq_bits as u32) << 8);
    push_section(doc_bits, out, |b| {
        packer.compress_sorted(docs[0], &e, b, doc_bits)
    });
    let freq_off = out.len() as u32;
    push_section(freq_bits, out, |b| packer.compress(&f, b, freq_bits));
    freq_off
}

/// A block of fewer than 128 postings: gaps minus one and frequencies minus one, `n` values each.
fn encode_short(docs: &[u32], freqs: &[u32], out: &mut Vec<u32>) -> u32 {
    let gaps: Vec<u32> = doc_gap_values(docs).collect();
    let tfs: Vec<u32> = freqs.iter().map(|&f| f - 1).collect();
    let width = |v: &[u32]| bit_width(v.iter().copied().max().unwrap_or(0));
    let (doc_bits, freq_bits) = (width(&gaps), width(&tfs));
    out.push(doc_bits | freq_bits << 8);
    pack(&gaps, doc_bits, out);
    let freq_off = out.len() as u32;
    pack(&tfs, freq_bits, out);
    freq_off
}

/// The block's docID and frequency widths, checked.
fn widths(block: &[u32]) -> Result<(u8, u8), CodecError> {
    let head = *block.first().ok_or(CodecError::Truncated)?;
    let (doc_bits, freq_bits) = ((head & 0xff) as u8, (head >> 8 & 0xff) as u8);
    if head >> 16 != 0 || doc_bits > 32 || freq_bits > 32 {
        return Err(CodecError::Corrupt("SIMD-BP128 block header"));
    }
    Ok((doc_bits, freq_bits))
}

/// The `bits`-wide section of `block` starting at word `at`, as bytes.
fn section(block: &[u32], at: usize, bits: u8) -> Result<&[u8], CodecError> {
    let words = block
        .get(at..at + section_words(bits))
        .ok_or(CodecError::Truncated)?;
    Ok(bytemuck::cast_slice(words))
}

/// Decodes the docIDs of a block of `out.len()` postings starting at `first`.
pub fn decode_docs(block: &[u32], freq_off: usize, first: u32, out: &mut [u32]) -> Result<(), CodecError> {
    let (doc_bits, _) = widths(block)?;
    if out.len() < BLOCK_LEN {
        if freq_off != 1 + packed_words(out.len(), doc_bits as u32) {
            return Err(CodecError::Corrupt("SIMD-BP128 frequency offset"));
        }
        unpack(&block[1..freq_off], doc_bits as u32, out)?;
        return prefix_docs(first, out);
    }
    if freq_off != 1 + section_words(doc_bits) {
        return Err(CodecError::Corrupt("SIMD-BP128 frequency offset"));
    }
    // The deltas of e are the gaps minus one (e[0] − first = 0): BitPacker4x's strictly sorted decoding
    // from first − 1 gives the docIDs directly, in place.
    let initial = Some(first.wrapping_sub(1));
    BitPacker4x::new().decompress_strictly_sorted(initial, section(block, 1, doc_bits)?, out, doc_bits);
    // Each docID is the previous one plus a gap of at least 1, so the block is in order unless the sum
    // wraps past 2^32, which damage could make happen; the caller checks the first and last docIDs.
    // The wrap is impossible where even 128 of the widest gaps from `first` stay below 2^32 (every
    // block of a collection of fewer than 2^24 documents per gap width ≤ 24): only the other blocks
    // pay for the check of the order (9% of the CPU engine's AND time on the 25M collection).
    let widest = (BLOCK_LEN as u64) << doc_bits;
    if first as u64 + widest > u32::MAX as u64 && out.windows(2).fold(false, |bad, w| bad | (w[0] >= w[1])) {
        return Err(CodecError::Corrupt("SIMD-BP128 docIDs out of order"));
    }
    Ok(())
}

/// Decodes the frequencies of a block of `out.len()` postings.
pub fn decode_freqs(block: &[u32], freq_off: usize, out: &mut [u32]) -> Result<(), CodecError> {
    let (_, freq_bits) = widths(block)?;
    if out.len() < BLOCK_LEN {
        unpack(&block[freq_off..], freq_bits as u32, out)?;
        return crate::add_one(out);
    }
    BitPacker4x::new().decompress(section(block, freq_off, freq_bits)?, out, freq_bits);
    crate::add_one(out)
}
