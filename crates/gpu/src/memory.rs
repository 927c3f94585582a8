//! A searcher's device memory, readable from any thread: the searcher itself lives on the thread that
//! runs its batches (the hybrid's dispatcher), while a server reports its memory from a handler.

use std::sync::Arc;

use crate::device::Gpu;
use crate::error::GpuError;
use crate::searcher::GpuSearcher;

/// Device memory in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GpuMemory {
    /// What the searcher's index takes: the whole index, or its list cache and staging buffers.
    pub index: usize,
    /// In use on the device, by every context and process.
    pub used: usize,
    /// The device's memory.
    pub total: usize,
}

/// Reads a searcher's [`GpuMemory`] without the searcher.
#[derive(Clone)]
pub struct MemoryProbe {
    gpu: Arc<Gpu>,
    index: usize,
}

impl MemoryProbe {
    /// The device's memory now (the driver's count; binds the device's context to this thread).
    pub fn read(&self) -> Result<GpuMemory, GpuError> {
        let (free, total) = self.gpu.memory_info()?;
        Ok(GpuMemory {
            index: self.index,
            used: total.saturating_sub(free),
            total,
        })
    }
}

impl GpuSearcher {
    /// A probe of this searcher's device memory, for other threads.
    pub fn memory_probe(&self) -> MemoryProbe {
        MemoryProbe {
            gpu: self.shared_gpu(),
            index: self.index_bytes(),
        }
    }
}
