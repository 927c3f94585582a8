//! The copies of a cache plan change ([`DeviceIndex::apply`]): growing lists' cached prefixes moved on
//! the device, and their new blocks copied in from the host through the pinned bounce buffer.
//!
//! Measured on the 25M collection (`nvidia-h200`, `WARPSEARCH_CACHE_TRACE`), a change of 469 lists and
//! 274 MiB spent ~20 ms queueing the moves and ~20 ms gathering and queueing the new blocks: six driver
//! calls per list (postings words and five skip-data columns), ~7 µs each. Where the staging regions
//! are free to hold them (no batch is in flight during a change), the pieces go up in bounce-buffer
//! rounds and one `copy_pieces` launch per round puts every piece, moves included, in place.

use std::sync::Arc;

use cudarc::driver::{CudaStream, LaunchConfig, PushKernelArg};
use rayon::prelude::*;

use super::{ptr, Cached, Columns, DeviceIndex};
use crate::cache::Capacity;
use crate::GpuError;

/// A list's part to copy into the cache: postings words to word `w`, skip data to block `b`.
pub(super) struct Put<'i> {
    pub w: u64,
    pub words: &'i [u32],
    pub b: u64,
    pub cols: Columns,
}

/// A copy on the device: `words` 32-bit words from address `src` to `dst`.
#[derive(Clone, Copy)]
pub(super) struct Move {
    src: u64,
    dst: u64,
    words: u64,
}

/// Copies into the bounce buffer of at least this many words are spread over all cores.
const PARALLEL_FILL: usize = 1 << 18;
/// The least staging space (words) worth copying pieces through with the kernel.
const MIN_KERNEL_ROUND: u64 = 1 << 16;

impl DeviceIndex {
    /// Waits for the copies on `stream`, the bounce buffer's included: it is free again.
    pub(super) fn settle(&mut self, stream: &Arc<CudaStream>) -> Result<(), GpuError> {
        stream.synchronize()?;
        self.bounce_at = 0;
        Ok(())
    }

    /// The copies that move a cached prefix (`had` of space at `have`) to word `w` and block `b`.
    pub(super) fn moves(
        &self,
        stream: &CudaStream,
        have: Cached,
        had: Capacity,
        w: u64,
        b: u64,
    ) -> [Move; 6] {
        let words = ptr(&self.words, stream);
        let column = |base: u64| Move {
            src: base + have.loc.block_base as u64 * 4,
            dst: base + b * 4,
            words: had.blocks,
        };
        [
            Move {
                src: words + have.loc.word_base * 4,
                dst: words + w * 4,
                words: had.words,
            },
            column(ptr(&self.blk_first, stream)),
            column(ptr(&self.blk_last, stream)),
            column(ptr(&self.blk_off, stream)),
            column(ptr(&self.blk_foff, stream)),
            column(ptr(&self.blk_max, stream)),
        ]
    }

