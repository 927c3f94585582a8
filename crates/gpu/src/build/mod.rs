//! The index build on the GPU (docs/references.md#gpu-bm25-weights: documents → (term, doc) pairs →
//! sort → tf and df → a weight per pair): [`GpuBuilder`] takes the (term, doc, tf) tuples the CPU cores
//! analysed (terms already numbered through a dictionary, the variant that paid most), and on the device
//! sorts them by term rank and docID (a stable LSD radix sort, `kernels/build.cu`), finds each list's
//! offsets (its df), computes every block's BM25 bound and, for SIMD-BP128, encodes every block; the CPU
//! computes each list's idf from its df (so that `ln` rounds as the CPU's writer's), and encodes the
//! other codecs' blocks on its cores. The tuples go up after the analysis, or while it runs
//! (`stream.rs`).
//!
//! The lists, bounds and blocks equal the CPU build's bit for bit (`tests/build.rs` compares the files),
//! so the index is the same whoever builds it. A pass's tuples must fit the device's memory (28 bytes a
//! posting, within [`GpuBuilder::with_memory_budget`] where one is set): more postings than that, or
//! than the sort takes at once (2^31), are inverted in passes over whole partitions
//! (`warpsearch_index::build::invert_in_passes`); a build that fails is inverted on the CPU instead, as
//! `warpsearch_index::build` decides.

use std::sync::Arc;
use std::time::Instant;

use cudarc::driver::{CudaContext, CudaFunction, CudaModule, CudaSlice, CudaStream};
use cudarc::nvrtc::compile_ptx_with_opts;
use rayon::prelude::*;

use bytemuck::Zeroable;
use warpsearch_index::build::{DeviceInverter, EncodedLists, InvertJob, Inverted, TupleStream};
use warpsearch_index::{BlockMeta, Codec, BLOCK_LEN};

use crate::abi::{BoundArgs, EncodeArgs, RADIX_BITS};
use crate::device::open_context;
use crate::driver::{self, ptr, Pinned};
use crate::error::GpuError;
use crate::launch;
use crate::nvrtc::{build_source, compile_options};
use crate::options::KernelOptions;

/// Postings from which `--build-on auto` builds on the GPU: below, uploading the tuples and opening
/// the device cost more than the counting sort on the cores (a rule of thumb, not a measurement).
pub const AUTO_MIN_POSTINGS: u64 = 20_000_000;

/// Postings the sort takes at once: below 2^31, whose keys' positions fit its u32 counts.
const SORT_MAX: u64 = u32::MAX as u64 / 2;

/// Device bytes a posting takes during the build: the rank keys, docIDs, frequencies and two pairs of
/// sort buffers, u32 each.
const BYTES_PER_POSTING: u64 = 7 * 4;

/// Device bytes a job takes beside its postings: per term its list's offset, idf and first block,
/// per document its length and new number, u32 each (12 bytes a term or a document, a bound).
fn fixed_bytes(job: &InvertJob<'_>) -> u64 {
    (job.num_terms as u64 + job.lens.len() as u64) * 12
}

mod stream;

/// The build kernels of one context (`kernels/build.cu`), for the launches of `crate::launch`.
#[derive(Clone)]
pub(crate) struct BuildKernels {
    pub rank_keys: CudaFunction,
    pub map_docs: CudaFunction,
    pub gather: CudaFunction,
    pub histogram: CudaFunction,
    pub scan: CudaFunction,
    pub scatter: CudaFunction,
    pub starts: CudaFunction,
    pub bounds: CudaFunction,
    pub simdbp_sizes: CudaFunction,
    pub simdbp_pack: CudaFunction,
    /// Threads per CTA (`THREADS`).
    pub threads: u32,
    _module: Arc<CudaModule>,
}

/// A GPU opened for building indexes, with the build kernels compiled.
#[derive(Clone)]
pub struct GpuBuilder {
    ctx: Arc<CudaContext>,
    kernels: BuildKernels,
    name: String,
    min_postings: u64,
    /// Device bytes a pass may take (None: what is free).
    memory_budget: Option<u64>,
    /// Most u32s a staging buffer holds ([`STAGE`]; tests use fewer, to copy in many chunks).
    stage_len: usize,
}

