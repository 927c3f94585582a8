// warpsearch GPU kernels: block decode, exact top-k, and the batched AND / OR query kernel.
//
// Compiled once at start-up by NVRTC (crates/gpu/src/kernels.rs) with --fmad=false and IEEE division, so
// that every float operation rounds exactly as the CPU engine's does: scores are bit-identical to the CPU
// oracle's. docs/kernels.md describes each kernel's inputs, outputs, grid shape and invariants.
//
// Layout conventions (all little-endian u32 words, as in the on-disk index, docs/format.md):
// - a posting list is cut into blocks of 128 postings; block b of a list has skip data first/last docID,
//   its word offset from the list's start and the offset of its frequency section;
// - PForDelta, Elias-Fano, Rice and SIMD-BP128 blocks are decoded by one warp each (decode_block_warp).

#define BLOCK_LEN 128
#ifndef THREADS
#define THREADS 256  // set at start-up from WARPSEARCH_GPU_THREADS (crates/gpu/src/device.rs)
#endif
#define WARPS (THREADS / 32)
#define CPT 4                    // AND candidates per thread
#define CHUNK (THREADS * CPT)    // AND candidates per step: WARPS blocks of the shortest list
#define FULL_MASK 0xffffffffu
#define TOPK_CAP 36864u     // entries of the per-CTA running top-k buffer (k <= MAX_K_GPU, + a window)
#define MAX_K_GPU 1024u     // the final sort runs in shared memory over this many keys
#define MAX_WINDOW 32768u   // OR accumulator window (shared floats)
#define MAX_SMALL_OR 4096u  // postings of the largest OR query the sort path takes
#define SMALL_OR_BLOCKS 256u  // blocks of the largest OR query the sort path takes

#define CODEC_PFOR 0u
#define CODEC_EF 1u
#define CODEC_RICE 2u
#define CODEC_SIMDBP 3u

#define MODE_AND 0u
#define MODE_OR 1u

#define COUNT_FAILED 0xffffffffu

// Minimum resident CTAs per SM asked of the compiler for the query kernel (caps its registers per thread);
// set at start-up from WARPSEARCH_GPU_MIN_CTAS (crates/gpu/src/device.rs).
#ifndef MIN_CTAS
#define MIN_CTAS 1
#endif

typedef unsigned int u32;
typedef unsigned long long u64;

// ---------------------------------------------------------------------------------------------------------
// Descriptors shared with the host (crates/gpu/src/batch.rs mirrors them with #[repr(C)]).

struct TermDesc {
    u64 word_base;    // offset of the list's first word in the postings buffer
    u32 block_base;   // index of the list's first block in the block arrays
    u32 num_blocks;
    u32 df;
    u32 len_words;    // words of the whole list (end of the last block)
    u32 params;       // doc codec parameter | freq parameter << 8
    u32 slot_term;    // position (in this query's processing order) of the term whose plan slot is this index
    float weight;     // multiplies BM25's tf part
    float bound_scale; // block max_score * bound_scale bounds a contribution; < 0: no block bounds
};

struct QueryDesc {
    u32 term_begin;   // first TermDesc of the query (terms sorted by df, shortest first)
    u32 num_terms;
    u32 out_slot;     // results go to out_*[out_slot * k ..]
    float slack;      // relative rounding slack of bounds for this query (Plan::slack)
    u32 doc_lo;       // only documents in [doc_lo, doc_hi] count: a long query is cut into docID ranges,
    u32 doc_hi;       // one CTA each, whose top-k lists the host merges
};

struct IndexArgs {
    const u32* words;
    const u32* blk_first;
    const u32* blk_last;
    const u32* blk_off;
    const u32* blk_foff;
    const float* blk_max;
    const float* norms;   // per-document k1 * (1 - b + b * dl / avgdl)
    const float* prior;   // per-document static part of bm25-static, or null
    const float* gs;      // global scores (early termination), or null
    u32 codec;
    u32 num_docs;
    float k1p1;           // k1 + 1
    float prior_max;      // bound of the prior before slack (alpha), 0 for bm25
};

struct BatchArgs {
    const QueryDesc* queries;
    const TermDesc* terms;
    u32 num_queries;
    u32 k;
    u32 mode;             // MODE_AND or MODE_OR: the host launches search_and or search_or for it
    u32 early;            // stop on the global-score bound (papers/000 Algorithm 1)
    u32 window;           // OR accumulator window in documents (<= MAX_WINDOW, multiple of THREADS)
    u32 small_or;         // OR queries of at most this many postings are sorted, not accumulated (0: never)
    u32 merge_ratio;      // AND steps merge (merge-find, merge-path) when the list's postings in the
                          // candidates' range are at most merge_ratio per candidate; else binary search
    u32* next_query;      // work counter (zeroed before launch)
    u32* out_doc;
    float* out_score;
    u32* out_count;       // per query: hits, or COUNT_FAILED
    u32* scratch_doc;     // per CTA: CHUNK * BLOCK_LEN decoded docIDs
    u32* scratch_tf;      // per CTA: CHUNK * BLOCK_LEN decoded frequencies
    u64* topbuf;          // per CTA: TOPK_CAP keys
    u64* phase_cycles;    // per CTA: 8 counters, or null (no instrumentation)
};

// ---------------------------------------------------------------------------------------------------------
// Small helpers.

__device__ __forceinline__ u32 packed_words(u32 n, u32 b) { return (n * b + 31u) / 32u; }

__device__ __forceinline__ u32 low_mask(u32 b) { return b >= 32u ? FULL_MASK : ((1u << b) - 1u); }

// Value i of a sequence packed LSB-first with width b.
__device__ __forceinline__ u32 unpack_one(const u32* w, u32 b, u32 i) {
    if (b == 0u) return 0u;
    u32 bit = i * b, wi = bit >> 5, s = bit & 31u;
    u32 v = w[wi] >> s;
    if (s + b > 32u) v |= w[wi + 1] << (32u - s);
    return v & low_mask(b);
}

__device__ __forceinline__ u32 warp_inclusive_scan(u32 v) {
    u32 lane = threadIdx.x & 31u;
    for (u32 d = 1; d < 32; d <<= 1) {
        u32 o = __shfl_up_sync(FULL_MASK, v, d);
        if (lane >= d) v += o;
    }
    return v;
}

// Exclusive prefix sum over the CTA; every thread must call it. Returns the thread's offset and sets
// *total. Uses `sh` (WARPS + 1 words of shared memory).
__device__ u32 block_exclusive_scan(u32 v, u32* sh, u32* total) {
    u32 lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
    u32 inc = warp_inclusive_scan(v);
    if (lane == 31u) sh[warp] = inc;
    __syncthreads();
    if (warp == 0) {
        u32 s = lane < WARPS ? sh[lane] : 0u;
        u32 si = warp_inclusive_scan(s);
        if (lane < WARPS) sh[lane] = si - s;
        if (lane == WARPS - 1) sh[WARPS] = si;
    }
    __syncthreads();
    u32 r = sh[warp] + inc - v;
    *total = sh[WARPS];
    __syncthreads();
    return r;
}

// Ordered key of a hit: larger key = better (higher score, then smaller docID).
__device__ __forceinline__ u64 hit_key(float score, u32 doc) {
    u32 u = __float_as_uint(score);
    u = (u & 0x80000000u) ? ~u : (u | 0x80000000u);
    return ((u64)u << 32) | (u64)(~doc);
}
__device__ __forceinline__ float key_score(u64 key) {
    u32 u = (u32)(key >> 32);
    u = (u & 0x80000000u) ? (u & 0x7fffffffu) : ~u;
    return __uint_as_float(u);
}
__device__ __forceinline__ u32 key_doc(u64 key) { return ~(u32)key; }

// Postings in block b (0-based within the list) of list t: BLOCK_LEN but for the list's last block.
__device__ __forceinline__ u32 block_postings(const TermDesc& t, u32 b) {
    return b + 1u == t.num_blocks ? t.df - b * BLOCK_LEN : BLOCK_LEN;
}

// First index in [0, n) with a[i] >= x, or n.
// Block `bi` (global block index) of list `t` as its skip data describe it: its words, postings,
// length in words, the offset of its frequency section, and its first and last docIDs. False where the
// skip data describe no block (no words, no postings or more than a block's, a frequency section past
// the end): every decoder fails such a block, as the CPU's does.
struct BlockSpan {
    const u32* blk;
    u32 n, len, foff, first, last;
};

__device__ __forceinline__ bool block_span(const IndexArgs& ix, const TermDesc& t, u32 bi, BlockSpan* sp) {
    u32 local = bi - t.block_base;
    u32 off = ix.blk_off[bi];
    u32 end = local + 1 == t.num_blocks ? t.len_words : ix.blk_off[bi + 1];
    sp->blk = ix.words + t.word_base + off;
    sp->n = block_postings(t, local);
    sp->len = end - off;
    sp->foff = ix.blk_foff[bi];
    sp->first = ix.blk_first[bi];
    sp->last = ix.blk_last[bi];
    return end > off && sp->n != 0u && sp->n <= BLOCK_LEN && sp->foff <= sp->len;
}

__device__ __forceinline__ u32 lower_bound(const u32* a, u32 n, u32 x) {
    u32 lo = 0, hi = n;
    while (lo < hi) {
        u32 mid = (lo + hi) >> 1;
        if (a[mid] < x) lo = mid + 1; else hi = mid;
    }
    return lo;
}

