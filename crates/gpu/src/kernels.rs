//! The decode and top-k kernels run alone: the tests check them against the CPU references, and the
//! benchmark measures decode throughput against the device's copy bandwidth.

use std::sync::Arc;
use std::time::Duration;

use cudarc::driver::sys::CUevent_flags;
use cudarc::driver::{CudaSlice, CudaStream};
use warpsearch_index::Index;

use crate::abi::{codec_id, IndexArgs, TermDesc, BLOCK_LEN, TOPK_CAP};
use crate::device::Gpu;
use crate::driver::poison;
use crate::error::GpuError;
use crate::launch::{self, TopKBuffers};
use crate::residency::DeviceIndex;

/// The index on the device with a stream, for running the standalone kernels.
pub struct KernelBench<'a> {
    gpu: Arc<Gpu>,
    index: &'a Index,
    stream: Arc<CudaStream>,
    dev: DeviceIndex,
    terms: CudaSlice<u8>,
    term_descs: Vec<TermDesc>,
    /// Every block of the index: its term's and its own number, on the device.
    blocks: (CudaSlice<u32>, CudaSlice<u32>, usize),
}

/// A decoded block: docIDs and frequencies, or `None` where the kernel found it malformed.
pub type Decoded = Option<(Vec<u32>, Vec<u32>)>;

impl<'a> KernelBench<'a> {
    /// Uploads `index` (every list resident).
    pub fn new(gpu: Arc<Gpu>, index: &'a Index) -> Result<Self, GpuError> {
        let stream = gpu.ctx.new_stream()?;
        let dev = DeviceIndex::upload(&gpu, &stream, index, usize::MAX)?;
        let term_descs: Vec<TermDesc> = index
            .term_records()
            .iter()
            .enumerate()
            .map(|(id, r)| {
                let loc = dev.residency().list(id as u32);
                TermDesc::for_list(r, loc.word_base, loc.block_base)
            })
            .collect();
        let terms = upload_terms(&stream, &term_descs)?;
        let (tids, bids) = all_blocks(&term_descs);
        let blocks = (stream.memcpy_stod(&tids)?, stream.memcpy_stod(&bids)?, tids.len());
        Ok(KernelBench {
            gpu,
            index,
            stream,
            dev,
            terms,
            term_descs,
            blocks,
        })
    }

    /// Decodes every block of the index `reps` times with one kernel launch each, by `decoder`; returns
    /// the best time of a launch and the postings (docIDs + frequencies) decoded per launch.
    pub fn decode_all_timed(&self, reps: usize, decoder: Decoder) -> Result<(Duration, u64, u64), GpuError> {
        let (tids_d, bids_d, n) = &self.blocks;
        let ix = self.dev.args(&self.stream);
        let grid = self.gpu.multiprocessors() * 8;
        let mut bufs = None;
        let best = self.best_ms(reps, || {
            bufs = Some(launch_decode_into(
                &self.gpu,
                &self.stream,
                &ix,
                &self.terms,
                (tids_d, bids_d, *n),
                grid,
                decoder,
                bufs.take(),
            )?);
            Ok(())
        })?;
        let oks = self.stream.memcpy_dtov(&bufs.expect("at least one run").2)?;
        if oks.iter().any(|&o| o != 1) {
            return Err(GpuError::Unsupported(
                "a block failed to decode on the GPU".into(),
            ));
        }
        let postings: u64 = self.term_descs.iter().map(|d| d.df as u64).sum();
        Ok((
            Duration::from_secs_f64(best as f64 / 1e3),
            postings,
            self.index.words().len() as u64 * 4,
        ))
    }

    /// The shortest of `reps` runs of `work` on the stream, in ms (CUDA events).
    fn best_ms(&self, reps: usize, mut work: impl FnMut() -> Result<(), GpuError>) -> Result<f32, GpuError> {
        let event = || self.gpu.ctx.new_event(Some(CUevent_flags::CU_EVENT_DEFAULT));
        let (start, end) = (event()?, event()?);
        let mut best = f32::INFINITY;
        for _ in 0..reps.max(1) {
            start.record(&self.stream)?;
            work()?;
            end.record(&self.stream)?;
            end.synchronize()?;
            best = best.min(start.elapsed_ms(&end)?);
        }
        Ok(best)
    }

