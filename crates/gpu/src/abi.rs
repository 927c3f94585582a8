//! What the host and the CUDA kernels (`kernels/`) share: the `#[repr(C)]` structs the kernels read,
//! and every number both sides use. It imports nothing of this crate, so every other module may use it.
//!
//! - The structs mirror `struct TermDesc`, `QueryDesc`, `IndexArgs`, `BatchArgs`, `BoundArgs` and
//!   `EncodeArgs` of
//!   `kernels/common.cuh` field for field. They are `Pod` (no padding byte goes unnamed, any bit
//!   pattern is a value), their sizes and field offsets are checked here at compile time, and
//!   [`layout_checks`] states the same sizes and offsets to NVRTC as `static_assert`s, so that a
//!   change on either side fails a build instead of a query.
//! - The numbers ([`BLOCK_LEN`], [`TOPK_CAP`], the codec, mode and phase ids, …) are defined here
//!   only: the kernels get them as `-D` defines ([`defines`]), and `common.cuh` refuses to compile
//!   without them.

use bytemuck::{Pod, Zeroable};
use std::mem::{offset_of, size_of};
use warpsearch_codec::Codec;

/// Postings per block (`BLOCK_LEN`).
pub const BLOCK_LEN: usize = 128;
/// AND candidates per thread (`CPT`): a CTA's AND step holds `threads · CPT` candidates (`CHUNK`).
pub const CANDIDATES_PER_THREAD: usize = 4;
/// Entries of the per-CTA top-k buffer (`TOPK_CAP`): k ≤ [`MAX_K_GPU`], and a window of new hits.
pub const TOPK_CAP: usize = 36864;
/// Keys of the kernels' final sort in shared memory (`MAX_K_GPU`: k rounded up to a power of two).
pub const MAX_K_GPU: u32 = 1024;
/// Largest k the GPU kernels select: 1,000 is promised, within the final sort's [`MAX_K_GPU`] keys.
pub const MAX_K: usize = 1000;
const _: () = assert!(MAX_K as u32 <= MAX_K_GPU);
/// Largest OR accumulator window in documents (`MAX_WINDOW`).
pub const MAX_WINDOW: u32 = 32768;
/// Postings of the largest OR query the sort path takes (`MAX_SMALL_OR`).
pub const MAX_SMALL_OR: u32 = 4096;

/// The kernels' codec number of a PForDelta index (`CODEC_PFOR`).
pub const CODEC_PFOR: u32 = 0;
/// Elias-Fano (`CODEC_EF`).
pub const CODEC_EF: u32 = 1;
/// Rice (`CODEC_RICE`).
pub const CODEC_RICE: u32 = 2;
/// SIMD-BP128 (`CODEC_SIMDBP`).
pub const CODEC_SIMDBP: u32 = 3;

/// The kernels' number of `codec` ([`IndexArgs::codec`]).
pub fn codec_id(codec: Codec) -> u32 {
    match codec {
        Codec::PForDelta => CODEC_PFOR,
        Codec::EliasFano => CODEC_EF,
        Codec::Rice => CODEC_RICE,
        Codec::SimdBp => CODEC_SIMDBP,
    }
}

/// [`BatchArgs::mode`] of an AND batch (`MODE_AND`), launched on `search_and`.
pub const MODE_AND: u32 = 0;
/// [`BatchArgs::mode`] of an OR batch (`MODE_OR`), launched on `search_or`.
pub const MODE_OR: u32 = 1;

/// `out_count` of a query the kernel could not answer (`COUNT_FAILED`: a malformed block).
pub const COUNT_FAILED: u32 = u32::MAX;
/// `out_count` in host memory of a task not yet answered: the host's, set before launch (above any k).
pub const COUNT_PENDING: u32 = u32::MAX - 1;