// Parallel merge of two sorted arrays a (na) and b (nb) by merge path (papers/004 section 3.1.2, after
// Green et al.'s GPU MergePath): the merged sequence, a first on ties, is cut into equal parts, one per
// thread; each thread finds where its cross diagonal meets the path by binary search, then merges its part
// sequentially. visit(i, j) is called exactly once for every i < na, with j = lower_bound(b, a[i]) (the
// number of b elements below a[i]), so it serves Parallel Merge Find (papers/001 section 7.1) as well as
// intersection (a[i] is in b iff j < nb and b[j] == a[i]). No barrier inside: the caller synchronises.
template <typename Visit>
__device__ void merge_path(const u32* a, u32 na, const u32* b, u32 nb, Visit visit) {
    u32 total = na + nb;
    u32 per = (total + THREADS - 1) / THREADS;
    u32 k0 = min(threadIdx.x * per, total), k1 = min(k0 + per, total);
    u32 lo = k0 > nb ? k0 - nb : 0u, hi = min(k0, na);
    while (lo < hi) {
        u32 mid = (lo + hi) >> 1;
        if (a[mid] <= b[k0 - 1u - mid]) lo = mid + 1u; else hi = mid;
    }
    u32 i = lo, j = k0 - lo;
    for (u32 k = k0; k < k1; k++) {
        if (i < na && (j >= nb || a[i] <= b[j])) {
            visit(i, j);
            i++;
        } else {
            j++;
        }
    }
}

// ---------------------------------------------------------------------------------------------------------
// Block decode, one warp per block. `blk` is the block's words, `end` its length in words, `foff` the
// start of its frequency section, n its postings. Writes docIDs (if out_doc) and frequencies (if out_tf)
// for positions 0..n. Returns false (on every lane) if the block is malformed; the query then fails and is
// answered on the CPU, which reports the corruption.

// PForDelta exceptions (crates/codec/src/pfor.rs): the level-1 slots' exception positions and high bits are
// two arrays, each PForDelta again with its own width and exceptions, whose exceptions in turn are two
// plain arrays (no further nesting). The warp decodes the level-1 arrays and patches the slots together:
// lanes unpack the arrays, a warp scan turns the position gaps into slots, and each lane patches its own
// exceptions (slots are distinct, so no two lanes write one slot). Exceptions of the exception arrays are
// rarer still; one lane patches those. `xs` is per-warp shared scratch of 4 * BLOCK_LEN words. Every
// check of the CPU decoder is made, so a malformed block fails here as it fails there.

// Gaps to positions, by the whole warp (n <= BLOCK_LEN = 128): lane l takes elements 4l .. 4l+3 of
// v[0..n) as distances g[j] = v[i] + (i > 0 ? 1 : 0) (0 past n) and returns the sum of the distances
// before its first element, so that adding g[0..j] to it gives element 4l+j's position. u64 sums: a
// malformed block's gaps may add up past 2^32, which the callers check.
__device__ u64 gap_scan4(const u32* v, u32 n, u64 g[4]) {
    u32 lane = threadIdx.x & 31u;
    u64 sum = 0;
    for (u32 j = 0; j < 4; j++) {
        u32 i = lane * 4 + j;
        g[j] = i < n ? (u64)v[i] + (i > 0 ? 1ull : 0ull) : 0ull;
        sum += g[j];
    }
    u64 inc = sum;
    for (u32 d = 1; d < 32; d <<= 1) {
        u64 o = __shfl_up_sync(FULL_MASK, inc, d);
        if (lane >= d) inc += o;
    }
    return inc - sum;
}

// An innermost array: header (width, zero exceptions), then n values.
__device__ bool pfor_flat_array(const u32* w, u32 end, u32* pos, u32* out, u32 n) {
    if (*pos >= end) return false;
    u32 h = w[*pos];
    u32 b = h & 0xffu;
    if ((h >> 8) != 0u || b > 32u || *pos + 1u + packed_words(n, b) > end) return false;
    for (u32 i = 0; i < n; i++) out[i] = unpack_one(w + *pos + 1u, b, i);
    *pos += 1u + packed_words(n, b);
    return true;
}

// Patches exceptions into out, one lane: positions are gaps between exception slots, highs are (high
// bits - 1).
__device__ bool pfor_patch(u32* out, u32 n, u32 b, const u32* positions, const u32* highs, u32 exc) {
    u32 at = 0;
    for (u32 e = 0; e < exc; e++) {
        at += positions[e] + (e > 0 ? 1u : 0u);
        if (at >= n) return false;
        u64 v = (u64)out[at] | (((u64)highs[e] + 1ull) << b);
        if (v > 0xffffffffull) return false;
        out[at] = (u32)v;
    }
    return true;
}

// The same, by the whole warp: lane l takes exceptions 4l .. 4l+3 (exc <= BLOCK_LEN = 128).
__device__ bool pfor_patch_warp(u32* out, u32 n, u32 b, const u32* positions, const u32* highs, u32 exc) {
    u32 lane = threadIdx.x & 31u;
    u64 g[4];
    u64 at = gap_scan4(positions, exc, g);
    bool ok = true;
    for (u32 j = 0; j < 4; j++) {
        u32 e = lane * 4 + j;
        at += g[j];
        if (e < exc) {
            u64 v = at < n ? (u64)out[at] | (((u64)highs[e] + 1ull) << b) : 0ull;
            if (at >= n || v > 0xffffffffull) ok = false;
            else out[at] = (u32)v;
        }
    }
    ok = __all_sync(FULL_MASK, ok);
    __syncwarp();
    return ok;
}

// A middle array, by the whole warp: header (width, exceptions), n values, then two innermost arrays if
// exceptions. *pos advances the same on every lane.
__device__ bool pfor_mid_array_warp(const u32* w, u32 end, u32* pos, u32* out, u32 n, u32* p2, u32* h2) {
    u32 lane = threadIdx.x & 31u;
    if (*pos >= end) return false;
    u32 h = w[*pos];
    u32 b = h & 0xffu, exc = (h >> 8) & 0xffu;
    if ((h >> 16) != 0u || b > 32u || *pos + 1u + packed_words(n, b) > end) return false;
    for (u32 i = lane; i < n; i += 32) out[i] = unpack_one(w + *pos + 1u, b, i);
    *pos += 1u + packed_words(n, b);
    __syncwarp();
    if (exc == 0u) return true;
    if (b >= 32u || exc > n) return false;
    bool ok = true;
    u32 p = *pos;
    if (lane == 0)
        ok = pfor_flat_array(w, end, &p, p2, exc) && pfor_flat_array(w, end, &p, h2, exc) &&
             pfor_patch(out, n, b, p2, h2, exc);
    __syncwarp();
    *pos = __shfl_sync(FULL_MASK, p, 0);
    return __shfl_sync(FULL_MASK, ok ? 1u : 0u, 0) != 0u;
}

// Level-1 slots of one section, by the whole warp. Values land in out[0..n).
__device__ bool pfor_section_warp(const u32* w, u32 end, u32 pos, u32 b, u32 exc, u32* out, u32 n, u32* xs) {
    u32 lane = threadIdx.x & 31u;
    bool ok = b <= 32u && pos + packed_words(n, b) <= end;
    if (ok)
        for (u32 i = lane; i < n; i += 32) out[i] = unpack_one(w + pos, b, i);
    __syncwarp();
    if (!ok || exc == 0u) return ok;
    if (b >= 32u || exc > n) return false;
    u32 p = pos + packed_words(n, b);
    u32 *p1 = xs, *h1 = xs + BLOCK_LEN, *p2 = xs + 2 * BLOCK_LEN, *h2 = xs + 3 * BLOCK_LEN;
    return pfor_mid_array_warp(w, end, &p, p1, exc, p2, h2) && pfor_mid_array_warp(w, end, &p, h1, exc, p2, h2) &&
           pfor_patch_warp(out, n, b, p1, h1, exc);
}

// docIDs from gap values in out[0..n) (gap 0 for the first): d[i] = first + i + sum_{j<=i} gap[j].
__device__ bool prefix_docs_warp(u32* out, u32 n, u32 first, u32 last) {
    u32 lane = threadIdx.x & 31u;
    u64 g[4];
    u64 acc = (u64)first + gap_scan4(out, n, g);
    bool ok = true;
    __syncwarp();
    for (u32 j = 0; j < 4; j++) {
        u32 i = lane * 4 + j;
        acc += g[j];
        if (i < n) {
            if (acc > 0xffffffffull) ok = false;
            out[i] = (u32)acc;
        }
    }
    __syncwarp();
    ok = __all_sync(FULL_MASK, ok);
    // The block must end at the skip data's last docID (and start at its first).
    return ok && out[0] == first && out[n - 1] == last;
}

// Elias-Fano of n values in [0, upper] (crates/codec/src/eliasfano.rs): low bits packed, then the high
// bits' unary bucket stream. One lane per high word; a warp scan of popcounts gives each lane its rank.
__device__ bool ef_decode_warp(const u32* w, u32 end, u32 upper, u32* out, u32 n) {
    u32 lane = threadIdx.x & 31u;
    u64 ratio = (u64)upper / n;
    u32 low = ratio == 0 ? 0u : 63u - __clzll((long long)ratio);
    u32 lw = packed_words(n, low);
    u64 high_len = (u64)n + ((u64)upper >> low) + 1ull;
    u32 hw = (u32)((high_len + 31ull) / 32ull);
    if ((u64)lw + hw > end) return false;
    for (u32 i = lane; i < n; i += 32) out[i] = unpack_one(w, low, i);
    __syncwarp();
    u32 base = 0;
    bool ok = true;
    for (u32 c = 0; c < hw; c += 32) {
        u32 wi = c + lane;
        u32 word = 0;
        if (wi < hw) {
            word = w[lw + wi];
            u64 valid = high_len - (u64)wi * 32ull;
            if (valid < 32ull) word &= (1u << valid) - 1u;
        }
        u32 cnt = __popc(word);
        u32 inc = warp_inclusive_scan(cnt);
        u32 i = base + inc - cnt;
        while (word) {
            u32 bit = __ffs(word) - 1u;
            word &= word - 1u;
            if (i >= n) { ok = false; break; }
            u64 pos = (u64)wi * 32ull + bit;
            u64 value = ((pos - i) << low) | (u64)out[i];
            if (value > upper) { ok = false; break; }
            out[i] = (u32)value;  // only this lane touches element i
            i++;
        }
        base += __shfl_sync(FULL_MASK, inc, 31);
    }
    __syncwarp();
    ok = __all_sync(FULL_MASK, ok);
    return ok && base == n;
}

