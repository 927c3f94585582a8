#line 2 "kernels/build.cu"
// Index build (crates/gpu/src/build/, docs/references.md#gpu-bm25-weights): the analysed (term, doc, tf)
// tuples sorted by term rank then docID with a stable LSD radix sort, each list's offsets found, and every
// block's BM25 bound computed exactly as the CPU's writer computes it (crates/index/src/writer.rs:
// f32 arithmetic in the same order, no fused multiply-add). Its own translation unit: common.cuh, this
// file and the layout checks (crates/gpu/src/nvrtc.rs, build_source).

#define RADIX (1u << RADIX_BITS)
#define DIGIT_MASK (RADIX - 1u)

// keys[i] = rank[base[s] + term[i]] for the postings of segment s (seg_start[s] <= i < seg_start[s + 1]),
// the tuples of one partition (its terms numbered within it, their ranks from base[s] in rank).
extern "C" __global__ void build_rank_keys(const u32* term, const u32* rank, const u32* seg_start,
                                           const u32* base, u32 num_segs, u32 n, u32* keys) {
    for (u32 i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        u32 s = lower_bound(seg_start, num_segs + 1u, i + 1u) - 1u;
        keys[i] = rank[base[s] + term[i]];
    }
}

// doc[i] = new_id[doc[i]]: documents renumbered (global-score order).
extern "C" __global__ void build_map_docs(u32* doc, const u32* new_id, u32 n) {
    for (u32 i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        doc[i] = new_id[doc[i]];
}

// out[i] = src[idx[i]] (idx null: out[i] = i, the identity permutation).
extern "C" __global__ void build_gather(const u32* src, const u32* idx, u32 n, u32* out) {
    for (u32 i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        out[i] = idx ? src[idx[i]] : i;
}

// One radix sort pass, step 1: counts[d * tiles + t] = keys of tile t (SORT_TILE keys, the last tile
// fewer) whose digit at `shift` is d. One CTA per tile; digit-major, so that one exclusive scan of the
// counts gives every (digit, tile)'s first output position.
extern "C" __global__ void __launch_bounds__(THREADS) radix_histogram(const u32* keys, u32 n, u32 shift,
                                                                       u32* counts) {
    __shared__ u32 h[RADIX];
    for (u32 d = threadIdx.x; d < RADIX; d += THREADS) h[d] = 0u;
    __syncthreads();
    u64 lo = (u64)blockIdx.x * SORT_TILE, hi = min(lo + SORT_TILE, (u64)n);
    for (u64 i = lo + threadIdx.x; i < hi; i += THREADS) atomicAdd(&h[(keys[i] >> shift) & DIGIT_MASK], 1u);
    __syncthreads();
    for (u32 d = threadIdx.x; d < RADIX; d += THREADS) counts[(u64)d * gridDim.x + blockIdx.x] = h[d];
}

// Exclusive prefix sum of v[0..n) in place, by one CTA (a radix pass's counts: RADIX per tile). Each
// thread sums 16 consecutive values, the CTA scans the sums, and a carry runs from chunk to chunk.
#define SCAN_ITEMS 16u
extern "C" __global__ void __launch_bounds__(THREADS) scan_exclusive(u32* v, u32 n) {
    __shared__ u32 sh[WARPS + 1];
    u32 carry = 0u;
    for (u64 base = 0; base < n; base += (u64)THREADS * SCAN_ITEMS) {
        u64 start = base + (u64)threadIdx.x * SCAN_ITEMS;
        u32 local[SCAN_ITEMS];
        u32 sum = 0u;
#pragma unroll
        for (u32 k = 0; k < SCAN_ITEMS; k++) {
            local[k] = start + k < n ? v[start + k] : 0u;
            sum += local[k];
        }
        u32 total;
        u32 run = carry + block_exclusive_scan(sum, sh, &total);
#pragma unroll
        for (u32 k = 0; k < SCAN_ITEMS; k++) {
            if (start + k < n) v[start + k] = run;
            run += local[k];
        }
        carry += total;
    }
}

// One radix sort pass, step 2: every key of tile t (with its value) to its place, stably: keys of equal
// digit keep their order, across the tile's rounds of THREADS keys, the warps of a round and the lanes of
// a warp. `offsets` are the scanned counts of radix_histogram.
extern "C" __global__ void __launch_bounds__(THREADS) radix_scatter(const u32* keys, const u32* vals, u32 n,
                                                                     u32 shift, const u32* offsets,
                                                                     u32* keys_out, u32* vals_out) {
    __shared__ u32 base[RADIX];
    __shared__ u32 wcount[WARPS * RADIX];
    u32 lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
    for (u32 d = threadIdx.x; d < RADIX; d += THREADS) base[d] = offsets[(u64)d * gridDim.x + blockIdx.x];
    u64 lo = (u64)blockIdx.x * SORT_TILE, hi = min(lo + SORT_TILE, (u64)n);
    // Every thread runs every round (the bound is the CTA's), so the barriers inside are uniform.
    for (u64 r = lo; r < hi; r += THREADS) {
        u64 i = r + threadIdx.x;
        bool valid = i < hi;
        u32 key = valid ? keys[i] : 0u;
        u32 d = valid ? (key >> shift) & DIGIT_MASK : RADIX;
        u32 peers = __match_any_sync(FULL_MASK, d);
        u32 below = __popc(peers & ((1u << lane) - 1u));
        for (u32 j = threadIdx.x; j < WARPS * RADIX; j += THREADS) wcount[j] = 0u;
        __syncthreads();
        if (valid && below == 0u) wcount[warp * RADIX + d] = __popc(peers);
        __syncthreads();
        // Per digit: the warps' first positions in this round, and the digit's next position after it.
        for (u32 dd = threadIdx.x; dd < RADIX; dd += THREADS) {
            u32 s = base[dd];
            for (u32 w = 0; w < WARPS; w++) {
                u32 c = wcount[w * RADIX + dd];
                wcount[w * RADIX + dd] = s;
                s += c;
            }
            base[dd] = s;
        }
        __syncthreads();
        if (valid) {
            u32 pos = wcount[warp * RADIX + d] + below;
            keys_out[pos] = key;
            vals_out[pos] = vals[i];
        }
        __syncthreads();
    }
}

// starts[r] = the first position of rank r in the sorted keys, starts[num_terms] = n. Every rank below
// num_terms holds a posting; a rank that holds none keeps the value the host filled starts with, which it
// then refuses.
extern "C" __global__ void list_starts(const u32* keys, u32 n, u32 num_terms, u32* starts) {
    for (u32 i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        if (i == 0u || keys[i] != keys[i - 1u]) starts[keys[i]] = i;
        if (i == 0u) starts[num_terms] = n;
    }
}

// Every block's bound, one warp per block: the largest BM25 score of its postings, loosened as
// crates/index/src/bm25.rs's loosen_bound does. Each score is computed as Bm25::score computes it:
// norm = dl / avgdl (0 without length), length_norm = k1 * ((1 - b) + b * norm),
// tf_part = (tf * (k1 + 1)) / (tf + length_norm), score = idf * tf_part; the maximum does not depend on
// the order (scores are finite and positive).
extern "C" __global__ void __launch_bounds__(THREADS) block_bounds(const BoundArgs a) {
    u32 lane = threadIdx.x & 31u;
    u32 gw = blockIdx.x * WARPS + (threadIdx.x >> 5), nw = gridDim.x * WARPS;
    for (u32 j = gw; j < a.num_blocks; j += nw) {
        // The list of block j: the last one whose first block is at most j.
        u32 r = lower_bound(a.block_starts, a.num_terms + 1u, j + 1u) - 1u;
        u32 first = a.starts[r] + (j - a.block_starts[r]) * BLOCK_LEN;
        u32 end = min(first + BLOCK_LEN, a.starts[r + 1u]);
        float idf = a.idf[r];
        float m = 0.0f;
        for (u32 i = first + lane; i < end; i += 32u) {
            float tf = (float)a.tfs[i];
            float norm = a.avg_doc_len > 0.0f ? (float)a.lens[a.docs[i]] / a.avg_doc_len : 0.0f;
            float length_norm = a.k1 * ((1.0f - a.b) + a.b * norm);
            float part = (tf * (a.k1 + 1.0f)) / (tf + length_norm);
            m = fmaxf(m, idf * part);
        }
        for (u32 o = 16u; o > 0u; o >>= 1) m = fmaxf(m, __shfl_xor_sync(FULL_MASK, m, o));
        // loosen_bound: bound * (1 + 4 * f32::EPSILON) + f32::MIN_POSITIVE.
        if (lane == 0u) a.out[j] = m * 0x1.000008p+0f + 0x1p-126f;
    }
}

// SIMD-BP128 encoding (crates/codec/src/simdbp.rs), one warp per block, as the CPU's writer encodes: a header
// word (docID width | frequency width << 8), then the docIDs' gaps minus one (the first 0), then the
// frequencies minus one, each packed with the width of its largest value. A full block's sections are
// BitPacker4x's (value i in lane i % 4 at position i / 4, each lane LSB-first, its words at every fourth
// word); a shorter block packs each section plainly (crates/codec/src/bits.rs).

// Block j's list (*r), first posting (*first) and postings (*n).
__device__ __forceinline__ void encode_block_of(const EncodeArgs& a, u32 j, u32* r, u32* first, u32* n) {
    *r = lower_bound(a.block_starts, a.num_terms + 1u, j + 1u) - 1u;
    *first = a.starts[*r] + (j - a.block_starts[*r]) * BLOCK_LEN;
    *n = min(*first + BLOCK_LEN, a.starts[*r + 1u]) - *first;
}

__device__ __forceinline__ u32 warp_or(u32 v) {
    for (u32 o = 16u; o > 0u; o >>= 1) v |= __shfl_xor_sync(FULL_MASK, v, o);
    return v;
}

__device__ __forceinline__ u32 width_of(u32 v) { return 32u - __clz(v); }

// Step 1: offsets[j] = block j's size in words; cf[r] += the frequencies of its postings; *bad set where
// a docID is not above the one before it in its list (across blocks too), not below num_docs, or a
// frequency is 0.
extern "C" __global__ void __launch_bounds__(THREADS) simdbp_sizes(const EncodeArgs a) {
    u32 lane = threadIdx.x & 31u;
    u32 gw = blockIdx.x * WARPS + (threadIdx.x >> 5), nw = gridDim.x * WARPS;
    for (u32 j = gw; j < a.num_blocks; j += nw) {
        u32 r, first, n;
        encode_block_of(a, j, &r, &first, &n);
        u32 gaps = 0u, tfs = 0u;
        u64 cf = 0u;
        bool bad = false;
        for (u32 k = lane; k < n; k += 32u) {
            u32 i = first + k, d = a.docs[i], tf = a.tfs[i];
            if (i > a.starts[r]) {
                u32 before = a.docs[i - 1u];
                bad |= d <= before;
                if (k > 0u) gaps |= d - before - 1u;
            }
            bad |= d >= a.num_docs || tf == 0u;
            tfs |= tf - 1u;
            cf += tf;
        }
        gaps = warp_or(gaps);
        tfs = warp_or(tfs);
        for (u32 o = 16u; o > 0u; o >>= 1) cf += __shfl_xor_sync(FULL_MASK, cf, o);
        bad = __any_sync(FULL_MASK, bad);
        if (lane == 0u) {
            a.offsets[j] = 1u + simdbp_words(n, width_of(gaps)) + simdbp_words(n, width_of(tfs));
            atomicAdd(&a.cf[r], cf);
            if (bad) atomicOr(a.bad, 1u);
        }
    }
}

// Word w of a section of n values of width b (1 to 32) in v: BitPacker4x's layout for a full block, else
// the plain one. The word holds bits [32k, 32k + 32) of its lane's stream (the plain layout: one lane).
__device__ __forceinline__ u32 simdbp_word(const u32* v, u32 n, u32 b, u32 w) {
    bool full = n == BLOCK_LEN;
    u32 lane = full ? w & 3u : 0u, k = full ? w >> 2 : w, stride = full ? 4u : 1u;
    u32 count = full ? BLOCK_LEN / 4u : n;
    u32 lo = k * 32u;
    u32 p_end = min((lo + 31u) / b + 1u, count);
    u32 word = 0u;
    for (u32 p = lo / b; p < p_end; p++) {
        u32 x = v[p * stride + lane], at = p * b;
        word |= at >= lo ? x << (at - lo) : x >> (lo - at);
    }
    return word;
}

// Step 2 (offsets scanned: each block's first word, the last entry the total): every block's words and
// its BlockMeta, the offset from its list's first block.
extern "C" __global__ void __launch_bounds__(THREADS) simdbp_pack(const EncodeArgs a) {
    __shared__ u32 values[WARPS][2][BLOCK_LEN];
    u32 lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
    u32 gw = blockIdx.x * WARPS + warp, nw = gridDim.x * WARPS;
    u32* gaps = values[warp][0];
    u32* tfs = values[warp][1];
    for (u32 j = gw; j < a.num_blocks; j += nw) {
        u32 r, first, n;
        encode_block_of(a, j, &r, &first, &n);
        u32 gor = 0u, tor = 0u;
        for (u32 k = lane; k < n; k += 32u) {
            u32 i = first + k;
            u32 g = k == 0u ? 0u : a.docs[i] - a.docs[i - 1u] - 1u, t = a.tfs[i] - 1u;
            gaps[k] = g;
            tfs[k] = t;
            gor |= g;
            tor |= t;
        }
        u32 db = width_of(warp_or(gor)), fb = width_of(warp_or(tor));
        __syncwarp();
        u32 at = a.offsets[j];
        u32* out = a.words + at;
        u32 dw = simdbp_words(n, db), fw = simdbp_words(n, fb);
        if (lane == 0u) out[0] = db | fb << 8;
        if (db > 0u)
            for (u32 w = lane; w < dw; w += 32u) out[1u + w] = simdbp_word(gaps, n, db, w);
        if (fb > 0u)
            for (u32 w = lane; w < fw; w += 32u) out[1u + dw + w] = simdbp_word(tfs, n, fb, w);
        if (lane == 0u) {
            u32* m = a.meta + (u64)j * 5u;
            m[0] = a.docs[first];
            m[1] = a.docs[first + n - 1u];
            m[2] = at - a.offsets[a.block_starts[r]];
            m[3] = 1u + dw;
            m[4] = __float_as_uint(a.bounds[j]);
        }
        __syncwarp();
    }
}
