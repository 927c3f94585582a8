//! The index in GPU memory, under a byte budget: a list cache and the batches' staging space.
//!
//! [`Residency`] is the one place that knows where a list's blocks live on the device; the batch
//! preparation asks it for each query term. The device arrays (postings words and the skip data's
//! columns) hold two regions:
//! - the **cache** (S_c): each list's cached leading blocks ([`CachePlan`]), contiguous, placed first-fit;
//!   a plan is applied incrementally behind the batches in flight ([`DeviceIndex::apply`]); a list
//!   that grows where the free space is too fragmented for it keeps its old prefix (counted in
//!   [`Applied::skipped`]);
//! - one **staging** region per pipeline slot (together S_b): the blocks a batch needs that the cache
//!   lacks, copied with the batch.
//!
//! With no budget given, every list is cached whole and nothing is staged (the index is uploaded once,
//! or refused with the sizes when it does not fit).
//!
//! [`DeviceIndex::apply`] and the copies it makes are in `apply.rs`.

mod apply;

use std::sync::Arc;

use cudarc::driver::{CudaEvent, CudaSlice, CudaStream};
use warpsearch_index::{BlockMeta, Index};

use crate::abi::{codec_id, IndexArgs};
use crate::cache::extents::Extents;
pub use crate::cache::Applied;
use crate::cache::{CachePlan, Capacity};
use crate::device::Gpu;
use crate::driver::{ptr, Pinned};
use crate::error::GpuError;

/// Where one list's data is on the device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ListLocation {
    /// Offset of the list's first word in the device postings buffer.
    pub word_base: u64,
    /// Index of the list's first block in the device block arrays.
    pub block_base: u32,
}

/// One list's cached prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Cached {
    /// Where its first block is.
    pub loc: ListLocation,
    /// Leading blocks cached (0: none).
    pub blocks: u32,
}

/// Which lists are on the device, and where.
pub struct Residency {
    lists: Vec<Cached>,
    words: Extents,
    blocks: Extents,
}

impl Residency {
    /// Nothing of `index` on the device: every list is staged with its batches (tests of staging).
    pub fn nothing_cached(index: &Index) -> Residency {
        Residency {
            lists: vec![Cached::default(); index.term_records().len()],
            words: Extents::new(0),
            blocks: Extents::new(0),
        }
    }

    /// The device location of term `id`'s list (meaningful when [`Residency::cached`] has blocks).
    pub fn list(&self, id: u32) -> ListLocation {
        self.lists[id as usize].loc
    }

    /// Term `id`'s cached prefix.
    pub fn cached(&self, id: u32) -> Cached {
        self.lists[id as usize]
    }

    /// Space the cache holds now.
    pub fn used(&self) -> Capacity {
        Capacity {
            words: self.words.used(),
            blocks: self.blocks.used(),
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
    cache: Capacity,
    stage: Capacity,
    stages: usize,
    /// Pinned memory that plan changes go through (none when the whole index is uploaded once), and
    /// how much of it holds data whose copies may still be in flight (reset by [`Self::settle`]).
    bounce: Option<Pinned<u32>>,
    bounce_at: usize,
    /// Recorded behind the last plan change's copies, which [`Self::apply`] does not wait for: its
    /// bounce buffer contents are free once it has completed ([`Self::reclaim`]), and the streams of
    /// batches that read the cache wait for it ([`Self::copies`]).
    copied: Option<CudaEvent>,
    /// The kernel's codec number ([`crate::abi::codec_id`]).
    pub(crate) codec: u32,
    pub(crate) num_docs: u32,
    /// Report each plan change's timing ([`crate::GpuOptions::trace`]).
    pub(crate) trace: bool,
}

/// Words of pinned memory for plan changes (64 MiB).
const BOUNCE_WORDS: usize = 16 << 20;
/// Copies into the bounce buffer of at least this many words are spread over all cores.
const PARALLEL_FILL: usize = 1 << 18;

/// Bytes the whole index takes on the device: its postings words and 20 bytes of skip data per block.
pub fn device_bytes(index: &Index) -> usize {
    index.words().len() * 4 + index.block_metas().len() * 20
}

/// A list's part to copy into the cache: postings words to word `w`, skip data to block `b`.
struct Put<'i> {
    w: u64,
    words: &'i [u32],
    b: u64,
    cols: Columns,
}

/// The skip data of `metas` as the device's columns.
struct Columns {
    first: Vec<u32>,
    last: Vec<u32>,
    off: Vec<u32>,
    foff: Vec<u32>,
    max: Vec<f32>,
}

impl Columns {
    fn with_capacity(n: usize) -> Columns {
        Columns {
            first: Vec::with_capacity(n),
            last: Vec::with_capacity(n),
            off: Vec::with_capacity(n),
            foff: Vec::with_capacity(n),
            max: Vec::with_capacity(n),
        }
    }