// Rice: binary parts packed with width b, then unary quotients (ones ended by a zero). The positions of
// the first n zeros give the quotients: q[i] = z[i] - z[i-1] - 1. `zpos` is per-warp shared scratch.
__device__ bool rice_decode_warp(const u32* w, u32 end, u32 b, u32* out, u32 n, u32* zpos) {
    u32 lane = threadIdx.x & 31u;
    u32 bw = packed_words(n, b);
    if (b > 32u || bw > end) return false;
    for (u32 i = lane; i < n; i += 32) out[i] = unpack_one(w, b, i);
    u32 uw = end - bw;
    u32 found = 0;
    for (u32 c = 0; c < uw && found < n; c += 32) {
        u32 wi = c + lane;
        u32 zeros = wi < uw ? ~w[bw + wi] : 0u;
        u32 cnt = __popc(zeros);
        u32 inc = warp_inclusive_scan(cnt);
        u32 z = found + inc - cnt;
        while (zeros && z < n) {
            u32 bit = __ffs(zeros) - 1u;
            zeros &= zeros - 1u;
            zpos[z] = wi * 32u + bit;
            z++;
        }
        found += __shfl_sync(FULL_MASK, inc, 31);
    }
    __syncwarp();
    if (found < n) return false;
    bool ok = true;
    for (u32 i = lane; i < n; i += 32) {
        u32 prev = i == 0 ? 0u : zpos[i - 1] + 1u;
        u64 q = (u64)(zpos[i] - prev);
        u64 v = (q << b) | (u64)out[i];
        if (b >= 32u && q != 0) ok = false;
        if (v > 0xffffffffull) ok = false;
        out[i] = (u32)v;
    }
    __syncwarp();
    return __all_sync(FULL_MASK, ok);
}

// SIMD-BP128 (crates/codec/src/simdbp.rs): one header word (docID width | frequency width << 8), then the
// docID section, then the frequency section. A full block's sections are BitPacker4x's: 128 values in four
// interleaved 32-bit lanes, value i in lane i % 4 at position i / 4, each lane packed LSB-first and its
// words at every fourth word; docIDs as gaps minus one (the first 0), frequencies minus one. A shorter
// block packs each section plainly (unpack_one). Every lane decodes its values independently: no
// exceptions, no scan besides the docIDs' prefix sum.
__device__ __forceinline__ u32 bp4_one(const u32* w, u32 b, u32 i) {
    if (b == 0u) return 0u;
    u32 lane = i & 3u, bit = (i >> 2) * b, wi = bit >> 5, s = bit & 31u;
    u32 v = w[wi * 4u + lane] >> s;
    if (s + b > 32u) v |= w[(wi + 1u) * 4u + lane] << (32u - s);
    return v & low_mask(b);
}

// Words of a section of n values of width b: BitPacker4x's 4 * b for a full block, else plainly packed.
__device__ __forceinline__ u32 simdbp_words(u32 n, u32 b) { return n == BLOCK_LEN ? 4u * b : packed_words(n, b); }

__device__ bool simdbp_section_warp(const u32* blk, u32 from, u32 to, u32 b, u32* out, u32 n) {
    u32 lane = threadIdx.x & 31u;
    bool full = n == BLOCK_LEN;
    if (b > 32u || from + simdbp_words(n, b) > to) return false;
    const u32* w = blk + from;
    for (u32 i = lane; i < n; i += 32) out[i] = full ? bp4_one(w, b, i) : unpack_one(w, b, i);
    return true;
}

// A SIMD-BP128 block's header: the widths of its docID section (*db) and frequency section (*fb); false
// where its unused bits are set, a width passes 32, or the frequency section does not start where the
// docID section ends (crates/codec/src/simdbp.rs checks the same). Both decoders take the header here.
__device__ __forceinline__ bool simdbp_header(const u32* blk, u32 n, u32 foff, u32* db, u32* fb) {
    u32 header = blk[0];
    *db = header & 0xffu;
    *fb = (header >> 8) & 0xffu;
    return (header >> 16) == 0u && *db <= 32u && *fb <= 32u && foff == 1u + simdbp_words(n, *db);
}

__device__ bool simdbp_decode_warp(const u32* blk, u32 len, u32 foff, u32 first, u32 last, u32 n, u32* out_doc,
                                   u32* out_tf) {
    u32 db, fb;
    if (!simdbp_header(blk, n, foff, &db, &fb)) return false;
    bool ok = true;
    if (out_doc) {
        ok = simdbp_section_warp(blk, 1u, foff, db, out_doc, n);
        __syncwarp();
        if (ok) ok = prefix_docs_warp(out_doc, n, first, last);
    }
    if (ok && out_tf) ok = simdbp_section_warp(blk, foff, len, fb, out_tf, n);
    return ok;
}

// Decodes SIMD-BP128 block `bi` (global block index) of list `t` into registers, by the whole warp: lane l
// holds postings 4l .. 4l+3 (doc[j], tf[j]; past the block's n postings doc[j] is 0 and tf[j] 1, read by
// no caller) and the block's n in *count. The shape and header are checked by the helpers the
// memory-writing decoder uses (block_span, simdbp_header), the docIDs as prefix_docs_warp checks them, so
// a malformed block fails here as it fails there (and on the CPU); returns the same verdict on every lane.
// Nothing goes through memory: a full block's four values of a lane are adjacent words of its
// BitPacker4x section (value i in SIMD lane i % 4 at position i / 4), loaded together.
__device__ bool simdbp_block_regs(const IndexArgs& ix, const TermDesc& t, u32 bi, u32 doc[4], u32 tf[4],
                                  u32* count) {
    u32 lane = threadIdx.x & 31u;
    BlockSpan sp;
    bool shaped = block_span(ix, t, bi, &sp);
    u32 n = sp.n, foff = sp.foff, first = sp.first, last = sp.last;
    const u32* blk = sp.blk;
    *count = n;
    u32 db, fb;
    if (!shaped || !simdbp_header(blk, n, foff, &db, &fb) || foff + simdbp_words(n, fb) > sp.len) return false;
    bool full = n == BLOCK_LEN;
    // Sums in u32, wrapping: a step of the true (unbounded) sums is one gap, 1 to 2^32, so a sum that
    // passed 2^32 shows as a docID not above the one before it. Strictly increasing docIDs from `first`
    // to `last` are therefore prefix_docs_warp's check (no sum past 2^32 - 1, the skip data's ends).
    u32 g[4], sum = 0u;
    bool ok = true;
#pragma unroll
    for (u32 j = 0; j < 4; j++) {
        u32 i = lane * 4u + j;
        u32 v = 0u, f = 0u;
        if (i < n) {
            v = full ? bp4_one(blk + 1u, db, i) : unpack_one(blk + 1u, db, i);
            f = full ? bp4_one(blk + foff, fb, i) : unpack_one(blk + foff, fb, i);
            if (f == FULL_MASK) ok = false;
        }
        g[j] = i < n ? v + (i > 0u ? 1u : 0u) : 0u;
        sum += g[j];
        tf[j] = f + 1u;
    }
    u32 inc = warp_inclusive_scan(sum);
    u32 acc = first + (inc - sum);
    // The previous lane's last docID (lane 0 starts at `first`, checked as such).
    u32 prev = __shfl_up_sync(FULL_MASK, first + inc, 1);
#pragma unroll
    for (u32 j = 0; j < 4; j++) {
        u32 i = lane * 4u + j;
        acc += g[j];
        doc[j] = i < n ? acc : 0u;
        if (i < n) {
            // The block must start at the skip data's first docID and end at its last.
            if ((i == 0u && acc != first) || (i > 0u && acc <= prev) || (i + 1u == n && acc != last)) ok = false;
            prev = acc;
        }
    }
    return __all_sync(FULL_MASK, ok);
}

// Decodes block `bi` (global block index) of list `t`. `xs` is per-warp shared scratch of 4 * BLOCK_LEN.
__device__ bool decode_block_warp(const IndexArgs& ix, const TermDesc& t, u32 bi, u32* out_doc, u32* out_tf,
                                  u32* xs) {
    BlockSpan sp;
    if (!block_span(ix, t, bi, &sp)) return false;
    const u32* blk = sp.blk;
    u32 n = sp.n, len = sp.len, foff = sp.foff, first = sp.first, last = sp.last;
    u32 dp = t.params & 0xffu, fp = (t.params >> 8) & 0xffu;
    bool ok = true;
    if (ix.codec == CODEC_PFOR) {
        u32 header = blk[0];
        if (out_doc) {
            ok = pfor_section_warp(blk, foff, 1, dp, header & 0xffu, out_doc, n, xs);
            if (ok) ok = prefix_docs_warp(out_doc, n, first, last);
        }
        if (ok && out_tf) ok = pfor_section_warp(blk, len, foff, fp, (header >> 8) & 0xffu, out_tf, n, xs);
    } else if (ix.codec == CODEC_EF) {
        if (out_doc) {
            if (last < first) return false;
            ok = ef_decode_warp(blk, foff, last - first, out_doc, n);
            __syncwarp();
            if (ok) {
                u32 lane = threadIdx.x & 31u;
                bool inc = true;
                for (u32 i = lane; i < n; i += 32) out_doc[i] += first;
                __syncwarp();
                for (u32 i = lane; i + 1 < n; i += 32) inc = inc && out_doc[i] < out_doc[i + 1];
                ok = __all_sync(FULL_MASK, inc) && out_doc[0] == first && out_doc[n - 1] == last;
            }
        }
        if (ok && out_tf) {
            if (foff >= len) return false;
            u32 upper = blk[foff];
            ok = ef_decode_warp(blk + foff + 1, len - foff - 1, upper, out_tf, n);
            __syncwarp();
            if (ok) {
                // prefix sums of tf - 1 back to frequencies; one lane, 128 steps
                u32 lane = threadIdx.x & 31u;
                bool good = true;
                if (lane == 0) {
                    u32 prev = 0;
                    for (u32 i = 0; i < n; i++) {
                        u32 s = out_tf[i];
                        if (s < prev) good = false;
                        out_tf[i] = s - prev + 1u;
                        prev = s;
                    }
                }
                ok = __shfl_sync(FULL_MASK, good ? 1u : 0u, 0) != 0u;
            }
        }
    } else if (ix.codec == CODEC_SIMDBP) {
        ok = simdbp_decode_warp(blk, len, foff, first, last, n, out_doc, out_tf);
    } else {
        if (out_doc) {
            ok = rice_decode_warp(blk, foff, dp, out_doc, n, xs);
            if (ok) ok = prefix_docs_warp(out_doc, n, first, last);
        }
        __syncwarp();
        if (ok && out_tf) ok = rice_decode_warp(blk + foff, len - foff, fp, out_tf, n, xs);
    }
    __syncwarp();
    if (ok && out_tf && ix.codec != CODEC_EF) {
        u32 lane = threadIdx.x & 31u;
        bool good = true;
        for (u32 i = lane; i < n; i += 32) {
            if (out_tf[i] == FULL_MASK) good = false;
            out_tf[i] += 1u;
        }
        ok = __all_sync(FULL_MASK, good);
    }
    __syncwarp();
    return ok;
}

