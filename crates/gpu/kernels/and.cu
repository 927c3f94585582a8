#line 2 "kernels/and.cu"
// Ranked AND (SvS): a chunk of candidates from the shortest list looked up in each other list, then
// scored and offered to the top-k.

// Looks up every candidate in list t (SvS step). Thread i holds candidates CPT*i .. CPT*i+CPT-1 (in docID
// order), so that each thread has several independent searches in flight. Three stages, as docs/references.md#ding-gpu-query-processing
// section 8.1 and docs/references.md#griffin section 3.1.2 describe:
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
                                      want_tf ? dec_tf + j * BLOCK_LEN : (u32*)0, and_scratch(warp));
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

// The frequencies of the query's last KEEP_TF lists (in processing order), kept per candidate from their
// intersection steps, so that scoring reads them instead of looking the survivors up in those lists
// again. kept_tf[m] belongs to step keep_base + m (and_query). Only search_and uses it, so only its CTAs
// hold it (16 KiB at 256 threads). Keeping them measured faster than looking every list up again
// (docs/decisions/013-gpu-and-kernel.md).
#define KEEP_TF 4
__shared__ u32 kept_tf[KEEP_TF][CHUNK];

// Keeps the candidates whose tf is not 0, in order, with the frequencies kept so far (kept_tf[0 ..
// nk - 2]) and this step's (tf, into kept_tf[nk - 1]) when nk > 0.
__device__ void compact_candidates(QueryShared* s, const u32 (&tf)[CPT], u32 nk = 0) {
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
    u32 start = pos;
#pragma unroll
    for (int i = 0; i < CPT; i++) {
        u32 c = tid * CPT + i;
        if (c < ncand && tf[i] != 0) {
            s->cand_doc[pos] = d[i];
            s->cand_tf0[pos] = f[i];
            if (nk > 0u) kept_tf[nk - 1u][pos] = tf[i];
            pos++;
        }
    }
    // The earlier steps' frequencies move as the candidates do: all read, then all written.
    for (u32 m = 0; m + 1u < nk; m++) {
#pragma unroll
        for (int i = 0; i < CPT; i++) {
            u32 c = tid * CPT + i;
            f[i] = c < ncand ? kept_tf[m][c] : 0u;
        }
        __syncthreads();
        u32 p = start;
#pragma unroll
        for (int i = 0; i < CPT; i++) {
            u32 c = tid * CPT + i;
            if (c < ncand && tf[i] != 0) kept_tf[m][p++] = f[i];
        }
        __syncthreads();
    }
    if (tid == 0) s->ncand = total;
    __syncthreads();
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
                                          s->cand_tf0 + warp * BLOCK_LEN, and_scratch(warp));
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
        // Steps from keep_base on decode their frequencies too, and keep them for scoring.
        u32 keep_base = n > KEEP_TF ? n - KEEP_TF : 1u;
        for (u32 j = 1; j < n && s->ncand > 0; j++) {
            bool keep = j >= keep_base;
            if (!lookup_step(ix, ba, terms[j], s, dec_doc, dec_tf, keep, tf, clk)) return;
            compact_candidates(s, tf, keep ? j - keep_base + 1u : 0u);
            clk.lap(PH_INTERSECT);
        }
        u32 ncand = s->ncand;
        if (ncand == 0) continue;
        // Score the survivors: fixed-point sums (any order gives the CPU's).
        u32 score[CPT];
        u32 doc[CPT];
#pragma unroll
        for (int i = 0; i < CPT; i++) {
            u32 c = tid * CPT + i;
            score[i] = 0u;
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
            } else if (j >= keep_base) {
#pragma unroll
                for (int i = 0; i < CPT; i++) {
                    u32 c = tid * CPT + i;
                    tf[i] = c < ncand ? kept_tf[j - keep_base][c] : 0u;
                }
            } else {
                if (!lookup_step(ix, ba, terms[j], s, dec_doc, dec_tf, true, tf, clk)) return;
            }
#pragma unroll
            for (int i = 0; i < CPT; i++)
                if (tid * CPT + i < ncand) score[i] += fixed_of(s, contribution(ix, terms[j], doc[i], tf[i]));
        }
        clk.lap(PH_SCORE);
        topk_make_room(buf, ba.k, &s->top, CHUNK);
#pragma unroll
        for (int i = 0; i < CPT; i++) {
            bool valid = tid * CPT + i < ncand;
            topk_push(buf, &s->top, valid, valid ? finish(ix, doc[i], fixed_value(s, score[i])) : 0.0f, doc[i]);
        }
        __syncthreads();
        clk.lap(PH_TOPK);
    }
}
