//! A call's requests of one mode and k through the pipeline: cut into batches by size and staging
//! space, each prepared (descriptors) and gathered (staged blocks) on the host while the slot's last
//! batch may still compute, then copied and launched on the slot's stream, asynchronously.

use std::borrow::Borrow;
use std::sync::Arc;
use std::time::Instant;

use cudarc::driver::CudaStream;
use warpsearch_query::{DocRange, Mode, Ranking, Request};

use super::calls::CallId;
use super::collect::query_tasks;
use super::slot::InFlight;
use super::GpuSearcher;
use crate::abi::{BatchArgs, IndexArgs, COUNT_PENDING, MODE_AND, MODE_OR};
use crate::batch::{batches, map_all, prepare, Prepared, Split, WaveCut};
use crate::driver::{self, ptr};
use crate::error::GpuError;
use crate::launch;
use crate::stage::{self, Stage};

impl GpuSearcher {
    /// Sends `which` of call `call` in `mode` at `k` through the pipeline (their answers come back as
    /// slots are reused, or by [`GpuSearcher::drain`]); with `last` (the call's last run), applies the
    /// plan feed's ready plan behind its last batch.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn run<R: Borrow<Request> + Sync>(
        &mut self,
        call: CallId,
        mode: Mode,
        k: usize,
        requests: &[R],
        ranges: Option<&[DocRange]>,
        which: &[usize],
        last: bool,
    ) {
        let nslots = self.slots.len();
        // Batches are formed at the coarsest split; an AND batch is then cut finer (Split::for_costs).
        let g = &self.gopts;
        let split = Split {
            cost: match mode {
                Mode::Or => g.split_cost,
                _ if g.split_waves == 0 => g.and_split_cost,
                _ => g.split_cost.max(g.and_split_cost),
            },
            max_parts: self.gopts.max_parts,
            or_cost: mode == Mode::Or,
        };
        let index = self.scorer.index().clone();
        let num_docs = index.num_docs();
        let range = |i: usize| -> (u32, u32) {
            let last = num_docs.saturating_sub(1);
            ranges.map_or((0, last), |r| (r[i].first, r[i].last.min(last)))
        };
        let cap = self.dev.stage_capacity();
        let caches = self.caches();
        let need = |i: usize| {
            // With the whole index on the device nothing is staged (and looking that up term by term
            // cost the dispatcher a cache miss a term, serially, every batch).
            if !caches {
                return Vec::new();
            }
            let (lo, hi) = range(i);
            stage::spans(
                &index,
                self.dev.residency(),
                &requests[i].borrow().query.terms,
                lo,
                hi,
            )
        };
        // Each query's cost reads its terms' records (a cache miss each in a large dictionary), once
        // for the batches, their cut and their descriptors.
        let parallel = self.gopts.parallel_host || self.host_pool.is_some();
        let costed = Instant::now();
        let mut costs = vec![0; requests.len()];
        let found = on_host(&self.host_pool, || {
            map_all(which, parallel, |&i| {
                split.cost(&index, &requests[i].borrow().query)
            })
        });
        for (&i, c) in which.iter().zip(found) {
            costs[i] = c;
        }
        self.stats.prepare_ms += costed.elapsed().as_secs_f64() * 1e3;
        let chunks = batches(&index, &costs, which, split, self.gopts.batch_size, cap, need);
        for (b, chunk) in chunks.iter().enumerate() {
            let chunk = &chunk[..];
            let s = self.pick_slot();
            self.next_slot = (s + 1) % nslots;
            // The batch is prepared and its blocks gathered while the slot's last batch may still
            // compute; only its copies and kernel wait for that batch's answers to be collected. (So
            // the host's work no longer waits for the batch before last: with two slots it did, and a
            // batch's host work, copies and kernel ran one after another, half of them overlapped.)
            let started = Instant::now();
            let mut stage = Stage::new(self.dev.stage_base(s), cap);
            let (scorer, residency) = (&self.scorer, self.dev.residency());
            let (ctas, floor, task_cost) = match mode {
                Mode::Or => (self.grid_or, self.gopts.or_split_floor, self.gopts.or_task_cost),
                _ => (self.grid_and, self.gopts.and_split_cost, 0),
            };
            let cut = WaveCut {
                ctas,
                waves: self.gopts.split_waves,
                floor,
                max_parts: self.gopts.wave_parts,
                task_cost,
            };
            let size = self.batch_size();
            let mut split = split;
            let prepared = match on_host(&self.host_pool, || {
                split = split.for_costs(&index, &costs, chunk, cut, size);
                prepare(
                    scorer, residency, requests, &costs, chunk, split, ranges, &mut stage, parallel,
                )
            }) {
                Ok(p) => p,
                Err(e) => {
                    let why = e.to_string();
                    self.fail(call, chunk, |n| {
                        format!("a GPU batch of {n} queries failed ({why})")
                    });
                    continue;
                }
            };
            self.stats.prepare_ms += started.elapsed().as_secs_f64() * 1e3;
            self.stats.cached_blocks += stage.cached_blocks;
            self.stats.staged_blocks += stage.staged_blocks;
            let gathered = self.gather(s, &stage);
            self.harvest(s);
            if let Err(e) = gathered.and_then(|_| self.submit(s, &prepared, &stage, mode, k)) {
                self.fail(call, chunk, |n| {
                    format!("a GPU batch of {n} queries failed ({e})")
                });
                continue;
            }
            let staged = stage.used().bytes();
            self.calls.batch_sent(call);
            // and-or's answers may still change (its OR pass), so they wait for the batch.
            let pending = match self.mapped_outputs(s) {
                Some(_) => query_tasks(&prepared.slots)
                    .filter(|&(t, _)| requests[prepared.slots[t]].borrow().mode != Mode::AndOr)
                    .collect(),
                None => Vec::new(),
            };
            let early = vec![false; prepared.slots.len()];
            self.slots[s].in_flight = Some(InFlight {
                call,
                prepared,
                started,
                k,
                staged,
                spans: stage.spans.len(),
                split_cost: split.cost,
                blocks: (stage.cached_blocks, stage.staged_blocks),
                pending,
                early,
            });
            if last && b + 1 == chunks.len() {
                // The call's last batch: a plan ready now changes the cache while it computes. (Not
                // earlier: the caller chose each query's docID ranges for the cache as it was, and a
                // term is read from the cache only where its cached prefix covers a whole range.)
                self.apply_fed_plan(s, false);
            }
        }
    }

    /// Where slot `s`'s kernel writes the call's answers in host memory: the slot's mapped buffers, in
    /// a call that may be answered early (None: into device memory, copied back after the kernel).
    fn mapped_outputs(&self, s: usize) -> Option<[u64; 3]> {
        self.slots[s].mapped.filter(|_| self.early_call)
    }

    /// The slot the next batch goes to: the next in turn, or without a list cache the first idle one
    /// from it (a batch then never waits for a busy slot while another is free). With a cache the
    /// slots are taken in turn, the order its staging regions and plan changes are made for.
    fn pick_slot(&self) -> usize {
        let n = self.slots.len();
        if self.caches() {
            return self.next_slot;
        }
        (0..n)
            .map(|i| (self.next_slot + i) % n)
            .find(|&s| self.slots[s].in_flight.is_none())
            .unwrap_or(self.next_slot)
    }

    fn index_args(&self, stream: &CudaStream) -> IndexArgs {
        let options = self.scorer.options();
        IndexArgs {
            norms: ptr(&self.norms, stream),
            prior: self.prior.as_ref().map_or(0, |p| ptr(p, stream)),
            gs: self.gs.as_ref().map_or(0, |g| ptr(g, stream)),
            k1p1: options.bm25.k1 + 1.0,
            prior_max: match options.ranking {
                Ranking::Bm25 => 0.0,
                Ranking::Bm25Static { alpha } => alpha,
            },
            ..self.dev.args(stream)
        }
    }

    /// Gathers a batch's staged blocks from the index into slot `s`'s pinned buffer, once the copies of
    /// the slot's last batch, which read that buffer, are done (its kernel may still run).
    fn gather(&mut self, s: usize, stage: &Stage) -> Result<(), GpuError> {
        if stage.used().blocks == 0 {
            return Ok(());
        }
        let slot = &mut self.slots[s];
        if slot.in_flight.is_some() {
            // Recorded after the last batch's copies.
            slot.events[1].synchronize()?;
        }
        let gathered = Instant::now();
        let index = self.scorer.index();
        let h = &mut slot.h_stage;
        // On all cores (the batch's largest host cost), or the host pool's.
        let words = self.registered.is_err();
        on_host(&self.host_pool, || stage.fill(index, h.as_mut_slice(), words));
        self.stats.stage_ms += gathered.elapsed().as_secs_f64() * 1e3;
        Ok(())
    }

    /// Copies a batch's staged blocks ([`GpuSearcher::gather`]) and descriptors and launches it on slot
    /// `s`'s stream (all asynchronous).
    fn submit(
        &mut self,
        s: usize,
        p: &Prepared,
        stage: &Stage,
        mode: Mode,
        k: usize,
    ) -> Result<(), GpuError> {
        if self.gopts.fail_batches {
            return Err(GpuError::Failed("failure injected for a test".into()));
        }
        let qbytes: &[u8] = bytemuck::cast_slice(&p.queries);
        let tbytes: &[u8] = bytemuck::cast_slice(&p.terms);
        // Queries, terms (8-byte aligned) and the shared keys, zeroed by the same copy.
        let tat = p.terms_at();
        let kat = tat + tbytes.len();
        let total = p.bytes();
        let gpu = self.gpu.clone();
        self.slots[s].reserve_desc(&gpu, total)?;
        let ix = self.index_args(&self.slots[s].stream);
        let (grid, smem) = match mode {
            Mode::And => (self.grid_and, self.smem_and),
            _ => (self.grid_or, self.smem_or),
        };
        let mapped = self.mapped_outputs(s);
        let slot = &mut self.slots[s];
        let n = p.queries.len();
        let h = slot.h_desc.as_mut_slice();
        h[..qbytes.len()].copy_from_slice(qbytes);
        h[qbytes.len()..tat].fill(0);
        h[tat..kat].copy_from_slice(tbytes);
        h[kat..total].fill(0);
        let desc = ptr(&slot.desc, &slot.stream);
        let tptr = desc + tat as u64;
        let ba = BatchArgs {
            queries: desc,
            terms: tptr,
            num_queries: n as u32,
            k: k as u32,
            mode: if mode == Mode::And { MODE_AND } else { MODE_OR },
            early: self.early as u32,
            window: self.gopts.window,
            small_or: self.small_or,
            merge_ratio: self.gopts.merge_ratio,
            answers_mapped: mapped.is_some() as u32,
            next_query: ptr(&slot.counter, &slot.stream),
            out_doc: mapped.map_or_else(|| ptr(&slot.out_doc, &slot.stream), |m| m[0]),
            out_score: mapped.map_or_else(|| ptr(&slot.out_score, &slot.stream), |m| m[1]),
            out_count: mapped.map_or_else(|| ptr(&slot.out_count, &slot.stream), |m| m[2]),
            scratch_doc: ptr(&slot.scratch_doc, &slot.stream),
            scratch_tf: ptr(&slot.scratch_tf, &slot.stream),
            topbuf: ptr(&slot.topbuf, &slot.stream),
            phase_cycles: if self.gopts.instrument {
                ptr(&slot.phases, &slot.stream)
            } else {
                0
            },
            shared_keys: desc + kat as u64,
            task_ns: if self.gopts.instrument {
                ptr(&slot.task_ns, &slot.stream)
            } else {
                0
            },
        };
        let st = &slot.stream;
        // The staged blocks are in the slot's pinned buffer ([`GpuSearcher::gather`]).
        slot.events[0].record(st)?;
        if stage.used().blocks > 0 {
            let (w, b) = self.dev.stage_base(s);
            let bytes = stage::copy(st, &slot.h_stage, stage, self.registered.as_ref().ok(), &ix, w, b)?;
            self.stats.staged_bytes += bytes;
            self.stats.h2d_bytes += bytes;
        }
        driver::copy_to_device(st, desc, &slot.h_desc.as_slice()[..total])?;
        // The work counter is reset by the copy engine (a memset would wait for free SMs).
        driver::copy_to_device(st, ba.next_query, slot.h_zero.as_slice())?;
        if self.gopts.instrument {
            driver::memset_async(st, ba.phase_cycles, 0, slot.phases.len() * 8)?;
        }
        slot.events[1].record(st)?;
        if mapped.is_some() {
            // The slot's last batch is collected, so the host alone touches its counts until launch.
            slot.h_count.as_mut_slice()[..n].fill(COUNT_PENDING);
        }
        launch::search_batch(&gpu, st, grid, smem, &ix, &ba)?;
        slot.events[2].record(st)?;
        if mapped.is_none() {
            driver::copy_to_host(st, &mut slot.h_count.as_mut_slice()[..n], ba.out_count)?;
            driver::copy_to_host(st, &mut slot.h_doc.as_mut_slice()[..n * k], ba.out_doc)?;
            driver::copy_to_host(st, &mut slot.h_score.as_mut_slice()[..n * k], ba.out_score)?;
        }
        if self.gopts.instrument {
            let c = slot.phases.len();
            driver::copy_to_host(st, &mut slot.h_phases.as_mut_slice()[..c], ba.phase_cycles)?;
            driver::copy_to_host(st, &mut slot.h_task_ns.as_mut_slice()[..2 * n], ba.task_ns)?;
        }
        slot.events[3].record(st)?;
        self.stats.batches += 1;
        self.stats.queries += n as u64;
        self.stats.h2d_bytes += total as u64;
        self.stats.d2h_bytes += (n * 4 + n * k * 8) as u64;
        Ok(())
    }
}

/// Runs `f` in `pool` (its parallel iterators on the pool's threads), or where it is called.
fn on_host<T: Send>(pool: &Option<Arc<rayon::ThreadPool>>, f: impl FnOnce() -> T + Send) -> T {
    match pool {
        Some(p) => p.install(f),
        None => f(),
    }
}