/// Phase counters of an instrumented CTA (`PH_*`): indices into its [`PHASE_COUNTERS`] u64s at
/// [`BatchArgs::phase_cycles`]. The first five are clock cycles per phase, in the order of
/// [`crate::stats::PHASES`]; [`PH_BLOCKS`] counts the blocks the CTA decoded.
pub const PH_SELECT: usize = 0;
/// Decoding blocks (`PH_DECODE`).
pub const PH_DECODE: usize = 1;
/// Intersecting candidates (`PH_INTERSECT`).
pub const PH_INTERSECT: usize = 2;
/// Scoring (`PH_SCORE`).
pub const PH_SCORE: usize = 3;
/// Top-k selection (`PH_TOPK`).
pub const PH_TOPK: usize = 4;
/// Not a phase: the blocks decoded (`PH_BLOCKS`).
pub const PH_BLOCKS: usize = 5;
/// u64 counters per CTA at [`BatchArgs::phase_cycles`] (`PHASE_COUNTERS`).
pub const PHASE_COUNTERS: usize = 8;
const _: () = assert!(PH_BLOCKS < PHASE_COUNTERS);

/// One query term as the kernel reads it (mirrors `struct TermDesc`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Pod, Zeroable)]
pub struct TermDesc {
    /// Offset of the list's first word in the device postings buffer.
    pub word_base: u64,
    /// Index of the list's first block in the device block arrays.
    pub block_base: u32,
    /// Blocks of the list.
    pub num_blocks: u32,
    /// Postings of the list.
    pub df: u32,
    /// Words of the whole list.
    pub len_words: u32,
    /// Codec parameters: docID parameter | frequency parameter << 8.
    pub params: u32,
    /// Position, in processing order, of the term whose plan slot is this entry's index.
    pub slot_term: u32,
    /// Weight multiplying BM25's tf part.
    pub weight: f32,
    /// Block max_score times this bounds a contribution (with slack); negative: no usable bounds.
    pub bound_scale: f32,
}

impl TermDesc {
    /// The list of `rec` at device word `word_base` and block `block_base`, with weight 0, no block
    /// bounds and slot 0.
    pub fn for_list(rec: &warpsearch_index::TermRecord, word_base: u64, block_base: u32) -> TermDesc {
        TermDesc {
            word_base,
            block_base,
            num_blocks: rec.num_blocks() as u32,
            df: rec.df,
            len_words: rec.len_words,
            params: rec.doc_param as u32 | (rec.freq_param as u32) << 8,
            slot_term: 0,
            weight: 0.0,
            bound_scale: -1.0,
        }
    }
}

/// One query, or one docID-range part of a long one, as the kernel reads it (mirrors
/// `struct QueryDesc`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Pod, Zeroable)]
pub struct QueryDesc {
    /// First [`TermDesc`] of the query.
    pub term_begin: u32,
    /// Terms of the query.
    pub num_terms: u32,
    /// Where its results go: `out[out_slot * k ..]`.
    pub out_slot: u32,
    /// Relative slack of bounds for this query (`warpsearch_query::plan::bound_slack`).
    pub slack: f32,
    /// First docID of this part of the query (0 when not cut).
    pub doc_lo: u32,
    /// Last docID of this part of the query (u32::MAX when not cut).
    pub doc_hi: u32,
    /// The query's fixed point (`Fixed::scale`): a contribution times this, rounded down, is summed.
    pub fixed_scale: f32,
    /// `Fixed::unit`: a fixed-point sum, rounded to `f32`, times this is the score before the prior.
    pub fixed_unit: f32,
    /// A query cut into parts: its entry of [`BatchArgs::shared_keys`], which all its parts share;
    /// [`NO_SHARE`]: a query of one part.
    pub share: u32,
}

/// [`QueryDesc::share`] of a query of one part (`NO_SHARE`).
pub const NO_SHARE: u32 = u32::MAX;

/// The kernels' index arguments (mirrors `struct IndexArgs`): device addresses of the index arrays
/// and of the per-search arrays, the codec and the ranking's constants. Passed by value.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Pod, Zeroable)]
pub struct IndexArgs {
    /// Postings words (`const u32*`).
    pub words: u64,
    /// Per block: first docID.
    pub blk_first: u64,
    /// Per block: last docID.
    pub blk_last: u64,
    /// Per block: word offset from its list's start.
    pub blk_off: u64,
    /// Per block: offset of its frequency section.
    pub blk_foff: u64,
    /// Per block: bound of its contributions (`const float*`).
    pub blk_max: u64,
    /// Per document: k1 · (1 − b + b · dl / avgdl).
    pub norms: u64,
    /// Per document: the static part of bm25-static, or 0 (null).
    pub prior: u64,
    /// Global scores (early termination), or 0 (null).
    pub gs: u64,
    /// [`codec_id`] of the index.
    pub codec: u32,
    /// Documents of the index.
    pub num_docs: u32,
    /// k1 + 1.
    pub k1p1: f32,
    /// Bound of the prior before slack (alpha); 0 for bm25.
    pub prior_max: f32,
}

