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

use std::sync::Arc;
use std::time::Instant;

use cudarc::driver::{CudaEvent, CudaSlice, CudaStream, DevicePtr};
use warpsearch_index::{BlockMeta, Index};

use crate::cache::extents::Extents;
use crate::cache::{prefix_need, CachePlan, Capacity};
use crate::launch::Pinned;
use crate::{Gpu, GpuError};
use rayon::prelude::*;

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

/// What applying a plan did.
#[derive(Debug, Clone, Copy, Default)]
pub struct Applied {
    /// Lists whose cached prefix changed.
    pub lists: u64,
    /// Bytes copied to the device from the host.
    pub bytes: u64,
    /// Lists that could not grow for want of contiguous space (they keep their old prefix).
    pub skipped: u64,
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
    /// The kernel's codec number ([`crate::kernels::codec_id`]).
    pub(crate) codec: u32,
    pub(crate) num_docs: u32,
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
        dev.codec = crate::kernels::codec_id(index.codec());
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
            bounce: Some(Pinned::new(gpu, BOUNCE_WORDS)?),
            bounce_at: 0,
            copied: None,
            codec: crate::kernels::codec_id(index.codec()),
            num_docs: index.num_docs(),
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

    /// Makes the cache hold `plan` (which must fit its capacity), copying only the lists that change,
    /// as far as the free space allows: a growing list that finds no room keeps its old prefix
    /// ([`Applied::skipped`]; a later plan may place it). The copies run on `stream`
    /// in its order. A batch still reading the cache on another stream must be put before them by the
    /// caller ([`crate::GpuSearcher`] makes `stream` wait for it), and a batch on another stream
    /// that reads the new cache after them ([`Self::copies`]): a change from a non-empty cache returns
    /// without waiting for its copies, which run behind the batches in flight while the host goes on.
    /// (It waits only where the change exceeds the bounce buffer.)
    pub fn apply(
        &mut self,
        stream: &Arc<CudaStream>,
        index: &Index,
        plan: &CachePlan,
    ) -> Result<Applied, GpuError> {
        let started = Instant::now();
        self.reclaim()?;
        let need = plan.need(index);
        if !self.cache.holds(need) {
            return Err(GpuError::Unsupported(format!(
                "a cache plan of {:.1} MiB does not fit the cache's {:.1} MiB",
                mib(need.bytes() as usize),
                mib(self.cache.bytes() as usize)
            )));
        }
        if self.residency.used() == Capacity::default() {
            // From empty: one copy per array.
            self.rebuild(stream, index, plan)?;
            self.settle(stream)?;
            let lists = plan.blocks.iter().filter(|&&b| b > 0).count() as u64;
            return Ok(Applied {
                lists,
                bytes: need.bytes(),
                skipped: 0,
            });
        }
        let mut applied = Applied::default();
        // What grown lists need copied in: after every move on the device (one stream keeps the order;
        // the space a move leaves is reused only by copies queued after it).
        let mut puts = Vec::new();
        // The lists that change, found on all cores: a plan has an entry per term (14M on the 25M
        // collection), and a pass over it and the residency table on one core took tens of ms.
        let lists = &self.residency.lists;
        let changed: Vec<usize> = (0..plan.blocks.len())
            .into_par_iter()
            .filter(|&id| plan.blocks[id] != lists[id].blocks)
            .collect();
        let scanned = started.elapsed();
        // Shrink and drop first, so that growing lists find the space.
        let mut grow = Vec::new();
        for id in changed {
            let want = plan.blocks[id];
            let have = self.residency.lists[id];
            applied.lists += 1;
            if want < have.blocks {
                let keep = prefix_need(index, id as u32, want);
                let had = prefix_need(index, id as u32, have.blocks);
                let r = &mut self.residency;
                r.words
                    .release(have.loc.word_base + keep.words, had.words - keep.words);
                r.blocks
                    .release(have.loc.block_base as u64 + keep.blocks, had.blocks - keep.blocks);
                r.lists[id].blocks = want;
            } else {
                grow.push(id as u32);
            }
        }
        for &id in &grow {
            let have = self.residency.lists[id as usize];
            let had = prefix_need(index, id, have.blocks);
            let want = prefix_need(index, id, plan.blocks[id as usize]);
            let r = &mut self.residency;
            // The new place beside the old one, so that the cached part moves on the device. Where the
            // free space is too fragmented for it, the list keeps its old prefix (still exact; the
            // next plan may place it).
            let place = (r.words.alloc(want.words), r.blocks.alloc(want.blocks));
            let (Some(w), Some(b)) = place else {
                // Undo whichever half succeeded (a zero-length release is nothing).
                if let Some(w) = place.0 {
                    r.words.release(w, want.words);
                }
                if let Some(b) = place.1 {
                    r.blocks.release(b, want.blocks);
                }
                applied.skipped += 1;
                continue;
            };
            if had.blocks > 0 {
                self.move_prefix(stream, have, had, w, b)?;
                let r = &mut self.residency;
                r.words.release(have.loc.word_base, had.words);
                r.blocks.release(have.loc.block_base as u64, had.blocks);
                puts.push(self.put_from(index, id, plan.blocks[id as usize], w, b, had));
                applied.bytes += want.bytes() - had.bytes();
            } else {
                puts.push(self.put_from(index, id, plan.blocks[id as usize], w, b, Capacity::default()));
                applied.bytes += want.bytes();
            }
        }
        let placed = started.elapsed();
        self.put_all(stream, &puts)?;
        self.copied =
            Some(stream.record_event(Some(cudarc::driver::sys::CUevent_flags::CU_EVENT_DISABLE_TIMING))?);
        if crate::cache::tracing() {
            let ms = |d: std::time::Duration| d.as_secs_f64() * 1e3;
            eprintln!(
                "cache plan change: {} lists ({} left as they were, for want of room), {:.1} MiB; scan \
                 {:.1} ms, placed and moves queued {:.1} ms, gathered and queued {:.1} ms (bounce buffer \
                 {} MiB)",
                applied.lists,
                applied.skipped,
                mib(applied.bytes as usize),
                ms(scanned),
                ms(placed - scanned),
                ms(started.elapsed() - placed),
                self.bounce.as_ref().map_or(0, |b| b.as_slice().len() >> 18)
            );
        }
        Ok(applied)
    }

