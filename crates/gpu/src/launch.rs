//! Every kernel launch in one place: one typed wrapper per kernel, and the `DeviceRepr` of the structs
//! kernels take by value. (The other raw driver calls, copies and page-locked memory, are in
//! `driver`; no other module holds `unsafe` code.)
//!
//! cudarc checks none of a kernel's argument contract (`driver/safe/launch.rs` says what it cannot
//! check): the number and types of the arguments, the sizes of the buffers behind raw pointers, and
//! whether those buffers outlive the asynchronous work. Each wrapper below restates the contract of its
//! kernel (in `kernels/`) in a `// SAFETY:` comment, and its callers uphold it.

use std::sync::Arc;

use cudarc::driver::{CudaFunction, CudaSlice, CudaStream, DeviceRepr, LaunchConfig, PushKernelArg};

use crate::abi::{BatchArgs, BoundArgs, EncodeArgs, IndexArgs, MODE_AND};
use crate::build::BuildKernels;
use crate::device::Gpu;
use crate::error::GpuError;

// SAFETY: `#[repr(C)]` and `Pod` (every byte a field, no pointers the host dereferences), with the
// size and field offsets of the kernels' `struct IndexArgs` (checked at compile time on both sides,
// `crate::abi`); a kernel takes it by value, which is what `DeviceRepr` passes.
unsafe impl DeviceRepr for IndexArgs {}
// SAFETY: as for `IndexArgs`, with the kernels' `struct BatchArgs`.
unsafe impl DeviceRepr for BatchArgs {}

/// Launches the query kernel's entry point for `ba.mode` (`search_and` for [`MODE_AND`], else `search_or`) on
/// `stream`: `grid` persistent CTAs of `gpu.threads()` threads with `smem` bytes of dynamic shared memory.
///
/// Contract (the caller, `GpuSearcher::submit` in `searcher/pipeline.rs`, upholds it): `ix` points at a device index
/// that lives as long as the searcher; `ba.queries` holds `ba.num_queries` `QueryDesc`s whose terms lie
/// in `ba.terms`, copied earlier on the same stream; the outputs hold `num_queries · k` entries and the
/// counts `num_queries`; the scratch buffers hold `grid · CHUNK · BLOCK_LEN` entries and `topbuf`
/// `grid · TOPK_CAP`; `next_query` is a zeroed u32; `phase_cycles` is 0 or holds `grid · PHASE_COUNTERS`
/// u64; `smem`
/// is what `and_shared_bytes` / `or_shared_bytes` give for the batch's mode and window.
pub(crate) fn search_batch(
    gpu: &Gpu,
    stream: &Arc<CudaStream>,
    grid: u32,
    smem: u32,
    ix: &IndexArgs,
    ba: &BatchArgs,
) -> Result<(), GpuError> {
    let kernel = if ba.mode == MODE_AND {
        &gpu.search_and
    } else {
        &gpu.search_or
    };
    let mut launch = stream.launch_builder(kernel);
    launch.arg(ix).arg(ba);
    // SAFETY: the kernel takes exactly (IndexArgs, BatchArgs) by value, both `#[repr(C)]` mirrors of its
    // structs; every address in them is a live device allocation of the sizes stated above, owned by
    // the searcher or the slot, which are not dropped or reused before the slot's last event completes.
    unsafe {
        launch.launch(LaunchConfig {
            grid_dim: (grid, 1, 1),
            block_dim: (gpu.threads(), 1, 1),
            shared_mem_bytes: smem,
        })?;
    }
    Ok(())
}

/// Launches `decode_blocks`: decodes `count` blocks, block `bids[j]` of term `tids[j]`, into
/// `out_doc`/`out_tf` at `j · BLOCK_LEN` and sets `ok[j]` to 1 for a well-formed block. `regs`: SIMD-BP128
/// blocks through the register decoder (the OR windows'), else through the one that writes to memory.
#[allow(clippy::too_many_arguments)]
pub(crate) fn decode_blocks(
    gpu: &Gpu,
    stream: &Arc<CudaStream>,
    grid: u32,
    ix: &IndexArgs,
    terms: &CudaSlice<u8>,
    tids: &CudaSlice<u32>,
    bids: &CudaSlice<u32>,
    count: u32,
    regs: bool,
    out: &mut (CudaSlice<u32>, CudaSlice<u32>, CudaSlice<u32>),
) -> Result<(), GpuError> {
    let regs = regs as u32;
    let block_len = crate::abi::BLOCK_LEN;
    assert!(tids.len() >= count as usize && bids.len() >= count as usize);
    assert!(out.0.len() >= count as usize * block_len && out.1.len() >= count as usize * block_len);
    assert!(out.2.len() >= count as usize);
    let mut launch = stream.launch_builder(&gpu.decode);
    launch
        .arg(ix)
        .arg(terms)
        .arg(tids)
        .arg(bids)
        .arg(&count)
        .arg(&regs)
        .arg(&mut out.0)
        .arg(&mut out.1)
        .arg(&mut out.2);
    // SAFETY: the arguments match `decode_blocks(IndexArgs, const TermDesc*, const u32*, const u32*,
    // u32, u32, u32*, u32*, u32*)` in order and type; the asserts above check the output sizes the kernel
    // writes for `count` blocks; `terms` holds a `TermDesc` for every id in `tids` and every `bids[j]` is
    // a block of that term (the callers build both from the same descriptors); the kernel writes only
    // the three outputs, which the launch borrows mutably until the caller synchronizes.
    unsafe {
        launch.launch(LaunchConfig {
            grid_dim: (grid.max(1), 1, 1),
            block_dim: (gpu.threads(), 1, 1),
            shared_mem_bytes: 0,
        })?;
    }
    Ok(())
}

