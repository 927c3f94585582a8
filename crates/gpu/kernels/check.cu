#line 2 "kernels/check.cu"
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
