//! The GPU kernels against their CPU references (the GPU engine against the CPU oracle is in the engine
//! crate's `tests/gpu_engine.rs`).
//!
//! Every test needs a CUDA device; where there is none it prints "skipped: no CUDA device" and returns.
//! On the lent GPU machine they run (scripts/device-check.sh).

use warpsearch_codec::{Codec, BLOCK_LEN};
use warpsearch_gpu::kernels::{decode_raw, topk_segments, Decoder, RawList};
use warpsearch_gpu::testing::{gpu, say};
use warpsearch_index::BlockMeta;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// A list of `n` postings starting at `start`, with gaps drawn from `gap_bits` and a few large tfs.
fn raw_list(
    codec: Codec,
    n: usize,
    start: u32,
    gap_bits: u32,
    rng: &mut Rng,
) -> (RawList, Vec<u32>, Vec<u32>) {
    let mut docs = Vec::with_capacity(n);
    let mut d = start as u64;
    for i in 0..n {
        if i > 0 {
            let big = rng.below(23) == 0;
            let bits = if big { gap_bits + 6 } else { gap_bits };
            d += 1 + rng.below(1u64 << bits.min(40));
        }
        docs.push(d);
    }
    // Keep every docID within u32 (shift the list down if it overflowed).
    let over = docs.last().copied().unwrap_or(0).saturating_sub(u32::MAX as u64);
    let docs: Vec<u32> = docs.iter().map(|&d| (d - over) as u32).collect();
    let freqs: Vec<u32> = (0..n)
        .map(|_| match rng.below(40) {
            0 => 70_000 + rng.below(1000) as u32,
            1..=5 => 1 + rng.below(300) as u32,
            _ => 1 + rng.below(3) as u32,
        })
        .collect();
    let params = codec.list_params(&docs, &freqs);
    let (mut words, mut blocks) = (Vec::new(), Vec::new());
    for (cd, cf) in docs.chunks(BLOCK_LEN).zip(freqs.chunks(BLOCK_LEN)) {
        let offset = words.len() as u32;
        let f = codec.encode_block(params, cd, cf, &mut words);
        blocks.push(BlockMeta {
            first_doc: cd[0],
            last_doc: *cd.last().unwrap(),
            offset,
            freq_offset: f,
            max_score: 0.0,
        });
    }
    let list = RawList {
        words,
        blocks,
        df: n as u32,
        params,
    };
    (list, docs, freqs)
}

#[test]
fn decode_kernel_equals_the_cpu_decoders() {
    let Some(gpu) = gpu() else { return };
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    for codec in Codec::ALL {
        let mut lists = Vec::new();
        let mut expected = Vec::new();
        for &n in &[1usize, 2, 31, 127, 128, 129, 255, 256, 1000, 4097] {
            for &(start, gap_bits) in &[
                (0u32, 0u32),
                (5, 3),
                (1000, 12),
                (u32::MAX - 200_000, 10),
                (u32::MAX - 130, 0),
            ] {
                if gap_bits == 0 && start > 1000 && n > 130 {
                    continue;
                }
                let (list, docs, freqs) = raw_list(codec, n, start, gap_bits, &mut rng);
                lists.push(list);
                expected.push((docs, freqs));
            }
        }
        let (mut bad, _, _) = raw_list(codec, 200, 10, 4, &mut rng);
        bad.blocks[1].last_doc += 1;
        // SIMD-BP128 has two decoders on the GPU; the other codecs' one runs under both choices.
        for decoder in [Decoder::Registers, Decoder::Memory] {
            let got = decode_raw(&gpu, codec, &lists, decoder).unwrap();
            for (li, (list, (docs, freqs))) in lists.iter().zip(&expected).enumerate() {
                assert_eq!(got[li].len(), list.blocks.len());
                for (b, block) in got[li].iter().enumerate() {
                    let r = b * BLOCK_LEN..(b * BLOCK_LEN + BLOCK_LEN).min(docs.len());
                    // The CPU decoder is the reference; both must give the original postings.
                    let (cd, cf) = cpu_decode(codec, list, b)
                        .unwrap_or_else(|| panic!("{codec} list {li} block {b}: CPU says malformed"));
                    let (gd, gf) = block
                        .as_ref()
                        .unwrap_or_else(|| panic!("{codec} list {li} block {b}: GPU says malformed"));
                    assert_eq!(gd, &docs[r.clone()], "{codec} list {li} block {b} docIDs");
                    assert_eq!(gf, &freqs[r.clone()], "{codec} list {li} block {b} freqs");
                    assert_eq!((&cd, &cf), (gd, gf));
                }
            }
            // A block whose skip data disagrees with its contents is reported, not decoded into garbage.
            let got = decode_raw(&gpu, codec, &[bad.clone()], decoder).unwrap();
            assert!(got[0][0].is_some());
            assert!(
                got[0][1].is_none(),
                "{codec} ({decoder:?}): a wrong last docID must fail the block"
            );
        }
    }
}

/// The CPU decoder's verdict on block `b` of `list`: its postings, or `None` if it is malformed.
fn cpu_decode(codec: Codec, list: &RawList, b: usize) -> Option<(Vec<u32>, Vec<u32>)> {
    let meta = &list.blocks[b];
    let end = list
        .blocks
        .get(b + 1)
        .map_or(list.words.len(), |m| m.offset as usize);
    let n = (list.df as usize - b * BLOCK_LEN).min(BLOCK_LEN);
    let words = &list.words[meta.offset as usize..end];
    let (mut d, mut f) = (vec![0u32; n], vec![0u32; n]);
    let f_off = meta.freq_offset as usize;
    codec
        .decode_docs(list.params, words, f_off, meta.first_doc, meta.last_doc, &mut d)
        .ok()?;
    codec.decode_freqs(list.params, words, f_off, &mut f).ok()?;
    Some((d, f))
}

