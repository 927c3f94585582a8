#line 2 "kernels/query_state.cuh"
// The query kernel's shared state.

struct QueryShared {
    TopShared top;
    // AND: candidates and their blocks, CHUNK each, in the dynamic shared memory of an AND launch (an OR
    // launch gives that memory to its window instead).
    u32* cand_doc;
    u32* cand_tf0;
    u32* blk;
    u32* sel_blk;
    // The PForDelta and Rice decoders' per-warp scratch (4 * BLOCK_LEN words a warp, warp_scratch), at the
    // end of the dynamic shared memory, which holds it only for an index in those codecs (the host sizes
    // it: decode_scratch_bytes in crates/gpu/src/device.rs). Kept out of the static shared memory, it
    // leaves room for three CTAs of OR windows of 16,384 documents on an SM.
    u32* xs;
    u32 ncand;
    u32 range_lo;       // AND step: the first block of the list that can hold a candidate
    u32 range_hi;       // and the one that can hold the last candidate (num_blocks if none)
    u32 q;
    float bound;
    u32 wnext;
    float slack;        // this query's bound slack
    float fixed_scale;  // this query's fixed point: 2^s (fixed_of)
    float fixed_unit;   // and 2^-s (fixed_value)
    u32 doc_lo;         // this (part of a) query's docID range, inclusive
    u32 doc_hi;
    // OR windows, by the window's number modulo 3 (or_windows says why three): its bound, the first
    // docID after it, and the largest fixed-point sum written to its accumulators.
    float win_bound[3];
    u32 win_after[3];
    u32 win_max[3];
    u32 bound_bits;            // query_bound: one term's largest block bound (a non-negative float's bits)
};

// The query kernel's dynamic shared memory (search_body says what it holds).
extern __shared__ __align__(16) float dyn[];

// An OR query's per-term arrays, in an OR launch's dynamic shared memory (after the window's
// accumulators and bits: or_state), so that AND's CTAs do not hold them: as static shared memory, their
// 6 KiB in each of AND's five CTAs an SM would leave less of the SM's memory to the L1 cache.
struct OrState {
    u32 t_start[THREADS];      // OR window: per plan slot, the first block overlapping the window
    u32 t_off[THREADS + 1];    // OR window: per plan slot, the offset of its blocks in the window's list
    // OR windows (or_windows), the window being added in one half and the next one's selection in the
    // other (by parity of the window's number): per term, the first block whose last docID reaches the
    // window, and the blocks overlapping it.
    u32 t_first[2][THREADS];
    u32 t_cnt[2][THREADS];
};

// Words of OrState, rounded up to 16 bytes (the host's or_state_bytes in crates/gpu/src/abi.rs).
#define OR_STATE_WORDS ((6u * THREADS + 1u + 3u) & ~3u)
static_assert(sizeof(OrState) <= OR_STATE_WORDS * 4u, "OrState outgrew OR_STATE_WORDS (and or_state_bytes)");

__device__ __forceinline__ u32* warp_scratch(QueryShared* s, u32 warp) { return s->xs + warp * 4u * BLOCK_LEN; }

// An AND launch's decoder scratch: after its four candidate arrays, at a fixed offset. Not through s->xs
// as OR's (warp_scratch): read from there, search_and spills more (ptxas -v, sm_90).
__device__ __forceinline__ u32* and_scratch(u32 warp) { return (u32*)dyn + 4u * CHUNK + warp * 4u * BLOCK_LEN; }

// 4-byte words of an OR launch's accumulators (u32 fixed-point sums): the window, or more where the
// final sort's keys, which reuse them once the query's windows are done, need it (or_shared_bytes in
// crates/gpu/src/device.rs).
__device__ __forceinline__ u32 or_acc_words(u32 window) { return max(window, 2u * MAX_K_GPU); }

// An OR launch's OrState: after the window's accumulators and its bit per document.
__device__ __forceinline__ OrState* or_state(u32 window) {
    return (OrState*)((u32*)dyn + or_acc_words(window) + window / 32u);
}

// Phases of the clock (PH_SELECT, PH_DECODE, PH_INTERSECT, PH_SCORE, PH_TOPK), then PH_BLOCKS, not a phase:
// the blocks decoded; each CTA has PHASE_COUNTERS u64 counters. Defined by the host (abi.rs).

// The phase clock's state, in shared memory rather than in every thread's registers (only thread 0 reads
// the time, and only in instrumented runs): held in registers across the whole kernel, the two 64-bit
// fields were spilled and reloaded at every lap once the OR windows' register decoding raised the
// kernel's pressure.
__shared__ u64* clock_out;  // this CTA's counters, or null (no instrumentation)
__shared__ u64 clock_at;    // thread 0's last reading

// The device's clock in ns (%globaltimer), comparable across SMs, for the tasks' times (BatchArgs::task_ns).
__device__ __forceinline__ u64 device_ns() {
    u64 t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

struct PhaseClock {
    __device__ bool on() const { return clock_out != (u64*)0; }
    __device__ void start() { if (threadIdx.x == 0 && clock_out) clock_at = clock64(); }
    __device__ void lap(int phase) {
        if (threadIdx.x == 0 && clock_out) { u64 now = clock64(); clock_out[phase] += now - clock_at; clock_at = now; }
    }
    // Counts blocks decoded (any one thread per call).
    __device__ void blocks(u32 n) { if (clock_out) atomicAdd((unsigned long long*)&clock_out[PH_BLOCKS], (u64)n); }
};
