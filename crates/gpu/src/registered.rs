//! The index's encoded words page-locked where they lie (`cuMemHostRegister`, read-only), so that the
//! blocks a batch stages are copied from the index by the GPU's copy engine, span by span, instead of
//! gathered by the host into a pinned buffer first, a gather that took all cores and bounded the
//! pipeline (docs/decisions/017-list-cache-pipeline.md). Registration can be refused (memory limits,
//! a platform without it): the searcher then gathers as before.

use std::sync::Arc;

use warpsearch_index::Index;

use crate::device::Gpu;
use crate::driver::PageLock;
use crate::error::GpuError;

/// The pages of an index's words, page-locked for the device's copies while this lives.
pub(crate) struct Registered {
    pages: PageLock<Index>,
}

impl Registered {
    /// Registers `index`'s words with the context of `gpu`, read-only; an error where the driver
    /// refuses (the caller then gathers staged words on the host).
    pub(crate) fn new(gpu: &Gpu, index: Arc<Index>) -> Result<Registered, GpuError> {
        if index.words().is_empty() {
            return Err(GpuError::Unsupported("no words to register".into()));
        }
        let pages = PageLock::read_only(&gpu.ctx, index, |ix| bytemuck::cast_slice(ix.words()))?;
        Ok(Registered { pages })
    }

    /// `index`'s words registered where a searcher stages blocks at all (`staging`), without
    /// `host_gather` ([`crate::GpuOptions::host_gather`]: the gather asked for, to compare the two),
    /// and where the driver allows it; else why not.
    pub(crate) fn for_staging(
        gpu: &Gpu,
        index: &Arc<Index>,
        staging: bool,
        host_gather: bool,
    ) -> Result<Registered, String> {
        if !staging {
            return Err("nothing is staged".into());
        }
        if host_gather {
            return Err("the host gather asked for".into());
        }
        Registered::new(gpu, index.clone()).map_err(|e| e.to_string())
    }

    /// The registered words (the index's).
    pub(crate) fn words(&self) -> &[u32] {
        self.pages.owner().words()
    }

    /// Bytes page-locked.
    pub(crate) fn bytes(&self) -> usize {
        std::mem::size_of_val(self.words())
    }
}