// ---------------------------------------------------------------------------------------------------------
// The running top-k of one CTA: keys in a global buffer, a threshold key below which nothing can enter.

struct TopShared {
    u32 count;        // keys in the buffer
    u32 full;         // the buffer held k keys after a selection
    u64 thresh;       // keys below this cannot enter the top k
    u32 hist[256];
    u32 scan[WARPS + 1];
    u64 prefix;
    u32 need;
    u32 shift_done;
    u32 failed;
};

// Finds T such that exactly `k` of buf[0..count) are >= T (keys are distinct), by MSB radix select over
// 8-bit digits; stops early once the bucket holding the k-th key is taken whole.
__device__ u64 radix_select(const u64* buf, u32 count, u32 k, TopShared* ts) {
    if (threadIdx.x == 0) { ts->prefix = 0; ts->need = k; ts->shift_done = 0; }
    __syncthreads();
    for (int shift = 56; shift >= 0; shift -= 8) {
        for (u32 i = threadIdx.x; i < 256; i += THREADS) ts->hist[i] = 0;
        __syncthreads();
        u64 prefix = ts->prefix;
        u64 hi_mask = shift == 56 ? 0ull : (~0ull << (shift + 8));
        for (u32 i = threadIdx.x; i < count; i += THREADS) {
            u64 key = buf[i];
            if ((key & hi_mask) == prefix) atomicAdd(&ts->hist[(key >> shift) & 0xffu], 1u);
        }
        __syncthreads();
        if (threadIdx.x == 0) {
            u32 need = ts->need, acc = 0;
            int d = 255;
            for (; d > 0; d--) {
                if (acc + ts->hist[d] >= need) break;
                acc += ts->hist[d];
            }
            ts->prefix = prefix | ((u64)d << shift);
            ts->need = need - acc;
            if (ts->hist[d] == ts->need) ts->shift_done = 1;
        }
        __syncthreads();
        if (ts->shift_done) break;
    }
    u64 t = ts->prefix;
    __syncthreads();
    return t;
}

// Keeps the keys >= t (stable in-place compaction); returns how many.
__device__ u32 compact_keys(u64* buf, u32 count, u64 t, TopShared* ts) {
    u32 out = 0;
    for (u32 base = 0; base < count; base += THREADS) {
        u32 i = base + threadIdx.x;
        u64 key = i < count ? buf[i] : 0ull;
        u32 keep = (i < count && key >= t) ? 1u : 0u;
        u32 total;
        u32 pos = block_exclusive_scan(keep, ts->scan, &total);
        if (keep) buf[out + pos] = key;
        out += total;
        __syncthreads();
    }
    return out;
}

__device__ void topk_reset(TopShared* ts) {
    if (threadIdx.x == 0) { ts->count = 0; ts->full = 0; ts->thresh = 0; ts->failed = 0; }
    __syncthreads();
}

// Shrinks the buffer to the top k and raises the threshold. All threads call it.
__device__ void topk_shrink(u64* buf, u32 k, TopShared* ts) {
    u32 count = ts->count;
    if (count <= k) return;
    u64 t = radix_select(buf, count, k, ts);
    u32 kept = compact_keys(buf, count, t, ts);
    if (threadIdx.x == 0) { ts->count = kept; ts->full = 1; if (t > ts->thresh) ts->thresh = t; }
    __syncthreads();
}

// Makes room for up to `incoming` new keys: shrinks the buffer to the top k when it holds more than
// max(2k, 512) keys (so that the threshold rises soon and block-max skipping starts) or when the new keys
// would not fit. All threads call it; afterwards threads push with topk_push and then synchronise.
__device__ void topk_make_room(u64* buf, u32 k, TopShared* ts, u32 incoming) {
    u32 eager = max(2u * k, 512u);
    u32 count = ts->count;
    // Every thread must see the same count before any thread pushes (or the shrink would diverge).
    __syncthreads();
    if (count > eager || count + incoming > TOPK_CAP) topk_shrink(buf, k, ts);
}

// Appends one hit if it can still enter the top k (no synchronisation; see topk_make_room).
__device__ __forceinline__ void topk_push(u64* buf, TopShared* ts, bool valid, float score, u32 doc) {
    u64 key = hit_key(score, doc);
    if (valid && key >= ts->thresh) {
        u32 pos = atomicAdd(&ts->count, 1u);
        buf[pos] = key;
    }
}

// Offers one hit per calling thread (valid = false: none). All threads call it.
__device__ void topk_offer(u64* buf, u32 k, TopShared* ts, bool valid, float score, u32 doc) {
    topk_make_room(buf, k, ts, THREADS);
    topk_push(buf, ts, valid, score, doc);
    __syncthreads();
}

// Threshold score: no document scoring below it can enter (a lower bound of the k-th score once full).
__device__ __forceinline__ bool topk_full(const TopShared* ts) { return ts->full != 0; }
__device__ __forceinline__ float topk_threshold(const TopShared* ts) { return key_score(ts->thresh); }

// Final selection and a bitonic sort (descending keys) in shared memory; writes up to k hits.
__device__ u32 topk_finish(u64* buf, u32 k, TopShared* ts, u64* sort, u32* out_doc, float* out_score) {
    topk_shrink(buf, k, ts);
    u32 n = ts->count;
    u32 m = 1;
    while (m < n) m <<= 1;
    for (u32 i = threadIdx.x; i < m; i += THREADS) sort[i] = i < n ? buf[i] : 0ull;
    __syncthreads();
    for (u32 size = 2; size <= m; size <<= 1) {
        for (u32 stride = size >> 1; stride > 0; stride >>= 1) {
            for (u32 i = threadIdx.x; i < m; i += THREADS) {
                u32 j = i ^ stride;
                if (j > i) {
                    bool desc = (i & size) == 0;
                    u64 a = sort[i], b = sort[j];
                    if (desc ? (a < b) : (a > b)) { sort[i] = b; sort[j] = a; }
                }
            }
            __syncthreads();
        }
    }
    for (u32 i = threadIdx.x; i < n; i += THREADS) {
        out_doc[i] = key_doc(sort[i]);
        out_score[i] = key_score(sort[i]);
    }
    __syncthreads();
    return n;
}

// ---------------------------------------------------------------------------------------------------------
// The query kernel's shared state.

struct QueryShared {
    TopShared top;
    u64 sort[MAX_K_GPU];
    // AND: candidates and their blocks, CHUNK each, in the dynamic shared memory of an AND launch (an OR
    // launch gives that memory to its window instead).
    u32* cand_doc;
    u32* cand_tf0;
    u32* blk;
    u32* sel_blk;
    u32 xs[WARPS][4 * BLOCK_LEN];
    u32 ncand;
    u32 range_lo;       // AND step: the first block of the list that can hold a candidate
    u32 range_hi;       // and the one that can hold the last candidate (num_blocks if none)
    u32 q;
    float bound;
    u32 wnext;
    float slack;        // this query's bound slack
    u32 doc_lo;         // this (part of a) query's docID range, inclusive
    u32 doc_hi;
    u32 t_start[THREADS];      // OR window: per plan slot, the first block overlapping the window
    u32 t_off[THREADS + 1];    // OR window: per plan slot, the offset of its blocks in the window's list
    u32 t_first[THREADS];      // OR window: per term, the first block whose last docID reaches the window
    u32 t_cnt[THREADS];        // OR window: per term, the blocks overlapping the window
    u32 bound_bits;            // query_bound: one term's largest block bound (a non-negative float's bits)
};

#define PH_SELECT 0
#define PH_DECODE 1
#define PH_INTERSECT 2
#define PH_SCORE 3
#define PH_TOPK 4
#define PH_BLOCKS 5   // not a phase: the blocks decoded (instrumented runs)

// The phase clock's state, in shared memory rather than in every thread's registers (only thread 0 reads
// the time, and only in instrumented runs): held in registers across the whole kernel, the two 64-bit
// fields were spilled and reloaded at every lap once the OR windows' register decoding raised the
// kernel's pressure.
__shared__ u64* clock_out;  // this CTA's counters, or null (no instrumentation)
__shared__ u64 clock_at;    // thread 0's last reading

