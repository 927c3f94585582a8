# Variant for the next session: AND's lookup step searches the candidates' blocks in a shared-memory copy
# of the range's last docIDs (s->sel_blk, free until selection) when the range spans at most CHUNK blocks,
# instead of log2(rn) dependent global loads per candidate. Usage: python3 and_shared_last.py [dst]
import shutil, os, sys
src = '/work/main/crates/gpu/kernels'
dst = sys.argv[1] if len(sys.argv) > 1 else '/work/main/.device/kernels/lastsh'
if dst != src:
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(src, dst)
p = os.path.join(dst, 'and.cu'); s = open(p).read()
def rep(a, b):
    global s
    assert a in s, a
    s = s.replace(a, b, 1)
rep('''    u64 budget = (u64)ba.merge_ratio * ncand;
    bool merge_select = (u64)rn * BLOCK_LEN <= budget;
    if (merge_select) {
        u32* blk = s->blk;
        merge_path(s->cand_doc, ncand, last + rlo, rn, [&](u32 i, u32 j) { blk[i] = rlo + j; });
        __syncthreads();
    }''', '''    u64 budget = (u64)ba.merge_ratio * ncand;
    bool merge_select = (u64)rn * BLOCK_LEN <= budget;
    // A range of at most CHUNK blocks: its last docIDs copied into s->sel_blk (free until the selection
    // below), so that the searches read shared memory.
    const u32* lasts = last + rlo;
    if (rn <= (u32)CHUNK) {
        for (u32 i = tid; i < rn; i += THREADS) s->sel_blk[i] = lasts[i];
        lasts = s->sel_blk;
        __syncthreads();
    }
    if (merge_select) {
        u32* blk = s->blk;
        merge_path(s->cand_doc, ncand, lasts, rn, [&](u32 i, u32 j) { blk[i] = rlo + j; });
        __syncthreads();
    }''')
rep('''            b[i] = merge_select ? s->blk[c] : rlo + lower_bound(last + rlo, rn, d[i]);''',
    '''            b[i] = merge_select ? s->blk[c] : rlo + lower_bound(lasts, rn, d[i]);''')
open(p, 'w').write(s)
if dst != src:
    w = os.path.join(os.path.dirname(dst), 'v-' + os.path.basename(dst))
    open(w, 'w').write('#!/usr/bin/env bash\nd=$(cd "$(dirname "$0")" && pwd)\nWARPSEARCH_GPU_KERNELS="$d/%s" exec "$d/../warpsearch" "$@"\n' % os.path.basename(dst))
    os.chmod(w, 0o755)
