//! Round-trip property tests on random and adversarial lists, and decoding of arbitrary words.

use proptest::prelude::*;

use crate::{Codec, ListParams, BLOCK_LEN};

/// Encodes a whole list block by block and decodes it again.
fn round_trip(codec: Codec, docs: &[u32], freqs: &[u32]) {
    let p = codec.list_params(docs, freqs);
    for (d, f) in docs.chunks(BLOCK_LEN).zip(freqs.chunks(BLOCK_LEN)) {
        let mut words = Vec::new();
        let freq_off = codec.encode_block(p, d, f, &mut words) as usize;
        let (mut dd, mut ff) = (vec![0; d.len()], vec![0; d.len()]);
        codec
            .decode_docs(p, &words, freq_off, d[0], d[d.len() - 1], &mut dd)
            .unwrap();
        codec.decode_freqs(p, &words, freq_off, &mut ff).unwrap();
        assert_eq!(dd, d, "{codec} docs");
        assert_eq!(ff, f, "{codec} freqs");
    }
}

fn list_from_gaps(start: u32, gaps: &[u32]) -> Vec<u32> {
    let mut docs = Vec::with_capacity(gaps.len() + 1);
    let mut d = start as u64;
    docs.push(start);
    for &g in gaps {
        d += g as u64 + 1;
        if d > u32::MAX as u64 {
            break;
        }
        docs.push(d as u32);
    }
    docs
}

/// Gaps from a mixture: mostly small, sometimes large, rarely enormous (skewed like real lists).
fn gap() -> impl Strategy<Value = u32> {
    prop_oneof![8 => 0u32..4, 4 => 0u32..300, 2 => 0u32..100_000, 1 => any::<u32>()]
}

fn freq() -> impl Strategy<Value = u32> {
    prop_oneof![10 => 1u32..4, 3 => 1u32..100, 1 => 1u32..=u32::MAX / 256]
}

proptest! {
    #[test]
    fn random_lists_round_trip(start in prop_oneof![Just(0u32), any::<u32>()], gaps in prop::collection::vec(gap(), 0..600), seed in any::<u64>()) {
        let docs = list_from_gaps(start, &gaps);
        let freqs: Vec<u32> = (0..docs.len() as u64).map(|i| 1 + ((seed ^ i.wrapping_mul(0x9E37_79B9_7F4A_7C15)) >> 59) as u32).collect();
        for codec in Codec::ALL {
            round_trip(codec, &docs, &freqs);
        }
    }

    #[test]
    fn skewed_frequencies_round_trip(gaps in prop::collection::vec(0u32..50, 1..300), freqs in prop::collection::vec(freq(), 301)) {
        let docs = list_from_gaps(0, &gaps);
        for codec in Codec::ALL {
            round_trip(codec, &docs, &freqs[..docs.len()]);
        }
    }

    /// Decoders given arbitrary words and parameters return an error or some values, never panic.
    #[test]
    fn arbitrary_words_never_panic(words in prop::collection::vec(any::<u32>(), 0..200), n in 0usize..140,
                                   freq_off in 0usize..220, first in any::<u32>(), last in any::<u32>(),
                                   doc in 0u8..40, fr in 0u8..40) {
        let p = ListParams { doc, freq: fr };
        let mut out = vec![0u32; n];
        for codec in Codec::ALL {
            let _ = codec.decode_docs(p, &words, freq_off, first, last, &mut out);
            let _ = codec.decode_freqs(p, &words, freq_off, &mut out);
        }
    }
}

#[test]
fn adversarial_lists_round_trip() {
    let max = u32::MAX;
    let cases: Vec<Vec<u32>> = vec![
        vec![0],
        vec![max],
        vec![0, max],
        vec![max - 1, max],
        (0..128).collect(),
        (0..129).collect(),
        (0..1000).map(|i| i * 3).collect(),
        (max - 300..=max).collect(),
        (0..255).map(|i| if i < 254 { i } else { max }).collect(),
        (0..130).map(|i| i * (max / 130)).collect(),
    ];
    for docs in cases {
        for freqs in [
            vec![1; docs.len()],
            (0..docs.len() as u32)
                .map(|i| if i % 7 == 0 { max / 128 } else { 1 })
                .collect(),
        ] {
            for codec in Codec::ALL {
                round_trip(codec, &docs, &freqs);
            }
        }
    }
}

