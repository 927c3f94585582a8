//! Every `unsafe` call into the device in one place: one typed wrapper per kernel, the asynchronous
//! copies between pinned host memory and device buffers, and pinned allocations.
//!
//! cudarc checks none of a kernel's argument contract (`driver/safe/launch.rs` says what it cannot
//! check): the number and types of the arguments, the sizes of the buffers behind raw pointers, and
//! whether those buffers outlive the asynchronous work. Each wrapper below restates the contract of its
//! kernel (in `kernels/`) in a `// SAFETY:` comment, and its callers uphold it.

use std::sync::Arc;

use cudarc::driver::result as cu;
use cudarc::driver::{CudaSlice, CudaStream, DeviceRepr, LaunchConfig, PushKernelArg};

use crate::abi::{BatchArgs, IndexArgs, MODE_AND};
use crate::device::threads;
use crate::residency::ptr;
use crate::{Gpu, GpuError};

// SAFETY: `#[repr(C)]` and `Pod` (every byte a field, no pointers the host dereferences), with the
// size and field offsets of the kernels' `struct IndexArgs` (checked at compile time on both sides,
// `crate::abi`); a kernel takes it by value, which is what `DeviceRepr` passes.
unsafe impl DeviceRepr for IndexArgs {}
// SAFETY: as for `IndexArgs`, with the kernels' `struct BatchArgs`.
unsafe impl DeviceRepr for BatchArgs {}

/// Launches the query kernel's entry point for `ba.mode` (`search_and` for [`MODE_AND`], else `search_or`) on
/// `stream`: `grid` persistent CTAs of `threads()` threads with `smem` bytes of dynamic shared memory.
///
/// Contract (the caller, `engine::GpuSearcher::submit`, upholds it): `ix` points at a device index
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
            block_dim: (threads(), 1, 1),
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
            block_dim: (threads(), 1, 1),
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
            block_dim: (threads(), 1, 1),
            shared_mem_bytes: 0,
        })?;
    }
    Ok(())
}

/// Fills `bytes` bytes at device address `dst` with `value`, asynchronously on `stream`.
pub(crate) fn memset_async(stream: &CudaStream, dst: u64, value: u8, bytes: usize) -> Result<(), GpuError> {
    // SAFETY: callers pass the address of a live allocation of at least `bytes` bytes (from `ptr`).
    unsafe { cu::memset_d8_async(dst, value, bytes, stream.cu_stream())? };
    Ok(())
}

/// Fills a device buffer with `value` bytes (poisoning outputs a test checks are all written).
pub(crate) fn poison<T>(stream: &CudaStream, buf: &CudaSlice<T>, value: u8) -> Result<(), GpuError> {
    memset_async(
        stream,
        ptr(buf, stream),
        value,
        buf.len() * std::mem::size_of::<T>(),
    )
}

/// Page-locked host memory (not write-combined: the host reads results back from it). Asynchronous
/// copies need it: the device reads or writes it while the host goes on.
pub(crate) struct Pinned<T: Copy> {
    ptr: *mut T,
    len: usize,
}

// SAFETY: the allocation is owned by the value and freed once, on drop; no other handle aliases it.
unsafe impl<T: Copy> Send for Pinned<T> {}

impl<T: Copy> Pinned<T> {
    /// `len` (at least one) zero-initialised elements.
    pub(crate) fn new(gpu: &Gpu, len: usize) -> Result<Self, GpuError> {
        gpu.ctx.bind_to_thread()?;
        let len = len.max(1);
        let bytes = len * std::mem::size_of::<T>();
        // SAFETY: the context is bound to this thread; a fresh allocation of `bytes` bytes is returned
        // or an error, and is zeroed below before any read.
        let ptr = unsafe { cu::malloc_host(bytes, 0)? } as *mut T;
        // SAFETY: `ptr` points at `bytes` writable bytes.
        unsafe { std::ptr::write_bytes(ptr as *mut u8, 0, bytes) };
        Ok(Pinned { ptr, len })
    }

    pub(crate) fn as_slice(&self) -> &[T] {
        // SAFETY: `ptr` holds `len` initialised elements for the value's lifetime.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }

    pub(crate) fn as_mut_slice(&mut self) -> &mut [T] {
        // SAFETY: as above, and `&mut self` makes the borrow unique.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

impl<T: Copy> Drop for Pinned<T> {
    fn drop(&mut self) {
        // SAFETY: `ptr` came from `malloc_host` and is freed only here. Slots synchronize their last
        // event before their buffers are dropped or replaced, so no copy still uses it.
        unsafe {
            let _ = cu::free_host(self.ptr as *mut std::ffi::c_void);
        }
    }
}

/// Copies `src` (pinned) to device address `dst`, asynchronously on `stream`.
pub(crate) fn copy_to_device<T: Copy>(stream: &CudaStream, dst: u64, src: &[T]) -> Result<(), GpuError> {
    // SAFETY: `src` lies in a `Pinned` buffer that the caller keeps unchanged until the stream's next
    // recorded event completes; `dst` is a live device allocation of at least `size_of_val(src)` bytes.
    unsafe { cu::memcpy_htod_async(dst, src, stream.cu_stream())? };
    Ok(())
}

/// Copies `bytes` bytes from device address `src` to device address `dst`, asynchronously on `stream`.
pub(crate) fn copy_on_device(stream: &CudaStream, dst: u64, src: u64, bytes: usize) -> Result<(), GpuError> {
    // SAFETY: callers pass addresses inside live device allocations with `bytes` bytes after each, in
    // regions that do not overlap (a list's old and new places in the cache).
    unsafe { cu::memcpy_dtod_async(dst, src, bytes, stream.cu_stream())? };
    Ok(())
}

/// Copies `dst.len()` elements from device address `src` into `dst` (pinned), asynchronously.
pub(crate) fn copy_to_host<T: Copy>(stream: &CudaStream, dst: &mut [T], src: u64) -> Result<(), GpuError> {
    // SAFETY: `dst` lies in a `Pinned` buffer that the host reads only after the stream's next recorded
    // event completes; `src` is a live device allocation of at least `size_of_val(dst)` bytes.
    unsafe { cu::memcpy_dtoh_async(dst, src, stream.cu_stream())? };
    Ok(())
}
