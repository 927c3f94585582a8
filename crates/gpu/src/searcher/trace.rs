//! `WARPSEARCH_CACHE_TRACE`'s timeline: when each batch was prepared on the host and when its copies,
//! kernel and answers ran on the device, in ms after the searcher was made, so that a trace shows
//! where the pipeline waits.

use std::time::Instant;

use cudarc::driver::sys::CUevent_flags;
use cudarc::driver::{CudaEvent, CudaStream};

use crate::{Gpu, GpuError};

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

    /// A batch prepared from `started` until now (host), and its slot's four events (before the
    /// copies, before the kernel, after it, after the answers' copies), all completed.
    pub(crate) fn timeline(&self, events: &[CudaEvent; 4], started: Instant) -> String {
        let at = |e: &CudaEvent| self.event.elapsed_ms(e).map_or(f64::NAN, f64::from);
        format!(
            "host {:.2}..{:.2}, device {:.2} / {:.2} / {:.2} / {:.2} ms",
            started.duration_since(self.host).as_secs_f64() * 1e3,
            self.host.elapsed().as_secs_f64() * 1e3,
            at(&events[0]),
            at(&events[1]),
            at(&events[2]),
            at(&events[3])
        )
    }
}