impl GpuBuilder {
    /// Opens device `ordinal` and compiles the build kernels, or says why it cannot (no driver, no
    /// NVRTC, no device: [`GpuError::Unavailable`]; a failing driver or compilation).
    pub fn open(ordinal: usize) -> Result<GpuBuilder, GpuError> {
        let ctx = open_context(ordinal)?;
        // One stream, synchronized once at the end: cudarc's per-buffer events would only cost.
        crate::driver::disable_event_tracking(&ctx);
        let name = ctx.name()?;
        let (major, minor) = ctx.compute_capability()?;
        let options = KernelOptions::default();
        let ptx = compile_ptx_with_opts(build_source(), compile_options(major, minor, &options))
            .map_err(|e| GpuError::Compile(format!("{e}")))?;
        let module = ctx.load_module(ptx)?;
        let f = |name: &str| module.load_function(name);
        let kernels = BuildKernels {
            rank_keys: f("build_rank_keys")?,
            map_docs: f("build_map_docs")?,
            gather: f("build_gather")?,
            histogram: f("radix_histogram")?,
            scan: f("scan_exclusive")?,
            scatter: f("radix_scatter")?,
            starts: f("list_starts")?,
            bounds: f("block_bounds")?,
            simdbp_sizes: f("simdbp_sizes")?,
            simdbp_pack: f("simdbp_pack")?,
            threads: options.threads,
            _module: module,
        };
        Ok(GpuBuilder {
            ctx,
            kernels,
            name,
            min_postings: AUTO_MIN_POSTINGS,
            memory_budget: None,
            stage_len: STAGE,
        })
    }

    /// The same builder, used by `auto` from `min_postings` postings (tests use 0).
    pub fn with_min_postings(mut self, min_postings: u64) -> Self {
        self.min_postings = min_postings;
        self
    }

    /// The same builder, its passes within `bytes` of device memory (where less is free, within that),
    /// so that a build leaves the rest to others (a server searching on the same GPU).
    pub fn with_memory_budget(mut self, bytes: u64) -> Self {
        self.memory_budget = Some(bytes);
        self
    }

    /// The same builder, its copies to and from the device through buffers of at most `len` u32s
    /// (at least one): tests use small ones, so that a list crosses many chunks.
    pub fn with_stage_len(mut self, len: usize) -> Self {
        self.stage_len = len.max(1);
        self
    }

    /// Postings one pass over a job like `job` can take beside what its terms and documents take
    /// (in 90% of the free memory, or the budget); None where the driver does not say what is free
    /// (the pass then says why).
    pub fn pass_postings(&self, job: &InvertJob<'_>) -> Option<u64> {
        self.postings_beside(fixed_bytes(job))
    }

    /// Postings a pass can take in 90% of the free memory (or the budget, where smaller) beside
    /// `reserved` bytes, at `BYTES_PER_POSTING` each, and fewer than the sort's 2^31; None where the
    /// driver does not say what is free.
    fn postings_beside(&self, reserved: u64) -> Option<u64> {
        self.ctx.bind_to_thread().ok()?;
        let (free, _) = cudarc::driver::result::mem_get_info().ok()?;
        let usable = self.within_budget(free as u64 / 10 * 9);
        Some((usable.saturating_sub(reserved) / BYTES_PER_POSTING).min(SORT_MAX - 1))
    }

    /// `free` bytes of device memory, or the budget where smaller.
    fn within_budget(&self, free: u64) -> u64 {
        free.min(self.memory_budget.unwrap_or(u64::MAX))
    }

