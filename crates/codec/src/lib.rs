//! Block codecs for posting lists.
//!
//! A posting list is cut into blocks of [`BLOCK_LEN`] postings (the last one may be shorter). Each block
//! is encoded on its own, so a reader can skip to any block and decode only the blocks it needs; the
//! block's first and last docID live uncompressed in the index's skip data, and every codec encodes
//! docIDs relative to the block's first docID. Encoded data is a sequence of little-endian `u32` words.
//!
//! Four codecs, chosen once for a whole index:
//! - [`Codec::PForDelta`]: docs/references.md#ding-gpu-query-processing section 6.2. One bit width `b` for the whole list; the low `b`
//!   bits of every gap sit in fixed slots; the exceptions' high bits and positions are two separate
//!   arrays, each compressed again with PForDelta (recursively, see [`pfor`]).
//! - [`Codec::EliasFano`]: docs/references.md#griffin section 3.1.1, partitioned into fixed 128-element blocks.
//! - [`Codec::Rice`]: docs/references.md#ding-gpu-query-processing sections 2 and 6.1, unary and binary parts in separate bit fields.
//! - [`Codec::SimdBp`]: SIMD-BP128, as PISA's `block_simdbp` (see [`simdbp`]).
//!
//! The first three decoders are the scalar references that GPU kernels are checked against. Decoders
//! never trust their input: malformed words give a [`CodecError`], never a panic or an out-of-bounds
//! read.

#![warn(missing_docs)]
#[cfg(target_endian = "big")]
compile_error!("the index format is little-endian; big-endian targets are not supported");

pub mod bits;
pub mod eliasfano;
pub mod pfor;
pub mod rice;
pub mod simdbp;

use std::fmt;
use std::str::FromStr;

/// Postings per block.
pub const BLOCK_LEN: usize = 128;

/// A decoding failure: the words do not form a valid block.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CodecError {
    /// The block needs more words than it was given.
    #[error("encoded block is truncated")]
    Truncated,
    /// The words decode to something impossible.
    #[error("encoded block is corrupt: {0}")]
    Corrupt(&'static str),
}

/// The index-wide choice of posting-list compression.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Codec {
    /// PForDelta with one bit width per list and recursively compressed exceptions.
    PForDelta,
    /// Partitioned Elias-Fano (one partition per block).
    EliasFano,
    /// Rice coding with separate unary and binary parts.
    Rice,
    /// SIMD-BP128: docIDs and frequencies bit-packed with one width per block, decoded with SIMD.
    SimdBp,
}

impl Codec {
    /// All codecs, in a fixed order. The GPU kernels decode every one.
    pub const ALL: [Codec; 4] = [Codec::PForDelta, Codec::EliasFano, Codec::Rice, Codec::SimdBp];

    /// The name used on the command line and in the index metadata.
    pub fn name(self) -> &'static str {
        match self {
            Codec::PForDelta => "pfor",
            Codec::EliasFano => "ef",
            Codec::Rice => "rice",
            Codec::SimdBp => "simdbp",
        }
    }

    /// Chooses the per-list parameters from the whole list (docIDs strictly increasing, freqs >= 1).
    pub fn list_params(self, docs: &[u32], freqs: &[u32]) -> ListParams {
        let gaps = || {
            docs.chunks(BLOCK_LEN)
                .flat_map(|block| doc_gap_values(block).collect::<Vec<_>>())
        };
        let tfs = || freqs.iter().map(|&f| f.saturating_sub(1));
        match self {
            Codec::PForDelta => ListParams {
                doc: pfor::choose_list_width(gaps()),
                freq: pfor::choose_list_width(tfs()),
            },
            Codec::EliasFano | Codec::SimdBp => ListParams::default(),
            Codec::Rice => ListParams {
                doc: rice::choose_param(gaps()),
                freq: rice::choose_param(tfs()),
            },
        }
    }

    /// Appends one block (`docs` strictly increasing, `freqs` >= 1, same length, 1..=128 postings) to
    /// `out`; returns the offset in words, from the block's start, of its frequency section.
    pub fn encode_block(self, p: ListParams, docs: &[u32], freqs: &[u32], out: &mut Vec<u32>) -> u32 {
        assert!(!docs.is_empty() && docs.len() <= BLOCK_LEN && docs.len() == freqs.len());
        debug_assert!(docs.windows(2).all(|w| w[0] < w[1]) && freqs.iter().all(|&f| f >= 1));
        let start = out.len();
        match self {
            Codec::PForDelta => pfor::encode_block(p, docs, freqs, out),
            Codec::EliasFano => eliasfano::encode_block(docs, freqs, out),
            Codec::Rice => rice::encode_block(p, docs, freqs, out),
            Codec::SimdBp => simdbp::encode_block(docs, freqs, out),
        }
        .checked_sub(start as u32)
        .expect("frequency section starts inside the block")
    }

    /// Decodes the docIDs of a block of `out.len()` postings whose first and last docIDs are `first`
    /// and `last`. `block` holds the block's words; `freq_off` is where its frequency section starts.
    pub fn decode_docs(
        self,
        p: ListParams,
        block: &[u32],
        freq_off: usize,
        first: u32,
        last: u32,
        out: &mut [u32],
    ) -> Result<(), CodecError> {
        check_block_shape(block, freq_off, out.len())?;
        match self {
            Codec::PForDelta => pfor::decode_docs(p, block, freq_off, first, out)?,
            Codec::EliasFano => eliasfano::decode_docs(&block[..freq_off], first, last, out)?,
            Codec::Rice => rice::decode_docs(p, &block[..freq_off], first, out)?,
            Codec::SimdBp => simdbp::decode_docs(block, freq_off, first, out)?,
        }
        if out.first() != Some(&first) || out.last() != Some(&last) {
            return Err(CodecError::Corrupt("decoded docIDs disagree with the skip data"));
        }
        Ok(())
    }

    /// Decodes the term frequencies of a block of `out.len()` postings.
    pub fn decode_freqs(
        self,
        p: ListParams,
        block: &[u32],
        freq_off: usize,
        out: &mut [u32],
    ) -> Result<(), CodecError> {
        check_block_shape(block, freq_off, out.len())?;
        match self {
            Codec::PForDelta => pfor::decode_freqs(p, block, freq_off, out),
            Codec::EliasFano => eliasfano::decode_freqs(&block[freq_off..], out),
            Codec::Rice => rice::decode_freqs(p, &block[freq_off..], out),
            Codec::SimdBp => simdbp::decode_freqs(block, freq_off, out),
        }
    }
}