/// The query kernel's batch arguments (mirrors `struct BatchArgs`): device addresses of one pipeline
/// slot's descriptors, outputs and per-CTA scratch. Passed by value.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Pod, Zeroable)]
pub struct BatchArgs {
    /// The batch's [`QueryDesc`]s.
    pub queries: u64,
    /// Their [`TermDesc`]s.
    pub terms: u64,
    /// Entries at `queries`.
    pub num_queries: u32,
    /// Results per query.
    pub k: u32,
    /// [`MODE_AND`] or [`MODE_OR`].
    pub mode: u32,
    /// 1: stop on the global-score bound.
    pub early: u32,
    /// OR accumulator window in documents.
    pub window: u32,
    /// OR queries of at most this many postings are sorted, not accumulated (0: never).
    pub small_or: u32,
    /// AND steps merge when the list holds at most this many postings per candidate in range.
    pub merge_ratio: u32,
    /// 1: `out_doc`, `out_score` and `out_count` are host memory, read by the host while the kernel
    /// runs: each query's count is written after its hits, fenced, so that a count the host sees has
    /// its hits with it (0: device memory, copied back after the kernel).
    pub answers_mapped: u32,
    /// Work counter (a u32 zeroed before launch).
    pub next_query: u64,
    /// `num_queries · k` docIDs.
    pub out_doc: u64,
    /// `num_queries · k` scores.
    pub out_score: u64,
    /// Per query: hits, or [`COUNT_FAILED`].
    pub out_count: u64,
    /// Per CTA: `CHUNK · BLOCK_LEN` decoded docIDs.
    pub scratch_doc: u64,
    /// Per CTA: `CHUNK · BLOCK_LEN` decoded frequencies.
    pub scratch_tf: u64,
    /// Per CTA: [`TOPK_CAP`] keys.
    pub topbuf: u64,
    /// Per CTA: [`PHASE_COUNTERS`] u64, or 0 (no instrumentation).
    pub phase_cycles: u64,
    /// Per query cut into parts: the best k-th key of its parts so far (u64, zeroed before launch).
    pub shared_keys: u64,
    /// Per task (out_slot): two u64, the device clock in ns when a CTA took it and when its answer
    /// was written; or 0 (no instrumentation).
    pub task_ns: u64,
}

/// The index build's block-bound kernel's arguments (mirrors `struct BoundArgs`): the lists sorted by
/// term, their offsets and idf, the documents' lengths, and BM25's parameters. Passed by value.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Pod, Zeroable)]
pub struct BoundArgs {
    /// `num_terms + 1` offsets of the lists in `docs` (`const u32*`).
    pub starts: u64,
    /// `num_terms + 1` offsets of the lists' first blocks.
    pub block_starts: u64,
    /// Per list: its idf (`const float*`).
    pub idf: u64,
    /// Final docIDs, list after list.
    pub docs: u64,
    /// Frequencies beside them.
    pub tfs: u64,
    /// Per final docID: its length in tokens.
    pub lens: u64,
    /// Per block: its bound (`float*`, written).
    pub out: u64,
    /// Lists.
    pub num_terms: u32,
    /// Blocks of all lists.
    pub num_blocks: u32,
    /// BM25's k1.
    pub k1: f32,
    /// BM25's b.
    pub b: f32,
    /// The mean document length the index stores, as `f32`.
    pub avg_doc_len: f32,
    /// The padding the kernel's struct has at its end (its alignment), named so that every byte is a
    /// field; always 0, never read.
    pub _pad: u32,
}