    /// [`DeviceInverter::invert`] with the GPU's own error.
    pub fn invert_on(&self, job: &InvertJob<'_>) -> Result<Inverted, GpuError> {
        if job.num_postings == 0 {
            return Ok(empty(job));
        }
        self.ctx.bind_to_thread()?;
        let clock = Instant::now();
        let slack = self.room(job, 0)?;
        let n = job.num_postings as usize;
        let stream = self.ctx.new_stream()?;
        // The tuples, partition after partition, through the staging buffers.
        let mut staging = Staging::new(&self.ctx, &stream, n.min(self.stage_len))?;
        let docs = stream.alloc_zeros::<u32>(n)?;
        let tfs = stream.alloc_zeros::<u32>(n)?;
        let terms = stream.alloc_zeros::<u32>(n)?;
        let mut segments = Vec::with_capacity(job.parts.len());
        let mut at = 0usize;
        for (p, part) in job.parts.iter().enumerate() {
            let len = part.doc.len();
            if len == 0 {
                continue;
            }
            if at + len > n || part.tf.len() != len || part.term.len() != len {
                return Err(GpuError::Failed(format!(
                    "the partitions' tuples do not make the {n} postings the job counts"
                )));
            }
            let offset = (at * std::mem::size_of::<u32>()) as u64;
            staging.upload(part.doc, ptr(&docs, &stream) + offset)?;
            staging.upload(part.tf, ptr(&tfs, &stream) + offset)?;
            staging.upload(part.term, ptr(&terms, &stream) + offset)?;
            segments.push((p as u32, at as u64));
            at += len;
        }
        if at != n {
            return Err(GpuError::Failed(format!(
                "the partitions hold {at} postings, not the {n} the job counts"
            )));
        }
        let tuples = Tuples {
            docs,
            tfs,
            terms,
            segments,
        };
        self.invert_tuples(job, &stream, staging, tuples, slack, clock)
    }

    /// Device bytes free for a pass over `job` beyond what it needs ([`BYTES_PER_POSTING`] a posting,
    /// [`fixed_bytes`]), counting `held` bytes the caller holds and frees before the pass allocates;
    /// an error where they are too few, or the postings too many for the sort.
    fn room(&self, job: &InvertJob<'_>, held: u64) -> Result<u64, GpuError> {
        let n64 = job.num_postings;
        if n64 >= SORT_MAX {
            return Err(GpuError::Unsupported(format!(
                "{n64} postings: the GPU build sorts at most 2^31 at once"
            )));
        }
        let (free, _) = cudarc::driver::result::mem_get_info()?;
        let need = n64 * BYTES_PER_POSTING + fixed_bytes(job);
        let usable = self.within_budget(free as u64 + held);
        if need > usable {
            return Err(GpuError::Unsupported(format!(
                "the {n64} postings need {:.1} GiB of device memory and {:.1} GiB are free{}",
                need as f64 / (1u64 << 30) as f64,
                (free as u64 + held) as f64 / (1u64 << 30) as f64,
                match self.memory_budget {
                    Some(b) => format!(" (the budget: {:.1} GiB)", b as f64 / (1u64 << 30) as f64),
                    None => String::new(),
                }
            )));
        }
        Ok(usable - need)
    }

