#line 2 "kernels/or.cu"
// Ranked OR: document windows with dense fixed-point accumulators in shared memory (every list of a window
// added at once: integer sums are the CPU's in any order), and small queries by sorting.

// The plan slot of (list, block) pair p: the last slot whose first pair is at most p (it has blocks, as p
// is before its end). os->t_off holds each slot's first pair.
__device__ __forceinline__ u32 slot_of_pair(const OrState* os, u32 n, u32 p) {
    u32 lo = 0, hi = n;
    while (hi - lo > 1) {
        u32 mid = (lo + hi) >> 1;
        if (os->t_off[mid] <= p) lo = mid; else hi = mid;
    }
    return lo;
}

// Starts bringing the length norms of documents [a, b] into L2 (one bulk prefetch by thread 0, on sm_90
// and later), so that a window's first list finds them there instead of in DRAM: the norm loads are the
// OR kernel's largest single cost. Only the window being scored: also prefetching the next window's
// measured slower (docs/decisions/011-or-kernel-exhaustive-windows.md).
__device__ __forceinline__ void prefetch_norms(const IndexArgs& ix, u32 a, u32 b) {
#if __CUDA_ARCH__ >= 900
    u64 end = min((u64)b + 1u, (u64)ix.num_docs);
    u32 a4 = a & ~3u, e4 = (u32)end & ~3u;  // 16-byte aligned, a multiple of 16 bytes, inside the array
    if (threadIdx.x == 0 && e4 > a4)
        asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(ix.norms + a4), "r"((e4 - a4) * 4u) : "memory");
#endif
}

// Sets window offset i's bit in `seen`, a bit per window document, set once its accumulator holds a
// sum: the bits let the window's reset and its top-k pass visit only the documents the lists touched (a
// window of 16,384 documents holds a few thousand). The plain read only saves the atomic where the bit
// is set already: threads adding the same document (its lists are added at once) may both find it clear
// and both set it, which is harmless; the atomic OR keeps other threads' bits of the word.
__device__ __forceinline__ void mark_seen(u32* seen, u32 i) {
    u32 m = 1u << (i & 31u);
    if (!(seen[i >> 5] & m)) atomicOr(&seen[i >> 5], m);
}

// Adds fixed-point contribution q to window offset i's accumulator and returns the new sum. Atomic (a
// native shared-memory integer add), so any thread may add any list's posting at any time: the sum is
// exact whatever the order. Every accumulator is 0 until its document's first contribution (or_query
// keeps them so between windows).
__device__ __forceinline__ u32 acc_add(u32* acc, u32* seen, u32 i, u32 q) {
    mark_seen(seen, i);
    return atomicAdd(&acc[i], q) + q;
}

// Offers a thread's largest sum written in this window to *wmax. The caller synchronises before
// reading it.
__device__ __forceinline__ void offer_window_max(u32* wmax, u32 mx) {
    for (u32 d = 16; d > 0; d >>= 1) mx = max(mx, __shfl_xor_sync(FULL_MASK, mx, d));
    if ((threadIdx.x & 31u) == 0u && mx > 0u) atomicMax(wmax, mx);
}

