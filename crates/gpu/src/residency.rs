//! The index in GPU memory, under a byte budget.
//!
//! [`Residency`] is the one place that knows where a list's blocks live on the device; the batch
//! preparation asks it for each query term. Today every list is resident (the whole index is uploaded
//! once, or the upload is refused with the sizes when it does not fit the budget); a block cache for
//! indexes larger than GPU memory replaces this module's answer without touching the kernels.

use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream, DevicePtr};
use warpsearch_index::{BlockMeta, Index};

use crate::{Gpu, GpuError};

/// Where one list's data is on the device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListLocation {
    /// Offset of the list's first word in the device postings buffer.
    pub word_base: u64,
    /// Index of the list's first block in the device block arrays.
    pub block_base: u32,
}

/// Which lists are on the device, and where.
pub struct Residency {
    offsets: Vec<(u64, u32)>,
}

impl Residency {
    /// The device location of term `id`'s list.
    pub fn list(&self, id: u32) -> ListLocation {
        let (word_base, block_base) = self.offsets[id as usize];
        ListLocation {
            word_base,
            block_base,
        }
    }
}

/// The index's posting data and skip data in device memory (structure of arrays for the skip data, so
/// that the binary searches over block last docIDs read contiguous words).
pub struct DeviceIndex {
    pub(crate) words: CudaSlice<u32>,
    pub(crate) blk_first: CudaSlice<u32>,
    pub(crate) blk_last: CudaSlice<u32>,
    pub(crate) blk_off: CudaSlice<u32>,
    pub(crate) blk_foff: CudaSlice<u32>,
    pub(crate) blk_max: CudaSlice<f32>,
    residency: Residency,
    bytes: usize,
    /// The kernel's codec number ([`crate::kernels::codec_id`]).
    pub(crate) codec: u32,
    pub(crate) num_docs: u32,
}

/// Bytes the index takes on the device: its postings words and 20 bytes of skip data per block.
pub fn device_bytes(index: &Index) -> usize {
    index.words().len() * 4 + index.block_metas().len() * 20
}

impl DeviceIndex {
    /// Uploads `index` on `stream`, refusing if it needs more than `budget` bytes.
    pub fn upload(
        gpu: &Gpu,
        stream: &Arc<CudaStream>,
        index: &Index,
        budget: usize,
    ) -> Result<Self, GpuError> {
        let bytes = device_bytes(index);
        if bytes > budget {
            return Err(GpuError::Unsupported(format!(
                "the index in {} needs {:.1} MiB of GPU memory and the budget is {:.1} MiB: raise \
                 --gpu-memory or use --backend cpu",
                index.dir().display(),
                mib(bytes),
                mib(budget)
            )));
        }
        gpu.ctx.bind_to_thread()?;
        let offsets = index
            .term_records()
            .iter()
            .map(|r| (r.offset_words, r.first_block as u32))
            .collect();
        let mut dev = DeviceIndex::from_parts(stream, index.words(), index.block_metas(), offsets)?;
        dev.codec = crate::kernels::codec_id(index.codec());
        dev.num_docs = index.num_docs();
        Ok(dev)
    }

    /// Uploads postings `words` and the skip data `metas` of lists at `offsets` (word and block of each
    /// list's start), for a codec and document count the caller sets. Also the decode tests' way in.
    pub(crate) fn from_parts(
        stream: &Arc<CudaStream>,
        words: &[u32],
        metas: &[BlockMeta],
        offsets: Vec<(u64, u32)>,
    ) -> Result<Self, GpuError> {
        // Zero-length device buffers are not allocatable: keep one element.
        fn upload<T: cudarc::driver::DeviceRepr + Default + Copy>(
            stream: &Arc<CudaStream>,
            v: &[T],
        ) -> Result<CudaSlice<T>, GpuError> {
            let one = [T::default()];
            Ok(stream.memcpy_stod(if v.is_empty() { &one[..] } else { v })?)
        }
        let column = |f: fn(&BlockMeta) -> u32| -> Result<CudaSlice<u32>, GpuError> {
            upload(stream, &metas.iter().map(f).collect::<Vec<u32>>())
        };
        let maxes: Vec<f32> = metas.iter().map(|m| m.max_score).collect();
        let dev = DeviceIndex {
            words: upload(stream, words)?,
            blk_first: column(|m| m.first_doc)?,
            blk_last: column(|m| m.last_doc)?,
            blk_off: column(|m| m.offset)?,
            blk_foff: column(|m| m.freq_offset)?,
            blk_max: upload(stream, &maxes)?,
            residency: Residency { offsets },
            bytes: words.len() * 4 + metas.len() * 20,
            codec: 0,
            num_docs: 0,
        };
        stream.synchronize()?;
        Ok(dev)
    }

    /// Where each list lives.
    pub fn residency(&self) -> &Residency {
        &self.residency
    }

    /// Bytes of device memory held.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// The kernels' index arguments, without per-search arrays (norms, prior, global scores).
    pub(crate) fn args(&self, stream: &CudaStream) -> IndexArgs {
        IndexArgs {
            words: ptr(&self.words, stream),
            blk_first: ptr(&self.blk_first, stream),
            blk_last: ptr(&self.blk_last, stream),
            blk_off: ptr(&self.blk_off, stream),
            blk_foff: ptr(&self.blk_foff, stream),
            blk_max: ptr(&self.blk_max, stream),
            norms: 0,
            prior: 0,
            gs: 0,
            codec: self.codec,
            num_docs: self.num_docs,
            k1p1: 0.0,
            prior_max: 0.0,
        }
    }
}

/// The kernels' `IndexArgs` (mirrors `struct IndexArgs` in `kernels/search.cu`): device addresses of the
/// index arrays and of the per-search arrays, the codec and the ranking's constants.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(crate) struct IndexArgs {
    pub words: u64,
    pub blk_first: u64,
    pub blk_last: u64,
    pub blk_off: u64,
    pub blk_foff: u64,
    pub blk_max: u64,
    pub norms: u64,
    pub prior: u64,
    pub gs: u64,
    pub codec: u32,
    pub num_docs: u32,
    pub k1p1: f32,
    pub prior_max: f32,
}
unsafe impl cudarc::driver::DeviceRepr for IndexArgs {}

/// The raw device address of a buffer (event tracking is off: the pipeline synchronises itself).
pub(crate) fn ptr<T>(s: &CudaSlice<T>, stream: &CudaStream) -> u64 {
    let (p, _sync) = s.device_ptr(stream);
    p
}

pub(crate) fn mib(bytes: usize) -> f64 {
    bytes as f64 / (1u64 << 20) as f64
}