    /// The event behind the last plan change's copies, for the streams of later batches to wait for.
    pub(crate) fn copies(&self) -> Option<&CudaEvent> {
        self.copied.as_ref()
    }

    /// Waits for the last plan change's copies (long done by the next change): the bounce buffer is
    /// free again.
    fn reclaim(&mut self) -> Result<(), GpuError> {
        if let Some(e) = self.copied.take() {
            e.synchronize()?;
            self.bounce_at = 0;
        }
        Ok(())
    }

    /// Makes the bounce buffer hold at least `words` (for a cache whose plan changes are fed while
    /// batches run: a change that fits it is copied without the host waiting for the GPU). Where that
    /// much pinned memory cannot be had, the buffer stays as it is (changes then wait where they
    /// exceed it).
    pub(crate) fn reserve_bounce(&mut self, gpu: &Gpu, words: usize) -> Result<(), GpuError> {
        let Some(have) = self.bounce.as_ref().map(|b| b.as_slice().len()) else {
            return Ok(());
        };
        if words <= have {
            return Ok(());
        }
        let Ok(grown) = Pinned::new(gpu, words) else {
            return Ok(());
        };
        self.reclaim()?;
        self.bounce = Some(grown);
        self.bounce_at = 0;
        Ok(())
    }

    /// Waits for the copies on `stream`, the bounce buffer's included: it is free again.
    fn settle(&mut self, stream: &Arc<CudaStream>) -> Result<(), GpuError> {
        stream.synchronize()?;
        self.copied = None;
        self.bounce_at = 0;
        Ok(())
    }

    /// Forgets what the cache holds (after a failed change on `stream`): every list is then staged.
    /// It first waits for what may still be in flight, so that nothing still reads the bounce buffer or
    /// writes the cache once it is reused: the copies the failed change queued before failing (on
    /// `stream`), and the last change's (its event).
    pub(crate) fn forget(&mut self, stream: &Arc<CudaStream>) {
        let _ = stream.synchronize();
        let _ = self.reclaim();
        let r = &mut self.residency;
        r.lists.iter_mut().for_each(|c| *c = Cached::default());
        r.words = Extents::new(self.cache.words);
        r.blocks = Extents::new(self.cache.blocks);
        self.bounce_at = 0;
    }

