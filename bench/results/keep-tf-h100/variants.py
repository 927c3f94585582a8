import shutil, os, sys
src='/work/main/crates/gpu/kernels'
def variant(name, keep):
    dst=f'/work/main/.device/kernels/{name}'
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(src, dst)
    p=os.path.join(dst,'and.cu'); s=open(p).read()
    def rep(a,b):
        nonlocal s
        assert a in s, a
        s=s.replace(a,b,1)
    rep('// Keeps the candidates whose tf is not 0, in order.\n__device__ void compact_candidates(QueryShared* s, const u32 (&tf)[CPT]) {',
f'''#define KEEP_TF {keep}
__shared__ u32 kept_tf[KEEP_TF][CHUNK];

// Keeps the candidates whose tf is not 0, in order.
__device__ void compact_candidates(QueryShared* s, const u32 (&tf)[CPT], u32 nk = 0) {{''')
    rep('''    u32 total;
    u32 pos = block_exclusive_scan(keeps, s->top.scan, &total);
#pragma unroll
    for (int i = 0; i < CPT; i++) {
        u32 c = tid * CPT + i;
        if (c < ncand && tf[i] != 0) {
            s->cand_doc[pos] = d[i];
            s->cand_tf0[pos] = f[i];
            pos++;
        }
    }''','''    u32 total;
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
    }''')
    rep('''        for (u32 j = 1; j < n && s->ncand > 0; j++) {
            if (!lookup_step(ix, ba, terms[j], s, dec_doc, dec_tf, false, tf, clk)) return;
            compact_candidates(s, tf);''','''        u32 keep_base = n > KEEP_TF ? n - KEEP_TF : 1u;
        for (u32 j = 1; j < n && s->ncand > 0; j++) {
            bool keep = j >= keep_base;
            if (!lookup_step(ix, ba, terms[j], s, dec_doc, dec_tf, keep, tf, clk)) return;
            compact_candidates(s, tf, keep ? j - keep_base + 1u : 0u);''')
    rep('''            } else {
                if (!lookup_step(ix, ba, terms[j], s, dec_doc, dec_tf, true, tf, clk)) return;
            }''','''            } else if (j >= keep_base) {
#pragma unroll
                for (int i = 0; i < CPT; i++) {
                    u32 c = tid * CPT + i;
                    tf[i] = c < ncand ? kept_tf[j - keep_base][c] : 0u;
                }
            } else {
                if (!lookup_step(ix, ba, terms[j], s, dec_doc, dec_tf, true, tf, clk)) return;
            }''')
    open(p,'w').write(s)
    w=f'/work/main/.device/kernels/v-{name}'
    open(w,'w').write('#!/usr/bin/env bash\nd=$(cd "$(dirname "$0")" && pwd)\nWARPSEARCH_GPU_KERNELS="$d/%s" exec "$d/../warpsearch" "$@"\n' % name)
    os.chmod(w,0o755)
for k in (1,2,4): variant(f'keep{k}', k)