/// The index build's SIMD-BP128 encoding kernels' arguments (mirrors `struct EncodeArgs`): the sorted
/// lists and their blocks' bounds in, the encoded blocks and their metadata out. Passed by value.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Pod, Zeroable)]
pub struct EncodeArgs {
    /// `num_terms + 1` offsets of the lists in `docs` (`const u32*`).
    pub starts: u64,
    /// `num_terms + 1` offsets of the lists' first blocks.
    pub block_starts: u64,
    /// Final docIDs, list after list.
    pub docs: u64,
    /// Frequencies beside them.
    pub tfs: u64,
    /// Per block: its bound (`const float*`).
    pub bounds: u64,
    /// `num_blocks + 1` words (`u32*`): each block's size in words, written by `simdbp_sizes`, then
    /// (scanned by the host's launch) each block's first word in `words`, the last entry their total.
    pub offsets: u64,
    /// The encoded blocks (`u32*`, written by `simdbp_pack`).
    pub words: u64,
    /// Per block: its `BlockMeta` (five words: first and last docID, offset from the list's first
    /// word, frequency section's offset, bound; written by `simdbp_pack`).
    pub meta: u64,
    /// Per list: its frequencies' sum (`unsigned long long*`, zeroed, added to by `simdbp_sizes`).
    pub cf: u64,
    /// One word, zeroed: set where a list is not strictly increasing, a docID is not below
    /// `num_docs` or a frequency is 0 (`u32*`).
    pub bad: u64,
    /// Lists.
    pub num_terms: u32,
    /// Blocks of all lists.
    pub num_blocks: u32,
    /// Documents: every docID is below it.
    pub num_docs: u32,
    /// The padding the kernel's struct has at its end (its alignment), named so that every byte is a
    /// field; always 0, never read.
    pub _pad: u32,
}

/// Bits of a key a radix sort pass of the index build orders (`RADIX_BITS`).
pub const RADIX_BITS: u32 = 8;
/// Keys a CTA of a radix sort pass orders (`SORT_TILE`); a multiple of every CTA size.
pub const SORT_TILE: u32 = 4096;

/// Declares each struct's size and field offsets once: the Rust side is checked at compile time, and
/// [`layout_checks`] gives NVRTC the same numbers to check the CUDA side.
macro_rules! layouts {
    ($($ty:ident { size: $size:expr, $($field:ident: $off:expr),+ $(,)? })+) => {
        $(
            const _: () = assert!(size_of::<$ty>() == $size);
            $(const _: () = assert!(offset_of!($ty, $field) == $off);)+
        )+
        /// (struct, size, [(field, offset)]) of every struct the kernels share, as asserted above.
        pub const LAYOUTS: &[(&str, usize, &[(&str, usize)])] = &[
            $((stringify!($ty), $size, &[$((stringify!($field), $off)),+]),)+
        ];
    };
}

layouts! {
    TermDesc {
        size: 40,
        word_base: 0, block_base: 8, num_blocks: 12, df: 16, len_words: 20, params: 24,
        slot_term: 28, weight: 32, bound_scale: 36,
    }
    QueryDesc {
        size: 36,
        term_begin: 0, num_terms: 4, out_slot: 8, slack: 12, doc_lo: 16, doc_hi: 20,
        fixed_scale: 24, fixed_unit: 28, share: 32,
    }
    IndexArgs {
        size: 88,
        words: 0, blk_first: 8, blk_last: 16, blk_off: 24, blk_foff: 32, blk_max: 40, norms: 48,
        prior: 56, gs: 64, codec: 72, num_docs: 76, k1p1: 80, prior_max: 84,
    }
    BatchArgs {
        size: 128,
        queries: 0, terms: 8, num_queries: 16, k: 20, mode: 24, early: 28, window: 32,
        small_or: 36, merge_ratio: 40, answers_mapped: 44, next_query: 48, out_doc: 56, out_score: 64, out_count: 72,
        scratch_doc: 80, scratch_tf: 88, topbuf: 96, phase_cycles: 104, shared_keys: 112,
        task_ns: 120,
    }
    BoundArgs {
        size: 80,
        starts: 0, block_starts: 8, idf: 16, docs: 24, tfs: 32, lens: 40, out: 48, num_terms: 56,
        num_blocks: 60, k1: 64, b: 68, avg_doc_len: 72, _pad: 76,
    }
    EncodeArgs {
        size: 96,
        starts: 0, block_starts: 8, docs: 16, tfs: 24, bounds: 32, offsets: 40, words: 48, meta: 56,
        cf: 64, bad: 72, num_terms: 80, num_blocks: 84, num_docs: 88, _pad: 92,
    }
}

