//! The per-batch timeline of [`crate::GpuOptions::trace`]: when each batch was prepared on the host
//! and when its copies, kernel and answers ran on the device, in ms after the searcher was made, so
//! that a trace shows where the pipeline waits. Reported as a `tracing` event at debug level.

use std::time::Instant;

use cudarc::driver::sys::CUevent_flags;
use cudarc::driver::{CudaEvent, CudaStream};

use super::slot::InFlight;
use crate::device::Gpu;
use crate::error::GpuError;

/// An event recorded when the searcher was made, and the host's instant then.
pub(crate) struct Epoch {
    event: CudaEvent,
    host: Instant,
}

impl Epoch {
    pub(crate) fn new(gpu: &Gpu, stream: &CudaStream) -> Result<Epoch, GpuError> {
        let event = gpu.ctx.new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))?;
        event.record(stream)?;
        Ok(Epoch {
            event,
            host: Instant::now(),
        })
    }

    /// Reports `job`, the batch slot `slot` ran, now that its answers are on the host: its tasks,
    /// split, staging and cache hit rate, the device times of its copies and kernel (`h2d_ms`,
    /// `kernel_ms`, `d2h_ms`), and its timeline: the host's work from its preparation until now, and
    /// the slot's four events (before the copies, before the kernel, after it, after the answers'
    /// copies), all completed.
    pub(crate) fn report(
        &self,
        slot: usize,
        job: &InFlight,
        events: &[CudaEvent; 4],
        (h2d_ms, kernel_ms, d2h_ms): (f64, f64, f64),
    ) {
        let at = |e: &CudaEvent| self.event.elapsed_ms(e).map_or(f64::NAN, f64::from);
        let ms = |d: std::time::Duration| d.as_secs_f64() * 1e3;
        let (cached, staged) = job.blocks;
        tracing::debug!(
            tasks = job.prepared.queries.len(),
            cut_above_postings = job.split_cost,
            staged_mib = job.staged as f64 / (1u64 << 20) as f64,
            spans = job.spans,
            hit_rate = cached as f64 / (cached + staged).max(1) as f64,
            h2d_ms,
            kernel_ms,
            d2h_ms,
            preparation_to_answers_ms = ms(job.started.elapsed()),
            slot,
            host_from_ms = ms(job.started.duration_since(self.host)),
            host_to_ms = ms(self.host.elapsed()),
            copies_at_ms = at(&events[0]),
            kernel_at_ms = at(&events[1]),
            kernel_done_ms = at(&events[2]),
            answers_at_ms = at(&events[3]),
            "gpu batch"
        );
    }
}
