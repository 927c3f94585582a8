//! The index's encoded words page-locked where they lie (`cuMemHostRegister`, read-only), so that the
//! blocks a batch stages are copied from the index by the GPU's copy engine, span by span, instead of
//! gathered by the host into a pinned buffer first. On the 25M collection at a quarter of the index
//! that gather took 9 ms of all 16 cores per AND batch of ~385 queries, and bounded the pipeline
//! (bench/RESULTS.md, issue 13, twenty-fourth session). Registration can be refused (memory limits,
//! a platform without it): the searcher then gathers as before.

use std::ffi::c_void;
use std::sync::Arc;

use cudarc::driver::sys;
use warpsearch_index::Index;

use crate::{Gpu, GpuError};

/// The pages of an index's words, page-locked for the device's copies while this lives.
pub(crate) struct Registered {
    /// Keeps the words (their mapping) alive while they are registered.
    index: Arc<Index>,
    /// The first page registered (the words' start, rounded down to a page).
    base: *mut c_void,
}

// SAFETY: `base` is only passed back to the driver to unregister; the words are read through `index`.
unsafe impl Send for Registered {}

/// Page size assumed for rounding the registered range (a multiple of the system's on x86-64 and
/// aarch64 Linux with 4 KiB pages; the driver rounds to its own pages within the range given).
const PAGE: usize = 4096;

impl Registered {
    /// Registers `index`'s words with the context of `gpu`, read-only; an error where the driver
    /// refuses (the caller then gathers staged words on the host).
    pub(crate) fn new(gpu: &Gpu, index: Arc<Index>) -> Result<Registered, GpuError> {
        let words = index.words();
        if words.is_empty() {
            return Err(GpuError::Unsupported("no words to register".into()));
        }
        let start = words.as_ptr() as usize;
        let end = start + std::mem::size_of_val(words);
        let (lo, hi) = (start & !(PAGE - 1), end.div_ceil(PAGE) * PAGE);
        gpu.ctx.bind_to_thread()?;
        // SAFETY: [lo, hi) covers the words' pages, which lie in one mapping (or allocation) of the
        // index's that stays mapped while `index` lives, that is until `drop` unregisters them; the
        // device only reads them (READ_ONLY).
        unsafe {
            sys::cuMemHostRegister_v2(lo as *mut c_void, hi - lo, sys::CU_MEMHOSTREGISTER_READ_ONLY)
                .result()?;
        }
        Ok(Registered {
            index,
            base: lo as *mut c_void,
        })
    }

    /// `index`'s words registered where a searcher stages blocks at all (`staging`) and the driver
    /// allows it; else why not. `WARPSEARCH_GPU_GATHER=1` keeps the gather (to compare the two).
    pub(crate) fn for_staging(gpu: &Gpu, index: &Arc<Index>, staging: bool) -> Result<Registered, String> {
        if !staging {
            return Err("nothing is staged".into());
        }
        if std::env::var_os("WARPSEARCH_GPU_GATHER").is_some_and(|v| v == "1") {
            return Err("WARPSEARCH_GPU_GATHER=1".into());
        }
        Registered::new(gpu, index.clone()).map_err(|e| e.to_string())
    }

    /// The registered words (the index's).
    pub(crate) fn words(&self) -> &[u32] {
        self.index.words()
    }

    /// Bytes page-locked.
    pub(crate) fn bytes(&self) -> usize {
        std::mem::size_of_val(self.words())
    }
}

impl Drop for Registered {
    fn drop(&mut self) {
        // SAFETY: `base` was registered in `new` and is unregistered once, here; the searcher that owns
        // this synchronizes its slots' streams in its `drop`, before its fields are dropped, so no copy
        // reads it (and that binds the searcher's context to this thread, which the call needs).
        unsafe {
            let _ = sys::cuMemHostUnregister(self.base);
        }
    }
}
