#line 2 "kernels/common.cuh"
// warpsearch GPU kernels: block decode, exact top-k, and the batched AND / OR query kernel.
//
// Compiled once at start-up by NVRTC (crates/gpu/src/nvrtc.rs) with --fmad=false and IEEE division, so
// that every float operation rounds exactly as the CPU engine's does: scores are bit-identical to the CPU
// oracle's. docs/kernels.md describes each kernel's inputs, outputs, grid shape and invariants.
//
// One translation unit made of these files, in this order (nvrtc.rs concatenates them; each starts with
// a #line directive, so that NVRTC's errors and -lineinfo name the file and line):
// - common.cuh: compile-time constants (set from Rust as -D defines), the descriptors the host fills
//   (crates/gpu/src/abi.rs mirrors them and checks their layout), small helpers (unpacking, scans, hit keys,
//   binary search, merge path);
// - decode.cu: block decode, one warp per block, for every codec;
// - topk.cu: the running top-k of a CTA;
// - query_state.cuh: the query kernel's shared state and its phase clock;
// - score.cu: BM25 contributions, block-max bounds, an OR window's blocks;
// - and.cu: ranked AND; or.cu: ranked OR;
// - search.cu: the query kernel's entry points; check.cu: the test and benchmark kernels.
//
// Layout conventions (all little-endian u32 words, as in the on-disk index, docs/format.md):
// - a posting list is cut into blocks of 128 postings; block b of a list has skip data first/last docID,
//   its word offset from the list's start and the offset of its frequency section;
// - PForDelta, Elias-Fano, Rice and SIMD-BP128 blocks are decoded by one warp each (decode_block_warp).

// The numbers the host shares with these kernels are defined once, in crates/gpu/src/abi.rs, and given
// to NVRTC as -D defines (abi::defines): BLOCK_LEN, THREADS (threads per CTA), CPT (AND candidates per
// thread), TOPK_CAP (entries of the per-CTA running top-k buffer: k <= MAX_K_GPU, + a window), MAX_K_GPU
// (the final sort runs in shared memory over this many keys), MAX_WINDOW (OR accumulator window: shared
// u32 sums), MAX_SMALL_OR (postings of the largest OR query the sort path takes), the codec ids CODEC_*,
// the modes MODE_*, COUNT_FAILED, the phase counters PH_* and PHASE_COUNTERS (query_state.cuh), and
// MIN_CTAS_AND / MIN_CTAS_OR: the minimum resident CTAs per SM asked of the compiler for each entry
// point of the query kernel (it caps registers per thread; crates/gpu/src/nvrtc.rs chooses them); and the
// index build's RADIX_BITS (bits a radix sort pass orders) and SORT_TILE (keys a CTA of a pass orders).
#if !defined(BLOCK_LEN) || !defined(THREADS) || !defined(CPT) || !defined(TOPK_CAP) || !defined(MAX_K_GPU) \
    || !defined(MAX_WINDOW) || !defined(MAX_SMALL_OR) || !defined(CODEC_PFOR) || !defined(CODEC_EF)       \
    || !defined(CODEC_RICE) || !defined(CODEC_SIMDBP) || !defined(MODE_AND) || !defined(MODE_OR)           \
    || !defined(COUNT_FAILED) || !defined(PH_SELECT) || !defined(PH_DECODE) || !defined(PH_INTERSECT)      \
    || !defined(PH_SCORE) || !defined(PH_TOPK) || !defined(PH_BLOCKS) || !defined(PHASE_COUNTERS)          \
    || !defined(MIN_CTAS_AND) || !defined(MIN_CTAS_OR) || !defined(RADIX_BITS) || !defined(SORT_TILE)
#error "the shared constants come from the host: compile through crates/gpu/src/nvrtc.rs (abi::defines)"
#endif
#define WARPS (THREADS / 32)
#define CHUNK (THREADS * CPT)    // AND candidates per step: WARPS blocks of the shortest list
#define FULL_MASK 0xffffffffu
#define SMALL_OR_BLOCKS 256u  // blocks of the largest OR query the sort path takes

typedef unsigned int u32;
typedef unsigned long long u64;