/// The `-D` defines that give the kernels every number they share with the host, for kernels of
/// `threads` threads per CTA whose entry points are compiled for `min_ctas_and` and `min_ctas_or`
/// resident CTAs per SM. Each value is written as the kernels' source wrote it (unsigned where
/// they compare or mix it with unsigned values), so that the compiled code is the same.
pub fn defines(threads: u32, min_ctas_and: u32, min_ctas_or: u32) -> Vec<String> {
    let defines: Vec<(&str, String)> = vec![
        ("BLOCK_LEN", BLOCK_LEN.to_string()),
        ("THREADS", threads.to_string()),
        ("CPT", CANDIDATES_PER_THREAD.to_string()),
        ("TOPK_CAP", format!("{TOPK_CAP}u")),
        ("MAX_K_GPU", format!("{MAX_K_GPU}u")),
        ("MAX_WINDOW", format!("{MAX_WINDOW}u")),
        ("MAX_SMALL_OR", format!("{MAX_SMALL_OR}u")),
        ("CODEC_PFOR", format!("{CODEC_PFOR}u")),
        ("CODEC_EF", format!("{CODEC_EF}u")),
        ("CODEC_RICE", format!("{CODEC_RICE}u")),
        ("CODEC_SIMDBP", format!("{CODEC_SIMDBP}u")),
        ("MODE_AND", format!("{MODE_AND}u")),
        ("MODE_OR", format!("{MODE_OR}u")),
        ("COUNT_FAILED", format!("{COUNT_FAILED:#x}u")),
        ("NO_SHARE", format!("{NO_SHARE:#x}u")),
        ("PH_SELECT", PH_SELECT.to_string()),
        ("PH_DECODE", PH_DECODE.to_string()),
        ("PH_INTERSECT", PH_INTERSECT.to_string()),
        ("PH_SCORE", PH_SCORE.to_string()),
        ("PH_TOPK", PH_TOPK.to_string()),
        ("PH_BLOCKS", PH_BLOCKS.to_string()),
        ("PHASE_COUNTERS", PHASE_COUNTERS.to_string()),
        ("MIN_CTAS_AND", min_ctas_and.to_string()),
        ("MIN_CTAS_OR", min_ctas_or.to_string()),
        ("RADIX_BITS", format!("{RADIX_BITS}u")),
        ("SORT_TILE", format!("{SORT_TILE}u")),
    ];
    defines
        .into_iter()
        .map(|(name, value)| format!("-D{name}={value}"))
        .collect()
}

/// CUDA source, appended to the kernels' translation unit, that asserts at compile time what the
/// host assumes of it: every shared struct's size and field offsets ([`LAYOUTS`]), and the sizes of
/// the shared memory the host computes for it (`CHUNK`, `OR_STATE_WORDS`, for `threads`). It
/// declares nothing, so the compiled code is the same with it.
pub fn layout_checks(threads: u32) -> String {
    let mut out = struct_checks();
    out.push_str(&format!(
        "static_assert(CHUNK == {}, \"CHUNK differs from the host's\");\n",
        threads as usize * CANDIDATES_PER_THREAD
    ));
    out.push_str(&format!(
        "static_assert(OR_STATE_WORDS * 4u == {}u, \"OR_STATE_WORDS differs from the host's or_state_bytes\");\n",
        or_state_bytes(threads)
    ));
    out
}

/// CUDA source, appended to the index build's translation unit (`kernels/build.cu`), that asserts every
/// shared struct's size and field offsets as [`layout_checks`] does; the query kernels' sizes are not
/// part of it.
pub fn build_layout_checks() -> String {
    struct_checks()
}