    /// Inverts `job`'s tuples, on the device in `tuples`; `slack` device bytes are free beyond what
    /// the pass needs, and the pass's time runs from `clock`.
    fn invert_tuples(
        &self,
        job: &InvertJob<'_>,
        stream: &Arc<CudaStream>,
        mut staging: Staging,
        tuples: Tuples,
        slack: u64,
        mut clock: Instant,
    ) -> Result<Inverted, GpuError> {
        let t = job.num_terms as usize;
        let n64 = job.num_postings;
        let n = n64 as u32;
        let k = &self.kernels;
        let stream = stream.clone();
        // Each phase ends with the stream synchronized, so that its time is its own.
        let mut phases = Vec::new();
        let mut phase = |name: &'static str, stream: &Arc<CudaStream>| -> Result<(), GpuError> {
            stream.synchronize()?;
            phases.push((name, clock.elapsed()));
            clock = Instant::now();
            Ok(())
        };
        let Tuples {
            mut docs,
            tfs,
            terms: mut kb,
            segments,
        } = tuples;
        // The rank keys from each partition's term numbers, which `kb` holds until the sort.
        let mut rank_keys = stream.alloc_zeros::<u32>(n as usize)?;
        self.rank_keys(&stream, job, &kb, &segments, &mut rank_keys)?;
        let mut va = stream.alloc_zeros::<u32>(n as usize)?;
        let mut ka = stream.alloc_zeros::<u32>(n as usize)?;
        let mut vb = stream.alloc_zeros::<u32>(n as usize)?;
        launch::build_gather(k, &stream, None, n, &mut va)?;
        let bits = |max: u64| 64 - max.leading_zeros();
        if let Some(new_id) = job.new_id {
            // Renumbered documents: sorted by docID first, then (stably) by rank.
            let new_id = stream.memcpy_stod(new_id)?;
            launch::build_map_docs(k, &stream, &mut docs, &new_id, n)?;
            stream.memcpy_dtod(&docs, &mut ka)?;
            self.sort(
                &stream,
                n,
                bits(job.lens.len().saturating_sub(1) as u64),
                (&mut ka, &mut va),
                (&mut kb, &mut vb),
            )?;
            launch::build_gather(k, &stream, Some((&rank_keys, &va)), n, &mut ka)?;
        } else {
            stream.memcpy_dtod(&rank_keys, &mut ka)?;
        }
        self.sort(
            &stream,
            n,
            bits(t.saturating_sub(1) as u64),
            (&mut ka, &mut va),
            (&mut kb, &mut vb),
        )?;
        phase("sort", &stream)?;
        // Lists: offsets from the sorted keys, postings gathered through the permutation.
        let mut starts = stream.alloc_zeros::<u32>(t + 1)?;
        crate::driver::poison(&stream, &starts, 0xFF)?;
        launch::list_starts(k, &stream, &ka, n, t as u32, &mut starts)?;
        launch::build_gather(k, &stream, Some((&docs, &va)), n, &mut kb)?;
        launch::build_gather(k, &stream, Some((&tfs, &va)), n, &mut vb)?;
        let starts_h: Vec<u32> = stream.memcpy_dtov(&starts)?;
        if starts_h[0] != 0 || starts_h.windows(2).any(|w| w[0] >= w[1]) || starts_h[t] != n {
            return Err(GpuError::Failed(
                "the sorted postings do not form one list per term".into(),
            ));
        }
        phase("list offsets", &stream)?;
        // idf on the CPU, as the writer computes it; the lists' first blocks.
        let idf: Vec<f32> = starts_h
            .par_windows(2)
            .map(|w| job.bm25.idf((w[1] - w[0]) as u64))
            .collect();
        let block_starts = block_starts(&starts_h);
        let num_blocks = block_starts[t];
        let idf_d = stream.memcpy_stod(&idf)?;
        let block_starts_d = stream.memcpy_stod(&block_starts)?;
        let lens = stream.memcpy_stod(job.lens)?;
        let out = stream.alloc_zeros::<f32>(num_blocks as usize)?;
        let args = BoundArgs {
            starts: ptr(&starts, &stream),
            block_starts: ptr(&block_starts_d, &stream),
            idf: ptr(&idf_d, &stream),
            docs: ptr(&kb, &stream),
            tfs: ptr(&vb, &stream),
            lens: ptr(&lens, &stream),
            out: ptr(&out, &stream),
            num_terms: t as u32,
            num_blocks,
            k1: job.bm25.params.k1,
            b: job.bm25.params.b,
            avg_doc_len: job.bm25.avg_doc_len,
            _pad: 0,
        };
        launch::block_bounds(k, &stream, &args)?;
        phase("idf and block bounds", &stream)?;
        // The sort's other buffers are free from here: the encoding's arrays take their place.
        drop((rank_keys, docs, tfs, ka, va));
        let free = slack + 5 * n64 * 4;
        let lists = DeviceLists {
            starts: &starts,
            block_starts: &block_starts_d,
            docs: &kb,
            tfs: &vb,
            bounds: &out,
            num_terms: t as u32,
            num_blocks,
            num_docs: job.lens.len() as u32,
        };
        let encoded = match job.codec {
            Codec::SimdBp => self.encode_simdbp(&stream, &lists, free)?,
            _ => None,
        };
        if encoded.is_some() {
            phase("encode", &stream)?;
        }
        let (docs_h, tfs_h, block_max, encoded) = match encoded {
            Some(e) => (
                Vec::new(),
                Vec::new(),
                Vec::new(),
                Some(e.download(&mut staging)?),
            ),
            None => {
                let mut docs_h = vec![0u32; n as usize];
                staging.download(ptr(&kb, &stream), &mut docs_h)?;
                let mut tfs_h = vec![0u32; n as usize];
                staging.download(ptr(&vb, &stream), &mut tfs_h)?;
                (docs_h, tfs_h, stream.memcpy_dtov(&out)?, None)
            }
        };
        phase("copy the lists back", &stream)?;
        Ok(Inverted {
            starts: starts_h.into_iter().map(u64::from).collect(),
            docs: docs_h,
            tfs: tfs_h,
            block_max,
            encoded,
            phases,
        })
    }

    /// Encodes the lists `docs[starts[r]..starts[r + 1]]` (with their frequencies `tfs`) with SIMD-BP128
    /// on the device, every block's bound 0, as a build does once it has sorted them: for tests, which
    /// compare the words with the CPU's codec on lists a collection could not hold (docIDs up to
    /// 2^32 − 2, gaps and frequencies of every width).
    #[doc(hidden)]
    pub fn encode_simdbp_lists(
        &self,
        starts: &[u32],
        docs: &[u32],
        tfs: &[u32],
        num_docs: u32,
    ) -> Result<EncodedLists, GpuError> {
        let t = starts.len().saturating_sub(1);
        if t == 0 && docs.is_empty() {
            return Ok(EncodedLists {
                word_starts: vec![0],
                ..EncodedLists::default()
            });
        }
        if starts.first() != Some(&0)
            || starts.last() != Some(&(docs.len() as u32))
            || starts.windows(2).any(|w| w[0] >= w[1])
            || tfs.len() != docs.len()
        {
            return Err(GpuError::Failed("lists: malformed offsets".into()));
        }
        let block_starts = block_starts(starts);
        self.ctx.bind_to_thread()?;
        let stream = self.ctx.new_stream()?;
        let num_blocks = block_starts[t];
        let lists = DeviceLists {
            starts: &stream.memcpy_stod(starts)?,
            block_starts: &stream.memcpy_stod(&block_starts)?,
            docs: &stream.memcpy_stod(docs)?,
            tfs: &stream.memcpy_stod(tfs)?,
            bounds: &stream.alloc_zeros::<f32>(num_blocks.max(1) as usize)?,
            num_terms: t as u32,
            num_blocks,
            num_docs,
        };
        let encoded = self
            .encode_simdbp(&stream, &lists, u64::MAX)?
            .ok_or_else(|| GpuError::Unsupported("lists of 2^32 words or more".into()))?;
        let mut staging = Staging::new(&self.ctx, &stream, docs.len().clamp(1, self.stage_len))?;
        encoded.download(&mut staging)
    }

    /// Encodes `lists` with SIMD-BP128 on the device, within `free` bytes of device memory; None where
    /// they would take more (or could hold 2^32 words or more), so that the CPU encodes them; an error
    /// where a list is not strictly increasing within the documents, or a frequency is 0.
    fn encode_simdbp(
        &self,
        stream: &Arc<CudaStream>,
        lists: &DeviceLists<'_>,
        free: u64,
    ) -> Result<Option<OnDevice>, GpuError> {
        let (t, blocks) = (lists.num_terms as u64, lists.num_blocks as u64);
        // The words' offsets are u32: a block takes at most a header word and two words a posting.
        let postings = lists.docs.len() as u64;
        let sizes_bytes = 4 * (blocks + 2) + 8 * t;
        if blocks + 2 * postings >= u32::MAX as u64 || sizes_bytes > free {
            return Ok(None);
        }
        let k = &self.kernels;
        let mut offsets = stream.alloc_zeros::<u32>(blocks as usize + 1)?;
        let cf = stream.alloc_zeros::<u64>(t as usize)?;
        let bad = stream.alloc_zeros::<u32>(1)?;
        let mut args = EncodeArgs {
            starts: ptr(lists.starts, stream),
            block_starts: ptr(lists.block_starts, stream),
            docs: ptr(lists.docs, stream),
            tfs: ptr(lists.tfs, stream),
            bounds: ptr(lists.bounds, stream),
            offsets: ptr(&offsets, stream),
            words: 0,
            meta: 0,
            cf: ptr(&cf, stream),
            bad: ptr(&bad, stream),
            num_terms: lists.num_terms,
            num_blocks: lists.num_blocks,
            num_docs: lists.num_docs,
            _pad: 0,
        };
        launch::simdbp_step(k, &k.simdbp_sizes, stream, &args)?;
        launch::scan_exclusive(k, stream, &mut offsets, lists.num_blocks + 1)?;
        let total = stream.memcpy_dtov(&offsets.slice(blocks as usize..))?[0] as u64;
        if stream.memcpy_dtov(&bad)?[0] != 0 {
            return Err(GpuError::Failed(
                "the sorted lists are not strictly increasing within the documents, or a frequency is 0"
                    .into(),
            ));
        }
        if sizes_bytes + 4 * (total + 5 * blocks) + 4 * (t + 1) > free {
            return Ok(None);
        }
        let words = stream.alloc_zeros::<u32>(total.max(1) as usize)?;
        let meta = stream.alloc_zeros::<u32>(5 * blocks as usize)?;
        args.words = ptr(&words, stream);
        args.meta = ptr(&meta, stream);
        launch::simdbp_step(k, &k.simdbp_pack, stream, &args)?;
        // Each list's first word: the first word of its first block.
        let mut word_starts = stream.alloc_zeros::<u32>(t as usize + 1)?;
        launch::build_gather(
            k,
            stream,
            Some((&offsets, lists.block_starts)),
            lists.num_terms + 1,
            &mut word_starts,
        )?;
        Ok(Some(OnDevice {
            words,
            total: total as usize,
            meta,
            word_starts,
            cf,
        }))
    }

    /// `keys[i]`: the rank of posting i's term, for the `keys.len()` postings of `segments` (each a
    /// partition's tuples from a position in `terms`, the positions increasing from 0).
    fn rank_keys(
        &self,
        stream: &Arc<CudaStream>,
        job: &InvertJob<'_>,
        terms: &CudaSlice<u32>,
        segments: &[(u32, u64)],
        keys: &mut CudaSlice<u32>,
    ) -> Result<(), GpuError> {
        let n = keys.len() as u64;
        // Every partition's rank table, one after another.
        let mut ranks = Vec::with_capacity(job.num_terms as usize);
        let mut part_base = Vec::with_capacity(job.parts.len());
        for part in &job.parts {
            part_base.push(ranks.len() as u32);
            ranks.extend_from_slice(part.rank);
        }
        let mut seg_start = Vec::with_capacity(segments.len() + 1);
        let mut base = Vec::with_capacity(segments.len());
        for &(p, start) in segments {
            let ordered = seg_start.last().is_none_or(|&s| s as u64 <= start);
            match part_base.get(p as usize) {
                Some(&b) if ordered && start <= n => base.push(b),
                _ => return Err(GpuError::Failed("the tuples' segments are out of order".into())),
            }
            seg_start.push(start as u32);
        }
        if seg_start.first() != Some(&0) {
            return Err(GpuError::Failed("the tuples' segments do not start at 0".into()));
        }
        seg_start.push(n as u32);
        let (ranks, seg_start, base) = (
            stream.memcpy_stod(&ranks)?,
            stream.memcpy_stod(&seg_start)?,
            stream.memcpy_stod(&base)?,
        );
        launch::build_rank_keys(
            &self.kernels,
            stream,
            terms,
            &ranks,
            (&seg_start, &base),
            n as u32,
            keys,
        )
    }

    /// Sorts `n` pairs by the low `bits` bits of their keys, stably, ping-ponging between the two
    /// buffers; the result ends in `a`.
    fn sort(
        &self,
        stream: &Arc<CudaStream>,
        n: u32,
        bits: u32,
        a: (&mut CudaSlice<u32>, &mut CudaSlice<u32>),
        b: (&mut CudaSlice<u32>, &mut CudaSlice<u32>),
    ) -> Result<(), GpuError> {
        let passes = bits.div_ceil(RADIX_BITS);
        let tiles = n.div_ceil(crate::abi::SORT_TILE).max(1) as usize;
        let mut counts = stream.alloc_zeros::<u32>(tiles << RADIX_BITS)?;
        let (ka, va) = a;
        let (kb, vb) = b;
        for pass in 0..passes {
            let shift = pass * RADIX_BITS;
            if pass % 2 == 0 {
                launch::radix_pass(&self.kernels, stream, (ka, va), n, shift, &mut counts, (kb, vb))?;
            } else {
                launch::radix_pass(&self.kernels, stream, (kb, vb), n, shift, &mut counts, (ka, va))?;
            }
        }
        if passes % 2 == 1 {
            stream.memcpy_dtod(kb, ka)?;
            stream.memcpy_dtod(vb, va)?;
        }
        Ok(())
    }
}

