#line 2 "kernels/decode.cu"
// Block decode, one warp per block. `blk` is the block's words, `end` its length in words, `foff` the
// start of its frequency section, n its postings. Writes docIDs (if out_doc) and frequencies (if out_tf)
// for positions 0..n. Returns false (on every lane) if the block is malformed; the query then fails and is
// answered on the CPU, which reports the corruption.

// PForDelta exceptions (crates/codec/src/pfor.rs): the level-1 slots' exception positions and high bits are
// two arrays, each PForDelta again with its own width and exceptions, whose exceptions in turn are two
// plain arrays (no further nesting). The warp decodes the level-1 arrays and patches the slots together:
// lanes unpack the arrays, a warp scan turns the position gaps into slots, and each lane patches its own
// exceptions (slots are distinct, so no two lanes write one slot). Exceptions of the exception arrays are
// rarer still; one lane patches those. `xs` is per-warp shared scratch of 4 * BLOCK_LEN words. Every
// check of the CPU decoder is made, so a malformed block fails here as it fails there.

// Gaps to positions, by the whole warp (n <= BLOCK_LEN = 128): lane l takes elements 4l .. 4l+3 of
// v[0..n) as distances g[j] = v[i] + (i > 0 ? 1 : 0) (0 past n) and returns the sum of the distances
// before its first element, so that adding g[0..j] to it gives element 4l+j's position. u64 sums: a
// malformed block's gaps may add up past 2^32, which the callers check.
__device__ u64 gap_scan4(const u32* v, u32 n, u64 g[4]) {
    u32 lane = threadIdx.x & 31u;
    u64 sum = 0;
    for (u32 j = 0; j < 4; j++) {
        u32 i = lane * 4 + j;
        g[j] = i < n ? (u64)v[i] + (i > 0 ? 1ull : 0ull) : 0ull;
        sum += g[j];
    }
    u64 inc = sum;
    for (u32 d = 1; d < 32; d <<= 1) {
        u64 o = __shfl_up_sync(FULL_MASK, inc, d);
        if (lane >= d) inc += o;
    }
    return inc - sum;
}

// An innermost array: header (width, zero exceptions), then n values.
__device__ bool pfor_flat_array(const u32* w, u32 end, u32* pos, u32* out, u32 n) {
    if (*pos >= end) return false;
    u32 h = w[*pos];
    u32 b = h & 0xffu;
    if ((h >> 8) != 0u || b > 32u || *pos + 1u + packed_words(n, b) > end) return false;
    for (u32 i = 0; i < n; i++) out[i] = unpack_one(w + *pos + 1u, b, i);
    *pos += 1u + packed_words(n, b);
    return true;
}

// Patches exceptions into out, one lane: positions are gaps between exception slots, highs are (high
// bits - 1).
__device__ bool pfor_patch(u32* out, u32 n, u32 b, const u32* positions, const u32* highs, u32 exc) {
    u32 at = 0;
    for (u32 e = 0; e < exc; e++) {
        at += positions[e] + (e > 0 ? 1u : 0u);
        if (at >= n) return false;
        u64 v = (u64)out[at] | (((u64)highs[e] + 1ull) << b);
        if (v > 0xffffffffull) return false;
        out[at] = (u32)v;
    }
    return true;
}

// The same, by the whole warp: lane l takes exceptions 4l .. 4l+3 (exc <= BLOCK_LEN = 128).
__device__ bool pfor_patch_warp(u32* out, u32 n, u32 b, const u32* positions, const u32* highs, u32 exc) {
    u32 lane = threadIdx.x & 31u;
    u64 g[4];
    u64 at = gap_scan4(positions, exc, g);
    bool ok = true;
    for (u32 j = 0; j < 4; j++) {
        u32 e = lane * 4 + j;
        at += g[j];
        if (e < exc) {
            u64 v = at < n ? (u64)out[at] | (((u64)highs[e] + 1ull) << b) : 0ull;
            if (at >= n || v > 0xffffffffull) ok = false;
            else out[at] = (u32)v;
        }
    }
    ok = __all_sync(FULL_MASK, ok);
    __syncwarp();
    return ok;
}