/// Lists of `codec` with one bit flipped somewhere in each (`starts`: their first docIDs, in turn):
/// the GPU's `decoder` must agree with the CPU decoder, block by block, on whether the block is malformed
/// and, if not, on every value. Returns how many blocks both found malformed and how many both decoded.
fn damaged_blocks_agree(codec: Codec, decoder: Decoder, seed: u64, starts: &[u32]) -> (usize, usize) {
    let gpu = gpu().expect("checked by the caller");
    let mut rng = Rng(seed);
    let mut damaged = Vec::new();
    for trial in 0..600 {
        let start = starts[trial % starts.len()];
        let (mut list, _, _) = raw_list(
            codec,
            129 + (trial % 200),
            start,
            2 + (trial % 5) as u32,
            &mut rng,
        );
        let at = rng.below(list.words.len() as u64) as usize;
        list.words[at] ^= 1 << rng.below(32);
        damaged.push(list);
    }
    let got = decode_raw(&gpu, codec, &damaged, decoder).unwrap();
    assert_eq!(got.len(), damaged.len());
    let (mut agreed_bad, mut agreed_good) = (0, 0);
    for (li, list) in damaged.iter().enumerate() {
        assert_eq!(got[li].len(), list.blocks.len(), "list {li}");
        for (b, on_gpu) in got[li].iter().enumerate() {
            let cpu = cpu_decode(codec, list, b);
            assert_eq!(
                on_gpu, &cpu,
                "{codec} ({decoder:?}) list {li} block {b}: GPU and CPU disagree"
            );
            if cpu.is_some() {
                agreed_good += 1;
            } else {
                agreed_bad += 1;
            }
        }
    }
    say(&format!(
        "damaged {codec} blocks ({decoder:?}): {agreed_bad} malformed on both, {agreed_good} decoded alike"
    ));
    (agreed_bad, agreed_good)
}

#[test]
fn damaged_exceptions_fail_or_decode_exactly_as_on_the_cpu() {
    // PForDelta blocks full of exceptions (large gaps and frequencies): the GPU's warp-parallel
    // exception path.
    if gpu().is_none() {
        return;
    }
    let seed = 0xD1B5_4A32_D192_ED03;
    let (bad, _) = damaged_blocks_agree(Codec::PForDelta, Decoder::Memory, seed, &[7]);
    assert!(bad > 100, "too few flips hit: {bad}");
}

#[test]
fn damaged_simdbp_blocks_fail_or_decode_exactly_as_on_the_cpu() {
    // SIMD-BP128 blocks with a flip in a header, a docID gap (some sums then pass 2^32 - 1 near the top
    // of the docID range) or a frequency, through both decoders: into registers as the OR windows decode,
    // into memory as AND and the small OR path decode.
    if gpu().is_none() {
        return;
    }
    let starts = [7, u32::MAX - 2_000_000, u32::MAX - 40_000];
    for decoder in [Decoder::Registers, Decoder::Memory] {
        let seed = 0x5EED_B128_0DD5_F00D;
        let (bad, good) = damaged_blocks_agree(Codec::SimdBp, decoder, seed, &starts);
        assert!(
            bad > 100 && good > 100,
            "{decoder:?}: too few flips hit or missed: {bad} malformed, {good} decoded"
        );
    }
}

fn sorted_top(hits: &[(u32, f32)], k: usize) -> Vec<(u32, f32)> {
    let mut v = hits.to_vec();
    v.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    v.truncate(k);
    v
}

#[test]
fn topk_kernel_equals_a_full_sort() {
    let Some(gpu) = gpu() else { return };
    let mut rng = Rng(7);
    for k in [1usize, 10, 100, 1000] {
        let mut segments = Vec::new();
        for &n in &[
            0usize, 1, 2, 255, 256, 257, 999, 1000, 1001, 1024, 1025, 5000, 20_000,
        ] {
            for kind in 0..3 {
                let mut docs: Vec<u32> = (0..n as u32)
                    .map(|i| i.wrapping_mul(2_654_435_761) ^ 0xF000_0000)
                    .collect();
                docs.sort_unstable();
                docs.dedup();
                // Shuffle so that the kernel sees docIDs out of order.
                for i in (1..docs.len()).rev() {
                    docs.swap(i, rng.below(i as u64 + 1) as usize);
                }
                let hits: Vec<(u32, f32)> = docs
                    .iter()
                    .map(|&d| {
                        let s = match kind {
                            0 => rng.below(1 << 20) as f32 / 1000.0,
                            1 => (rng.below(4) as f32) * 0.5, // many ties
                            _ => 3.25,                        // all equal
                        };
                        (d, s)
                    })
                    .collect();
                segments.push(hits);
            }
        }
        segments.push((0..3000).map(|i| (u32::MAX - i, 1.0)).collect());
        let got = topk_segments(&gpu, &segments, k).unwrap();
        for (i, seg) in segments.iter().enumerate() {
            let want = sorted_top(seg, k);
            let same = got[i].len() == want.len()
                && got[i]
                    .iter()
                    .zip(&want)
                    .all(|(a, b)| a.0 == b.0 && a.1.to_bits() == b.1.to_bits());
            assert!(
                same,
                "k {k} segment {i} of {}: GPU {:?}.. vs {:?}..",
                seg.len(),
                &got[i][..got[i].len().min(5)],
                &want[..want.len().min(5)]
            );
        }
    }
}