/// A job's tuples on the device: `docs`, `tfs` and `terms` hold its postings, in segments of one
/// partition each: segment s, `(p, start)`, holds partition p's postings from `start` to the next
/// segment's start (or the end), in the order the partition gathered them.
struct Tuples {
    docs: CudaSlice<u32>,
    tfs: CudaSlice<u32>,
    terms: CudaSlice<u32>,
    segments: Vec<(u32, u64)>,
}

/// Each list's first block, for lists at offsets `starts` (increasing), and the blocks of all last:
/// a list of n postings takes `n.div_ceil(BLOCK_LEN)` blocks.
fn block_starts(starts: &[u32]) -> Vec<u32> {
    let mut out = Vec::with_capacity(starts.len());
    out.push(0u32);
    for w in starts.windows(2) {
        out.push(out[out.len() - 1] + (w[1] - w[0]).div_ceil(BLOCK_LEN as u32));
    }
    out
}

/// The lists of a job without postings: every list empty.
fn empty(job: &InvertJob<'_>) -> Inverted {
    Inverted {
        starts: vec![0; job.num_terms as usize + 1],
        ..Inverted::default()
    }
}

/// Sorted lists on the device, with their bounds, as the encoding takes them.
struct DeviceLists<'a> {
    starts: &'a CudaSlice<u32>,
    block_starts: &'a CudaSlice<u32>,
    docs: &'a CudaSlice<u32>,
    tfs: &'a CudaSlice<u32>,
    bounds: &'a CudaSlice<f32>,
    num_terms: u32,
    num_blocks: u32,
    num_docs: u32,
}