    /// Device-to-device copy bandwidth (bytes read + written per second) over `bytes`, best of `reps`.
    pub fn copy_bandwidth(&self, bytes: usize, reps: usize) -> Result<f64, GpuError> {
        let n = bytes / 4;
        let src = self.stream.alloc_zeros::<u32>(n)?;
        let mut dst = self.stream.alloc_zeros::<u32>(n)?;
        let best = self.best_ms(reps, || Ok(self.stream.memcpy_dtod(&src, &mut dst)?))?;
        Ok(2.0 * (n * 4) as f64 / (best as f64 / 1e3))
    }
}

/// Top `k` of each segment of `(doc, score)` hits on the GPU (the query kernel's selection), sorted by
/// descending score then ascending docID.
pub fn topk_segments(
    gpu: &Gpu,
    segments: &[Vec<(u32, f32)>],
    k: usize,
) -> Result<Vec<Vec<(u32, f32)>>, GpuError> {
    let stream = gpu.ctx.new_stream()?;
    let mut seg = vec![0u32];
    let (mut docs, mut scores) = (Vec::new(), Vec::new());
    for s in segments {
        docs.extend(s.iter().map(|h| h.0));
        scores.extend(s.iter().map(|h| h.1));
        seg.push(docs.len() as u32);
    }
    docs.push(0);
    scores.push(0.0);
    let n = segments.len();
    let grid = (n as u32).clamp(1, gpu.multiprocessors() * 4);
    let mut b = TopKBuffers {
        seg: stream.memcpy_stod(&seg)?,
        docs: stream.memcpy_stod(&docs)?,
        scores: stream.memcpy_stod(&scores)?,
        topbuf: stream.alloc_zeros::<u64>(grid as usize * TOPK_CAP)?,
        out_doc: stream.alloc_zeros::<u32>((n * k).max(1))?,
        out_score: stream.alloc_zeros::<f32>((n * k).max(1))?,
        out_count: stream.alloc_zeros::<u32>(n.max(1))?,
    };
    launch::topk_segments(gpu, &stream, grid, k as u32, &mut b)?;
    stream.synchronize()?;
    let (d, s, c) = (
        stream.memcpy_dtov(&b.out_doc)?,
        stream.memcpy_dtov(&b.out_score)?,
        stream.memcpy_dtov(&b.out_count)?,
    );
    Ok((0..n)
        .map(|i| (0..c[i] as usize).map(|j| (d[i * k + j], s[i * k + j])).collect())
        .collect())
}

/// Every block of `terms`' lists, in order: its term's number and its own (in the index's skip data).
fn all_blocks(terms: &[TermDesc]) -> (Vec<u32>, Vec<u32>) {
    terms
        .iter()
        .enumerate()
        .flat_map(|(t, d)| (0..d.num_blocks).map(move |b| (t as u32, d.block_base + b)))
        .unzip()
}

/// Which of the GPU's two SIMD-BP128 decoders a decode runs (the other codecs have one decoder each, which
/// both choices run).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decoder {
    /// Into registers, a lane's four postings at once: the OR windows' decoder.
    Registers,
    /// Into memory (a warp's scratch): the decoder of AND and of the small OR path.
    Memory,
}

/// One posting list in raw form for [`decode_raw`]: its encoded words, skip data and codec parameters.
#[derive(Debug, Clone)]
pub struct RawList {
    /// Encoded blocks.
    pub words: Vec<u32>,
    /// Skip data (offsets relative to the list's start).
    pub blocks: Vec<warpsearch_index::BlockMeta>,
    /// Postings.
    pub df: u32,
    /// Codec parameters.
    pub params: warpsearch_codec::ListParams,
}

