//! Every kernel launch in one place: one typed wrapper per kernel, and the `DeviceRepr` of the structs
//! kernels take by value. (The other raw driver calls, copies and page-locked memory, are in
//! `driver`; no other module holds `unsafe` code.)
//!
//! cudarc checks none of a kernel's argument contract (`driver/safe/launch.rs` says what it cannot
//! check): the number and types of the arguments, the sizes of the buffers behind raw pointers, and
//! whether those buffers outlive the asynchronous work. Each wrapper below restates the contract of its
//! kernel (in `kernels/`) in a `// SAFETY:` comment, and its callers uphold it.

use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream, DeviceRepr, LaunchConfig, PushKernelArg};

use crate::abi::{BatchArgs, IndexArgs, MODE_AND};
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