/// Lists encoded on the device, not yet copied back.
struct OnDevice {
    words: CudaSlice<u32>,
    /// Words the lists take (`words` holds one at least).
    total: usize,
    meta: CudaSlice<u32>,
    word_starts: CudaSlice<u32>,
    cf: CudaSlice<u64>,
}

impl OnDevice {
    /// The lists on the host, the words and block metadata through `staging`.
    fn download(self, staging: &mut Staging) -> Result<EncodedLists, GpuError> {
        let stream = staging.stream.clone();
        let mut words = vec![0u32; self.total];
        staging.download(ptr(&self.words, &stream), &mut words)?;
        let mut blocks = vec![BlockMeta::zeroed(); self.meta.len() / 5];
        staging.download(ptr(&self.meta, &stream), bytemuck::cast_slice_mut(&mut blocks))?;
        let word_starts: Vec<u32> = stream.memcpy_dtov(&self.word_starts)?;
        Ok(EncodedLists {
            words,
            word_starts: word_starts.into_iter().map(u64::from).collect(),
            blocks,
            cf: stream.memcpy_dtov(&self.cf)?,
        })
    }
}

/// Most u32s in a staging buffer (64 MiB).
const STAGE: usize = 1 << 24;
/// u32s a core copies at once between a staging buffer and the host's memory.
const COPY_PIECE: usize = 1 << 16;