// A middle array, by the whole warp: header (width, exceptions), n values, then two innermost arrays if
// exceptions. *pos advances the same on every lane.
__device__ bool pfor_mid_array_warp(const u32* w, u32 end, u32* pos, u32* out, u32 n, u32* p2, u32* h2) {
    u32 lane = threadIdx.x & 31u;
    if (*pos >= end) return false;
    u32 h = w[*pos];
    u32 b = h & 0xffu, exc = (h >> 8) & 0xffu;
    if ((h >> 16) != 0u || b > 32u || *pos + 1u + packed_words(n, b) > end) return false;
    for (u32 i = lane; i < n; i += 32) out[i] = unpack_one(w + *pos + 1u, b, i);
    *pos += 1u + packed_words(n, b);
    __syncwarp();
    if (exc == 0u) return true;
    if (b >= 32u || exc > n) return false;
    bool ok = true;
    u32 p = *pos;
    if (lane == 0)
        ok = pfor_flat_array(w, end, &p, p2, exc) && pfor_flat_array(w, end, &p, h2, exc) &&
             pfor_patch(out, n, b, p2, h2, exc);
    __syncwarp();
    *pos = __shfl_sync(FULL_MASK, p, 0);
    return __shfl_sync(FULL_MASK, ok ? 1u : 0u, 0) != 0u;
}

// Level-1 slots of one section, by the whole warp. Values land in out[0..n).
__device__ bool pfor_section_warp(const u32* w, u32 end, u32 pos, u32 b, u32 exc, u32* out, u32 n, u32* xs) {
    u32 lane = threadIdx.x & 31u;
    bool ok = b <= 32u && pos + packed_words(n, b) <= end;
    if (ok)
        for (u32 i = lane; i < n; i += 32) out[i] = unpack_one(w + pos, b, i);
    __syncwarp();
    if (!ok || exc == 0u) return ok;
    if (b >= 32u || exc > n) return false;
    u32 p = pos + packed_words(n, b);
    u32 *p1 = xs, *h1 = xs + BLOCK_LEN, *p2 = xs + 2 * BLOCK_LEN, *h2 = xs + 3 * BLOCK_LEN;
    return pfor_mid_array_warp(w, end, &p, p1, exc, p2, h2) && pfor_mid_array_warp(w, end, &p, h1, exc, p2, h2) &&
           pfor_patch_warp(out, n, b, p1, h1, exc);
}

// docIDs from gap values in out[0..n) (gap 0 for the first): d[i] = first + i + sum_{j<=i} gap[j].
__device__ bool prefix_docs_warp(u32* out, u32 n, u32 first, u32 last) {
    u32 lane = threadIdx.x & 31u;
    u64 g[4];
    u64 acc = (u64)first + gap_scan4(out, n, g);
    bool ok = true;
    __syncwarp();
    for (u32 j = 0; j < 4; j++) {
        u32 i = lane * 4 + j;
        acc += g[j];
        if (i < n) {
            if (acc > 0xffffffffull) ok = false;
            out[i] = (u32)acc;
        }
    }
    __syncwarp();
    ok = __all_sync(FULL_MASK, ok);
    // The block must end at the skip data's last docID (and start at its first).
    return ok && out[0] == first && out[n - 1] == last;
}