/// Decodes every block of every list on the GPU (one warp per block, by `decoder`) and returns, per list
/// and block, the docIDs and frequencies, or `None` where the kernel found the block malformed.
pub fn decode_raw(
    gpu: &Gpu,
    codec: warpsearch_codec::Codec,
    lists: &[RawList],
    decoder: Decoder,
) -> Result<Vec<Vec<Decoded>>, GpuError> {
    let stream = gpu.ctx.new_stream()?;
    let (mut words, mut metas, mut terms) = (Vec::new(), Vec::new(), Vec::new());
    for l in lists {
        let block_base = metas.len() as u32;
        terms.push(TermDesc {
            word_base: words.len() as u64,
            block_base,
            num_blocks: l.blocks.len() as u32,
            df: l.df,
            len_words: l.words.len() as u32,
            params: l.params.doc as u32 | (l.params.freq as u32) << 8,
            ..TermDesc::default()
        });
        words.extend_from_slice(&l.words);
        metas.extend_from_slice(&l.blocks);
    }
    let offsets = terms.iter().map(|t| (t.word_base, t.block_base)).collect();
    let mut dev = DeviceIndex::from_parts(&stream, &words, &metas, offsets)?;
    dev.codec = codec_id(codec);
    let ix = dev.args(&stream);
    let terms_d = upload_terms(&stream, &terms)?;
    let (tids, bids) = all_blocks(&terms);
    let n = tids.len();
    if n == 0 {
        return Ok(lists.iter().map(|_| Vec::new()).collect());
    }
    let (tids_d, bids_d) = (stream.memcpy_stod(&tids)?, stream.memcpy_stod(&bids)?);
    let blocks = (&tids_d, &bids_d, n);
    let out = launch_decode_into(gpu, &stream, &ix, &terms_d, blocks, 0, decoder, None)?;
    let (docs, tfs, ok) = (
        stream.memcpy_dtov(&out.0)?,
        stream.memcpy_dtov(&out.1)?,
        stream.memcpy_dtov(&out.2)?,
    );
    let mut out: Vec<Vec<Decoded>> = lists.iter().map(|_| Vec::new()).collect();
    for j in 0..n {
        // Postings in the block: BLOCK_LEN, but for a list's last block.
        let t = &terms[tids[j] as usize];
        let b = bids[j] - t.block_base;
        let len = if b + 1 == t.num_blocks {
            t.df as usize - b as usize * BLOCK_LEN
        } else {
            BLOCK_LEN
        };
        let r = j * BLOCK_LEN..j * BLOCK_LEN + len;
        out[tids[j] as usize].push((ok[j] == 1).then(|| (docs[r.clone()].to_vec(), tfs[r].to_vec())));
    }
    Ok(out)
}

/// Term descriptors as the device bytes the kernels read (one zero descriptor when there are none:
/// empty device buffers cannot be allocated).
fn upload_terms(stream: &Arc<CudaStream>, terms: &[TermDesc]) -> Result<CudaSlice<u8>, GpuError> {
    let one = [TermDesc::default()];
    let terms = if terms.is_empty() { &one[..] } else { terms };
    Ok(stream.memcpy_stod(bytemuck::cast_slice::<TermDesc, u8>(terms))?)
}

/// Decoded docIDs, frequencies and per-block success flags on the device.
type DecodeBuffers = (CudaSlice<u32>, CudaSlice<u32>, CudaSlice<u32>);

/// Runs `decode_blocks` over `n` requested blocks. Fresh buffers (`reuse` None) are poisoned first, so
/// that the caller can check every element the kernel must write. `grid` 0: one CTA per 8 blocks.
#[allow(clippy::too_many_arguments)]
fn launch_decode_into(
    gpu: &Gpu,
    stream: &Arc<CudaStream>,
    ix: &IndexArgs,
    terms: &CudaSlice<u8>,
    (tids, bids, n): (&CudaSlice<u32>, &CudaSlice<u32>, usize),
    grid: u32,
    decoder: Decoder,
    reuse: Option<DecodeBuffers>,
) -> Result<DecodeBuffers, GpuError> {
    let mut out = match reuse {
        Some(b) => b,
        None => {
            let b = (
                stream.alloc_zeros::<u32>(n * BLOCK_LEN)?,
                stream.alloc_zeros::<u32>(n * BLOCK_LEN)?,
                stream.alloc_zeros::<u32>(n)?,
            );
            // Poison the outputs: the caller checks every element the kernel must write.
            poison(stream, &b.0, 0xAB)?;
            poison(stream, &b.1, 0xCD)?;
            poison(stream, &b.2, 0xEF)?;
            b
        }
    };
    let warps = gpu.threads() / 32;
    let grid = if grid == 0 {
        (n as u32).div_ceil(warps)
    } else {
        grid
    };
    let regs = decoder == Decoder::Registers;
    launch::decode_blocks(gpu, stream, grid, ix, terms, tids, bids, n as u32, regs, &mut out)?;
    stream.synchronize()?;
    Ok(out)
}