/// Two page-locked buffers through which the tuples go up and the lists come back, a chunk at a time:
/// the device copies one while the cores fill or empty the other. Copies from and to pageable memory
/// ran at a few GB/s, a second each way on 400 million postings.
struct Staging {
    stream: Arc<CudaStream>,
    bufs: [Pinned<u32>; 2],
    /// u32s a chunk holds: a buffer's length.
    chunk: usize,
    /// The buffer the next chunk up goes through; the other may still be read by the copy before.
    turn: usize,
}

impl Staging {
    /// Buffers of `chunk` u32s (at least one).
    fn new(ctx: &Arc<CudaContext>, stream: &Arc<CudaStream>, chunk: usize) -> Result<Staging, GpuError> {
        let chunk = chunk.max(1);
        Ok(Staging {
            stream: stream.clone(),
            bufs: [Pinned::new(ctx, chunk)?, Pinned::new(ctx, chunk)?],
            chunk,
            turn: 0,
        })
    }

    /// Copies `src` to device address `dst`, asynchronously: when it returns, every chunk but the last
    /// has arrived, and the last is on its way on `stream`.
    fn upload(&mut self, src: &[u32], dst: u64) -> Result<(), GpuError> {
        let stream = &self.stream;
        for (i, chunk) in src.chunks(self.chunk).enumerate() {
            let buf = &mut self.bufs[self.turn].as_mut_slice()[..chunk.len()];
            // The copy that last read this buffer ended before the one now in flight began.
            driver::par_copy(buf, chunk, COPY_PIECE);
            stream.synchronize()?;
            driver::copy_to_device(stream, dst + (i * self.chunk * 4) as u64, buf)?;
            self.turn ^= 1;
        }
        Ok(())
    }

