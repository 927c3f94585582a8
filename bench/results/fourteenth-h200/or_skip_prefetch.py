# Variant for the next session: window_blocks prefetches into L2 the skip data (last, first, block max)
# of the blocks right after each term's blocks in this window, which the next window's selection reads
# (one dependent round of DRAM misses per window per array, for the long lists). Usage: python3
# or_skip_prefetch.py [dst]
import shutil, os, sys
src = '/work/main/crates/gpu/kernels'
dst = sys.argv[1] if len(sys.argv) > 1 else '/work/main/.device/kernels/skippf'
if dst != src:
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(src, dst)
p = os.path.join(dst, 'score.cu'); s = open(p).read()
a = '''        m = t.bound_scale < 0.0f ? __int_as_float(0x7f800000) : warp_max(m);'''
b = '''        m = t.bound_scale < 0.0f ? __int_as_float(0x7f800000) : warp_max(m);
        // The next window's selection starts at block b + cnt - 1 or b + cnt: its skip data into L2.
        {
            u32 e = b + cnt + (lane >= 3u ? 31u : 0u), a3 = lane % 3u;
            const u32* col = a3 == 0u ? last : a3 == 1u ? first : (const u32*)ix.blk_max + t.block_base;
            if (lane < 6u && e < nb) asm volatile("prefetch.global.L2 [%0];" ::"l"(col + e));
        }'''
assert a in s
s = s.replace(a, b, 1)
open(p, 'w').write(s)
if dst != src:
    w = os.path.join(os.path.dirname(dst), 'v-' + os.path.basename(dst))
    open(w, 'w').write('#!/usr/bin/env bash\nd=$(cd "$(dirname "$0")" && pwd)\nWARPSEARCH_GPU_KERNELS="$d/%s" exec "$d/../warpsearch" "$@"\n' % os.path.basename(dst))
    os.chmod(w, 0o755)