struct PhaseClock {
    __device__ bool on() const { return clock_out != (u64*)0; }
    __device__ void start() { if (threadIdx.x == 0 && clock_out) clock_at = clock64(); }
    __device__ void lap(int phase) {
        if (threadIdx.x == 0 && clock_out) { u64 now = clock64(); clock_out[phase] += now - clock_at; clock_at = now; }
    }
    // Counts blocks decoded (any one thread per call).
    __device__ void blocks(u32 n) { if (clock_out) atomicAdd((unsigned long long*)&clock_out[PH_BLOCKS], (u64)n); }
};

// Looks up every candidate in list t (SvS step). Thread i holds candidates CPT*i .. CPT*i+CPT-1 (in docID
// order), so that each thread has several independent searches in flight. Three stages, as papers/001
// section 8.1 and papers/004 section 3.1.2 describe:
// 1. block selection: each candidate's block, the first whose last docID is at or above it, within the
//    blocks the candidates' range spans. When the list has at most ba.merge_ratio postings per candidate in
//    that range (lengths alike), by Parallel Merge Find of the candidates against the blocks' last docIDs
//    (merge_path); else by one binary search per candidate over the range's last docIDs (skip pointers).
//    One selection per run of candidates falling in the same block;
// 2. decode of the selected blocks only, one warp each, into consecutive slots of dec_doc (they stay in
//    docID order, so the decoded postings form one sorted array);
// 3. intersection: merge path of the candidates with the decoded postings when these are at most
//    ba.merge_ratio per candidate, else a binary search of each candidate in its decoded block.
// Sets tf[i] (0: absent) for each of the thread's candidates. Returns false if a block is malformed.
__device__ bool lookup_step(const IndexArgs& ix, const BatchArgs& ba, const TermDesc& t, QueryShared* s,
                            u32* dec_doc, u32* dec_tf, bool want_tf, u32 (&tf)[CPT], PhaseClock& clk) {
    u32 tid = threadIdx.x, lane = tid & 31u, warp = tid >> 5;
    u32 ncand = s->ncand;
    const u32* last = ix.blk_last + t.block_base;
    // Two threads of different warps search at once.
    if (tid == 0) s->range_lo = lower_bound(last, t.num_blocks, s->cand_doc[0]);
    if (tid == 32) s->range_hi = lower_bound(last, t.num_blocks, s->cand_doc[ncand - 1u]);
    __syncthreads();
    u32 rlo = s->range_lo, rn = min(s->range_hi + 1u, t.num_blocks) - rlo;
    u64 budget = (u64)ba.merge_ratio * ncand;
    bool merge_select = (u64)rn * BLOCK_LEN <= budget;
    if (merge_select) {
        u32* blk = s->blk;
        merge_path(s->cand_doc, ncand, last + rlo, rn, [&](u32 i, u32 j) { blk[i] = rlo + j; });
        __syncthreads();
    }
    u32 d[CPT], b[CPT];
    bool inr[CPT];
#pragma unroll
    for (int i = 0; i < CPT; i++) {
        u32 c = tid * CPT + i;
        d[i] = c < ncand ? s->cand_doc[c] : 0u;
        b[i] = t.num_blocks;
        inr[i] = false;
        if (c < ncand) {
            b[i] = merge_select ? s->blk[c] : rlo + lower_bound(last + rlo, rn, d[i]);
            inr[i] = b[i] < t.num_blocks && ix.blk_first[t.block_base + b[i]] <= d[i];
        }
    }
    // Each thread reads and writes only its own candidates' entries of s->blk above, and below.
#pragma unroll
    for (int i = 0; i < CPT; i++) {
        u32 c = tid * CPT + i;
        if (c < ncand) s->blk[c] = inr[i] ? b[i] : 0xffffffffu;
    }
    __syncthreads();
    bool need[CPT];
    u32 needs = 0;
#pragma unroll
    for (int i = 0; i < CPT; i++) {
        u32 c = tid * CPT + i;
        need[i] = inr[i] && (c == 0 || s->blk[c - 1] != b[i]);
        needs += need[i] ? 1u : 0u;
    }
    u32 total;
    u32 run = block_exclusive_scan(needs, s->top.scan, &total);
    // sel[i]: the decode slot of candidate i's block, the last selection at or before it.
    u32 sel[CPT];
#pragma unroll
    for (int i = 0; i < CPT; i++) {
        if (need[i]) s->sel_blk[run] = t.block_base + b[i];
        run += need[i] ? 1u : 0u;
        sel[i] = run - 1u;
    }
    __syncthreads();
    clk.lap(PH_SELECT);
    if (tid == 0) clk.blocks(total);
    bool ok = true;
    for (u32 j = warp; j < total; j += WARPS) {
        bool good = decode_block_warp(ix, t, s->sel_blk[j], dec_doc + j * BLOCK_LEN,
                                      want_tf ? dec_tf + j * BLOCK_LEN : (u32*)0, s->xs[warp]);
        if (!good) ok = false;
    }
    if (!ok && lane == 0) s->top.failed = 1;
    __syncthreads();
    clk.lap(PH_DECODE);
    if (total == 0) {
#pragma unroll
        for (int i = 0; i < CPT; i++) tf[i] = 0;
        return s->top.failed == 0;
    }
    // Decoded postings: every selected block is full but the list's last one.
    u32 tail = block_postings(t, s->sel_blk[total - 1u] - t.block_base);
    u32 decoded = (total - 1u) * BLOCK_LEN + tail;
    if ((u64)decoded <= budget) {
        // s->blk is free again: every thread has its b[], need[] and sel[] in registers (barrier above).
        u32* found = s->blk;
        merge_path(s->cand_doc, ncand, dec_doc, decoded, [&](u32 i, u32 j) {
            bool hit = j < decoded && dec_doc[j] == s->cand_doc[i];
            found[i] = hit ? (want_tf ? dec_tf[j] : 1u) : 0u;
        });
        __syncthreads();
#pragma unroll
        for (int i = 0; i < CPT; i++) {
            u32 c = tid * CPT + i;
            tf[i] = c < ncand ? found[c] : 0u;
        }
    } else {
#pragma unroll
        for (int i = 0; i < CPT; i++) {
            tf[i] = 0;
            if (inr[i]) {
                u32 n = block_postings(t, b[i]);
                const u32* dd = dec_doc + sel[i] * BLOCK_LEN;
                u32 lo = lower_bound(dd, n, d[i]);
                if (lo < n && dd[lo] == d[i]) tf[i] = want_tf ? dec_tf[sel[i] * BLOCK_LEN + lo] : 1u;
            }
        }
    }
    __syncthreads();
    return s->top.failed == 0;
}

// Keeps the candidates whose tf is not 0, in order.
__device__ void compact_candidates(QueryShared* s, const u32 (&tf)[CPT]) {
    u32 tid = threadIdx.x;
    u32 ncand = s->ncand;
    u32 d[CPT], f[CPT], keeps = 0;
#pragma unroll
    for (int i = 0; i < CPT; i++) {
        u32 c = tid * CPT + i;
        d[i] = c < ncand ? s->cand_doc[c] : 0u;
        f[i] = c < ncand ? s->cand_tf0[c] : 0u;
        keeps += (c < ncand && tf[i] != 0) ? 1u : 0u;
    }
    u32 total;
    u32 pos = block_exclusive_scan(keeps, s->top.scan, &total);
#pragma unroll
    for (int i = 0; i < CPT; i++) {
        u32 c = tid * CPT + i;
        if (c < ncand && tf[i] != 0) {
            s->cand_doc[pos] = d[i];
            s->cand_tf0[pos] = f[i];
            pos++;
        }
    }
    if (tid == 0) s->ncand = total;
    __syncthreads();
}

// BM25's contribution of a posting with frequency tf to a document whose length norm is `norm`.
__device__ __forceinline__ float contribution_of(const IndexArgs& ix, const TermDesc& t, float norm, u32 tf) {
    float f = (float)tf;
    return t.weight * (f * ix.k1p1 / (f + norm));
}

__device__ __forceinline__ float contribution(const IndexArgs& ix, const TermDesc& t, u32 doc, u32 tf) {
    return contribution_of(ix, t, ix.norms[doc], tf);
}

__device__ __forceinline__ float finish(const IndexArgs& ix, u32 doc, float sum) {
    return ix.prior ? sum + ix.prior[doc] : sum;
}

__device__ __forceinline__ float warp_max(float v) {
    for (u32 d = 16; d > 0; d >>= 1) v = fmaxf(v, __shfl_xor_sync(FULL_MASK, v, d));
    return v;
}

// Sum of the terms' upper bounds over docIDs [lo, hi] from their block maxima (+inf for a term without
// block bounds), plus the prior's bound, in s->bound. One term at a time, its blocks in the range read by
// all threads at once: a long list's range can span thousands of blocks (an AND chunk's range is that of
// 1,024 postings of the shortest list). Each block bound is non-negative, so the largest one's float bits
// are the largest integer (atomicMax).
__device__ void query_bound(const IndexArgs& ix, const TermDesc* terms, u32 n, u32 lo, u32 hi, QueryShared* s) {
    u32 tid = threadIdx.x;
    if (tid == 0) {
        s->bound = ix.prior_max * s->slack;
        s->bound_bits = 0u;
    }
    __syncthreads();
    for (u32 i = 0; i < n; i++) {
        const TermDesc& t = terms[i];
        float m = 0.0f;
        if (t.bound_scale < 0.0f) {
            m = __int_as_float(0x7f800000);
        } else {
            u32 b = lower_bound(ix.blk_last + t.block_base, t.num_blocks, lo);
            for (u32 x = b + tid; x < t.num_blocks; x += THREADS) {
                if (ix.blk_first[t.block_base + x] > hi) break;
                m = fmaxf(m, ix.blk_max[t.block_base + x] * t.bound_scale);
            }
        }
        m = warp_max(m);
        if ((tid & 31u) == 0 && m > 0.0f) atomicMax(&s->bound_bits, __float_as_uint(m));
        __syncthreads();
        if (tid == 0) {
            s->bound += __uint_as_float(s->bound_bits);
            s->bound_bits = 0u;
        }
        __syncthreads();
    }
}

