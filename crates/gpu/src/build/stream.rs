//! The tuples of a build taken while its partitions gather them ([`GpuBuilder`]'s
//! [`DeviceInverter::stream`]): after each batch, the tuples it added to every partition are copied on
//! every core into a page-locked buffer and go up while the next batch is analysed, into chunks of
//! device memory, so that when the analysis ends the sort starts at once. The inversion gathers the
//! chunks into one array each and inverts as [`GpuBuilder`] does with tuples it uploaded itself.

use std::sync::Arc;
use std::time::Instant;

use cudarc::driver::sys::CUevent_flags;
use cudarc::driver::{CudaEvent, CudaSlice, CudaStream};
use rayon::prelude::*;

use warpsearch_index::build::{InvertJob, Inverted, NewTuples, TupleStream};

use super::{GpuBuilder, Staging, Tuples};
use crate::driver::{self, ptr, Pinned};
use crate::error::GpuError;

/// Postings a chunk of device memory holds (three arrays of u32: 384 MiB).
const CHUNK: usize = 1 << 25;

/// Device bytes kept free for a pass's terms and documents, which are not known while the tuples
/// are taken (a pass needs 12 bytes for each).
const RESERVE: u64 = 1 << 30;

/// A build's tuples as they are taken: chunk after chunk, in the order taken.
pub(super) struct GpuTupleStream {
    gpu: GpuBuilder,
    stream: Arc<CudaStream>,
    /// Two page-locked buffers, used in turn: a batch's three columns are copied into one while the
    /// copies up from the other may still run.
    bufs: [Option<Pinned<u32>>; 2],
    /// Per buffer: the event after its last copies up.
    copied: [Option<CudaEvent>; 2],
    turn: usize,
    /// Each chunk's docs, frequencies and term numbers.
    chunks: Vec<[CudaSlice<u32>; 3]>,
    /// Postings taken.
    held: usize,
    /// Postings it takes at most: what a pass over them could take, the reserve kept.
    limit: usize,
    /// Per partition's tuples taken at once: the partition, and the position of the first.
    segments: Vec<(u32, u64)>,
    /// Per partition: the postings taken.
    per_part: Vec<u64>,
}

impl GpuTupleStream {
    /// A stream for a build of `parts` partitions on `gpu`.
    pub(super) fn new(gpu: &GpuBuilder, parts: usize) -> Result<GpuTupleStream, GpuError> {
        let limit = gpu
            .postings_beside(RESERVE)
            .ok_or_else(|| GpuError::Failed("the driver does not say what memory is free".into()))?
            as usize;
        Ok(GpuTupleStream {
            gpu: gpu.clone(),
            stream: gpu.ctx.new_stream()?,
            bufs: [None, None],
            copied: [None, None],
            turn: 0,
            chunks: Vec::new(),
            held: 0,
            limit,
            segments: Vec::new(),
            per_part: vec![0; parts],
        })
    }