/// Device buffers of `topk_segments`: inputs (segment offsets, docIDs, scores), per-CTA scratch, outputs.
pub(crate) struct TopKBuffers {
    pub seg: CudaSlice<u32>,
    pub docs: CudaSlice<u32>,
    pub scores: CudaSlice<f32>,
    pub topbuf: CudaSlice<u64>,
    pub out_doc: CudaSlice<u32>,
    pub out_score: CudaSlice<f32>,
    pub out_count: CudaSlice<u32>,
}

/// Launches `topk_segments`: the top `k` of each of `seg.len() − 1` segments.
pub(crate) fn topk_segments(
    gpu: &Gpu,
    stream: &Arc<CudaStream>,
    grid: u32,
    k: u32,
    b: &mut TopKBuffers,
) -> Result<(), GpuError> {
    let nseg = (b.seg.len() - 1) as u32;
    assert!(b.topbuf.len() >= grid as usize * crate::abi::TOPK_CAP);
    assert!(b.out_doc.len() >= (nseg * k) as usize && b.out_score.len() >= (nseg * k) as usize);
    assert!(b.out_count.len() >= nseg as usize && k as usize <= crate::abi::MAX_K);
    let mut launch = stream.launch_builder(&gpu.topk);
    launch
        .arg(&b.seg)
        .arg(&b.docs)
        .arg(&b.scores)
        .arg(&nseg)
        .arg(&k)
        .arg(&mut b.topbuf)
        .arg(&mut b.out_doc)
        .arg(&mut b.out_score)
        .arg(&mut b.out_count);
    // SAFETY: the arguments match `topk_segments(const u32*, const u32*, const float*, u32, u32, u64*,
    // u32*, float*, u32*)` in order and type; `seg` is non-decreasing and ends at most at the length of
    // `docs` and `scores` (the caller builds them together); the asserts check the scratch and output
    // sizes for `grid` CTAs, `nseg` segments and k ≤ MAX_K_GPU.
    unsafe {
        launch.launch(LaunchConfig {
            grid_dim: (grid, 1, 1),
            block_dim: (gpu.threads(), 1, 1),
            shared_mem_bytes: 0,
        })?;
    }
    Ok(())
}

/// CTAs for a grid-stride kernel over `n` elements: one element a thread, at most 2^20 CTAs.
fn elementwise_grid(kernels: &BuildKernels, n: u32) -> u32 {
    n.div_ceil(kernels.threads).clamp(1, 1 << 20)
}