// ---------------------------------------------------------------------------------------------------------
// Descriptors shared with the host (crates/gpu/src/abi.rs mirrors them with #[repr(C)] and appends
// static_asserts of their sizes and field offsets to this translation unit).

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
    float fixed_scale; // the query's fixed point (crates/query/src/fixed.rs): 2^s
    float fixed_unit;  // and 2^-s
    u32 share;        // a query cut into parts: its key in ba.shared_keys, the best k-th key any of its
                      // parts has found (each part prunes with it); NO_SHARE: one part
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
    u32 early;            // stop on the global-score bound (docs/references.md#pruned-list-caching Algorithm 1)
    u32 window;           // OR accumulator window in documents (<= MAX_WINDOW, multiple of THREADS)
    u32 small_or;         // OR queries of at most this many postings are sorted, not accumulated (0: never)
    u32 merge_ratio;      // AND steps merge (merge-find, merge-path) when the list's postings in the
                          // candidates' range are at most merge_ratio per candidate; else binary search
    u32 answers_mapped;   // 1: the outputs are host memory read while the kernel runs (a count after its hits)
    u32* next_query;      // work counter (zeroed before launch)
    u32* out_doc;
    float* out_score;
    u32* out_count;       // per query: hits, or COUNT_FAILED
    u32* scratch_doc;     // per CTA: CHUNK * BLOCK_LEN decoded docIDs
    u32* scratch_tf;      // per CTA: CHUNK * BLOCK_LEN decoded frequencies
    u64* topbuf;          // per CTA: TOPK_CAP keys
    u64* phase_cycles;    // per CTA: 8 counters, or null (no instrumentation)
    u64* shared_keys;     // per query cut into parts (QueryDesc::share): a key, zeroed before launch
    u64* task_ns;         // per task (out_slot): globaltimer when taken and when answered, or null
};

// The index build's block-bound kernel's arguments (build.cu): the lists sorted by term, their offsets
// and idf, the documents' lengths and BM25's parameters.
struct BoundArgs {
    const u32* starts;        // num_terms + 1 offsets of the lists in docs
    const u32* block_starts;  // num_terms + 1 offsets of the lists' first blocks
    const float* idf;         // per list
    const u32* docs;          // final docIDs, list after list
    const u32* tfs;
    const u32* lens;          // per final docID
    float* out;               // per block: its bound
    u32 num_terms;
    u32 num_blocks;
    float k1;
    float b;
    float avg_doc_len;
};

struct EncodeArgs {
    const u32* starts;        // num_terms + 1 offsets of the lists in docs
    const u32* block_starts;  // num_terms + 1 offsets of the lists' first blocks
    const u32* docs;          // final docIDs, list after list
    const u32* tfs;
    const float* bounds;      // per block: its bound
    u32* offsets;             // num_blocks + 1: each block's size in words, then (scanned) its first word
    u32* words;               // the encoded blocks
    u32* meta;                // per block: BlockMeta (first doc, last doc, offset in its list, freq offset, bound)
    u64* cf;                  // per list: its frequencies' sum (zeroed)
    u32* bad;                 // set where a list is not strictly increasing, a docID >= num_docs or a tf is 0
    u32 num_terms;
    u32 num_blocks;
    u32 num_docs;
};

// ---------------------------------------------------------------------------------------------------------
// Small helpers.

__device__ __forceinline__ u32 packed_words(u32 n, u32 b) { return (n * b + 31u) / 32u; }

__device__ __forceinline__ u32 low_mask(u32 b) { return b >= 32u ? FULL_MASK : ((1u << b) - 1u); }

// Words of a SIMD-BP128 section of n values of width b: BitPacker4x's 4 * b for a full block, else plainly
// packed (crates/codec/src/simdbp.rs).
__device__ __forceinline__ u32 simdbp_words(u32 n, u32 b) { return n == BLOCK_LEN ? 4u * b : packed_words(n, b); }

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

// First index in [0, n) with a[i] >= x, or n.
__device__ __forceinline__ u32 lower_bound(const u32* a, u32 n, u32 x) {
    u32 lo = 0, hi = n;
    while (lo < hi) {
        u32 mid = (lo + hi) >> 1;
        if (a[mid] < x) lo = mid + 1; else hi = mid;
    }
    return lo;
}

// Parallel merge of two sorted arrays a (na) and b (nb) by merge path (docs/references.md#griffin section 3.1.2, after
// Green et al.'s GPU MergePath): the merged sequence, a first on ties, is cut into equal parts, one per
// thread; each thread finds where its cross diagonal meets the path by binary search, then merges its part
// sequentially. visit(i, j) is called exactly once for every i < na, with j = lower_bound(b, a[i]) (the
// number of b elements below a[i]), so it serves Parallel Merge Find (docs/references.md#ding-gpu-query-processing section 7.1) as well as
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
