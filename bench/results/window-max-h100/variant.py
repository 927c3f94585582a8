import shutil, os, sys
src='/work/main/crates/gpu/kernels'
dst = sys.argv[1] if len(sys.argv) > 1 else '/work/main/.device/kernels/wmax'
if dst != src:
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(src, dst)
def edit(fn, pairs):
    p=os.path.join(dst, fn); s=open(p).read()
    for a,b in pairs:
        assert a in s, (fn, a)
        s=s.replace(a,b,1)
    open(p,'w').write(s)
edit('query_state.cuh', [('''    u32 bound_bits;            // query_bound: one term's largest block bound (a non-negative float's bits)
''','''    u32 bound_bits;            // query_bound: one term's largest block bound (a non-negative float's bits)
    u32 wmax_bits;             // OR window: the largest sum written to its accumulators (a float's bits)
''')])
edit('or.cu', [
('''// Adds contribution c to window offset i's accumulator.''','''// Adds contribution c to window offset i's accumulator and returns the new sum.'''),
('''__device__ __forceinline__ void acc_add(float* acc, u32* seen, u32 i, float c) {
    u32 m = 1u << (i & 31u);
    if (seen[i >> 5] & m) {
        acc[i] = acc[i] + c;
    } else {
        acc[i] = 0.0f + c;
        atomicOr(&seen[i >> 5], m);
    }
}''','''__device__ __forceinline__ float acc_add(float* acc, u32* seen, u32 i, float c) {
    u32 m = 1u << (i & 31u);
    float v;
    if (seen[i >> 5] & m) {
        v = acc[i] + c;
    } else {
        v = 0.0f + c;
        atomicOr(&seen[i >> 5], m);
    }
    acc[i] = v;
    return v;
}

// Offers a thread's largest sum written in this window to s->wmax_bits (sums are non-negative, so
// their bits order as they do). The caller synchronises before reading it.
__device__ __forceinline__ void offer_window_max(QueryShared* s, float mx) {
    mx = warp_max(mx);
    if ((threadIdx.x & 31u) == 0u && mx > 0.0f) atomicMax(&s->wmax_bits, __float_as_uint(mx));
}'''),
# or_window generic
('''    u32 tid = threadIdx.x, lane = tid & 31u, warp = tid >> 5;
    u32 cnt = 0;''','''    u32 tid = threadIdx.x, lane = tid & 31u, warp = tid >> 5;
    float mx = 0.0f;
    u32 cnt = 0;'''),
('''        if (s->top.failed) return;
        for (u32 sl = 0; sl < n; sl++) {''','''        if (s->top.failed) break;
        for (u32 sl = 0; sl < n; sl++) {'''),
('''                    if (d >= r0 && d <= r1) acc_add(acc, seen, d - w0, contribution(ix, t, d, dec_tf[(p - q0) * BLOCK_LEN + i]));
                }
            }
            __syncthreads();
        }
    }
}''','''                    if (d >= r0 && d <= r1)
                        mx = fmaxf(mx, acc_add(acc, seen, d - w0, contribution(ix, t, d, dec_tf[(p - q0) * BLOCK_LEN + i])));
                }
            }
            __syncthreads();
        }
    }
    offer_window_max(s, mx);
}'''),
# regs
('''    u32 lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
    if (clk.on() && threadIdx.x == 0) {''','''    u32 lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
    float mx = 0.0f;
    if (clk.on() && threadIdx.x == 0) {'''),
('''                if (in[k]) acc_add(acc, seen, doc[k] - w0, contribution_of(ix, t, norm[k], tf[k]));
        }
        __syncthreads();
    }
}''','''                if (in[k]) mx = fmaxf(mx, acc_add(acc, seen, doc[k] - w0, contribution_of(ix, t, norm[k], tf[k])));
        }
        __syncthreads();
    }
    offer_window_max(s, mx);
}'''),
('''        if (tid == 0) {
            s->wnext = 0xffffffffu;
            s->bound = ix.prior_max * s->slack;
        }''','''        if (tid == 0) {
            s->wnext = 0xffffffffu;
            s->bound = ix.prior_max * s->slack;
            s->wmax_bits = 0u;
        }'''),
('''        clk.lap(PH_SCORE);
        if (s->top.failed) return;
        topk_make_room(buf, ba.k, &s->top, W);''','''        if (n <= THREADS) {
            // Every sum only grows, so the largest written is the window's best document's sum. Below
            // the threshold, no document of the window can enter the top k: its pass is skipped.
            __syncthreads();
            float m = __uint_as_float(s->wmax_bits);
            float top = ix.prior ? (m + ix.prior_max) * s->slack : m;
            if (!s->top.failed && top < topk_threshold(&s->top)) {
                clk.lap(PH_SCORE);
                continue;
            }
        }
        clk.lap(PH_SCORE);
        if (s->top.failed) return;
        topk_make_room(buf, ba.k, &s->top, W);'''),
])
w = '/work/main/.device/kernels/v-wmax'
if dst != src:
    open(w,'w').write('#!/usr/bin/env bash\nd=$(cd "$(dirname "$0")" && pwd)\nWARPSEARCH_GPU_KERNELS="$d/wmax" exec "$d/../warpsearch" "$@"\n')
    os.chmod(w,0o755)
