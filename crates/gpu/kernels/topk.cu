#line 2 "kernels/topk.cu"
// The running top-k of one CTA: keys in a global buffer, a threshold key below which nothing can enter.
// The parts of a query cut into docID ranges share their best k-th key through global memory: a part's
// k-th key has k documents at or above it, so no document below it is in the query's top k, whichever
// part holds it (keys are distinct, and a key orders by score, then docID, as the merged answer does).

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
    u64* shared;      // the query's key shared by its parts (QueryDesc::share), or null
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
        if (threadIdx.x < 32u) {
            // The bucket holding the need-th largest key, by warp 0: lane l holds digits 255 - 8l down to
            // 248 - 8l; the first lane whose running count (digits from 255 down) reaches `need` holds it,
            // and digit 0 takes what is left, as a scan from 255 down would.
            u32 lane = threadIdx.x, need = ts->need, h[8], sum = 0;
#pragma unroll
            for (u32 i = 0; i < 8u; i++) {
                h[i] = ts->hist[255u - (lane * 8u + i)];
                sum += h[i];
            }
            u32 incl = warp_inclusive_scan(sum);
            u32 first = __ffs(__ballot_sync(FULL_MASK, incl >= need || lane == 31u)) - 1u;
            if (lane == first) {
                u32 acc = incl - sum, d = 0;
#pragma unroll
                for (u32 i = 0; i < 8u; i++) {
                    d = 255u - (lane * 8u + i);
                    if (acc + h[i] >= need || d == 0u) break;
                    acc += h[i];
                }
                ts->prefix = prefix | ((u64)d << shift);
                ts->need = need - acc;
                if (ts->hist[d] == need - acc) ts->shift_done = 1;
            }
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

// `shared`: the key this query's parts share, or null (a query of one part).
__device__ void topk_reset(TopShared* ts, u64* shared = (u64*)0) {
    if (threadIdx.x == 0) { ts->count = 0; ts->full = 0; ts->thresh = 0; ts->failed = 0; ts->shared = shared; }
    __syncthreads();
}

// Takes the key the query's other parts found where it is above this CTA's threshold. Thread 0 only, at
// a point where no thread reads `full` or `thresh` for a decision all must share before the next
// barrier (topk_push reads `thresh` and is right with the old value or the new).
__device__ __forceinline__ void topk_borrow(TopShared* ts) {
    if (ts->shared == 0) return;
    u64 other = *(volatile u64*)ts->shared;
    if (other > ts->thresh) { ts->thresh = other; ts->full = 1; }
}

// Shrinks the buffer to the top k and raises the threshold (to the query's other parts' k-th key where
// that is higher), offering this part's k-th key to them. All threads call it.
__device__ void topk_shrink(u64* buf, u32 k, TopShared* ts) {
    u32 count = ts->count;
    if (count <= k) return;
    u64 t = radix_select(buf, count, k, ts);
    u32 kept = compact_keys(buf, count, t, ts);
    if (threadIdx.x == 0) {
        ts->count = kept;
        ts->full = 1;
        if (t > ts->thresh) ts->thresh = t;
        if (ts->shared) {
            u64 other = atomicMax((unsigned long long*)ts->shared, (unsigned long long)ts->thresh);
            if (other > ts->thresh) ts->thresh = other;
        }
    }
    __syncthreads();
}

// Makes room for up to `incoming` new keys: shrinks the buffer to the top k when it holds more than
// max(2k, 512) keys (so that the threshold rises soon and block-max skipping starts) or when the new keys
// would not fit. All threads call it; afterwards threads push with topk_push and then synchronise.
// `count` is ts->count as every thread read it with no push since (or the shrink would diverge), and a
// barrier separates every thread's read of it from the first push after this call (topk_make_room's
// own; or_windows' after a window's adds).
// It also takes the other parts' key (topk_borrow), as the pushes that follow may read either threshold.
__device__ void topk_make_room_at(u64* buf, u32 k, TopShared* ts, u32 incoming, u32 count) {
    u32 eager = max(2u * k, 512u);
    if (count > eager || count + incoming > TOPK_CAP) topk_shrink(buf, k, ts);
    if (threadIdx.x == 0) topk_borrow(ts);
}

__device__ void topk_make_room(u64* buf, u32 k, TopShared* ts, u32 incoming) {
    u32 count = ts->count;
    __syncthreads();  // every thread has read the count before any thread pushes
    topk_make_room_at(buf, k, ts, incoming, count);
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