// The blocks of each term i < n (one warp each) that overlap an OR window's range [r0, r1] (w1: the
// window's last docID): s->t_first[i], the first whose last docID is at least r0, searched forward from
// the previous window's (32 blocks at a time, then by bisection), and s->t_cnt[i] of them. Adds the
// largest of their bounds to s->bound (set beforehand to the prior's bound) and lowers s->wnext to the
// first docID after w1 in any of the term's blocks.
__device__ void window_blocks(const IndexArgs& ix, const TermDesc* terms, u32 n, u32 r0, u32 r1, u32 w1,
                              QueryShared* s) {
    u32 lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
    for (u32 i = warp; i < n; i += WARPS) {
        const TermDesc& t = terms[i];
        const u32* first = ix.blk_first + t.block_base;
        const u32* last = ix.blk_last + t.block_base;
        u32 nb = t.num_blocks, b = s->t_first[i];
        u32 ahead = __ballot_sync(FULL_MASK, b + lane >= nb || last[b + lane] >= r0);
        b = ahead ? b + __ffs(ahead) - 1u : b + 32u + lower_bound(last + b + 32u, nb - b - 32u, r0);
        u32 cnt = 0;
        float m = 0.0f;
        for (u32 c = b;; c += 32u) {
            u32 x = c + lane;
            bool in = x < nb && first[x] <= r1;
            if (in) m = fmaxf(m, ix.blk_max[t.block_base + x] * t.bound_scale);
            u32 ins = __ballot_sync(FULL_MASK, in);
            cnt += __popc(ins);
            if (ins != FULL_MASK) break;
        }
        m = t.bound_scale < 0.0f ? __int_as_float(0x7f800000) : warp_max(m);
        if (lane == 0) {
            s->t_first[i] = b;
            s->t_cnt[i] = cnt;
            atomicAdd(&s->bound, m);
            // Blocks before b + cnt start at or before r1; the next posting after w1 is in the last of them
            // if it reaches past w1, else it is the next block's first.
            u32 e = b + cnt, next = 0xffffffffu;
            if (w1 != 0xffffffffu) {
                if (cnt > 0u && last[e - 1u] > w1) next = w1 + 1u;
                else if (e < nb) next = max(first[e], w1 + 1u);
            }
            atomicMin(&s->wnext, next);
        }
    }
}

// Ranked AND of one query (SvS from the shortest list, a chunk of THREADS candidates at a time).
__device__ void and_query(const IndexArgs& ix, const BatchArgs& ba, const TermDesc* terms, u32 n, QueryShared* s,
                          u64* buf, u32* dec_doc, u32* dec_tf, PhaseClock& clk) {
    u32 tid = threadIdx.x, warp = tid >> 5;
    const TermDesc& t0 = terms[0];
    u32 lo = s->doc_lo, hi = s->doc_hi;
    bool ranged = lo > 0u || hi < 0xffffffffu;
    u32 start = lower_bound(ix.blk_last + t0.block_base, t0.num_blocks, lo) * BLOCK_LEN;
    for (u32 c0 = start; c0 < t0.df; c0 += CHUNK) {
        // The previous chunk's readers of the candidate arrays and counts are done.
        __syncthreads();
        u32 b0 = t0.block_base + c0 / BLOCK_LEN;
        u32 nb = min((u32)(CHUNK / BLOCK_LEN), t0.num_blocks - c0 / BLOCK_LEN);
        u32 first = max(ix.blk_first[b0], lo), last = min(ix.blk_last[b0 + nb - 1], hi);
        if (first > hi) break;
        if (ba.early && topk_full(&s->top) && topk_threshold(&s->top) >= ix.gs[first] * s->slack) break;
        // Block-max skip: no candidate of this chunk can enter the top k.
        if (topk_full(&s->top)) {
            query_bound(ix, terms, n, first, last, s);
            if (s->bound * s->slack < topk_threshold(&s->top)) continue;
        }
        clk.lap(PH_SELECT);
        if (tid == 0) clk.blocks(nb);
        if (warp < nb) {
            bool good = decode_block_warp(ix, t0, b0 + warp, s->cand_doc + warp * BLOCK_LEN,
                                          s->cand_tf0 + warp * BLOCK_LEN, s->xs[warp]);
            if (!good && (tid & 31u) == 0) s->top.failed = 1;
        }
        if (tid == 0) s->ncand = min((u32)CHUNK, t0.df - c0);
        __syncthreads();
        clk.lap(PH_DECODE);
        if (s->top.failed) return;
        u32 tf[CPT];
        if (ranged) {
#pragma unroll
            for (int i = 0; i < CPT; i++) {
                u32 c = tid * CPT + i;
                u32 d = c < s->ncand ? s->cand_doc[c] : 0u;
                tf[i] = d >= lo && d <= hi ? 1u : 0u;
            }
            compact_candidates(s, tf);
        }
        for (u32 j = 1; j < n && s->ncand > 0; j++) {
            if (!lookup_step(ix, ba, terms[j], s, dec_doc, dec_tf, false, tf, clk)) return;
            compact_candidates(s, tf);
            clk.lap(PH_INTERSECT);
        }
        u32 ncand = s->ncand;
        if (ncand == 0) continue;
        // Score the survivors in plan slot order, as the CPU does.
        float score[CPT];
        u32 doc[CPT];
#pragma unroll
        for (int i = 0; i < CPT; i++) {
            u32 c = tid * CPT + i;
            score[i] = 0.0f;
            doc[i] = c < ncand ? s->cand_doc[c] : 0u;
        }
        for (u32 slot = 0; slot < n; slot++) {
            u32 j = terms[slot].slot_term;
            if (j == 0) {
#pragma unroll
                for (int i = 0; i < CPT; i++) {
                    u32 c = tid * CPT + i;
                    tf[i] = c < ncand ? s->cand_tf0[c] : 0u;
                }
            } else {
                if (!lookup_step(ix, ba, terms[j], s, dec_doc, dec_tf, true, tf, clk)) return;
            }
#pragma unroll
            for (int i = 0; i < CPT; i++)
                if (tid * CPT + i < ncand) score[i] = score[i] + contribution(ix, terms[j], doc[i], tf[i]);
        }
        clk.lap(PH_SCORE);
        topk_make_room(buf, ba.k, &s->top, CHUNK);
#pragma unroll
        for (int i = 0; i < CPT; i++) {
            bool valid = tid * CPT + i < ncand;
            topk_push(buf, &s->top, valid, valid ? finish(ix, doc[i], score[i]) : 0.0f, doc[i]);
        }
        __syncthreads();
        clk.lap(PH_TOPK);
    }
}

// The plan slot of (list, block) pair p: the last slot whose first pair is at most p (it has blocks, as p
// is before its end). s->t_off holds each slot's first pair.
__device__ __forceinline__ u32 slot_of_pair(const QueryShared* s, u32 n, u32 p) {
    u32 lo = 0, hi = n;
    while (hi - lo > 1) {
        u32 mid = (lo + hi) >> 1;
        if (s->t_off[mid] <= p) lo = mid; else hi = mid;
    }
    return lo;
}

// Adds contribution c to window offset i's accumulator. `seen` holds a bit per window document, set
// once its accumulator holds a sum: the first contribution starts the sum (0 + c, as the CPU adds), and
// the bits let the window's reset and its top-k pass visit only the documents the lists touched (a
// window of 16,384 documents holds a few thousand). Within one list each document is added by one
// thread, so reading the word without an atomic sees this document's bit as this thread left it;
// the atomic OR keeps other threads' bits of the word.
__device__ __forceinline__ void acc_add(float* acc, u32* seen, u32 i, float c) {
    u32 m = 1u << (i & 31u);
    if (seen[i >> 5] & m) {
        acc[i] = acc[i] + c;
    } else {
        acc[i] = 0.0f + c;
        atomicOr(&seen[i >> 5], m);
    }
}

// Adds one OR window's postings to the accumulators (at most THREADS terms): every (list, block) pair that
// overlaps the window is decoded first, one warp per pair and all warps at once, into the CTA's scratch;
// then the lists are added in plan slot order, all threads on one list's postings at a time (a barrier
// between lists keeps each document's sum in slot order). More than THREADS pairs go in rounds, in order.
__device__ void or_window(const IndexArgs& ix, const TermDesc* terms, u32 n, u32 w0, u32 r0, u32 r1,
                          QueryShared* s, float* acc, u32* seen, u32* dec_doc, u32* dec_tf, PhaseClock& clk) {
    u32 tid = threadIdx.x, lane = tid & 31u, warp = tid >> 5;
    u32 cnt = 0;
    if (tid < n) {
        u32 j = terms[tid].slot_term;  // window_blocks found each term's blocks
        cnt = s->t_cnt[j];
        s->t_start[tid] = s->t_first[j];
    }
    u32 total;
    u32 off = block_exclusive_scan(cnt, s->top.scan, &total);
    if (tid < n) s->t_off[tid] = off;
    if (tid == 0) {
        s->t_off[n] = total;
        clk.blocks(total);
    }
    __syncthreads();
    clk.lap(PH_SELECT);
    for (u32 q0 = 0; q0 < total; q0 += THREADS) {
        u32 q1 = min(total, q0 + THREADS);
        for (u32 p = q0 + warp; p < q1; p += WARPS) {
            u32 lo = slot_of_pair(s, n, p);
            const TermDesc& t = terms[terms[lo].slot_term];
            u32 bi = t.block_base + s->t_start[lo] + (p - s->t_off[lo]);
            bool good = decode_block_warp(ix, t, bi, dec_doc + (p - q0) * BLOCK_LEN, dec_tf + (p - q0) * BLOCK_LEN,
                                          s->xs[warp]);
            if (!good && lane == 0) s->top.failed = 1;
        }
        __syncthreads();
        clk.lap(PH_DECODE);
        if (s->top.failed) return;
        for (u32 sl = 0; sl < n; sl++) {
            u32 a = max(s->t_off[sl], q0), b = min(s->t_off[sl + 1], q1);
            if (a >= b) continue;
            const TermDesc& t = terms[terms[sl].slot_term];
            for (u32 x = tid; x < (b - a) * BLOCK_LEN; x += THREADS) {
                u32 p = a + x / BLOCK_LEN, i = x % BLOCK_LEN;
                u32 local = s->t_start[sl] + (p - s->t_off[sl]);
                u32 nb = block_postings(t, local);
                if (i < nb) {
                    u32 d = dec_doc[(p - q0) * BLOCK_LEN + i];
                    if (d >= r0 && d <= r1) acc_add(acc, seen, d - w0, contribution(ix, t, d, dec_tf[(p - q0) * BLOCK_LEN + i]));
                }
            }
            __syncthreads();
        }
    }
}