#[test]
fn corrupt_blocks_are_detected() {
    let docs: Vec<u32> = (0..128).map(|i| i * 5).collect();
    let freqs = vec![2; 128];
    for codec in Codec::ALL {
        let p = codec.list_params(&docs, &freqs);
        let mut words = Vec::new();
        let freq_off = codec.encode_block(p, &docs, &freqs, &mut words) as usize;
        let mut out = [0u32; 128];
        // Wrong skip data: the last docID does not match what the block holds.
        assert!(
            codec.decode_docs(p, &words, freq_off, 0, 634, &mut out).is_err(),
            "{codec}"
        );
        // Truncated block.
        assert!(
            codec
                .decode_docs(p, &words[..freq_off / 2], freq_off / 2, 0, 635, &mut out)
                .is_err(),
            "{codec}"
        );
        // An empty block is never valid.
        assert!(
            codec.decode_docs(p, &words, freq_off, 0, 635, &mut []).is_err(),
            "{codec}"
        );
        assert!(codec.decode_docs(p, &words, freq_off, 0, 635, &mut out).is_ok());
        if codec == Codec::PForDelta {
            // The first gap slot (low bits of the word after the header) is always 0; damage there
            // leaves first and last docIDs intact, and must still be caught (the GPU catches it).
            let mut damaged = words.clone();
            damaged[1] ^= 1;
            assert!(codec
                .decode_docs(p, &damaged, freq_off, 0, 635, &mut out)
                .is_err());
        }
    }
}

/// Blocks are appended to a shared word vector; offsets must be relative to each block's start.
#[test]
fn blocks_encode_after_other_blocks() {
    let docs: Vec<u32> = (0..300).map(|i| i * 7 + i % 3).collect();
    let freqs: Vec<u32> = (0..300).map(|i| 1 + i % 5).collect();
    for codec in Codec::ALL {
        let p = codec.list_params(&docs, &freqs);
        let mut words = vec![0xdead_beef; 13];
        let mut blocks = Vec::new();
        for (d, f) in docs.chunks(BLOCK_LEN).zip(freqs.chunks(BLOCK_LEN)) {
            let start = words.len();
            let freq_off = codec.encode_block(p, d, f, &mut words) as usize;
            blocks.push((start, freq_off, d));
        }
        for (i, &(start, freq_off, d)) in blocks.iter().enumerate() {
            let end = blocks.get(i + 1).map_or(words.len(), |b| b.0);
            let mut out = vec![0; d.len()];
            codec
                .decode_docs(p, &words[start..end], freq_off, d[0], d[d.len() - 1], &mut out)
                .unwrap();
            assert_eq!(out, d, "{codec}");
        }
    }
}

#[test]
fn codec_names_parse_back() {
    for codec in Codec::ALL {
        assert_eq!(codec.name().parse::<Codec>().unwrap(), codec);
    }
    assert!("lz4"
        .parse::<Codec>()
        .unwrap_err()
        .contains("pfor, ef, rice or simdbp"));
}

#[test]
fn docids_past_u32_max_are_refused() {
    // Gaps that carry the block's docIDs past u32::MAX, even when the last one wraps to a small value.
    // 10, 16, then 16 + (u32::MAX - 10) + 1, 7 past u32::MAX.
    let mut out = [0, 5, u32::MAX - 10];
    assert!(crate::prefix_docs(10, &mut out).is_err());
    let mut out = [0, u32::MAX, 0];
    assert!(crate::prefix_docs(0, &mut out).is_err());
    // 10, 15, then exactly u32::MAX.
    let mut out = [0, 4, u32::MAX - 16];
    assert!(crate::prefix_docs(10, &mut out).is_ok());
    assert_eq!(out, [10, 15, u32::MAX]);
}

/// SIMD-BP128 (full blocks) and its short blocks keep docIDs delta-coded: damage to the header is
/// refused, and a flipped bit of the docID section either fails or still gives strictly increasing docIDs
/// between the skip data's first and last (what the cursors rely on); it never panics. Also for wide
/// gaps from a high first docID, where damage can make the sum of the gaps wrap past 2^32 (the only
/// blocks whose order the decoder checks).
#[test]
fn simdbp_damage_is_refused_or_keeps_docids_in_order() {
    let codec = Codec::SimdBp;
    let lists: [fn(u32) -> u32; 2] = [|i| 7 + i * i, |i| 0x8000_0000 + i * ((1 << 24) - 1)];
    for (n, list) in [1usize, 100, 128].into_iter().flat_map(|n| lists.map(|l| (n, l))) {
        let docs: Vec<u32> = (0..n as u32).map(list).collect();
        let freqs: Vec<u32> = (0..n as u32).map(|i| 1 + i % 9).collect();
        let p = codec.list_params(&docs, &freqs);
        let mut words = Vec::new();
        let freq_off = codec.encode_block(p, &docs, &freqs, &mut words) as usize;
        let (first, last) = (docs[0], docs[n - 1]);
        let mut out = vec![0u32; n];
        for header in [words[0] | 0xff, words[0] | 1 << 16] {
            let mut damaged = words.clone();
            damaged[0] = header;
            assert!(codec
                .decode_docs(p, &damaged, freq_off, first, last, &mut out)
                .is_err());
        }
        let mut refused = 0;
        for bit in 32..freq_off * 32 {
            let mut damaged = words.clone();
            damaged[bit / 32] ^= 1 << (bit % 32);
            match codec.decode_docs(p, &damaged, freq_off, first, last, &mut out) {
                Err(_) => refused += 1,
                Ok(()) => {
                    assert!(out.windows(2).all(|w| w[0] < w[1]) && out[0] == first && out[n - 1] == last)
                }
            }
        }
        assert!(n == 1 || refused > 0, "n {n}: no flipped bit was refused");
    }
}