    fn push(&mut self, m: &BlockMeta) {
        self.first.push(m.first_doc);
        self.last.push(m.last_doc);
        self.off.push(m.offset);
        self.foff.push(m.freq_offset);
        self.max.push(m.max_score);
    }
}

impl DeviceIndex {
    /// Uploads all of `index` on `stream`, refusing if it needs more than `budget` bytes.
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
                 --gpu-memory, cache part of it (--gpu-cache), or use --backend cpu",
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
        dev.codec = codec_id(index.codec());
        dev.num_docs = index.num_docs();
        Ok(dev)
    }

    /// A device index of `cache` space for lists, holding `plan` (which must fit), and `stages`
    /// staging regions of `stage` space each.
    pub fn with_cache(
        gpu: &Gpu,
        stream: &Arc<CudaStream>,
        index: &Index,
        cache: Capacity,
        stage: Capacity,
        stages: usize,
        plan: &CachePlan,
    ) -> Result<Self, GpuError> {
        gpu.ctx.bind_to_thread()?;
        let words = cache.words + stage.words * stages as u64;
        let blocks = cache.blocks + stage.blocks * stages as u64;
        if blocks > u32::MAX as u64 {
            return Err(GpuError::Unsupported(
                "the GPU cache would hold more than 2^32 blocks".into(),
            ));
        }
        let alloc_u32 = |n: u64| stream.alloc_zeros::<u32>(n.max(1) as usize);
        let mut dev = DeviceIndex {
            words: alloc_u32(words)?,
            blk_first: alloc_u32(blocks)?,
            blk_last: alloc_u32(blocks)?,
            blk_off: alloc_u32(blocks)?,
            blk_foff: alloc_u32(blocks)?,
            blk_max: stream.alloc_zeros::<f32>(blocks.max(1) as usize)?,
            residency: Residency {
                lists: vec![Cached::default(); index.term_records().len()],
                words: Extents::new(cache.words),
                blocks: Extents::new(cache.blocks),
            },
            cache,
            stage,
            stages,
            bounce: Some(Pinned::new(&gpu.ctx, BOUNCE_WORDS)?),
            bounce_at: 0,
            copied: None,
            codec: codec_id(index.codec()),
            num_docs: index.num_docs(),
            trace: false,
        };
        dev.rebuild(stream, index, plan)?;
        dev.settle(stream)?;
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
        let mut cols = Columns::with_capacity(metas.len());
        metas.iter().for_each(|m| cols.push(m));
        // Every list whole: the lists' block counts follow from consecutive offsets.
        let block_ends: Vec<u32> = offsets
            .iter()
            .skip(1)
            .map(|o| o.1)
            .chain(std::iter::once(metas.len() as u32))
            .collect();
        let lists = offsets
            .iter()
            .zip(block_ends)
            .map(|(&(word_base, block_base), end)| Cached {
                loc: ListLocation {
                    word_base,
                    block_base,
                },
                blocks: end.saturating_sub(block_base),
            })
            .collect();
        let cache = Capacity {
            words: words.len() as u64,
            blocks: metas.len() as u64,
        };
        let full = |n: u64| {
            let mut e = Extents::new(n);
            e.alloc(n);
            e
        };
        let dev = DeviceIndex {
            words: upload(stream, words)?,
            blk_first: upload(stream, &cols.first)?,
            blk_last: upload(stream, &cols.last)?,
            blk_off: upload(stream, &cols.off)?,
            blk_foff: upload(stream, &cols.foff)?,
            blk_max: upload(stream, &cols.max)?,
            residency: Residency {
                lists,
                words: full(cache.words),
                blocks: full(cache.blocks),
            },
            cache,
            stage: Capacity::default(),
            stages: 0,
            bounce: None,
            bounce_at: 0,
            copied: None,
            codec: 0,
            num_docs: 0,
            trace: false,
        };
        stream.synchronize()?;
        Ok(dev)
    }

    /// Where each list lives.
    pub fn residency(&self) -> &Residency {
        &self.residency
    }

    /// Bytes of device memory held (cache and staging).
    pub fn bytes(&self) -> usize {
        (self.cache.bytes() + self.stage.bytes() * self.stages as u64) as usize
    }

    /// The cache's space.
    pub fn cache_capacity(&self) -> Capacity {
        self.cache
    }

    /// One staging region's space (none when everything is cached).
    pub fn stage_capacity(&self) -> Capacity {
        self.stage
    }

    /// Where staging region `slot` starts: (word, block).
    pub(crate) fn stage_base(&self, slot: usize) -> (u64, u64) {
        (
            self.cache.words + self.stage.words * slot as u64,
            self.cache.blocks + self.stage.blocks * slot as u64,
        )
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

pub(crate) fn mib(bytes: usize) -> f64 {
    bytes as f64 / (1u64 << 20) as f64
}

impl Drop for DeviceIndex {
    /// The bounce buffer is freed with the index: not while a plan change's copies still read it.
    fn drop(&mut self) {
        let _ = self.reclaim();
    }
}
