//! One pipeline slot of the GPU searcher: a stream, the device buffers of one batch and their pinned host
//! mirrors, and the batch on its way through them.

use std::sync::Arc;
use std::time::Instant;

use cudarc::driver::sys::CUevent_flags;
use cudarc::driver::{CudaEvent, CudaSlice, CudaStream};

use super::calls::CallId;
use crate::abi::{QueryDesc, TermDesc, BLOCK_LEN, PHASE_COUNTERS, TOPK_CAP};
use crate::batch::Prepared;
use crate::cache::Capacity;
use crate::device::chunk;
use crate::device::Gpu;
use crate::driver::Pinned;
use crate::error::GpuError;

/// A batch on its way through a slot.
pub(crate) struct InFlight {
    /// The call its queries came in.
    pub(crate) call: CallId,
    pub(crate) prepared: Prepared,
    pub(crate) started: Instant,
    pub(crate) k: usize,
    /// Bytes staged with the batch, and the spans they came in.
    pub(crate) staged: u64,
    pub(crate) spans: usize,
    /// The cost above which its queries were cut.
    pub(crate) split_cost: u64,
    /// Blocks of its ranges read from the cache, and staged.
    pub(crate) blocks: (u64, u64),
    /// The tasks (first, end) of each query that may be answered before the batch ends (its answers
    /// in host memory, and final once its tasks are: not and-or's), not yet answered.
    pub(crate) pending: Vec<(usize, usize)>,
    /// Per task: whether its query was answered before the batch ended.
    pub(crate) early: Vec<bool>,
}

/// One pipeline slot: a stream and the buffers of one batch.
pub(crate) struct Slot {
    pub(crate) stream: Arc<CudaStream>,
    pub(crate) desc: CudaSlice<u8>,
    pub(crate) counter: CudaSlice<u32>,
    pub(crate) out_doc: CudaSlice<u32>,
    pub(crate) out_score: CudaSlice<f32>,
    pub(crate) out_count: CudaSlice<u32>,
    pub(crate) scratch_doc: CudaSlice<u32>,
    pub(crate) scratch_tf: CudaSlice<u32>,
    pub(crate) topbuf: CudaSlice<u64>,
    pub(crate) phases: CudaSlice<u64>,
    /// Per task: when a CTA took it and when its answer was written (instrumented runs).
    pub(crate) task_ns: CudaSlice<u64>,
    pub(crate) h_desc: Pinned<u8>,
    pub(crate) h_doc: Pinned<u32>,
    pub(crate) h_score: Pinned<f32>,
    pub(crate) h_count: Pinned<u32>,
    pub(crate) h_phases: Pinned<u64>,
    pub(crate) h_task_ns: Pinned<u64>,
    pub(crate) h_zero: Pinned<u32>,
    /// Staged blocks on their way: words, then the skip data's five columns.
    pub(crate) h_stage: Pinned<u32>,
    pub(crate) events: [CudaEvent; 4],
    pub(crate) in_flight: Option<InFlight>,
    /// Where the kernel writes `h_doc`, `h_score` and `h_count` (host memory mapped into the device's
    /// address space), where answers go there rather than through device memory.
    pub(crate) mapped: Option<[u64; 3]>,
}

impl Slot {
    pub(crate) fn new(
        gpu: &Gpu,
        batch: usize,
        k: usize,
        grid: u32,
        stage: Capacity,
        map_answers: bool,
    ) -> Result<Self, GpuError> {
        let stream = gpu.ctx.new_stream()?;
        let ctas = grid as usize;
        // Per query: its descriptor, its shared key and eight terms (more grow it: reserve_desc).
        let desc_bytes =
            8 + batch * (std::mem::size_of::<QueryDesc>() + 8 + 8 * std::mem::size_of::<TermDesc>());
        let event = || gpu.ctx.new_event(Some(CUevent_flags::CU_EVENT_DEFAULT));
        let (h_doc, h_score, h_count) = (
            Pinned::new(&gpu.ctx, batch * k)?,
            Pinned::new(&gpu.ctx, batch * k)?,
            Pinned::new(&gpu.ctx, batch)?,
        );
        let mapped = match map_answers {
            true => (|| Some([h_doc.device_ptr()?, h_score.device_ptr()?, h_count.device_ptr()?]))(),
            false => None,
        };
        Ok(Slot {
            desc: stream.alloc_zeros(desc_bytes)?,
            counter: stream.alloc_zeros(1)?,
            out_doc: stream.alloc_zeros(batch * k)?,
            out_score: stream.alloc_zeros(batch * k)?,
            out_count: stream.alloc_zeros(batch)?,
            scratch_doc: stream.alloc_zeros(ctas * chunk(gpu.threads()) * BLOCK_LEN)?,
            scratch_tf: stream.alloc_zeros(ctas * chunk(gpu.threads()) * BLOCK_LEN)?,
            topbuf: stream.alloc_zeros(ctas * TOPK_CAP)?,
            phases: stream.alloc_zeros(ctas * PHASE_COUNTERS)?,
            task_ns: stream.alloc_zeros(2 * batch)?,
            h_desc: Pinned::new(&gpu.ctx, desc_bytes)?,
            h_doc,
            h_score,
            h_count,
            h_phases: Pinned::new(&gpu.ctx, ctas * PHASE_COUNTERS)?,
            h_task_ns: Pinned::new(&gpu.ctx, 2 * batch)?,
            h_zero: {
                let mut z = Pinned::new(&gpu.ctx, 1)?;
                z.as_mut_slice()[0] = 0;
                z
            },
            h_stage: Pinned::new(&gpu.ctx, (stage.words + 5 * stage.blocks) as usize)?,
            events: [event()?, event()?, event()?, event()?],
            stream,
            in_flight: None,
            mapped,
        })
    }

    /// Grows the descriptor buffers (the slot is idle).
    pub(crate) fn reserve_desc(&mut self, gpu: &Gpu, bytes: usize) -> Result<(), GpuError> {
        if bytes > self.desc.len() {
            let bytes = bytes.next_power_of_two();
            self.desc = self.stream.alloc_zeros(bytes)?;
            self.h_desc = Pinned::new(&gpu.ctx, bytes)?;
        }
        Ok(())
    }
}