fn elementwise_config(kernels: &BuildKernels, n: u32) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (elementwise_grid(kernels, n), 1, 1),
        block_dim: (kernels.threads, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// Launches `build_rank_keys`: `keys[i] = rank[base[s] + term[i]]` for the postings `i` of segment `s`
/// (`seg_start[s] <= i < seg_start[s + 1]`), `n` in all.
pub(crate) fn build_rank_keys(
    k: &BuildKernels,
    stream: &Arc<CudaStream>,
    term: &CudaSlice<u32>,
    rank: &CudaSlice<u32>,
    (seg_start, base): (&CudaSlice<u32>, &CudaSlice<u32>),
    n: u32,
    keys: &mut CudaSlice<u32>,
) -> Result<(), GpuError> {
    let num_segs = base.len() as u32;
    assert!(keys.len() >= n as usize && term.len() >= n as usize && seg_start.len() == base.len() + 1);
    let mut launch = stream.launch_builder(&k.rank_keys);
    launch
        .arg(term)
        .arg(rank)
        .arg(seg_start)
        .arg(base)
        .arg(&num_segs)
        .arg(&n)
        .arg(keys);
    // SAFETY: the arguments match `build_rank_keys(const u32*, const u32*, const u32*, const u32*, u32,
    // u32, u32*)`; the assert checks the reads of `term` and the writes of `keys`; the caller
    // (`build::rank_keys`) gives increasing segment starts from 0 to `n`, and every segment's term numbers
    // are below its partition's rank table, which lies in `rank` from the segment's base.
    unsafe { launch.launch(elementwise_config(k, n))? };
    Ok(())
}

/// Launches `build_map_docs`: `doc[i] = new_id[doc[i]]`.
pub(crate) fn build_map_docs(
    k: &BuildKernels,
    stream: &Arc<CudaStream>,
    doc: &mut CudaSlice<u32>,
    new_id: &CudaSlice<u32>,
    n: u32,
) -> Result<(), GpuError> {
    assert!(doc.len() >= n as usize);
    let mut launch = stream.launch_builder(&k.map_docs);
    launch.arg(doc).arg(new_id).arg(&n);
    // SAFETY: the arguments match `build_map_docs(u32*, const u32*, u32)`; the assert checks the first
    // `n` entries exist; every docID is below `new_id.len()` (the number of documents: the builder
    // numbers documents from 0 and gives one new number each).
    unsafe { launch.launch(elementwise_config(k, n))? };
    Ok(())
}

/// Launches `build_gather`: `out[i] = src[idx[i]]` for `i < n`, or the identity where `src_idx` is None.
pub(crate) fn build_gather(
    k: &BuildKernels,
    stream: &Arc<CudaStream>,
    src_idx: Option<(&CudaSlice<u32>, &CudaSlice<u32>)>,
    n: u32,
    out: &mut CudaSlice<u32>,
) -> Result<(), GpuError> {
    assert!(out.len() >= n as usize);
    let mut launch = stream.launch_builder(&k.gather);
    let null = 0u64;
    match &src_idx {
        Some((src, idx)) => {
            assert!(idx.len() >= n as usize);
            launch.arg(*src).arg(*idx);
        }
        None => {
            launch.arg(&null).arg(&null);
        }
    }
    launch.arg(&n).arg(out);
    // SAFETY: the arguments match `build_gather(const u32*, const u32*, u32, u32*)` (null pointers as a
    // u64 0 where there is no source: the kernel then reads neither); the asserts check `idx` and `out`
    // hold `n` entries; every index in `idx` is below `src.len()` (a permutation of the positions of
    // `src`, which the sort makes).
    unsafe { launch.launch(elementwise_config(k, n))? };
    Ok(())
}

/// One stable radix sort pass over `n` (key, value) pairs: the digit at `shift` of each key orders them
/// from `keys`/`vals` into `out`; `counts` is scratch of `RADIX · tiles` words.
pub(crate) fn radix_pass(
    k: &BuildKernels,
    stream: &Arc<CudaStream>,
    (keys, vals): (&CudaSlice<u32>, &CudaSlice<u32>),
    n: u32,
    shift: u32,
    counts: &mut CudaSlice<u32>,
    out: (&mut CudaSlice<u32>, &mut CudaSlice<u32>),
) -> Result<(), GpuError> {
    let tiles = n.div_ceil(crate::abi::SORT_TILE).max(1);
    let m = (tiles as usize) << crate::abi::RADIX_BITS;
    assert!(keys.len() >= n as usize && vals.len() >= n as usize && counts.len() >= m);
    assert!(out.0.len() >= n as usize && out.1.len() >= n as usize);
    let tiles_config = LaunchConfig {
        grid_dim: (tiles, 1, 1),
        block_dim: (k.threads, 1, 1),
        shared_mem_bytes: 0,
    };
    let mut launch = stream.launch_builder(&k.histogram);
    launch.arg(keys).arg(&n).arg(&shift).arg(&mut *counts);
    // SAFETY: the arguments match `radix_histogram(const u32*, u32, u32, u32*)`; its `tiles` CTAs read
    // `n` keys and write `RADIX · tiles` counts, which the asserts check.
    unsafe { launch.launch(tiles_config)? };
    scan_exclusive(k, stream, counts, m as u32)?;
    let mut launch = stream.launch_builder(&k.scatter);
    launch
        .arg(keys)
        .arg(vals)
        .arg(&n)
        .arg(&shift)
        .arg(&*counts)
        .arg(out.0)
        .arg(out.1);
    // SAFETY: the arguments match `radix_scatter(const u32*, const u32*, u32, u32, const u32*, u32*,
    // u32*)` with the same `tiles` CTAs as the histogram; the scanned counts give every key a distinct
    // position below `n` (they count every key once), and the asserts check the outputs hold `n`.
    unsafe { launch.launch(tiles_config)? };
    Ok(())
}

/// Launches `scan_exclusive`: the exclusive prefix sum of `v[..n]`, in place, by one CTA.
pub(crate) fn scan_exclusive(
    k: &BuildKernels,
    stream: &Arc<CudaStream>,
    v: &mut CudaSlice<u32>,
    n: u32,
) -> Result<(), GpuError> {
    assert!(v.len() >= n as usize);
    let mut launch = stream.launch_builder(&k.scan);
    launch.arg(v).arg(&n);
    // SAFETY: the arguments match `scan_exclusive(u32*, u32)`; one CTA scans the first `n` values in
    // place, which the assert checks exist.
    unsafe {
        launch.launch(LaunchConfig {
            grid_dim: (1, 1, 1),
            block_dim: (k.threads, 1, 1),
            shared_mem_bytes: 0,
        })?
    };
    Ok(())
}

/// Launches `list_starts` over `n` sorted rank keys into `starts` (`num_terms + 1` words).
pub(crate) fn list_starts(
    k: &BuildKernels,
    stream: &Arc<CudaStream>,
    keys: &CudaSlice<u32>,
    n: u32,
    num_terms: u32,
    starts: &mut CudaSlice<u32>,
) -> Result<(), GpuError> {
    assert!(keys.len() >= n as usize && starts.len() > num_terms as usize);
    let mut launch = stream.launch_builder(&k.starts);
    launch.arg(keys).arg(&n).arg(&num_terms).arg(starts);
    // SAFETY: the arguments match `list_starts(const u32*, u32, u32, u32*)`; every key is a rank below
    // `num_terms` (ranks of the build's terms), so the writes stay within the `num_terms + 1` words the
    // assert checks.
    unsafe { launch.launch(elementwise_config(k, n))? };
    Ok(())
}

/// Launches `block_bounds` over `a.num_blocks` blocks (one warp each).
pub(crate) fn block_bounds(
    k: &BuildKernels,
    stream: &Arc<CudaStream>,
    a: &BoundArgs,
) -> Result<(), GpuError> {
    let mut launch = stream.launch_builder(&k.bounds);
    launch.arg(a);
    // SAFETY: the kernel takes exactly one `BoundArgs` by value, the `#[repr(C)]` mirror of its struct;
    // the caller (`build::invert_tuples`) fills it with live device allocations on this stream: `starts`
    // and `block_starts` of `num_terms + 1` words whose lists and blocks lie within `docs`/`tfs` and
    // `out`, `idf` of `num_terms` floats, `lens` with an entry for every docID in `docs`.
    unsafe { launch.launch(warp_per_block(k, a.num_blocks))? };
    Ok(())
}

/// A launch of one warp per block of `blocks` (grid-stride over at most 2^20 CTAs).
fn warp_per_block(k: &BuildKernels, blocks: u32) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (blocks.div_ceil(k.threads / 32).clamp(1, 1 << 20), 1, 1),
        block_dim: (k.threads, 1, 1),
        shared_mem_bytes: 0,
    }
}