// Elias-Fano of n values in [0, upper] (crates/codec/src/eliasfano.rs): low bits packed, then the high
// bits' unary bucket stream. One lane per high word; a warp scan of popcounts gives each lane its rank.
__device__ bool ef_decode_warp(const u32* w, u32 end, u32 upper, u32* out, u32 n) {
    u32 lane = threadIdx.x & 31u;
    u64 ratio = (u64)upper / n;
    u32 low = ratio == 0 ? 0u : 63u - __clzll((long long)ratio);
    u32 lw = packed_words(n, low);
    u64 high_len = (u64)n + ((u64)upper >> low) + 1ull;
    u32 hw = (u32)((high_len + 31ull) / 32ull);
    if ((u64)lw + hw > end) return false;
    for (u32 i = lane; i < n; i += 32) out[i] = unpack_one(w, low, i);
    __syncwarp();
    u32 base = 0;
    bool ok = true;
    for (u32 c = 0; c < hw; c += 32) {
        u32 wi = c + lane;
        u32 word = 0;
        if (wi < hw) {
            word = w[lw + wi];
            u64 valid = high_len - (u64)wi * 32ull;
            if (valid < 32ull) word &= (1u << valid) - 1u;
        }
        u32 cnt = __popc(word);
        u32 inc = warp_inclusive_scan(cnt);
        u32 i = base + inc - cnt;
        while (word) {
            u32 bit = __ffs(word) - 1u;
            word &= word - 1u;
            if (i >= n) { ok = false; break; }
            u64 pos = (u64)wi * 32ull + bit;
            u64 value = ((pos - i) << low) | (u64)out[i];
            if (value > upper) { ok = false; break; }
            out[i] = (u32)value;  // only this lane touches element i
            i++;
        }
        base += __shfl_sync(FULL_MASK, inc, 31);
    }
    __syncwarp();
    ok = __all_sync(FULL_MASK, ok);
    return ok && base == n;
}

// Rice: binary parts packed with width b, then unary quotients (ones ended by a zero). The positions of
// the first n zeros give the quotients: q[i] = z[i] - z[i-1] - 1. `zpos` is per-warp shared scratch.
__device__ bool rice_decode_warp(const u32* w, u32 end, u32 b, u32* out, u32 n, u32* zpos) {
    u32 lane = threadIdx.x & 31u;
    u32 bw = packed_words(n, b);
    if (b > 32u || bw > end) return false;
    for (u32 i = lane; i < n; i += 32) out[i] = unpack_one(w, b, i);
    u32 uw = end - bw;
    u32 found = 0;
    for (u32 c = 0; c < uw && found < n; c += 32) {
        u32 wi = c + lane;
        u32 zeros = wi < uw ? ~w[bw + wi] : 0u;
        u32 cnt = __popc(zeros);
        u32 inc = warp_inclusive_scan(cnt);
        u32 z = found + inc - cnt;
        while (zeros && z < n) {
            u32 bit = __ffs(zeros) - 1u;
            zeros &= zeros - 1u;
            zpos[z] = wi * 32u + bit;
            z++;
        }
        found += __shfl_sync(FULL_MASK, inc, 31);
    }
    __syncwarp();
    if (found < n) return false;
    bool ok = true;
    for (u32 i = lane; i < n; i += 32) {
        u32 prev = i == 0 ? 0u : zpos[i - 1] + 1u;
        u64 q = (u64)(zpos[i] - prev);
        u64 v = (q << b) | (u64)out[i];
        if (b >= 32u && q != 0) ok = false;
        if (v > 0xffffffffull) ok = false;
        out[i] = (u32)v;
    }
    __syncwarp();
    return __all_sync(FULL_MASK, ok);
}

// SIMD-BP128 (crates/codec/src/simdbp.rs): one header word (docID width | frequency width << 8), then the
// docID section, then the frequency section. A full block's sections are BitPacker4x's: 128 values in four
// interleaved 32-bit lanes, value i in lane i % 4 at position i / 4, each lane packed LSB-first and its
// words at every fourth word; docIDs as gaps minus one (the first 0), frequencies minus one. A shorter
// block packs each section plainly (unpack_one). Every lane decodes its values independently: no
// exceptions, no scan besides the docIDs' prefix sum.
__device__ __forceinline__ u32 bp4_one(const u32* w, u32 b, u32 i) {
    if (b == 0u) return 0u;
    u32 lane = i & 3u, bit = (i >> 2) * b, wi = bit >> 5, s = bit & 31u;
    u32 v = w[wi * 4u + lane] >> s;
    if (s + b > 32u) v |= w[(wi + 1u) * 4u + lane] << (32u - s);
    return v & low_mask(b);
}