// or_window for SIMD-BP128 lists: list by list in plan slot order, the warps share the list's blocks that
// overlap the window, each decoding its block into registers (simdbp_block_regs) and adding the postings
// at once, their length norms loaded together; a barrier between lists keeps each document's sum in slot
// order. No scratch memory and one barrier per list with blocks in the window, where or_window decodes
// every list into global scratch first, then reads it back list by list. The last list's barrier orders
// the adds before the window's top-k pass; a window without blocks adds nothing.
__device__ void or_window_regs(const IndexArgs& ix, const TermDesc* terms, u32 n, u32 w0, u32 r0, u32 r1,
                               QueryShared* s, float* acc, u32* seen, PhaseClock& clk) {
    u32 lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
    if (clk.on() && threadIdx.x == 0) {
        u32 total = 0;
        for (u32 i = 0; i < n; i++) total += s->t_cnt[i];
        clk.blocks(total);
    }
    for (u32 sl = 0; sl < n; sl++) {
        u32 j = terms[sl].slot_term;  // window_blocks found each term's blocks
        u32 cnt = s->t_cnt[j];
        if (cnt == 0u) continue;
        const TermDesc& t = terms[j];
        u32 b0 = t.block_base + s->t_first[j];
        for (u32 p = warp; p < cnt; p += WARPS) {
            u32 doc[4], tf[4], nb;
            if (!simdbp_block_regs(ix, t, b0 + p, doc, tf, &nb)) {
                if (lane == 0) s->top.failed = 1;
                break;
            }
            bool in[4];
            float norm[4];
#pragma unroll
            for (u32 k = 0; k < 4; k++) {
                in[k] = lane * 4u + k < nb && doc[k] >= r0 && doc[k] <= r1;
                norm[k] = in[k] ? ix.norms[doc[k]] : 0.0f;
            }
#pragma unroll
            for (u32 k = 0; k < 4; k++)
                if (in[k]) acc_add(acc, seen, doc[k] - w0, contribution_of(ix, t, norm[k], tf[k]));
        }
        __syncthreads();
    }
}

// OR of a small query by sorting, the alternative to dense accumulators: every block of every list is
// decoded into the CTA's scratch, each posting becomes a (docID, plan slot) key with its contribution, a
// bitonic sort in shared memory orders the keys, and one thread per run of equal docIDs sums the
// contributions in slot order (so sums round as the CPU's) and offers the document. The host sends only
// queries of at most ba.small_or postings (a power of two that fits the launch's shared memory) and at
// most SMALL_OR_BLOCKS blocks.
__device__ void or_small(const IndexArgs& ix, const BatchArgs& ba, const TermDesc* terms, u32 n, u32 postings,
                         QueryShared* s, u64* keys, float* vals, u32* dec_doc, u32* dec_tf, u64* buf,
                         PhaseClock& clk) {
    u32 tid = threadIdx.x, lane = tid & 31u, warp = tid >> 5;
    // Per plan slot: its first block pair and its first posting (exclusive scans).
    const TermDesc* mine = tid < n ? &terms[terms[tid].slot_term] : (const TermDesc*)0;
    u32 total, total_postings;
    u32 off = block_exclusive_scan(mine ? mine->num_blocks : 0u, s->top.scan, &total);
    u32 first = block_exclusive_scan(mine ? mine->df : 0u, s->top.scan, &total_postings);
    if (tid < n) {
        s->t_off[tid] = off;
        s->t_start[tid] = first;
    }
    if (tid == 0) s->t_off[n] = total;
    u32 m = 1;
    while (m < postings) m <<= 1;
    for (u32 x = postings + tid; x < m; x += THREADS) keys[x] = ~0ull;
    __syncthreads();
    clk.lap(PH_SELECT);
    if (tid == 0) clk.blocks(total);
    for (u32 p = warp; p < total; p += WARPS) {
        u32 lo = slot_of_pair(s, n, p);
        const TermDesc& t = terms[terms[lo].slot_term];
        u32 local = p - s->t_off[lo];
        u32* dd = dec_doc + p * BLOCK_LEN;
        u32* tt = dec_tf + p * BLOCK_LEN;
        if (!decode_block_warp(ix, t, t.block_base + local, dd, tt, s->xs[warp])) {
            if (lane == 0) s->top.failed = 1;
            continue;
        }
        u32 nb = block_postings(t, local);
        u32 x0 = s->t_start[lo] + local * BLOCK_LEN;
        for (u32 i = lane; i < nb; i += 32) {
            keys[x0 + i] = ((u64)dd[i] << 32) | lo;
            vals[x0 + i] = contribution(ix, t, dd[i], tt[i]);
        }
        __syncwarp();
    }
    __syncthreads();
    clk.lap(PH_DECODE);
    if (s->top.failed) return;
    for (u32 size = 2; size <= m; size <<= 1) {
        for (u32 stride = size >> 1; stride > 0; stride >>= 1) {
            for (u32 i = tid; i < m; i += THREADS) {
                u32 j = i ^ stride;
                if (j > i) {
                    bool up = (i & size) == 0;
                    u64 a = keys[i], b = keys[j];
                    if (up ? (a > b) : (a < b)) {
                        keys[i] = b;
                        keys[j] = a;
                        float v = vals[i];
                        vals[i] = vals[j];
                        vals[j] = v;
                    }
                }
            }
            __syncthreads();
        }
    }
    clk.lap(PH_SCORE);
    topk_make_room(buf, ba.k, &s->top, postings);
    for (u32 i = tid; i < postings; i += THREADS) {
        u32 d = (u32)(keys[i] >> 32);
        if (i > 0 && (u32)(keys[i - 1] >> 32) == d) continue;
        float sum = 0.0f;
        for (u32 j = i; j < postings && (u32)(keys[j] >> 32) == d; j++) sum = sum + vals[j];
        topk_push(buf, &s->top, true, finish(ix, d, sum), d);
    }
    __syncthreads();
    clk.lap(PH_TOPK);
}

