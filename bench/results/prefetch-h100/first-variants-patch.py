import sys, shutil, os
name, mode = sys.argv[1], sys.argv[2]
src = '/work/main/crates/gpu/kernels'
dst = f'/work/main/.device/kernels/{name}'
shutil.copytree(src, dst)
p = os.path.join(dst, 'or.cu')
s = open(p).read()
helper = r'''
// Prefetches the length norms of documents [a, b] into L2.
__device__ __forceinline__ void prefetch_norms(const IndexArgs& ix, u32 a, u32 b, bool bulk) {
    u64 end = min((u64)b + 1u, (u64)ix.num_docs);
    u32 a4 = a & ~3u, e4 = (u32)end & ~3u;
    if (e4 <= a4) return;
    if (bulk) {
        if (threadIdx.x == 0)
            asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(ix.norms + a4), "r"((e4 - a4) * 4u) : "memory");
    } else {
        for (u32 x = (a4 & ~31u) + threadIdx.x * 32u; x < e4; x += THREADS * 32u)
            asm volatile("prefetch.global.L2 [%0];" ::"l"(ix.norms + x));
    }
}
'''
anchor = '// Adds contribution c to window offset i'
s = s.replace(anchor, helper + '\n' + anchor, 1)
calls = {
 'cur': 'prefetch_norms(ix, r0, r1, true);',
 'next': 'if (s->wnext <= hi) prefetch_norms(ix, s->wnext, min(s->wnext / W * W + W - 1u, hi), true);',
 'both': 'prefetch_norms(ix, r0, r1, true); if (s->wnext <= hi) prefetch_norms(ix, s->wnext, min(s->wnext / W * W + W - 1u, hi), true);',
 'l2cur': 'prefetch_norms(ix, r0, r1, false);',
}
old = '        if (skip) continue;\n'
assert old in s
s = s.replace(old, old + '        if (n <= THREADS) { ' + calls[mode] + ' }\n', 1)
open(p, 'w').write(s)
w = f'/work/main/.device/kernels/v-{name}'
open(w, 'w').write('#!/usr/bin/env bash\nd=$(cd "$(dirname "$0")" && pwd)\nWARPSEARCH_GPU_KERNELS="$d/%s" exec "$d/../warpsearch" "$@"\n' % name)
os.chmod(w, 0o755)