__device__ bool simdbp_section_warp(const u32* blk, u32 from, u32 to, u32 b, u32* out, u32 n) {
    u32 lane = threadIdx.x & 31u;
    bool full = n == BLOCK_LEN;
    if (b > 32u || from + simdbp_words(n, b) > to) return false;
    const u32* w = blk + from;
    for (u32 i = lane; i < n; i += 32) out[i] = full ? bp4_one(w, b, i) : unpack_one(w, b, i);
    return true;
}

// A SIMD-BP128 block's header: the widths of its docID section (*db) and frequency section (*fb); false
// where its unused bits are set, a width passes 32, or the frequency section does not start where the
// docID section ends (crates/codec/src/simdbp.rs checks the same). Both decoders take the header here.
__device__ __forceinline__ bool simdbp_header(const u32* blk, u32 n, u32 foff, u32* db, u32* fb) {
    u32 header = blk[0];
    *db = header & 0xffu;
    *fb = (header >> 8) & 0xffu;
    return (header >> 16) == 0u && *db <= 32u && *fb <= 32u && foff == 1u + simdbp_words(n, *db);
}

__device__ bool simdbp_decode_warp(const u32* blk, u32 len, u32 foff, u32 first, u32 last, u32 n, u32* out_doc,
                                   u32* out_tf) {
    u32 db, fb;
    if (!simdbp_header(blk, n, foff, &db, &fb)) return false;
    bool ok = true;
    if (out_doc) {
        ok = simdbp_section_warp(blk, 1u, foff, db, out_doc, n);
        __syncwarp();
        if (ok) ok = prefix_docs_warp(out_doc, n, first, last);
    }
    if (ok && out_tf) ok = simdbp_section_warp(blk, foff, len, fb, out_tf, n);
    return ok;
}

// Decodes SIMD-BP128 block `bi` (global block index) of list `t` into registers, by the whole warp: lane l
// holds postings 4l .. 4l+3 (doc[j], tf[j]; past the block's n postings doc[j] is 0 and tf[j] 1, read by
// no caller) and the block's n in *count. The shape and header are checked by the helpers the
// memory-writing decoder uses (block_span, simdbp_header), the docIDs as prefix_docs_warp checks them, so
// a malformed block fails here as it fails there (and on the CPU); returns the same verdict on every lane.
// Nothing goes through memory: a full block's four values of a lane are adjacent words of its
// BitPacker4x section (value i in SIMD lane i % 4 at position i / 4), loaded together.
__device__ bool simdbp_block_regs(const IndexArgs& ix, const TermDesc& t, u32 bi, u32 doc[4], u32 tf[4],
                                  u32* count) {
    u32 lane = threadIdx.x & 31u;
    BlockSpan sp;
    bool shaped = block_span(ix, t, bi, &sp);
    u32 n = sp.n, foff = sp.foff, first = sp.first, last = sp.last;
    const u32* blk = sp.blk;
    *count = n;
    u32 db, fb;
    if (!shaped || !simdbp_header(blk, n, foff, &db, &fb) || foff + simdbp_words(n, fb) > sp.len) return false;
    bool full = n == BLOCK_LEN;
    // Sums in u32, wrapping: a step of the true (unbounded) sums is one gap, 1 to 2^32, so a sum that
    // passed 2^32 shows as a docID not above the one before it. Strictly increasing docIDs from `first`
    // to `last` are therefore prefix_docs_warp's check (no sum past 2^32 - 1, the skip data's ends).
    u32 g[4], sum = 0u;
    bool ok = true;
#pragma unroll
    for (u32 j = 0; j < 4; j++) {
        u32 i = lane * 4u + j;
        u32 v = 0u, f = 0u;
        if (i < n) {
            v = full ? bp4_one(blk + 1u, db, i) : unpack_one(blk + 1u, db, i);
            f = full ? bp4_one(blk + foff, fb, i) : unpack_one(blk + foff, fb, i);
            if (f == FULL_MASK) ok = false;
        }
        g[j] = i < n ? v + (i > 0u ? 1u : 0u) : 0u;
        sum += g[j];
        tf[j] = f + 1u;
    }
    u32 inc = warp_inclusive_scan(sum);
    u32 acc = first + (inc - sum);
    // The previous lane's last docID (lane 0 starts at `first`, checked as such).
    u32 prev = __shfl_up_sync(FULL_MASK, first + inc, 1);
#pragma unroll
    for (u32 j = 0; j < 4; j++) {
        u32 i = lane * 4u + j;
        acc += g[j];
        doc[j] = i < n ? acc : 0u;
        if (i < n) {
            // The block must start at the skip data's first docID and end at its last.
            if ((i == 0u && acc != first) || (i > 0u && acc <= prev) || (i + 1u == n && acc != last)) ok = false;
            prev = acc;
        }
    }
    return __all_sync(FULL_MASK, ok);
}

