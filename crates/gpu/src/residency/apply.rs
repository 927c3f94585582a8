//! A new cache plan applied to the device index: lists shrunk, moved and grown in place, their blocks
//! copied behind the batches in flight through a pinned bounce buffer.

use std::sync::Arc;
use std::time::Instant;

use cudarc::driver::{CudaEvent, CudaSlice, CudaStream};
use warpsearch_index::Index;

use super::{mib, Cached, Columns, DeviceIndex, ListLocation, Put, PARALLEL_FILL};
use crate::cache::extents::Extents;
use crate::cache::{prefix_need, Applied, CachePlan, Capacity};
use crate::device::Gpu;
use crate::driver::{self, ptr, Pinned};
use crate::error::GpuError;
use rayon::prelude::*;

impl DeviceIndex {
    /// Makes the cache hold `plan` (which must fit its capacity), copying only the lists that change,
    /// as far as the free space allows: a growing list that finds no room keeps its old prefix
    /// ([`Applied::skipped`]; a later plan may place it). The copies run on `stream`
    /// in its order. A batch still reading the cache on another stream must be put before them by the
    /// caller ([`crate::GpuSearcher`] makes `stream` wait for it), and a batch on another stream
    /// that reads the new cache after them (`copies`): a change from a non-empty cache returns
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
        if self.trace {
            let ms = |d: std::time::Duration| d.as_secs_f64() * 1e3;
            tracing::debug!(
                lists = applied.lists,
                left_for_want_of_room = applied.skipped,
                mib = mib(applied.bytes as usize),
                scan_ms = ms(scanned),
                placed_and_moves_queued_ms = ms(placed - scanned),
                gathered_and_queued_ms = ms(started.elapsed() - placed),
                bounce_buffer_mib = self.bounce.as_ref().map_or(0, |b| b.as_slice().len() >> 18),
                "cache plan change"
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
    pub(crate) fn reclaim(&mut self) -> Result<(), GpuError> {
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
        let Ok(grown) = Pinned::new(&gpu.ctx, words) else {
            return Ok(());
        };
        self.reclaim()?;
        self.bounce = Some(grown);
        self.bounce_at = 0;
        Ok(())
    }

    /// Waits for the copies on `stream`, the bounce buffer's included: it is free again.
    pub(super) fn settle(&mut self, stream: &Arc<CudaStream>) -> Result<(), GpuError> {
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
    pub(super) fn rebuild(
        &mut self,
        stream: &Arc<CudaStream>,
        index: &Index,
        plan: &CachePlan,
    ) -> Result<(), GpuError> {
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
    /// about half the time of [`Self::write`] list by list (timed by [`crate::GpuOptions::trace`]); a
    /// kernel that put every piece in place at once was no faster
    /// (docs/decisions/016-dynamic-cache-policy.md).
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
                driver::copy_to_device(stream, dst, &bounce.as_slice()[at..at + src.len()])?;
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
        driver::copy_on_device(
            stream,
            words + w * 4,
            words + have.loc.word_base * 4,
            had.words as usize * 4,
        )?;
        let (from, n) = (have.loc.block_base as u64 * 4, had.blocks as usize * 4);
        for col in [&self.blk_first, &self.blk_last, &self.blk_off, &self.blk_foff] {
            let c = base(col);
            driver::copy_on_device(stream, c + b * 4, c + from, n)?;
        }
        let m = ptr(&self.blk_max, stream);
        driver::copy_on_device(stream, m + b * 4, m + from, n)?;
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
            driver::par_copy(buf, &src[..n], PARALLEL_FILL);
            driver::copy_to_device(stream, dst, &bounce.as_slice()[at..at + n])?;
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
}