/// A full SIMD-BP128 block whose gaps are damaged so that their sum wraps past 2^32 and ends on the
/// skip data's last docID again: the first and last docIDs agree, and only the decoder's check of the
/// order (made where the block's width allows such a wrap) refuses it.
#[test]
fn simdbp_gaps_that_wrap_past_u32_max_are_refused() {
    use bitpacking::{BitPacker, BitPacker4x};
    let codec = Codec::SimdBp;
    // 0, 1, …, 126, then 2^31: the deltas (gaps minus one) are 0 but the last, so the width is 31.
    let mut docs: Vec<u32> = (0..127).collect();
    docs.push(1 << 31);
    let freqs = vec![1u32; 128];
    let p = codec.list_params(&docs, &freqs);
    let mut words = Vec::new();
    let freq_off = codec.encode_block(p, &docs, &freqs, &mut words) as usize;
    let bits = words[0] & 0xff;
    assert_eq!(
        (bits, freq_off),
        (31, 1 + 124),
        "the block's layout changed: adapt the damage"
    );
    let mut out = vec![0u32; 128];
    codec
        .decode_docs(p, &words, freq_off, 0, 1 << 31, &mut out)
        .unwrap();
    assert_eq!(out, docs);
    // Deltas 1 and 2 raised by 2^31 − 1 and delta 3 by 2: the gaps grow by exactly 2^32 in all.
    let mut deltas: Vec<u32> = docs.windows(2).map(|w| w[1] - w[0] - 1).collect();
    deltas.insert(0, 0);
    deltas[1] += (1 << 31) - 1;
    deltas[2] += (1 << 31) - 1;
    deltas[3] += 2;
    let mut damaged = words.clone();
    BitPacker4x::new().compress(&deltas, bytemuck::cast_slice_mut(&mut damaged[1..freq_off]), 31);
    let err = codec.decode_docs(p, &damaged, freq_off, 0, 1 << 31, &mut out);
    assert!(err.is_err(), "a wrapped block was accepted: {:?}", &out[..5]);
}

/// The layout the GPU kernel reads (`bp4_one` in `crates/gpu/kernels/decode.cu`): in a full block's
/// section of width b, value i sits in lane i % 4 at position i / 4, each lane packed LSB-first in every
/// fourth word; the docID values are the gaps minus one (the first 0), the frequency values tf − 1.
#[test]
fn simdbp_full_block_layout_is_four_interleaved_lsb_first_lanes() {
    fn value_at(section: &[u32], b: u32, i: usize) -> u32 {
        if b == 0 {
            return 0;
        }
        let (lane, bit) = (i % 4, (i / 4) * b as usize);
        let (w, s) = (bit / 32, (bit % 32) as u32);
        let mut v = (section[w * 4 + lane] >> s) as u64;
        if s + b > 32 {
            v |= (section[(w + 1) * 4 + lane] as u64) << (32 - s);
        }
        (v & ((1u64 << b) - 1)) as u32
    }
    let mut seed = 0x2545_F491_4F6C_DD1Du64;
    for gap_bits in [0u32, 1, 3, 7, 13, 20, 25] {
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let mut d = next() as u32 % 1000;
        let mut docs = Vec::new();
        for _ in 0..BLOCK_LEN {
            docs.push(d);
            d += 1 + (next() as u32 & ((1u32 << gap_bits) - 1));
        }
        let freqs: Vec<u32> = (0..BLOCK_LEN)
            .map(|_| 1 + (next() as u32 % (1 << (gap_bits % 17))))
            .collect();
        let mut words = Vec::new();
        let freq_off = Codec::SimdBp.encode_block(ListParams::default(), &docs, &freqs, &mut words) as usize;
        let (db, fb) = (words[0] & 0xff, words[0] >> 8 & 0xff);
        assert_eq!(freq_off, 1 + 4 * db as usize, "gap bits {gap_bits}");
        assert_eq!(words.len(), freq_off + 4 * fb as usize, "gap bits {gap_bits}");
        for i in 0..BLOCK_LEN {
            let gap = if i == 0 { 0 } else { docs[i] - docs[i - 1] - 1 };
            assert_eq!(value_at(&words[1..freq_off], db, i), gap, "docID value {i}");
            assert_eq!(
                value_at(&words[freq_off..], fb, i),
                freqs[i] - 1,
                "frequency value {i}"
            );
        }
    }
}