/// The `static_assert`s of every struct's size and field offsets ([`LAYOUTS`]).
fn struct_checks() -> String {
    let mut out = String::from("#line 1 \"crates/gpu/src/abi.rs (layout_checks)\"\n");
    for (ty, size, _) in LAYOUTS {
        out.push_str(&format!(
            "static_assert(sizeof({ty}) == {size}, \"{ty}: size differs from abi.rs\");\n"
        ));
    }
    // NVRTC 13.0 has no __builtin_offsetof (13.5 has): the offsets are checked where it is known.
    out.push_str("#if defined(__has_builtin)\n#if __has_builtin(__builtin_offsetof)\n");
    for (ty, _, fields) in LAYOUTS {
        for (field, off) in *fields {
            if field.starts_with('_') {
                continue; // padding: named on the host only
            }
            out.push_str(&format!(
                "static_assert(__builtin_offsetof({ty}, {field}) == {off}, \"{ty}::{field}: offset differs from abi.rs\");\n"
            ));
        }
    }
    out.push_str("#endif\n#endif\n");
    out
}

/// An OR query's per-term arrays (`OrState` in the kernels: six of `threads` words and one word, the
/// window selection's two halves included), rounded up to 16 bytes (`OR_STATE_WORDS · 4`). They are
/// dynamic shared memory, so that AND launches do not hold them.
pub fn or_state_bytes(threads: u32) -> u32 {
    ((6 * threads + 1 + 3) & !3) * 4
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The little-endian bytes of `words` (u32 or u64 each, as `(value, width)`), concatenated.
    fn le(words: &[(u64, usize)]) -> Vec<u8> {
        words
            .iter()
            .flat_map(|&(v, w)| v.to_le_bytes()[..w].to_vec())
            .collect()
    }

    #[test]
    fn term_desc_bytes_are_the_kernel_fields_in_order() {
        let t = TermDesc {
            word_base: 0x0102_0304_0506_0708,
            block_base: 9,
            num_blocks: 10,
            df: 11,
            len_words: 12,
            params: 13,
            slot_term: 14,
            weight: 1.5,
            bound_scale: -1.0,
        };
        let want = le(&[
            (0x0102_0304_0506_0708, 8),
            (9, 4),
            (10, 4),
            (11, 4),
            (12, 4),
            (13, 4),
            (14, 4),
            (1.5f32.to_bits() as u64, 4),
            ((-1.0f32).to_bits() as u64, 4),
        ]);
        assert_eq!(bytemuck::bytes_of(&t), &want[..]);
    }

    #[test]
    fn query_desc_bytes_are_the_kernel_fields_in_order() {
        let q = QueryDesc {
            term_begin: 1,
            num_terms: 2,
            out_slot: 3,
            slack: 0.25,
            doc_lo: 5,
            doc_hi: u32::MAX,
            fixed_scale: 1024.0,
            fixed_unit: 1.0 / 1024.0,
            share: 7,
        };
        let want = le(&[
            (1, 4),
            (2, 4),
            (3, 4),
            (0.25f32.to_bits() as u64, 4),
            (5, 4),
            (u32::MAX as u64, 4),
            (1024f32.to_bits() as u64, 4),
            ((1.0f32 / 1024.0).to_bits() as u64, 4),
            (7, 4),
        ]);
        assert_eq!(bytemuck::bytes_of(&q), &want[..]);
    }

    #[test]
    fn index_args_bytes_are_the_kernel_fields_in_order() {
        let ix = IndexArgs {
            words: 1,
            blk_first: 2,
            blk_last: 3,
            blk_off: 4,
            blk_foff: 5,
            blk_max: 6,
            norms: 7,
            prior: 8,
            gs: 9,
            codec: CODEC_SIMDBP,
            num_docs: 11,
            k1p1: 2.2,
            prior_max: 0.5,
        };
        let mut words: Vec<(u64, usize)> = (1..=9).map(|a| (a, 8)).collect();
        words.extend([
            (3, 4),
            (11, 4),
            (2.2f32.to_bits() as u64, 4),
            (0.5f32.to_bits() as u64, 4),
        ]);
        assert_eq!(bytemuck::bytes_of(&ix), &le(&words)[..]);
    }

    #[test]
    fn batch_args_bytes_are_the_kernel_fields_in_order_with_zero_padding() {
        let ba = BatchArgs {
            queries: 0x10,
            terms: 0x20,
            num_queries: 3,
            k: 10,
            mode: MODE_OR,
            early: 1,
            window: 16384,
            small_or: 4096,
            merge_ratio: 2,
            answers_mapped: 1,
            next_query: 0x30,
            out_doc: 0x40,
            out_score: 0x50,
            out_count: 0x60,
            scratch_doc: 0x70,
            scratch_tf: 0x80,
            topbuf: 0x90,
            phase_cycles: 0,
            shared_keys: 0xa0,
            task_ns: 0xb0,
        };
        let mut words = vec![(0x10, 8), (0x20, 8)];
        words.extend([3, 10, 1, 1, 16384, 4096, 2, 1].map(|v| (v, 4)));
        words.extend([0x30, 0x40, 0x50, 0x60, 0x70, 0x80, 0x90, 0, 0xa0, 0xb0].map(|v| (v, 8)));
        assert_eq!(bytemuck::bytes_of(&ba), &le(&words)[..]);
    }

    #[test]
    fn layouts_list_every_field_once_in_offset_order() {
        for (ty, size, fields) in LAYOUTS {
            let offsets: Vec<usize> = fields.iter().map(|f| f.1).collect();
            assert!(offsets.windows(2).all(|w| w[0] < w[1]), "{ty}: {offsets:?}");
            assert!(*offsets.last().unwrap() < *size, "{ty}");
        }
        let names: Vec<&str> = LAYOUTS.iter().map(|l| l.0).collect();
        assert_eq!(
            names,
            [
                "TermDesc",
                "QueryDesc",
                "IndexArgs",
                "BatchArgs",
                "BoundArgs",
                "EncodeArgs"
            ]
        );
    }

    #[test]
    fn defines_give_each_shared_number_once_as_the_kernels_wrote_it() {
        let d = defines(256, 5, 3);
        for want in [
            "-DBLOCK_LEN=128",
            "-DTHREADS=256",
            "-DCPT=4",
            "-DTOPK_CAP=36864u",
            "-DMAX_K_GPU=1024u",
            "-DMAX_WINDOW=32768u",
            "-DMAX_SMALL_OR=4096u",
            "-DCODEC_PFOR=0u",
            "-DCODEC_EF=1u",
            "-DCODEC_RICE=2u",
            "-DCODEC_SIMDBP=3u",
            "-DMODE_AND=0u",
            "-DMODE_OR=1u",
            "-DCOUNT_FAILED=0xffffffffu",
            "-DPH_SELECT=0",
            "-DPH_BLOCKS=5",
            "-DPHASE_COUNTERS=8",
            "-DMIN_CTAS_AND=5",
            "-DMIN_CTAS_OR=3",
        ] {
            assert!(d.iter().any(|x| x == want), "{want} missing from {d:?}");
        }
        let mut names: Vec<&str> = d.iter().map(|x| x.split('=').next().unwrap()).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), d.len(), "a define given twice: {d:?}");
    }

    #[test]
    fn layout_checks_assert_every_kernel_field() {
        let c = layout_checks(128);
        assert!(c.contains("static_assert(sizeof(BatchArgs) == 128"));
        assert!(c.contains("__builtin_offsetof(BatchArgs, next_query) == 48"));
        assert!(!c.contains("_pad"), "the padding is the host's name only");
        assert!(c.contains("#if __has_builtin(__builtin_offsetof)"));
        assert!(c.contains("static_assert(CHUNK == 512"));
        assert!(c.contains("OR_STATE_WORDS * 4u == 3088u"));
        let fields: usize = LAYOUTS.iter().map(|l| l.2.len()).sum();
        // One per field but the two paddings.
        assert_eq!(c.matches("__builtin_offsetof(").count(), fields - 2);
        let b = build_layout_checks();
        assert!(b.contains("static_assert(sizeof(BoundArgs) == 80"));
        assert!(b.contains("__builtin_offsetof(BoundArgs, avg_doc_len) == 72"));
        assert!(b.contains("static_assert(sizeof(EncodeArgs) == 96"));
        assert!(b.contains("__builtin_offsetof(EncodeArgs, num_docs) == 88"));
        assert!(!b.contains("CHUNK"), "the build's unit has no query kernels");
    }

    #[test]
    fn codec_ids_are_distinct() {
        let ids: Vec<u32> = Codec::ALL.iter().map(|&c| codec_id(c)).collect();
        let mut sorted = ids.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), ids.len());
    }
}
