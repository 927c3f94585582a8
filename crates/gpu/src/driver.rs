//! Every raw call into the CUDA driver other than kernel launches (those are in `launch`): whether the
//! libraries are there, asynchronous copies and fills by device address, page-locked host memory
//! (allocated, or registered where it lies), and device addresses of buffers.
//!
//! The driver checks none of what these calls rely on: that an address names a live allocation of
//! the size used, that host memory stays put and unchanged while a copy reads it, and that the
//! context is current on the calling thread. Each `unsafe` block below restates its contract in a
//! `// SAFETY:` note, and its callers uphold it; the pipeline's streams and events order every use.

use std::ffi::c_void;
use std::sync::Arc;

use cudarc::driver::result as cu;
use cudarc::driver::{sys, CudaContext, CudaEvent, CudaSlice, CudaStream, DevicePtr};

use crate::error::GpuError;

/// Whether the CUDA driver library (`libcuda.so`) can be loaded: with dynamic loading, the first call
/// into a missing library would panic, so `Gpu::open` looks first.
pub(crate) fn driver_present() -> bool {
    // SAFETY: only tries to load the library (once) and reports whether it could; calls nothing in it.
    unsafe { sys::is_culib_present() }
}

/// Whether NVRTC (`libnvrtc.so`) can be loaded (as [`driver_present`]).
pub(crate) fn nvrtc_present() -> bool {
    // SAFETY: as in `driver_present`, for NVRTC.
    unsafe { cudarc::nvrtc::sys::is_culib_present() }
}

/// Stops cudarc from recording an event at every use of a buffer and making other streams wait for
/// it: the searcher orders its streams itself (a stream per pipeline slot, events per batch), and the
/// implicit waits would serialize the slots.
pub(crate) fn disable_event_tracking(ctx: &CudaContext) {
    // SAFETY: with tracking off, cudarc no longer orders a buffer's uses across streams; every buffer of
    // this crate is used on one stream, or across streams only after an explicit event wait (a slot's
    // events, the cache's `copies` event), and freed only once the streams that used it are synchronized.
    unsafe { ctx.disable_event_tracking() };
}

/// Whether the work `event` recorded has finished, without waiting: true also where it failed (the
/// caller's wait then returns the error), so that a failed batch is collected, never waited on forever.
pub(crate) fn event_done(event: &CudaEvent) -> bool {
    // SAFETY: `event` is a live event of its context (cudarc frees it only on drop); querying it has no
    // other precondition, and a context not current on this thread is an error, not undefined behaviour.
    match unsafe { cu::event::query(event.cu_event()) } {
        Ok(()) => true,
        Err(e) => e.0 != sys::cudaError_enum::CUDA_ERROR_NOT_READY,
    }
}

/// The raw device address of a buffer (event tracking is off: the pipeline synchronizes itself).
pub(crate) fn ptr<T>(s: &CudaSlice<T>, stream: &CudaStream) -> u64 {
    let (p, _sync) = s.device_ptr(stream);
    p
}