// Decodes block `bi` (global block index) of list `t`. `xs` is per-warp shared scratch of 4 * BLOCK_LEN.
__device__ bool decode_block_warp(const IndexArgs& ix, const TermDesc& t, u32 bi, u32* out_doc, u32* out_tf,
                                  u32* xs) {
    BlockSpan sp;
    if (!block_span(ix, t, bi, &sp)) return false;
    const u32* blk = sp.blk;
    u32 n = sp.n, len = sp.len, foff = sp.foff, first = sp.first, last = sp.last;
    u32 dp = t.params & 0xffu, fp = (t.params >> 8) & 0xffu;
    bool ok = true;
    if (ix.codec == CODEC_PFOR) {
        u32 header = blk[0];
        if (out_doc) {
            ok = pfor_section_warp(blk, foff, 1, dp, header & 0xffu, out_doc, n, xs);
            if (ok) ok = prefix_docs_warp(out_doc, n, first, last);
        }
        if (ok && out_tf) ok = pfor_section_warp(blk, len, foff, fp, (header >> 8) & 0xffu, out_tf, n, xs);
    } else if (ix.codec == CODEC_EF) {
        if (out_doc) {
            if (last < first) return false;
            ok = ef_decode_warp(blk, foff, last - first, out_doc, n);
            __syncwarp();
            if (ok) {
                u32 lane = threadIdx.x & 31u;
                bool inc = true;
                for (u32 i = lane; i < n; i += 32) out_doc[i] += first;
                __syncwarp();
                for (u32 i = lane; i + 1 < n; i += 32) inc = inc && out_doc[i] < out_doc[i + 1];
                ok = __all_sync(FULL_MASK, inc) && out_doc[0] == first && out_doc[n - 1] == last;
            }
        }
        if (ok && out_tf) {
            if (foff >= len) return false;
            u32 upper = blk[foff];
            ok = ef_decode_warp(blk + foff + 1, len - foff - 1, upper, out_tf, n);
            __syncwarp();
            if (ok) {
                // prefix sums of tf - 1 back to frequencies; one lane, 128 steps
                u32 lane = threadIdx.x & 31u;
                bool good = true;
                if (lane == 0) {
                    u32 prev = 0;
                    for (u32 i = 0; i < n; i++) {
                        u32 s = out_tf[i];
                        if (s < prev) good = false;
                        out_tf[i] = s - prev + 1u;
                        prev = s;
                    }
                }
                ok = __shfl_sync(FULL_MASK, good ? 1u : 0u, 0) != 0u;
            }
        }
    } else if (ix.codec == CODEC_SIMDBP) {
        ok = simdbp_decode_warp(blk, len, foff, first, last, n, out_doc, out_tf);
    } else {
        if (out_doc) {
            ok = rice_decode_warp(blk, foff, dp, out_doc, n, xs);
            if (ok) ok = prefix_docs_warp(out_doc, n, first, last);
        }
        __syncwarp();
        if (ok && out_tf) ok = rice_decode_warp(blk + foff, len - foff, fp, out_tf, n, xs);
    }
    __syncwarp();
    if (ok && out_tf && ix.codec != CODEC_EF) {
        u32 lane = threadIdx.x & 31u;
        bool good = true;
        for (u32 i = lane; i < n; i += 32) {
            if (out_tf[i] == FULL_MASK) good = false;
            out_tf[i] += 1u;
        }
        ok = __all_sync(FULL_MASK, good);
    }
    __syncwarp();
    return ok;
}