// OR of one query: document windows of ba.window docIDs with dense accumulators in shared memory; lists
// are added in plan slot order (one list at a time), so sums round as the CPU's. A window whose block-max
// bound cannot beat the k-th score is skipped; with early termination the scan stops on the global score.
__device__ void or_query(const IndexArgs& ix, const BatchArgs& ba, const TermDesc* terms, u32 n, QueryShared* s,
                         float* acc, u32* wdoc, u32* wtf, u32* seen, u32* dec_doc, u32* dec_tf, u64* buf,
                         PhaseClock& clk) {
    u32 tid = threadIdx.x, lane = tid & 31u, warp = tid >> 5;
    u32 W = ba.window;
    // Small whole queries are sorted instead (postings and blocks summed by one thread; n is small then).
    if (ba.small_or != 0u && s->doc_lo == 0u && s->doc_hi == 0xffffffffu && n <= THREADS) {
        if (tid == 0) {
            u64 postings = 0, blocks = 0;
            for (u32 i = 0; i < n; i++) {
                postings += terms[i].df;
                blocks += terms[i].num_blocks;
            }
            s->wnext = postings <= ba.small_or && blocks <= SMALL_OR_BLOCKS ? (u32)postings : 0u;
        }
        __syncthreads();
        u32 postings = s->wnext;
        __syncthreads();
        if (postings != 0u) {
            or_small(ix, ba, terms, n, postings, s, (u64*)acc, (float*)((u64*)acc + ba.small_or), dec_doc,
                     dec_tf, buf, clk);
            return;
        }
    }
    // First docID of any list.
    if (tid == 0) s->wnext = 0xffffffffu;
    __syncthreads();
    u32 lo = s->doc_lo, hi = s->doc_hi;
    for (u32 i = tid; i < n; i += THREADS) {
        const TermDesc& t = terms[i];
        u32 b = lower_bound(ix.blk_last + t.block_base, t.num_blocks, lo);
        if (b < t.num_blocks) atomicMin(&s->wnext, max(ix.blk_first[t.block_base + b], lo));
        if (n <= THREADS) s->t_first[i] = b;
    }
    __syncthreads();
    while (s->wnext != 0xffffffffu && s->wnext <= hi) {
        u32 w0 = s->wnext / W * W;
        __syncthreads();  // every thread has read wnext before it is reset below
        u32 w1 = w0 + W - 1u;  // inclusive; W divides 2^32 so this never wraps past a window
        // The part of the window inside this query part's range.
        u32 r0 = max(w0, lo), r1 = min(w1, hi);
        if (ba.early && topk_full(&s->top) && topk_threshold(&s->top) >= ix.gs[r0] * s->slack) break;
        if (tid == 0) {
            s->wnext = 0xffffffffu;
            s->bound = ix.prior_max * s->slack;
        }
        __syncthreads();
        bool skip = false;
        if (n <= THREADS) {
            // This window's blocks of every term, their bound, and the next window holding a posting.
            window_blocks(ix, terms, n, r0, r1, w1, s);
            __syncthreads();
            skip = topk_full(&s->top) && s->bound * s->slack < topk_threshold(&s->top);
        } else {
            // Next window holding any posting after this one.
            if (w1 != 0xffffffffu) {
                for (u32 i = tid; i < n; i += THREADS) {
                    const TermDesc& t = terms[i];
                    u32 b = lower_bound(ix.blk_last + t.block_base, t.num_blocks, w1 + 1u);
                    if (b < t.num_blocks) {
                        u32 f = ix.blk_first[t.block_base + b];
                        atomicMin(&s->wnext, f > w1 ? f : w1 + 1u);
                    }
                }
            }
            if (topk_full(&s->top)) {
                query_bound(ix, terms, n, r0, r1, s);
                skip = s->bound * s->slack < topk_threshold(&s->top);
            }
        }
        clk.lap(PH_SELECT);
        if (skip) continue;
        for (u32 i = tid; i < W / 32u; i += THREADS) seen[i] = 0u;
        __syncthreads();
        if (n <= THREADS && ix.codec == CODEC_SIMDBP) {
            or_window_regs(ix, terms, n, w0, r0, r1, s, acc, seen, clk);
        } else if (n <= THREADS) {
            or_window(ix, terms, n, w0, r0, r1, s, acc, seen, dec_doc, dec_tf, clk);
            __syncthreads();
        }
        for (u32 slot = 0; n > THREADS && slot < n; slot++) {
            const TermDesc& t = terms[terms[slot].slot_term];
            u32 b = lower_bound(ix.blk_last + t.block_base, t.num_blocks, r0);
            for (u32 bi = b + warp; bi < t.num_blocks; bi += WARPS) {
                if (ix.blk_first[t.block_base + bi] > r1) break;
                u32* dd = wdoc + warp * BLOCK_LEN;
                u32* tt = wtf + warp * BLOCK_LEN;
                if (lane == 0) clk.blocks(1);
                if (!decode_block_warp(ix, t, t.block_base + bi, dd, tt, s->xs[warp])) {
                    if (lane == 0) s->top.failed = 1;
                    break;
                }
                u32 nb = block_postings(t, bi);
                for (u32 i = lane; i < nb; i += 32) {
                    u32 d = dd[i];
                    if (d >= r0 && d <= r1) acc_add(acc, seen, d - w0, contribution(ix, t, d, tt[i]));
                }
                __syncwarp();
            }
            __syncthreads();
        }
        clk.lap(PH_SCORE);
        if (s->top.failed) return;
        topk_make_room(buf, ba.k, &s->top, W);
        // The touched documents only, a word of `seen` at a time.
        for (u32 j = tid; j < W / 32u; j += THREADS) {
            for (u32 word = seen[j]; word != 0u; word &= word - 1u) {
                u32 i = j * 32u + (u32)(__ffs(word) - 1);
                u32 d = w0 + i;
                bool valid = (u64)w0 + i < (u64)ix.num_docs;
                topk_push(buf, &s->top, valid, valid ? finish(ix, d, acc[i]) : 0.0f, d);
            }
        }
        __syncthreads();
        clk.lap(PH_TOPK);
    }
}

// The query kernel's body for one mode. AND and OR are two entry points compiled from it (search_and,
// search_or), so that each gets its own register allocation under the MIN_CTAS cap: in one kernel, OR's
// window code raised AND's pressure and cost it 2.5-3% (bench/RESULTS.md, issue 14, tenth session).
template <u32 MODE>
__device__ __forceinline__ void search_body(const IndexArgs& ix, const BatchArgs& ba) {
    extern __shared__ __align__(16) float dyn[];  // AND: candidate arrays; OR: window accumulators, decode staging, bits of touched documents
    __shared__ QueryShared s;
    u32 cta = blockIdx.x;
    u64* buf = ba.topbuf + (u64)cta * TOPK_CAP;
    u32* dec_doc = ba.scratch_doc + (u64)cta * CHUNK * BLOCK_LEN;
    u32* dec_tf = ba.scratch_tf + (u64)cta * CHUNK * BLOCK_LEN;
    if (threadIdx.x == 0) {
        u32* and_arrays = (u32*)dyn;
        s.cand_doc = and_arrays;
        s.cand_tf0 = and_arrays + CHUNK;
        s.blk = and_arrays + 2 * CHUNK;
        s.sel_blk = and_arrays + 3 * CHUNK;
        clock_out = ba.phase_cycles ? ba.phase_cycles + (u64)cta * 8 : (u64*)0;
        clock_at = 0;
    }
    __syncthreads();
    PhaseClock clk;
    for (;;) {
        if (threadIdx.x == 0) s.q = atomicAdd(ba.next_query, 1u);
        __syncthreads();
        u32 q = s.q;
        if (q >= ba.num_queries) break;
        QueryDesc qd = ba.queries[q];
        const TermDesc* terms = ba.terms + qd.term_begin;
        clk.start();
        if (threadIdx.x == 0) {
            s.slack = qd.slack;
            s.doc_lo = qd.doc_lo;
            s.doc_hi = qd.doc_hi;
        }
        topk_reset(&s.top);
        if (MODE == MODE_AND)
            and_query(ix, ba, terms, qd.num_terms, &s, buf, dec_doc, dec_tf, clk);
        else
            or_query(ix, ba, terms, qd.num_terms, &s, dyn, (u32*)(dyn + ba.window),
                     (u32*)(dyn + ba.window) + WARPS * BLOCK_LEN, (u32*)(dyn + ba.window) + 2 * WARPS * BLOCK_LEN,
                     dec_doc, dec_tf, buf, clk);
        __syncthreads();
        u32* od = ba.out_doc + (u64)qd.out_slot * ba.k;
        float* os = ba.out_score + (u64)qd.out_slot * ba.k;
        if (s.top.failed) {
            if (threadIdx.x == 0) ba.out_count[qd.out_slot] = COUNT_FAILED;
        } else {
            u32 got = topk_finish(buf, ba.k, &s.top, s.sort, od, os);
            if (threadIdx.x == 0) ba.out_count[qd.out_slot] = got;
        }
        clk.lap(PH_TOPK);
        __syncthreads();
    }
}

// A batch of AND queries (ba.mode is MODE_AND) and a batch of OR queries (MODE_OR); see search_body.
extern "C" __global__ void __launch_bounds__(THREADS, MIN_CTAS) search_and(const IndexArgs ix, const BatchArgs ba) {
    search_body<MODE_AND>(ix, ba);
}

extern "C" __global__ void __launch_bounds__(THREADS, MIN_CTAS) search_or(const IndexArgs ix, const BatchArgs ba) {
    search_body<MODE_OR>(ix, ba);
}

// ---------------------------------------------------------------------------------------------------------
// Test and benchmark kernels.

// Decodes the listed blocks (one warp per block, any number of warps): block j of the request is global
// block bids[j] of term terms[tids[j]]; docIDs and frequencies go to out_*[j * BLOCK_LEN ..]; ok[j] = 0/1.
// SIMD-BP128 has two decoders: with regs != 0 its blocks are decoded into registers as the OR windows
// decode them (simdbp_block_regs), else into memory as AND and the small OR path do (decode_block_warp).
extern "C" __global__ void decode_blocks(const IndexArgs ix, const TermDesc* terms, const u32* tids,
                                         const u32* bids, u32 count, u32 regs, u32* out_doc, u32* out_tf,
                                         u32* ok) {
    __shared__ u32 xs[WARPS][4 * BLOCK_LEN];
    u32 warp = threadIdx.x >> 5, lane = threadIdx.x & 31u;
    u32 gw = blockIdx.x * WARPS + warp, nw = gridDim.x * WARPS;
    for (u32 j = gw; j < count; j += nw) {
        bool good;
        if (ix.codec == CODEC_SIMDBP && regs != 0u) {
            u32 d[4], f[4], n;
            good = simdbp_block_regs(ix, terms[tids[j]], bids[j], d, f, &n);
#pragma unroll
            for (u32 k = 0; k < 4; k++) {
                u32 i = lane * 4u + k;
                if (good && i < n) {
                    out_doc[(u64)j * BLOCK_LEN + i] = d[k];
                    // (The hosts pass out_tf; the frequencies are decoded and checked either way.)
                    if (out_tf) out_tf[(u64)j * BLOCK_LEN + i] = f[k];
                }
            }
        } else {
            good = decode_block_warp(ix, terms[tids[j]], bids[j], out_doc + (u64)j * BLOCK_LEN,
                                     out_tf ? out_tf + (u64)j * BLOCK_LEN : (u32*)0, xs[warp]);
        }
        if (lane == 0) ok[j] = good ? 1u : 0u;
    }
}

// Top-k of segments: segment i holds docs/scores [seg[i], seg[i+1]); one CTA per segment, any k up to
// MAX_K_GPU; writes out_count[i] hits to out_*[i * k ..]. Exercises the running top-k used by queries.
extern "C" __global__ void __launch_bounds__(THREADS) topk_segments(const u32* seg, const u32* docs,
        const float* scores, u32 num_segments, u32 k, u64* topbuf, u32* out_doc, float* out_score,
        u32* out_count) {
    __shared__ TopShared ts;
    __shared__ u64 sort[MAX_K_GPU];
    for (u32 i = blockIdx.x; i < num_segments; i += gridDim.x) {
        u64* buf = topbuf + (u64)blockIdx.x * TOPK_CAP;
        topk_reset(&ts);
        for (u32 base = seg[i]; base < seg[i + 1]; base += THREADS) {
            u32 j = base + threadIdx.x;
            bool valid = j < seg[i + 1];
            topk_offer(buf, k, &ts, valid, valid ? scores[j] : 0.0f, valid ? docs[j] : 0u);
        }
        u32 got = topk_finish(buf, k, &ts, sort, out_doc + (u64)i * k, out_score + (u64)i * k);
        if (threadIdx.x == 0) out_count[i] = got;
        __syncthreads();
    }
}