    fn take(&mut self, new: &[NewTuples<'_>]) -> Result<bool, GpuError> {
        let n: usize = new.iter().map(|t| t.2.len()).sum();
        if new.iter().any(|&(p, term, doc, tf)| {
            p >= self.per_part.len() || term.len() != doc.len() || tf.len() != doc.len()
        }) {
            return Err(GpuError::Failed("malformed tuples".into()));
        }
        if n == 0 {
            return Ok(true);
        }
        if self.held + n > self.limit {
            return Ok(false);
        }
        self.gpu.ctx.bind_to_thread()?;
        while self.chunks.len() * CHUNK < self.held + n {
            let alloc = || self.stream.alloc_zeros::<u32>(CHUNK);
            self.chunks.push([alloc()?, alloc()?, alloc()?]);
        }
        // The copies that last read this buffer ended before it is filled again.
        let turn = self.turn;
        if let Some(event) = &self.copied[turn] {
            event.synchronize()?;
        }
        if self.bufs[turn]
            .as_ref()
            .is_none_or(|b| b.as_slice().len() < 3 * n)
        {
            self.bufs[turn] = None;
            self.bufs[turn] = Some(Pinned::new(&self.gpu.ctx, 3 * n + 3 * n / 4)?);
        }
        let buf = &mut self.bufs[turn].as_mut().expect("allocated above").as_mut_slice()[..3 * n];
        // The columns (docs, frequencies, term numbers), each partition's tuples after the one before.
        let (docs, rest) = buf.split_at_mut(n);
        let (tfs, terms) = rest.split_at_mut(n);
        let mut places = Vec::with_capacity(new.len());
        let (mut d, mut f, mut t) = (docs, tfs, terms);
        for &tuples in new {
            let len = tuples.2.len();
            let (dh, dt) = std::mem::take(&mut d).split_at_mut(len);
            let (fh, ft) = std::mem::take(&mut f).split_at_mut(len);
            let (th, tt) = std::mem::take(&mut t).split_at_mut(len);
            places.push((tuples, dh, fh, th));
            (d, f, t) = (dt, ft, tt);
        }
        places.into_par_iter().for_each(|((_, term, doc, tf), d, f, t)| {
            d.copy_from_slice(doc);
            f.copy_from_slice(tf);
            t.copy_from_slice(term);
        });
        // Up, into the chunks the positions [held, held + n) fall in.
        let buf = self.bufs[turn].as_ref().expect("allocated above").as_slice();
        for (column, src) in buf[..3 * n].chunks_exact(n).enumerate() {
            let mut done = 0;
            while done < n {
                let at = self.held + done;
                let (c, off) = (at / CHUNK, at % CHUNK);
                let len = (n - done).min(CHUNK - off);
                let dst = ptr(&self.chunks[c][column], &self.stream) + (off * 4) as u64;
                driver::copy_to_device(&self.stream, dst, &src[done..done + len])?;
                done += len;
            }
        }
        self.copied[turn] = Some(
            self.stream
                .record_event(Some(CUevent_flags::CU_EVENT_DISABLE_TIMING))?,
        );
        self.turn ^= 1;
        let mut at = self.held as u64;
        for &(p, _, doc, _) in new {
            if !doc.is_empty() {
                self.segments.push((p as u32, at));
                self.per_part[p] += doc.len() as u64;
                at += doc.len() as u64;
            }
        }
        self.held += n;
        Ok(true)
    }

    fn invert_on(mut self, job: &InvertJob<'_>) -> Result<Inverted, GpuError> {
        let counts: Vec<u64> = job.parts.iter().map(|p| p.doc.len() as u64).collect();
        if counts != self.per_part || self.held as u64 != job.num_postings {
            return Err(GpuError::Failed(format!(
                "the stream took {} postings, not the {} the job counts (or not partition by \
                 partition)",
                self.held, job.num_postings
            )));
        }
        let held = self.held;
        if held == 0 {
            return Ok(super::empty(job));
        }
        self.gpu.ctx.bind_to_thread()?;
        let clock = Instant::now();
        let stream = self.stream.clone();
        // The chunks are freed once gathered, before the pass allocates the rest.
        let chunks = std::mem::take(&mut self.chunks);
        let slack = self.gpu.room(job, (chunks.len() * CHUNK * 12) as u64)?;
        let (free, _) = cudarc::driver::result::mem_get_info()?;
        if (free as u64) < 12 * held as u64 {
            return Err(GpuError::Unsupported(
                "too little device memory to gather the chunks".into(),
            ));
        }
        let mut columns = [
            stream.alloc_zeros::<u32>(held)?,
            stream.alloc_zeros::<u32>(held)?,
            stream.alloc_zeros::<u32>(held)?,
        ];
        for (c, chunk) in chunks.iter().enumerate() {
            let (from, to) = (c * CHUNK, ((c + 1) * CHUNK).min(held));
            for (dst, src) in columns.iter_mut().zip(chunk) {
                stream.memcpy_dtod(&src.slice(..to - from), &mut dst.slice_mut(from..to))?;
            }
        }
        drop(chunks);
        let [docs, tfs, terms] = columns;
        let tuples = Tuples {
            docs,
            tfs,
            terms,
            segments: std::mem::take(&mut self.segments),
        };
        let staging = Staging::new(&self.gpu.ctx, &stream, held.min(self.gpu.stage_len))?;
        self.gpu
            .invert_tuples(job, &stream, staging, tuples, slack, clock)
    }
}

impl Drop for GpuTupleStream {
    fn drop(&mut self) {
        // A copy up may still read a page-locked buffer: it must end before the buffer is freed.
        let _ = self.stream.synchronize();
    }
}

impl TupleStream for GpuTupleStream {
    fn add(&mut self, new: &[NewTuples<'_>]) -> Result<bool, String> {
        self.take(new).map_err(|e| e.to_string())
    }

    fn invert(
        self: Box<Self>,
        job: &InvertJob<'_>,
    ) -> Result<Inverted, Box<dyn std::error::Error + Send + Sync>> {
        Ok((*self).invert_on(job)?)
    }
}