// Adds one OR window's postings to the accumulators (at most THREADS terms): every (list, block) pair that
// overlaps the window is decoded first, one warp per pair and all warps at once, into the CTA's scratch;
// then all threads add the postings, list after list without waiting for one another (the sums are
// exact in any order). More than THREADS pairs go in rounds; the barrier after a round's adds lets the
// next round decode into the same scratch.
__device__ void or_window(const IndexArgs& ix, const TermDesc* terms, u32 n, u32 w0, u32 r0, u32 r1,
                          const u32* first, const u32* count, u32* wmax, QueryShared* s, OrState* os, u32* acc,
                          u32* seen, u32* dec_doc, u32* dec_tf, PhaseClock& clk) {
    u32 tid = threadIdx.x, lane = tid & 31u, warp = tid >> 5;
    u32 mx = 0u;
    u32 cnt = 0;
    if (tid < n) {
        u32 j = terms[tid].slot_term;  // window_blocks found each term's blocks
        cnt = count[j];
        os->t_start[tid] = first[j];
    }
    u32 total;
    u32 off = block_exclusive_scan(cnt, s->top.scan, &total);
    if (tid < n) os->t_off[tid] = off;
    if (tid == 0) {
        os->t_off[n] = total;
        clk.blocks(total);
    }
    __syncthreads();
    clk.lap(PH_SELECT);
    for (u32 q0 = 0; q0 < total; q0 += THREADS) {
        u32 q1 = min(total, q0 + THREADS);
        for (u32 p = q0 + warp; p < q1; p += WARPS) {
            u32 lo = slot_of_pair(os, n, p);
            const TermDesc& t = terms[terms[lo].slot_term];
            u32 bi = t.block_base + os->t_start[lo] + (p - os->t_off[lo]);
            bool good = decode_block_warp(ix, t, bi, dec_doc + (p - q0) * BLOCK_LEN, dec_tf + (p - q0) * BLOCK_LEN,
                                          warp_scratch(s, warp));
            if (!good && lane == 0) s->top.failed = 1;
        }
        __syncthreads();
        clk.lap(PH_DECODE);
        if (s->top.failed) break;
        for (u32 sl = 0; sl < n; sl++) {
            u32 a = max(os->t_off[sl], q0), b = min(os->t_off[sl + 1], q1);
            if (a >= b) continue;
            const TermDesc& t = terms[terms[sl].slot_term];
            for (u32 x = tid; x < (b - a) * BLOCK_LEN; x += THREADS) {
                u32 p = a + x / BLOCK_LEN, i = x % BLOCK_LEN;
                u32 local = os->t_start[sl] + (p - os->t_off[sl]);
                u32 nb = block_postings(t, local);
                if (i < nb) {
                    u32 d = dec_doc[(p - q0) * BLOCK_LEN + i];
                    if (d >= r0 && d <= r1) {
                        float c = contribution(ix, t, d, dec_tf[(p - q0) * BLOCK_LEN + i]);
                        mx = max(mx, acc_add(acc, seen, d - w0, fixed_of(s, c)));
                    }
                }
            }
        }
        __syncthreads();
    }
    offer_window_max(wmax, mx);
}

