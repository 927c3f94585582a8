#line 2 "kernels/search.cu"
// The query kernel: one body for both modes, compiled into two entry points (search_and, search_or).

// The query kernel's body for one mode. AND and OR are two entry points compiled from it (search_and,
// search_or), so that each gets its own register allocation under its MIN_CTAS cap, which spills less
// than one entry point for both (docs/decisions/014-gpu-launch-parameters.md).
template <u32 MODE>
__device__ __forceinline__ void search_body(const IndexArgs& ix, const BatchArgs& ba) {
    // dyn holds, for AND, the candidate arrays; for OR, the window's accumulators, bits of touched
    // documents and per-term arrays (OrState); then the decoders' scratch where the codec needs it
    // (and_scratch, QueryShared::xs). The final sort's keys reuse its first 8 KiB.
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
        s.xs = (u32*)or_state(ba.window) + OR_STATE_WORDS;  // OR's (AND's: and_scratch)
        clock_out = ba.phase_cycles ? ba.phase_cycles + (u64)cta * PHASE_COUNTERS : (u64*)0;
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
        if (threadIdx.x == 0 && ba.task_ns) ba.task_ns[2u * qd.out_slot] = device_ns();
        if (threadIdx.x == 0) {
            s.slack = qd.slack;
            s.fixed_scale = qd.fixed_scale;
            s.fixed_unit = qd.fixed_unit;
            s.doc_lo = qd.doc_lo;
            s.doc_hi = qd.doc_hi;
        }
        // Early termination stops where the bound equals the threshold, exact only when the threshold's
        // documents precede the rest of the range (its own keys do, another part's may not): with it,
        // a query's parts share nothing.
        bool share = qd.share != NO_SHARE && !ba.early;
        topk_reset(&s.top, share ? ba.shared_keys + qd.share : (u64*)0);
        if (MODE == MODE_AND)
            and_query(ix, ba, terms, qd.num_terms, &s, buf, dec_doc, dec_tf, clk);
        else
            or_query(ix, ba, terms, qd.num_terms, &s, or_state(ba.window), (u32*)dyn,
                     (u32*)(dyn + or_acc_words(ba.window)), dec_doc, dec_tf, buf, clk);
        __syncthreads();
        u32* od = ba.out_doc + (u64)qd.out_slot * ba.k;
        float* os = ba.out_score + (u64)qd.out_slot * ba.k;
        // With the outputs in host memory, the host takes a query's hits as soon as its count is
        // there: each thread's hits reach host memory before thread 0 writes the count.
        volatile u32* count = ba.out_count + qd.out_slot;
        if (s.top.failed) {
            if (threadIdx.x == 0) *count = COUNT_FAILED;
        } else {
            u32 got = topk_finish(buf, ba.k, &s.top, (u64*)dyn, od, os);  // the query's arrays are free
            if (ba.answers_mapped) {
                __threadfence_system();
                __syncthreads();
            }
            if (threadIdx.x == 0) *count = got;
        }
        clk.lap(PH_TOPK);
        if (threadIdx.x == 0 && ba.task_ns) ba.task_ns[2u * qd.out_slot + 1u] = device_ns();
        __syncthreads();
    }
}

// A batch of AND queries (ba.mode is MODE_AND) and a batch of OR queries (MODE_OR); see search_body.
extern "C" __global__ void __launch_bounds__(THREADS, MIN_CTAS_AND) search_and(const IndexArgs ix, const BatchArgs ba) {
    search_body<MODE_AND>(ix, ba);
}

extern "C" __global__ void __launch_bounds__(THREADS, MIN_CTAS_OR) search_or(const IndexArgs ix, const BatchArgs ba) {
    search_body<MODE_OR>(ix, ba);
}