    /// Lays out `plan` from the start of the cache, each list after the previous one, in one copy per
    /// array.
    fn rebuild(&mut self, stream: &Arc<CudaStream>, index: &Index, plan: &CachePlan) -> Result<(), GpuError> {
        let need = plan.need(index);
        let r = &mut self.residency;
        r.words = Extents::new(self.cache.words);
        r.blocks = Extents::new(self.cache.blocks);
        r.words.alloc(need.words);
        r.blocks.alloc(need.blocks);
        // Zeroed pages come from the OS lazily: the gather below writes each word once, on all cores.
        let mut words: Vec<u32> = vec![0; need.words as usize];
        let mut cols = Columns::with_capacity(need.blocks as usize);
        let mut spans = Vec::new();
        let mut at = 0usize;
        for (id, &b) in plan.blocks.iter().enumerate() {
            if b == 0 {
                r.lists[id] = Cached::default();
                continue;
            }
            let rec = &index.term_records()[id];
            let p = prefix_need(index, id as u32, b);
            r.lists[id] = Cached {
                loc: ListLocation {
                    word_base: at as u64,
                    block_base: cols.first.len() as u32,
                },
                blocks: p.blocks as u32,
            };
            let w0 = rec.offset_words as usize;
            spans.push(&index.words()[w0..w0 + p.words as usize]);
            at += p.words as usize;
            let b0 = rec.first_block as usize;
            index.block_metas()[b0..b0 + p.blocks as usize]
                .iter()
                .for_each(|m| cols.push(m));
        }
        crate::cache::gather(&mut words, spans);
        self.write(stream, 0, &words, 0, &cols)
    }