// SAFETY: `#[repr(C)]` and `Pod`, with the size and field offsets of the kernels' `struct BoundArgs`
// (checked at compile time on both sides, `crate::abi`); `block_bounds` takes it by value.
unsafe impl DeviceRepr for BoundArgs {}

// SAFETY: as for `BoundArgs`, with the kernels' `struct EncodeArgs`.
unsafe impl DeviceRepr for EncodeArgs {}

/// Launches the SIMD-BP128 encoding's step `step` (`k.simdbp_sizes` or `k.simdbp_pack`) over
/// `a.num_blocks` blocks (one warp each).
///
/// Contract (the caller, `build::encode_simdbp`, upholds it): `a` holds live device allocations on
/// this stream: `starts` and `block_starts` of `num_terms + 1` words, as `block_bounds` takes them,
/// whose lists lie within `docs`/`tfs`; `bounds` of `num_blocks` floats; `offsets` of `num_blocks + 1`
/// words; `cf` of `num_terms` u64s and `bad` of one word; for the pack, `offsets` scanned, `words`
/// of the total it ends with and `meta` of `5 · num_blocks` words.
pub(crate) fn simdbp_step(
    k: &BuildKernels,
    step: &CudaFunction,
    stream: &Arc<CudaStream>,
    a: &EncodeArgs,
) -> Result<(), GpuError> {
    let mut launch = stream.launch_builder(step);
    launch.arg(a);
    // SAFETY: both steps take exactly one `EncodeArgs` by value, the `#[repr(C)]` mirror of their
    // struct, filled as the contract above says; a warp reads and writes only its blocks' postings,
    // offsets, words and metadata.
    unsafe { launch.launch(warp_per_block(k, a.num_blocks))? };
    Ok(())
}