/// Fills `bytes` bytes at device address `dst` with `value`, asynchronously on `stream`.
pub(crate) fn memset_async(stream: &CudaStream, dst: u64, value: u8, bytes: usize) -> Result<(), GpuError> {
    // SAFETY: callers pass the address of a live allocation of at least `bytes` bytes (from `ptr`), which
    // is not freed before `stream` has run the fill.
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

/// Copies `src` (pinned) to device address `dst`, asynchronously on `stream`.
pub(crate) fn copy_to_device<T: Copy>(stream: &CudaStream, dst: u64, src: &[T]) -> Result<(), GpuError> {
    // SAFETY: `src` lies in page-locked memory (a `Pinned` buffer, or the index's words under a
    // `PageLock`) that the caller keeps allocated and unchanged until the stream's next recorded event
    // completes; `dst` is a live device allocation of at least `size_of_val(src)` bytes.
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
    // SAFETY: `dst` lies in a `Pinned` buffer that stays allocated and that the host reads only after
    // the stream's next recorded event completes; `src` is a live device allocation of at least
    // `size_of_val(dst)` bytes.
    unsafe { cu::memcpy_dtoh_async(dst, src, stream.cu_stream())? };
    Ok(())
}

/// `dst.copy_from_slice(src)`, on every core in pieces of `piece` u32s where there is more than one
/// piece: the host's side of a copy through a page-locked buffer.
pub(crate) fn par_copy(dst: &mut [u32], src: &[u32], piece: usize) {
    use rayon::prelude::*;
    if dst.len() <= piece {
        dst.copy_from_slice(src);
        return;
    }
    dst.par_chunks_mut(piece)
        .zip(src.par_chunks(piece))
        .for_each(|(d, s)| d.copy_from_slice(s));
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
    /// `len` (at least one) zero-initialised elements, in `ctx`.
    pub(crate) fn new(ctx: &CudaContext, len: usize) -> Result<Self, GpuError> {
        ctx.bind_to_thread()?;
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

    /// The address a kernel writes this memory at (it is mapped into the device's address space), or
    /// `None` where the driver cannot give one.
    pub(crate) fn device_ptr(&self) -> Option<u64> {
        let mut dptr: sys::CUdeviceptr = 0;
        // SAFETY: `ptr` came from `cuMemHostAlloc` in a context current on the thread that made it;
        // the call only writes `dptr`.
        let r = unsafe { sys::cuMemHostGetDevicePointer_v2(&mut dptr, self.ptr as *mut c_void, 0) };
        (r == sys::CUresult::CUDA_SUCCESS && dptr != 0).then_some(dptr)
    }

    /// Element `i`, read afresh from memory (a kernel may be writing the buffer meanwhile), without
    /// forming a reference to the buffer.
    pub(crate) fn volatile(&self, i: usize) -> T {
        assert!(i < self.len, "element {i} of {}", self.len);
        // SAFETY: `i` is in bounds; the element is initialised (zeroed at allocation, then written by
        // the host or the device); a volatile read of a `Copy` value needs no exclusive access.
        unsafe { std::ptr::read_volatile(self.ptr.add(i)) }
    }

    /// Elements `range`, which are written, while a kernel may be writing others of the buffer.
    ///
    /// # Safety
    /// Nothing writes these elements while the slice lives (a kernel wrote them before the count the
    /// caller read after them, and writes them no more).
    pub(crate) unsafe fn written(&self, range: std::ops::Range<usize>) -> &[T] {
        assert!(
            range.start <= range.end && range.end <= self.len,
            "{range:?} of {}",
            self.len
        );
        // SAFETY: in bounds and initialised; the caller guarantees no writer for the slice's life.
        unsafe { std::slice::from_raw_parts(self.ptr.add(range.start), range.end - range.start) }
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
            let _ = cu::free_host(self.ptr as *mut c_void);
        }
    }
}

/// Memory of `owner`'s that stays where it is, page-locked for the device's copies
/// (`cuMemHostRegister`, read-only) while this lives: the pages that hold the bytes `bytes(owner)`
/// names. Holding the owner keeps them mapped; it is shared, so they do not change.
pub(crate) struct PageLock<O: ?Sized> {
    /// The first byte registered (the bytes' start, rounded down to a page).
    base: *mut c_void,
    owner: Arc<O>,
}

// SAFETY: `base` is only passed back to the driver to unregister; the memory is read through `owner`,
// which is shared between threads as `Arc<O>` is.
unsafe impl<O: ?Sized + Send + Sync> Send for PageLock<O> {}

/// Page size assumed for rounding the registered range (a multiple of the system's on x86-64 and
/// aarch64 Linux with 4 KiB pages; the driver rounds to its own pages within the range given).
const PAGE: usize = 4096;

impl<O: ?Sized> PageLock<O> {
    /// Registers the pages of `bytes(&owner)` with `ctx`, read-only; an error where the driver refuses
    /// (or `bytes` is empty).
    pub(crate) fn read_only(
        ctx: &CudaContext,
        owner: Arc<O>,
        bytes: impl Fn(&O) -> &[u8],
    ) -> Result<PageLock<O>, GpuError> {
        let range = bytes(&owner);
        if range.is_empty() {
            return Err(GpuError::Unsupported("nothing to page-lock".into()));
        }
        let start = range.as_ptr() as usize;
        let end = start + range.len();
        let (lo, hi) = (start & !(PAGE - 1), end.div_ceil(PAGE) * PAGE);
        ctx.bind_to_thread()?;
        // SAFETY: [lo, hi) covers the pages of `range`, which `owner` holds and keeps mapped, unmoved
        // and unchanged (it is shared) until `drop` unregisters them; the device only reads them
        // (READ_ONLY).
        unsafe {
            sys::cuMemHostRegister_v2(lo as *mut c_void, hi - lo, sys::CU_MEMHOSTREGISTER_READ_ONLY)
                .result()?;
        }
        Ok(PageLock {
            base: lo as *mut c_void,
            owner,
        })
    }

    /// What holds the registered memory.
    pub(crate) fn owner(&self) -> &O {
        &self.owner
    }
}

impl<O: ?Sized> Drop for PageLock<O> {
    fn drop(&mut self) {
        // SAFETY: `base` was registered in `read_only` and is unregistered once, here, before `owner`
        // is dropped (a value's fields drop after its `drop`); the owner of this drops it only once no
        // copy reads the pages: the searcher synchronizes its slots' streams in its `drop`, before its
        // fields are dropped (which also binds its context to this thread, which the call needs).
        unsafe {
            let _ = sys::cuMemHostUnregister(self.base);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::par_copy;

    #[test]
    fn par_copy_copies_every_element_in_one_piece_or_many() {
        // Empty, below a piece, exactly a piece, and pieces with a short last one.
        for (len, piece) in [(0, 4), (3, 4), (4, 4), (1_000_003, 1 << 16), (10, 1)] {
            let src: Vec<u32> = (0..len as u32).map(|i| i.wrapping_mul(2_654_435_761)).collect();
            let mut dst = vec![u32::MAX; len];
            par_copy(&mut dst, &src, piece);
            assert_eq!(dst, src, "{len} u32s in pieces of {piece}");
        }
    }
}