    /// Makes `moves`, then copies `puts` in. No move's destination may overlap another's source (the
    /// caller frees the places lists move from only after all are queued).
    pub(super) fn copy_all(
        &mut self,
        stream: &Arc<CudaStream>,
        moves: &[Move],
        puts: &[Put<'_>],
    ) -> Result<(), GpuError> {
        let mut pieces: Vec<(u64, &[u32])> = Vec::with_capacity(puts.len() * 6);
        for p in puts {
            pieces.extend(self.targets(stream, p.w, p.words, p.b, &p.cols));
        }
        let room = (self.stage.words * self.stages as u64)
            .min(self.bounce.as_ref().map_or(0, |b| b.as_slice().len() as u64));
        match self.copier.clone() {
            Some(kernel) if room >= MIN_KERNEL_ROUND => {
                self.copy_by_kernel(stream, &kernel, room as usize, moves, &pieces)
            }
            _ => {
                for m in moves {
                    crate::launch::copy_on_device(stream, m.dst, m.src, m.words as usize * 4)?;
                }
                self.put_all(stream, &pieces)
            }
        }
    }

    /// The kernel's way: rounds of at most `room` words of the bounce buffer, each holding the host
    /// pieces' words side by side and a table of every piece's source, destination and length, copied
    /// to the staging regions at once and put in place by one `copy_pieces` launch.
    fn copy_by_kernel(
        &mut self,
        stream: &Arc<CudaStream>,
        kernel: &cudarc::driver::CudaFunction,
        room: usize,
        moves: &[Move],
        pieces: &[(u64, &[u32])],
    ) -> Result<(), GpuError> {
        // The staging regions follow the cache in the words array.
        let temp = ptr(&self.words, stream) + self.cache.words * 4;
        // Moves first (no data of their own), then the host pieces; a long one goes alone, in the
        // buffer's chunks (queued after the moves: one stream).
        let mut todo: Vec<(u64, Src)> = moves
            .iter()
            .filter(|m| m.words > 0)
            .map(|m| (m.dst, Src::Device(m.src, m.words)))
            .collect();
        for &(dst, src) in pieces {
            if src.len() > room / 2 {
                self.copy_in(stream, dst, src)?;
                self.settle(stream)?;
            } else if !src.is_empty() {
                todo.push((dst, Src::Host(src)));
            }
        }
        let mut rest = &todo[..];
        while !rest.is_empty() {
            // The pieces that fit this round: data, then the table (5 words a piece) at an 8-byte
            // aligned device address.
            let (mut data, mut n) = (0usize, 0usize);
            for (_, src) in rest {
                let d = src.data();
                let table_at = data + d + 1;
                if table_at + 5 * (n + 1) > room {
                    break;
                }
                data += d;
                n += 1;
            }
            let n = n.max(1);
            let (round, later) = rest.split_at(n);
            let t0 = data + ((self.cache.words as usize + data) & 1);
            let bounce = self.bounce.as_mut().expect("copy_all checked the bounce buffer");
            let buf = bounce.as_mut_slice();
            let (head, table) = buf.split_at_mut(t0);
            // Data, gathered on all cores.
            let mut free = &mut head[..data];
            let mut outs = Vec::with_capacity(round.len());
            for (_, src) in round {
                if let Src::Host(src) = src {
                    let (out, after) = free.split_at_mut(src.len());
                    outs.push((out, *src));
                    free = after;
                }
            }
            outs.into_par_iter().for_each(|(out, src)| {
                if src.len() >= PARALLEL_FILL {
                    out.par_chunks_mut(PARALLEL_FILL)
                        .zip(src.par_chunks(PARALLEL_FILL))
                        .for_each(|(d, s)| d.copy_from_slice(s));
                } else {
                    out.copy_from_slice(src);
                }
            });
            // The table: sources (u64), destinations (u64), lengths (u32).
            let mut at = 0u64;
            for (i, &(dst, src)) in round.iter().enumerate() {
                let (src, len) = match src {
                    Src::Host(s) => {
                        let a = temp + at * 4;
                        at += s.len() as u64;
                        (a, s.len() as u64)
                    }
                    Src::Device(a, len) => (a, len),
                };
                table[2 * i] = src as u32;
                table[2 * i + 1] = (src >> 32) as u32;
                table[2 * n + 2 * i] = dst as u32;
                table[2 * n + 2 * i + 1] = (dst >> 32) as u32;
                table[4 * n + i] = u32::try_from(len)
                    .map_err(|_| GpuError::Unsupported("a cache piece of 2^32 words or more".into()))?;
            }
            let used = t0 + 5 * n;
            crate::launch::copy_to_device(stream, temp, &bounce.as_slice()[..used])?;
            let (src_at, dst_at, len_at) = (
                temp + t0 as u64 * 4,
                temp + (t0 + 2 * n) as u64 * 4,
                temp + (t0 + 4 * n) as u64 * 4,
            );
            let count = n as u32;
            let mut launch = stream.launch_builder(kernel);
            launch.arg(&src_at).arg(&dst_at).arg(&len_at).arg(&count);
            // SAFETY: the arguments match `copy_pieces(const u64*, const u64*, const u32*, u32)`: three
            // device addresses of `n`-entry tables just copied into the staging regions (8-byte aligned
            // for the u64 ones), whose entries name ranges inside the device arrays (the cache's places,
            // and the staging regions' data before the tables) that do not overlap.
            unsafe {
                launch.launch(LaunchConfig {
                    grid_dim: (count.min(8192), 1, 1),
                    block_dim: (256, 1, 1),
                    shared_mem_bytes: 0,
                })?;
            }
            // The bounce buffer and the staging data are reused by the next round.
            self.settle(stream)?;
            rest = later;
        }
        Ok(())
    }

    /// Copies `pieces` (device address, words) in without the kernel: packed side by side into the
    /// bounce buffer, gathered there by all cores at once, one copy each, one wait per buffer-full.
    fn put_all(&mut self, stream: &Arc<CudaStream>, pieces: &[(u64, &[u32])]) -> Result<(), GpuError> {
        let Some(cap) = self.bounce.as_ref().map(|b| b.as_slice().len()) else {
            return Err(GpuError::Unsupported(
                "no bounce buffer: the whole index was uploaded".into(),
            ));
        };
        let mut rest = pieces;
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

    /// Copies `src` to device address `dst` (inside the device arrays) through the pinned bounce buffer,
    /// gathered there by all cores where it is large (pageable copies from the memory-mapped index reach
    /// a fraction of the pinned bandwidth). Copies are queued after the buffer's earlier contents and
    /// waited for only when it is full or at [`Self::settle`]: a plan change copies hundreds of short
    /// list prefixes, six arrays each, and a wait per copy made it take ~200 ms on the 25M collection.
    pub(super) fn copy_in(
        &mut self,
        stream: &Arc<CudaStream>,
        mut dst: u64,
        mut src: &[u32],
    ) -> Result<(), GpuError> {
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
}

/// Where a piece's words come from: a device address and a length, or host memory.
#[derive(Clone, Copy)]
enum Src<'a> {
    Device(u64, u64),
    Host(&'a [u32]),
}

impl Src<'_> {
    /// The words the piece takes in the bounce buffer.
    fn data(&self) -> usize {
        match self {
            Src::Device(..) => 0,
            Src::Host(s) => s.len(),
        }
    }
}