    /// Places term `id`'s first `blocks` blocks at word `w` and block `b` of the cache, and returns what
    /// must be copied there: all but the first `done` ones (already in place).
    fn put_from<'i>(
        &mut self,
        index: &'i Index,
        id: u32,
        blocks: u32,
        w: u64,
        b: u64,
        done: Capacity,
    ) -> Put<'i> {
        let rec = &index.term_records()[id as usize];
        let p = prefix_need(index, id, blocks);
        let w0 = rec.offset_words as usize;
        let b0 = rec.first_block as usize;
        let (dw, db) = (done.words as usize, done.blocks as usize);
        let mut cols = Columns::with_capacity(p.blocks as usize - db);
        index.block_metas()[b0 + db..b0 + p.blocks as usize]
            .iter()
            .for_each(|m| cols.push(m));
        self.residency.lists[id as usize] = Cached {
            loc: ListLocation {
                word_base: w,
                block_base: b as u32,
            },
            blocks: p.blocks as u32,
        };
        Put {
            w: w + dw as u64,
            words: &index.words()[w0 + dw..w0 + p.words as usize],
            b: b + db as u64,
            cols,
        }
    }

    /// Copies `puts` into the cache: their pieces (postings words and five skip-data columns each)
    /// packed side by side into the bounce buffer, gathered there by all cores at once, and copied
    /// with one wait per buffer-full. On the 25M collection a change of 469 lists (274 MiB) takes
    /// 17–20 ms here (`WARPSEARCH_CACHE_TRACE`), against 33–34 ms through [`Self::write`] list by list
    /// (f15bfed, measured and undone); a kernel that put every piece in place at once was no faster
    /// (bench/RESULTS.md, issue 13).
    fn put_all(&mut self, stream: &Arc<CudaStream>, puts: &[Put<'_>]) -> Result<(), GpuError> {
        let mut pieces: Vec<(u64, &[u32])> = Vec::with_capacity(puts.len() * 6);
        for p in puts {
            pieces.extend(self.targets(stream, p.w, p.words, p.b, &p.cols));
        }
        let Some(cap) = self.bounce.as_ref().map(|b| b.as_slice().len()) else {
            return Err(GpuError::Unsupported(
                "no bounce buffer: the whole index was uploaded".into(),
            ));
        };
        let mut rest = &pieces[..];
        while let Some(&(dst, src)) = rest.first() {
            if src.len() > cap - self.bounce_at {
                if src.len() > cap / 4 {
                    // A long piece goes alone, in the buffer's chunks.
                    self.copy_in(stream, dst, src)?;
                    rest = &rest[1..];
                    continue;
                }
                self.settle(stream)?;
            }
            // The pieces that fit the buffer from here, filled in parallel, then queued.
            let start = self.bounce_at;
            let mut end = start;
            let n = rest
                .iter()
                .take_while(|(_, s)| {
                    let fits = end + s.len() <= cap;
                    end += if fits { s.len() } else { 0 };
                    fits
                })
                .count();
            let (group, later) = rest.split_at(n);
            let bounce = self.bounce.as_mut().expect("checked above");
            let mut free = &mut bounce.as_mut_slice()[start..end];
            let mut outs = Vec::with_capacity(group.len());
            for (_, src) in group {
                let (out, after) = free.split_at_mut(src.len());
                outs.push(out);
                free = after;
            }
            outs.into_par_iter()
                .zip(group.par_iter())
                .for_each(|(out, (_, src))| out.copy_from_slice(src));
            let mut at = start;
            for &(dst, src) in group {
                crate::launch::copy_to_device(stream, dst, &bounce.as_slice()[at..at + src.len()])?;
                at += src.len();
            }
            self.bounce_at = end;
            rest = later;
        }
        Ok(())
    }

    /// Copies a cached prefix (`had` of space at `have`) to word `w` and block `b`, on the device.
    fn move_prefix(
        &mut self,
        stream: &Arc<CudaStream>,
        have: Cached,
        had: Capacity,
        w: u64,
        b: u64,
    ) -> Result<(), GpuError> {
        let base = |s: &CudaSlice<u32>| ptr(s, stream);
        let words = base(&self.words);
        crate::launch::copy_on_device(
            stream,
            words + w * 4,
            words + have.loc.word_base * 4,
            had.words as usize * 4,
        )?;
        let (from, n) = (have.loc.block_base as u64 * 4, had.blocks as usize * 4);
        for col in [&self.blk_first, &self.blk_last, &self.blk_off, &self.blk_foff] {
            let c = base(col);
            crate::launch::copy_on_device(stream, c + b * 4, c + from, n)?;
        }
        let m = ptr(&self.blk_max, stream);
        crate::launch::copy_on_device(stream, m + b * 4, m + from, n)?;
        Ok(())
    }

    /// Copies `src` to device address `dst` (inside the device arrays) through the pinned bounce buffer,
    /// gathered there by all cores where it is large (pageable copies from the memory-mapped index reach
    /// a fraction of the pinned bandwidth). Copies are queued after the buffer's earlier contents and
    /// waited for only when it is full or at [`Self::settle`]: a plan change copies hundreds of short
    /// list prefixes, six arrays each, and a wait per copy made it take ~200 ms on the 25M collection.
    fn copy_in(&mut self, stream: &Arc<CudaStream>, mut dst: u64, mut src: &[u32]) -> Result<(), GpuError> {
        let Some(cap) = self.bounce.as_ref().map(|b| b.as_slice().len()) else {
            return Err(GpuError::Unsupported(
                "no bounce buffer: the whole index was uploaded".into(),
            ));
        };
        while !src.is_empty() {
            if self.bounce_at == cap {
                self.settle(stream)?;
            }
            let at = self.bounce_at;
            let n = src.len().min(cap - at);
            let bounce = self.bounce.as_mut().expect("checked above");
            let buf = &mut bounce.as_mut_slice()[at..at + n];
            if n >= PARALLEL_FILL {
                buf.par_chunks_mut(PARALLEL_FILL)
                    .zip(src[..n].par_chunks(PARALLEL_FILL))
                    .for_each(|(d, s)| d.copy_from_slice(s));
            } else {
                buf.copy_from_slice(&src[..n]);
            }
            crate::launch::copy_to_device(stream, dst, &bounce.as_slice()[at..at + n])?;
            self.bounce_at += n;
            src = &src[n..];
            dst += n as u64 * 4;
        }
        Ok(())
    }

    /// Copies `words` to word `w` and the skip data `cols` to block `b` of the device arrays.
    fn write(
        &mut self,
        stream: &Arc<CudaStream>,
        w: u64,
        words: &[u32],
        b: u64,
        cols: &Columns,
    ) -> Result<(), GpuError> {
        for (dst, src) in self.targets(stream, w, words, b, cols) {
            self.copy_in(stream, dst, src)?;
        }
        Ok(())
    }

    /// Where `words` (to word `w`) and the columns of `cols` (to block `b`) go: device address and data.
    fn targets<'a>(
        &self,
        stream: &CudaStream,
        w: u64,
        words: &'a [u32],
        b: u64,
        cols: &'a Columns,
    ) -> [(u64, &'a [u32]); 6] {
        let max: &[u32] = bytemuck::cast_slice(&cols.max);
        [
            (ptr(&self.words, stream) + w * 4, words),
            (ptr(&self.blk_first, stream) + b * 4, &cols.first[..]),
            (ptr(&self.blk_last, stream) + b * 4, &cols.last[..]),
            (ptr(&self.blk_off, stream) + b * 4, &cols.off[..]),
            (ptr(&self.blk_foff, stream) + b * 4, &cols.foff[..]),
            (ptr(&self.blk_max, stream) + b * 4, max),
        ]
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

/// The kernels' `IndexArgs` (mirrors `struct IndexArgs` in `kernels/common.cuh`): device addresses of the
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

impl Drop for DeviceIndex {
    /// The bounce buffer is freed with the index: not while a plan change's copies still read it.
    fn drop(&mut self) {
        let _ = self.reclaim();
    }
}