    /// Copies `dst.len()` u32s from device address `src` into `dst`, after the work queued on `stream`.
    fn download(&mut self, src: u64, dst: &mut [u32]) -> Result<(), GpuError> {
        let stream = &self.stream;
        stream.synchronize()?;
        let mut pending: Option<(usize, &mut [u32])> = None;
        for (i, chunk) in dst.chunks_mut(self.chunk).enumerate() {
            let b = i % 2;
            driver::copy_to_host(
                stream,
                &mut self.bufs[b].as_mut_slice()[..chunk.len()],
                src + (i * self.chunk * 4) as u64,
            )?;
            // The chunk before is emptied while this one comes back.
            if let Some((before, out)) = pending.take() {
                driver::par_copy(out, &self.bufs[before].as_slice()[..out.len()], COPY_PIECE);
            }
            stream.synchronize()?;
            pending = Some((b, chunk));
        }
        if let Some((before, out)) = pending {
            driver::par_copy(out, &self.bufs[before].as_slice()[..out.len()], COPY_PIECE);
        }
        Ok(())
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        // A copy may still read or write a buffer (a build that failed half-way): it must end first.
        let _ = self.stream.synchronize();
    }
}

impl DeviceInverter for GpuBuilder {
    fn describe(&self) -> String {
        self.name.clone()
    }

    fn min_postings(&self) -> u64 {
        self.min_postings
    }

    fn invert(&self, job: &InvertJob<'_>) -> Result<Inverted, Box<dyn std::error::Error + Send + Sync>> {
        Ok(self.invert_on(job)?)
    }

    fn max_postings(&self, job: &InvertJob<'_>) -> Option<u64> {
        self.pass_postings(job)
    }

    fn stream(&self, parts: usize) -> Option<Box<dyn TupleStream>> {
        // A stream that cannot start leaves the tuples to go up at the inversion, as without one.
        let stream = stream::GpuTupleStream::new(self, parts).ok()?;
        Some(Box::new(stream))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_list_starts_after_the_blocks_of_those_before() {
        assert_eq!(block_starts(&[0]), [0]);
        // Lists of 1, 129, 128 and 256 postings.
        assert_eq!(block_starts(&[0, 1, 130, 258, 514]), [0, 1, 3, 4, 6]);
    }
}