fn check_block_shape(block: &[u32], freq_off: usize, n: usize) -> Result<(), CodecError> {
    if n == 0 || n > BLOCK_LEN {
        return Err(CodecError::Corrupt("block length outside 1..=128"));
    }
    if freq_off > block.len() {
        return Err(CodecError::Truncated);
    }
    Ok(())
}

impl fmt::Display for Codec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Codec {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "pfor" | "pfordelta" => Ok(Codec::PForDelta),
            "ef" | "elias-fano" | "eliasfano" => Ok(Codec::EliasFano),
            "rice" => Ok(Codec::Rice),
            "simdbp" | "simd-bp128" => Ok(Codec::SimdBp),
            _ => Err(format!("unknown codec '{s}': expected pfor, ef, rice or simdbp")),
        }
    }
}

/// Per-list codec parameters: a bit width for docID gaps and one for frequencies (PForDelta's `b`,
/// Rice's `b`); unused by Elias-Fano.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ListParams {
    /// Parameter for the docID part.
    pub doc: u8,
    /// Parameter for the frequency part.
    pub freq: u8,
}

/// The gap values a block encodes: 0 for the first posting (its docID is in the skip data), then
/// `d[i] - d[i-1] - 1`.
pub fn doc_gap_values(block: &[u32]) -> impl Iterator<Item = u32> + '_ {
    std::iter::once(0).chain(block.windows(2).map(|w| w[1] - w[0] - 1))
}

/// Rebuilds docIDs from `first` and the gap values in `out` (in place), checking for overflow. The first
/// gap value is always written as 0 (the skip data holds the first docID), so any other value is damage;
/// the GPU decoder, which adds every gap, rejects it too.
fn prefix_docs(first: u32, out: &mut [u32]) -> Result<(), CodecError> {
    if out[0] != 0 {
        return Err(CodecError::Corrupt("the first docID gap of a block is not 0"));
    }
    // The sum first (a loop without branches, which the compiler vectorises): the docIDs rise, so the
    // last is the largest, and if it fits in u32 every one does.
    let span: u64 = out[1..].iter().map(|&v| v as u64 + 1).sum();
    if first as u64 + span > u32::MAX as u64 {
        return Err(CodecError::Corrupt("docID above u32::MAX"));
    }
    let mut acc = first;
    out[0] = first;
    for v in out[1..].iter_mut() {
        acc += *v + 1;
        *v = acc;
    }
    Ok(())
}

/// Turns decoded `tf - 1` values back into frequencies, checking for overflow.
fn add_one(out: &mut [u32]) -> Result<(), CodecError> {
    // Checked first, then added: two loops without early exits, which the compiler vectorises.
    if out.iter().fold(false, |bad, &f| bad | (f == u32::MAX)) {
        return Err(CodecError::Corrupt("frequency above u32::MAX"));
    }
    out.iter_mut().for_each(|f| *f += 1);
    Ok(())
}

#[cfg(test)]
mod tests;
