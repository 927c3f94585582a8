#line 2 "kernels/score.cu"
// Scoring and bounds: BM25 contributions, block-max bounds of a docID range, and the blocks of each term
// that overlap an OR window.

// BM25's contribution of a posting with frequency tf to a document whose length norm is `norm`.
__device__ __forceinline__ float contribution_of(const IndexArgs& ix, const TermDesc& t, float norm, u32 tf) {
    float f = (float)tf;
    return t.weight * (f * ix.k1p1 / (f + norm));
}

__device__ __forceinline__ float contribution(const IndexArgs& ix, const TermDesc& t, u32 doc, u32 tf) {
    return contribution_of(ix, t, ix.norms[doc], tf);
}

// The query's fixed point (crates/query/src/fixed.rs, Fixed::of): contribution c as the integer
// floor(c * 2^s). Fixed-point sums are exact in any order, so threads may add a document's contributions
// in whatever order they come (shared atomics) and still get the CPU's sum, bit for bit.
__device__ __forceinline__ u32 fixed_of(const QueryShared* s, float c) { return __float2uint_rz(c * s->fixed_scale); }

// The score before the prior of fixed-point sum q (Fixed::value): q rounded to the nearest float, times 2^-s.
__device__ __forceinline__ float fixed_value(const QueryShared* s, u32 q) { return __uint2float_rn(q) * s->fixed_unit; }

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
// window's last docID): first_out[i], the first whose last docID is at least r0, and cnt_out[i] of them.
// Adds the largest of their bounds to *bound (set beforehand to the prior's bound) and lowers *after to
// the first docID after w1 in any of the term's blocks. The search runs forward from first_in[i] (the
// previous window's first block; first_out may be first_in), 32 blocks at a time, each lane loading its
// block's first and last docIDs and bound at once: the blocks wholly before the window, those in it and
// those after it are three runs of lanes, so one round of loads usually settles a term (a run of 32
// wholly before it is passed by bisection). The first docID after the window comes from the lanes too.
// Term i goes to warp WARPS - 1 - i % WARPS: or_window_regs deals a window's blocks out from warp 0, so
// when the next window's selection runs beside this one's adds, it lands on the warps with fewest blocks.
__device__ void window_blocks(const IndexArgs& ix, const TermDesc* terms, u32 n, u32 r0, u32 r1, u32 w1,
                              const u32* first_in, u32* first_out, u32* cnt_out, float* bound, u32* after) {
    u32 lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
    for (u32 i = WARPS - 1u - warp; i < n; i += WARPS) {
        const TermDesc& t = terms[i];
        const u32* first = ix.blk_first + t.block_base;
        const u32* last = ix.blk_last + t.block_base;
        const float* bmax = ix.blk_max + t.block_base;
        u32 nb = t.num_blocks, c = first_in[i];
        u32 b = 0, cnt = 0;
        bool placed = false;        // b found: the first block whose last docID is at least r0
        u32 in_last = 0;            // the last docID of the window's last block (cnt > 0)
        u32 after_first;            // the first docID of the first block after the window (~0: none)
        float m = 0.0f;
        for (;;) {
            u32 x = c + lane;
            bool valid = x < nb;
            u32 f = valid ? first[x] : 0xffffffffu;
            u32 l = valid ? last[x] : 0xffffffffu;
            float bm = valid ? bmax[x] : 0.0f;
            u32 before = __ballot_sync(FULL_MASK, valid && l < r0);
            if (before == FULL_MASK) {
                c += 32u + lower_bound(last + c + 32u, nb - c - 32u, r0);
                continue;
            }
            if (!placed) {
                placed = true;
                b = c + __popc(before);
            }
            bool in = valid && l >= r0 && f <= r1;
            if (in) m = fmaxf(m, bm * t.bound_scale);
            u32 ins = __ballot_sync(FULL_MASK, in);
            cnt += __popc(ins);
            if (ins) in_last = __shfl_sync(FULL_MASK, l, 31 - __clz(ins));
            u32 after = __ballot_sync(FULL_MASK, !valid || f > r1);
            if (after) {
                after_first = __shfl_sync(FULL_MASK, f, __ffs(after) - 1);
                break;
            }
            c += 32u;
        }
        m = t.bound_scale < 0.0f ? __int_as_float(0x7f800000) : warp_max(m);
        if (lane == 0) {
            first_out[i] = b;
            cnt_out[i] = cnt;
            atomicAdd(bound, m);
            // The next posting after w1 is in the window's last block if that reaches past w1, else it
            // is the next block's first (none: ~0, the sentinel of a lane past the list).
            u32 next = 0xffffffffu;
            if (w1 != 0xffffffffu) {
                if (cnt > 0u && in_last > w1) next = w1 + 1u;
                else next = max(after_first, w1 + 1u);
            }
            atomicMin(after, next);
        }
    }
}