// or_window for SIMD-BP128 lists: the warps share every (list, block) pair that overlaps the window,
// all lists at once, each warp decoding its block into registers (simdbp_block_regs) and adding the
// postings at once, their length norms loaded together. The fixed-point sums are exact in any order, so
// no list waits for another, and nothing here waits for another warp: the caller's one barrier a window
// orders the adds before the window's top-k pass (adding the lists in slot order, as float sums needed,
// cost a barrier a list). No scratch memory, where or_window decodes every list into global scratch
// first, then reads it back.
__device__ void or_window_regs(const IndexArgs& ix, const TermDesc* terms, u32 n, u32 w0, u32 r0, u32 r1,
                               const u32* first, const u32* count, u32* wmax, QueryShared* s, u32* acc,
                               u32* seen, PhaseClock& clk) {
    u32 lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
    u32 mx = 0u;
    if (clk.on() && threadIdx.x == 0) {
        u32 total = 0;
        for (u32 i = 0; i < n; i++) total += count[i];
        clk.blocks(total);
    }
    // Pair g (counting every term's blocks in the window, term after term) goes to warp g % WARPS:
    // `base` is the count of the terms before this one, so this warp's first block of the term is p0.
    u32 base = 0;
    for (u32 j = 0; j < n; j++) {
        u32 cnt = count[j];  // window_blocks found each term's blocks
        if (cnt == 0u) continue;
        const TermDesc& t = terms[j];
        u32 skew = base % WARPS;
        for (u32 p = warp >= skew ? warp - skew : warp + WARPS - skew; p < cnt; p += WARPS) {
            u32 doc[4], tf[4], nb;
            if (!simdbp_block_regs(ix, t, t.block_base + first[j] + p, doc, tf, &nb)) {
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
                if (in[k]) mx = max(mx, acc_add(acc, seen, doc[k] - w0, fixed_of(s, contribution_of(ix, t, norm[k], tf[k]))));
        }
        base += cnt;
    }
    offer_window_max(wmax, mx);
}

// OR of a small query by sorting, the alternative to dense accumulators: every block of every list is
// decoded into the CTA's scratch, each posting becomes a (docID, plan slot) key with its contribution, a
// bitonic sort in shared memory orders the keys, and one thread per run of equal docIDs sums the
// fixed-point contributions and offers the document. The host sends only
// queries of at most ba.small_or postings (a power of two that fits the launch's shared memory) and at
// most SMALL_OR_BLOCKS blocks.
__device__ void or_small(const IndexArgs& ix, const BatchArgs& ba, const TermDesc* terms, u32 n, u32 postings,
                         QueryShared* s, OrState* os, u64* keys, u32* vals, u32* dec_doc, u32* dec_tf, u64* buf,
                         PhaseClock& clk) {
    u32 tid = threadIdx.x, lane = tid & 31u, warp = tid >> 5;
    // Per plan slot: its first block pair and its first posting (exclusive scans).
    const TermDesc* mine = tid < n ? &terms[terms[tid].slot_term] : (const TermDesc*)0;
    u32 total, total_postings;
    u32 off = block_exclusive_scan(mine ? mine->num_blocks : 0u, s->top.scan, &total);
    u32 first = block_exclusive_scan(mine ? mine->df : 0u, s->top.scan, &total_postings);
    if (tid < n) {
        os->t_off[tid] = off;
        os->t_start[tid] = first;
    }
    if (tid == 0) os->t_off[n] = total;
    u32 m = 1;
    while (m < postings) m <<= 1;
    for (u32 x = postings + tid; x < m; x += THREADS) keys[x] = ~0ull;
    __syncthreads();
    clk.lap(PH_SELECT);
    if (tid == 0) clk.blocks(total);
    for (u32 p = warp; p < total; p += WARPS) {
        u32 lo = slot_of_pair(os, n, p);
        const TermDesc& t = terms[terms[lo].slot_term];
        u32 local = p - os->t_off[lo];
        u32* dd = dec_doc + p * BLOCK_LEN;
        u32* tt = dec_tf + p * BLOCK_LEN;
        if (!decode_block_warp(ix, t, t.block_base + local, dd, tt, warp_scratch(s, warp))) {
            if (lane == 0) s->top.failed = 1;
            continue;
        }
        u32 nb = block_postings(t, local);
        u32 x0 = os->t_start[lo] + local * BLOCK_LEN;
        for (u32 i = lane; i < nb; i += 32) {
            keys[x0 + i] = ((u64)dd[i] << 32) | lo;
            vals[x0 + i] = fixed_of(s, contribution(ix, t, dd[i], tt[i]));
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
                        u32 v = vals[i];
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
        u32 sum = 0u;
        for (u32 j = i; j < postings && (u32)(keys[j] >> 32) == d; j++) sum += vals[j];
        topk_push(buf, &s->top, true, finish(ix, d, fixed_value(s, sum)), d);
    }
    __syncthreads();
    clk.lap(PH_TOPK);
}

// A window's accumulators back to 0 and its bits cleared, for the next window, where its top-k pass
// does not run (window_topk does the same as it reads them).
__device__ __forceinline__ void window_reset(u32* acc, u32* seen, u32 W) {
    for (u32 j = threadIdx.x; j < W / 32u; j += THREADS) {
        for (u32 word = seen[j]; word != 0u; word &= word - 1u) acc[j * 32u + (u32)(__ffs(word) - 1)] = 0u;
        seen[j] = 0u;
    }
}

// A window's top-k pass: its touched documents only, a word of `seen` at a time, each accumulator reset
// once read (one pass for both, which measured faster than two). The caller has
// made room for a window's keys (topk_make_room or topk_make_room_at), and synchronises before the next
// window's adds and before reading the top k.
__device__ __forceinline__ void window_topk(const IndexArgs& ix, const BatchArgs& ba, QueryShared* s, u32* acc,
                                            u32* seen, u64* buf, u32 w0) {
    for (u32 j = threadIdx.x; j < ba.window / 32u; j += THREADS) {
        for (u32 word = seen[j]; word != 0u; word &= word - 1u) {
            u32 i = j * 32u + (u32)(__ffs(word) - 1);
            u32 d = w0 + i;
            bool valid = (u64)w0 + i < (u64)ix.num_docs;
            topk_push(buf, &s->top, valid, valid ? finish(ix, d, fixed_value(s, acc[i])) : 0.0f, d);
            acc[i] = 0u;
        }
        seen[j] = 0u;
    }
}

// The windows of a query of at most THREADS terms, from the first docID of any list (s->wnext; os->t_first[0]
// holds each term's first block at or after the range's start). Window j+1's block selection
// (window_blocks) runs beside window j's adds: a warp first selects its terms' blocks of window j+1 (the
// terms go to the warps from the last, which get the fewest of window j's blocks), then adds its blocks
// of window j. With SIMD-BP128 lists a window costs two barriers: one after its adds (and the next
// one's selection), one after its top-k pass or reset, where it cost five to seven (a skipped window:
// one); or_window, for the other codecs, adds its own (docs/decisions/011-or-kernel-exhaustive-windows.md:
// the selection must run beside the adds, not before them, to gain). Window j's selection is in the halves j % 2 of os->t_first and os->t_cnt, its
// bound, the first docID after it and its largest sum in the slots j % 3 of s->win_bound, s->win_after
// and s->win_max. Three, because thread 0 resets window j+2's bound and first docID after while the
// other threads may still be reading window j's, with no barrier between: those slots were last read
// (as window j-1's) before the barrier that ended window j-1's adds. The largest sum would do with two;
// it shares the slot numbering.
__device__ void or_windows(const IndexArgs& ix, const BatchArgs& ba, const TermDesc* terms, u32 n, QueryShared* s,
                           OrState* os, u32* acc, u32* seen, u32* dec_doc, u32* dec_tf, u64* buf, PhaseClock& clk) {
    u32 W = ba.window, lo = s->doc_lo, hi = s->doc_hi;
    u32 at = s->wnext;
    if (at == 0xffffffffu || at > hi) return;
    u32 w0 = at / W * W;
    window_blocks(ix, terms, n, max(w0, lo), min(w0 + W - 1u, hi), w0 + W - 1u, os->t_first[0], os->t_first[0],
                  os->t_cnt[0], &s->win_bound[0], &s->win_after[0]);
    __syncthreads();
    clk.lap(PH_SELECT);
    for (u32 j = 0;; j++) {
        u32 h = j & 1u, m3 = j % 3u;
        u32 w1 = w0 + W - 1u;  // inclusive; W divides 2^32 so this never wraps past a window
        // The part of the window inside this query part's range.
        u32 r0 = max(w0, lo), r1 = min(w1, hi);
        bool full = topk_full(&s->top);
        float threshold = topk_threshold(&s->top);
        if (ba.early && full && threshold >= ix.gs[r0] * s->slack) break;
        u32 count = s->top.count;
        bool skip = full && s->win_bound[m3] * s->slack < threshold;
        u32 after = s->win_after[m3];
        bool more = after != 0xffffffffu && after <= hi;
        if (threadIdx.x == 0) {
            u32 m3b = (j + 2u) % 3u;
            s->win_bound[m3b] = ix.prior_max * s->slack;
            s->win_after[m3b] = 0xffffffffu;
            s->win_max[(j + 1u) % 3u] = 0u;
        }
        u32 n0 = after / W * W;
        if (more)
            window_blocks(ix, terms, n, max(n0, lo), min(n0 + W - 1u, hi), n0 + W - 1u, os->t_first[h],
                          os->t_first[h ^ 1u], os->t_cnt[h ^ 1u], &s->win_bound[(j + 1u) % 3u],
                          &s->win_after[(j + 1u) % 3u]);
        if (!skip) {
            // The accumulators are all 0 here: the last window that added to them reset those it touched.
            prefetch_norms(ix, r0, r1);
            if (ix.codec == CODEC_SIMDBP)
                or_window_regs(ix, terms, n, w0, r0, r1, os->t_first[h], os->t_cnt[h], &s->win_max[m3], s, acc,
                               seen, clk);
            else
                or_window(ix, terms, n, w0, r0, r1, os->t_first[h], os->t_cnt[h], &s->win_max[m3], s, os, acc, seen,
                          dec_doc, dec_tf, clk);
        }
        __syncthreads();
        clk.lap(PH_SCORE);
        if (!skip) {
            if (s->top.failed) return;
            // Every sum only grows, so the largest written is the window's best document's sum. Below
            // the threshold, no document of the window can enter the top k: its pass is skipped.
            float m = fixed_value(s, s->win_max[m3]);
            float top = ix.prior ? (m + ix.prior_max) * s->slack : m;
            if (top < threshold) {
                window_reset(acc, seen, W);
            } else {
                topk_make_room_at(buf, ba.k, &s->top, W, count);
                window_topk(ix, ba, s, acc, seen, buf, w0);
            }
            __syncthreads();
            clk.lap(PH_TOPK);
        }
        if (!more) break;
        w0 = n0;
    }
}

// The windows of a query of more than THREADS terms (rare): each list decoded in turn into the CTA's
// scratch, a warp a block, and the window's bound from query_bound.
__device__ void or_windows_many(const IndexArgs& ix, const BatchArgs& ba, const TermDesc* terms, u32 n,
                                QueryShared* s, u32* acc, u32* seen, u32* dec_doc, u32* dec_tf, u64* buf,
                                PhaseClock& clk) {
    u32 lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
    u32 W = ba.window, lo = s->doc_lo, hi = s->doc_hi;
    while (s->wnext != 0xffffffffu && s->wnext <= hi) {
        u32 w0 = s->wnext / W * W;
        __syncthreads();  // every thread has read wnext before it is reset below
        u32 w1 = w0 + W - 1u;
        u32 r0 = max(w0, lo), r1 = min(w1, hi);
        if (ba.early && topk_full(&s->top) && topk_threshold(&s->top) >= ix.gs[r0] * s->slack) break;
        if (threadIdx.x == 0) s->wnext = 0xffffffffu;
        __syncthreads();
        // Next window holding any posting after this one.
        if (w1 != 0xffffffffu) {
            for (u32 i = threadIdx.x; i < n; i += THREADS) {
                const TermDesc& t = terms[i];
                u32 b = lower_bound(ix.blk_last + t.block_base, t.num_blocks, w1 + 1u);
                if (b < t.num_blocks) {
                    u32 f = ix.blk_first[t.block_base + b];
                    atomicMin(&s->wnext, f > w1 ? f : w1 + 1u);
                }
            }
        }
        bool skip = false;
        if (topk_full(&s->top)) {
            query_bound(ix, terms, n, r0, r1, s);
            skip = s->bound * s->slack < topk_threshold(&s->top);
        }
        clk.lap(PH_SELECT);
        if (skip) continue;
        for (u32 slot = 0; slot < n; slot++) {
            const TermDesc& t = terms[terms[slot].slot_term];
            u32 b = lower_bound(ix.blk_last + t.block_base, t.num_blocks, r0);
            for (u32 bi = b + warp; bi < t.num_blocks; bi += WARPS) {
                if (ix.blk_first[t.block_base + bi] > r1) break;
                u32* dd = dec_doc + warp * BLOCK_LEN;  // this warp's block, in the CTA's global scratch
                u32* tt = dec_tf + warp * BLOCK_LEN;
                if (lane == 0) clk.blocks(1);
                if (!decode_block_warp(ix, t, t.block_base + bi, dd, tt, warp_scratch(s, warp))) {
                    if (lane == 0) s->top.failed = 1;
                    break;
                }
                u32 nb = block_postings(t, bi);
                for (u32 i = lane; i < nb; i += 32) {
                    u32 d = dd[i];
                    if (d >= r0 && d <= r1) acc_add(acc, seen, d - w0, fixed_of(s, contribution(ix, t, d, tt[i])));
                }
                __syncwarp();
            }
        }
        __syncthreads();
        clk.lap(PH_SCORE);
        if (s->top.failed) return;
        topk_make_room(buf, ba.k, &s->top, W);
        window_topk(ix, ba, s, acc, seen, buf, w0);
        __syncthreads();
        clk.lap(PH_TOPK);
    }
}

// OR of one query: document windows of ba.window docIDs with dense fixed-point accumulators in shared
// memory, every list of a window added at once (or_windows; or_windows_many over THREADS terms), or by
// sorting for a small query (or_small). A window whose block-max bound cannot beat the k-th score is
// skipped; with early termination the scan stops on the global score.
__device__ void or_query(const IndexArgs& ix, const BatchArgs& ba, const TermDesc* terms, u32 n, QueryShared* s,
                         OrState* os, u32* acc, u32* seen, u32* dec_doc, u32* dec_tf, u64* buf,
                         PhaseClock& clk) {
    u32 tid = threadIdx.x;
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
            or_small(ix, ba, terms, n, postings, s, os, (u64*)acc, (u32*)((u64*)acc + ba.small_or), dec_doc,
                     dec_tf, buf, clk);
            return;
        }
    }
    // First docID of any list; the first window's slots.
    if (tid == 0) {
        s->wnext = 0xffffffffu;
        for (u32 i = 0; i < 3u; i++) {
            s->win_bound[i] = ix.prior_max * s->slack;
            s->win_after[i] = 0xffffffffu;
            s->win_max[i] = 0u;
        }
    }
    __syncthreads();
    u32 lo = s->doc_lo;
    for (u32 i = tid; i < n; i += THREADS) {
        const TermDesc& t = terms[i];
        u32 b = lower_bound(ix.blk_last + t.block_base, t.num_blocks, lo);
        if (b < t.num_blocks) atomicMin(&s->wnext, max(ix.blk_first[t.block_base + b], lo));
        if (n <= THREADS) os->t_first[0][i] = b;
    }
    // Every accumulator starts at 0, and each window resets those it touched before the next one.
    for (u32 i = tid; i < W; i += THREADS) acc[i] = 0u;
    for (u32 i = tid; i < W / 32u; i += THREADS) seen[i] = 0u;
    __syncthreads();
    if (n <= THREADS)
        or_windows(ix, ba, terms, n, s, os, acc, seen, dec_doc, dec_tf, buf, clk);
    else
        or_windows_many(ix, ba, terms, n, s, acc, seen, dec_doc, dec_tf, buf, clk);
}
