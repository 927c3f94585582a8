//! The list cache's plans: applied between calls ([`GpuSearcher::set_plan`],
//! [`GpuSearcher::apply_ready_plan`]), or taken from a feed and queued behind the batches in flight.

use std::sync::Arc;
use std::time::Instant;

use super::GpuSearcher;
use crate::cache::{CachePlan, PlanFeed};
use crate::error::GpuError;
use crate::residency::Applied;

impl GpuSearcher {
    /// Makes the list cache hold `plan` (no batch is in flight between calls), copying the lists that
    /// change; an error if the plan does not fit the cache or the searcher holds the whole index.
    pub fn set_plan(&mut self, plan: &CachePlan) -> Result<Applied, GpuError> {
        if !self.caches() {
            return Err(GpuError::Unsupported(
                "the whole index is on the device: no cache plan applies".into(),
            ));
        }
        let started = Instant::now();
        self.gpu.ctx.bind_to_thread()?;
        let applied = self.apply_on(0, plan, false)?;
        self.stats.prepare_ms += started.elapsed().as_secs_f64() * 1e3;
        Ok(applied)
    }

    /// Applies `plan` on slot `s`'s stream, behind what runs there; the copies first wait for the
    /// other slots' batches in flight, whose kernels read the cache as it was (none between calls).
    /// With `wait`, the host then waits for the copies. A failure leaves the cache empty: a copy may
    /// have failed half way, and nothing stale is served.
    fn apply_on(&mut self, s: usize, plan: &CachePlan, wait: bool) -> Result<Applied, GpuError> {
        let stream = self.slots[s].stream.clone();
        let index = self.scorer.index().clone();
        // The event recorded after each such batch's results were copied back.
        let waited = self
            .slots
            .iter()
            .enumerate()
            .filter(|(o, slot)| *o != s && slot.in_flight.is_some())
            .try_for_each(|(_, slot)| stream.wait(&slot.events[3]));
        let applied = waited
            .map_err(GpuError::from)
            .and_then(|_| self.dev.apply(&stream, &index, plan))
            .and_then(|applied| {
                // The other slots' later batches read the new cache: behind its copies (this slot's
                // are behind them in its stream's order).
                if let Some(copies) = self.dev.copies() {
                    for (_, slot) in self.slots.iter().enumerate().filter(|(o, _)| *o != s) {
                        slot.stream.wait(copies)?;
                    }
                }
                if wait {
                    self.dev.reclaim()?;
                }
                Ok(applied)
            });
        match applied {
            Ok(applied) => {
                self.stats.cache_fill_bytes += applied.bytes;
                Ok(applied)
            }
            Err(e) => {
                self.dev.forget(&stream);
                Err(e)
            }
        }
    }

    /// Takes the cache's plan changes from `feed` from now on: after the last batch of each call
    /// ([`GpuSearcher::search_batch_in`]) is submitted, the searcher applies a plan the feed has ready
    /// behind the batches in flight (a cached searcher only).
    pub fn set_feed(&mut self, feed: Option<Arc<dyn PlanFeed>>) -> Result<(), GpuError> {
        self.feed = feed.filter(|_| self.caches());
        if self.feed.is_some() {
            // A change of a few hundred lists (up to 314 MiB at a quarter of the 25M collection) fits
            // a quarter of the cache: copied without the GPU's thread waiting for the batches in
            // flight, where through 64 MiB it waited for them, then gathered and copied the rest
            // with the GPU idle.
            let bytes = (self.dev.cache_capacity().bytes() / 4).clamp(64 << 20, 1 << 30);
            self.gpu.ctx.bind_to_thread()?;
            // Without that much pinned memory, changes go through the buffer there is.
            self.dev.reserve_bounce(&self.gpu, bytes as usize / 4)?;
        }
        Ok(())
    }

    /// Applies the feed's plan now, if one is ready, and waits for its copies: between calls, from
    /// any thread (the feed otherwise applies its plans behind the last batch of a call, and never
    /// waits for one being made). Nothing is in flight then, so the next call's first batches do not
    /// stall behind the copies.
    pub fn apply_ready_plan(&mut self) {
        if self.feed.is_some() && self.gpu.ctx.bind_to_thread().is_ok() {
            self.apply_fed_plan(0, true);
        }
    }

    /// Applies the feed's plan, if one is ready, while the batches in flight compute: its copies are
    /// queued on slot `s`'s stream behind the batch just submitted there and wait for the other
    /// slots' batches, whose kernels read the cache as it was; the host meanwhile places the lists
    /// and gathers their blocks. With `wait`, the host then waits for the copies
    /// ([`GpuSearcher::apply_on`]).
    pub(super) fn apply_fed_plan(&mut self, s: usize, wait: bool) {
        let Some(feed) = self.feed.clone() else {
            return;
        };
        let Some(plan) = feed.ready() else {
            return;
        };
        let started = Instant::now();
        let result = self.apply_on(s, &plan, wait);
        feed.applied(plan, result.as_ref().copied(), started.elapsed().as_secs_f64());
    }
}
