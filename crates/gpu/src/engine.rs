//! The GPU searcher: batches of queries through the query kernel (`search_and`, `search_or`), two
//! pipeline slots (a stream, pinned host buffers and device buffers each) so that batch i+1 is prepared
//! and copied while batch i computes. A batch or query the GPU fails is returned as a typed error for
//! the caller (the engine) to answer elsewhere; this module never prints.

use std::borrow::Borrow;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cudarc::driver::{CudaSlice, CudaStream};
use warpsearch_query::{
    merge_top_k, Algorithm, Answer, DocRange, Mode, Prior, Ranking, Request, Scored, Scorer,
};

use crate::abi::{BatchArgs, IndexArgs, COUNT_FAILED, MODE_AND, MODE_OR, PHASE_COUNTERS, PH_BLOCKS};
use crate::batch::{batches, prepare, Prepared, Split};
use crate::cache::{CachePlan, Capacity, PlanFeed};
use crate::calls::{CallId, Calls};
use crate::device::{
    and_shared_bytes, or_shared_bytes, or_window_bytes, threads, MAX_K, MAX_SMALL_OR, MAX_WINDOW,
};
use crate::driver::{self, ptr};
use crate::launch;
use crate::options::{CacheBudget, GpuOptions, DEFAULT_CACHE_SLOTS};
use crate::registered::Registered;
use crate::residency::{mib, Applied, DeviceIndex, Residency};
use crate::slot::{InFlight, Slot};
use crate::stage::{self, Stage};
use crate::stats::GpuStats;
use crate::trace::Epoch;
use crate::view::CacheView;
use crate::{Gpu, GpuError};

/// Exact batched search on the GPU.
pub struct GpuSearcher {
    gpu: Arc<Gpu>,
    scorer: Arc<Scorer>,
    gopts: GpuOptions,
    dev: DeviceIndex,
    norms: CudaSlice<f32>,
    prior: Option<CudaSlice<f32>>,
    /// Global scores, uploaded only when queries stop early.
    gs: Option<CudaSlice<f32>>,
    early: bool,
    slots: Vec<Slot>,
    grid_and: u32,
    grid_or: u32,
    smem_or: u32,
    smem_and: u32,
    small_or: u32,
    stats: GpuStats,
    /// With `WARPSEARCH_CACHE_TRACE`: print a line per batch, with its events' and the host's times after
    /// this epoch's event (recorded on the first slot's stream when the searcher was made) and instant.
    trace: Option<Epoch>,
    /// Plan changes to make while batches run ([`GpuSearcher::set_feed`]).
    feed: Option<Arc<dyn PlanFeed>>,
    /// Threads of its own for a batch's host work ([`GpuSearcher::set_host_pool`]).
    host_pool: Option<Arc<rayon::ThreadPool>>,
    /// The calls whose answers are not yet taken back.
    calls: Calls,
    /// The slot the next kernel batch goes to (round robin, across calls).
    next_slot: usize,
    /// The index's words, page-locked for staging copies straight from them (a cached searcher,
    /// where the driver allows it); else `Err` with why, and staged words are gathered on the host.
    registered: Result<Registered, String>,
}

impl Drop for GpuSearcher {
    fn drop(&mut self) {
        // Copies may still read pinned or registered host memory: finish them before it is freed.
        for slot in &self.slots {
            let _ = slot.stream.synchronize();
        }
    }
}

impl GpuSearcher {
    /// Uploads the scorer's index and prepares the pipeline; an error says why the GPU cannot serve
    /// these options (`max_k` above 1,000, a CPU-only algorithm, the memory budget, a driver failure).
    pub fn new(gpu: Arc<Gpu>, scorer: Arc<Scorer>, gopts: GpuOptions) -> Result<Self, GpuError> {
        let index = scorer.index().clone();
        let options = *scorer.options();
        if gopts.max_k == 0 || gopts.max_k > MAX_K {
            return Err(GpuError::Unsupported(format!(
                "k = {} is above the GPU engine's limit of {MAX_K}: use --backend cpu",
                gopts.max_k
            )));
        }
        if !matches!(options.algorithm, Algorithm::Auto | Algorithm::EarlyTermination) {
            return Err(GpuError::Unsupported(format!(
                "--algorithm {} runs on the CPU only: use --backend cpu, or --algorithm auto",
                options.algorithm.name()
            )));
        }
        if gopts.window != 0
            && (!(256..=MAX_WINDOW).contains(&gopts.window) || !gopts.window.is_power_of_two())
        {
            return Err(GpuError::Unsupported(format!(
                "GPU window {} must be a power of two from 256 to {MAX_WINDOW} (or 0: the largest that costs no resident CTAs)",
                gopts.window
            )));
        }
        if index.block_metas().len() > u32::MAX as usize {
            return Err(GpuError::Unsupported(
                "the index has more than 2^32 blocks".into(),
            ));
        }
        let batch_size = gopts.batch_size.max(1);
        let codec = index.codec();
        let gopts = GpuOptions {
            batch_size,
            // A query's parts go in one batch.
            max_parts: gopts.max_parts.clamp(1, batch_size as u32),
            window: match gopts.window {
                0 => gpu.default_or_window(codec)?,
                w => w,
            },
            ..gopts
        };
        let init = gpu.ctx.new_stream()?;
        let (free, _) = gpu.memory_info()?;
        let budget = gopts.memory_budget.unwrap_or(free / 10 * 9);
        let nslots = match gopts.cache {
            Some(CacheBudget { slots: 0, .. }) => DEFAULT_CACHE_SLOTS,
            Some(c) => c.slots.max(2),
            None => 2,
        };
        let dev = match gopts.cache {
            None => DeviceIndex::upload(&gpu, &init, &index, budget)?,
            Some(c) => {
                if c.cache_bytes + c.stage_bytes > budget as u64 {
                    return Err(GpuError::Unsupported(format!(
                        "the GPU cache ({:.1} MiB) and staging buffers ({:.1} MiB) exceed the budget of \
                         {:.1} MiB: lower them or raise --gpu-memory",
                        mib(c.cache_bytes as usize),
                        mib(c.stage_bytes as usize),
                        mib(budget)
                    )));
                }
                let stage = Capacity::of_bytes(&index, c.stage_bytes / nslots as u64);
                let cache = c
                    .shape
                    .unwrap_or_else(|| Capacity::of_bytes(&index, c.cache_bytes));
                DeviceIndex::with_cache(
                    &gpu,
                    &init,
                    &index,
                    cache,
                    stage,
                    nslots,
                    &CachePlan::empty(&index),
                )?
            }
        };
        let norms = init.memcpy_stod(nonempty(scorer.norms()))?;
        let prior = match options.ranking {
            Ranking::Bm25 => None,
            Ranking::Bm25Static { alpha } => {
                let p = Prior::new(&index, alpha)?;
                let v: Vec<f32> = (0..index.num_docs()).map(|d| p.of(d)).collect();
                Some(init.memcpy_stod(nonempty(&v))?)
            }
        };
        let early = scorer.early_termination();
        let gs = match (early, index.global_scores()) {
            (true, Some(g)) => Some(init.memcpy_stod(nonempty(g))?),
            _ => None,
        };
        init.synchronize()?;
        let occupancy = |kernel: &cudarc::driver::CudaFunction, smem: u32| -> Result<u32, GpuError> {
            let per_sm =
                kernel.occupancy_max_active_blocks_per_multiprocessor(threads(), smem as usize, None)?;
            Ok(per_sm.max(1) * gpu.multiprocessors())
        };
        let smem_or = or_shared_bytes(gopts.window, codec);
        let smem_and = and_shared_bytes(codec);
        let grid_and = occupancy(&gpu.search_and, smem_and)?;
        let grid_or = occupancy(&gpu.search_or, smem_or)?;
        let grid = grid_and.max(grid_or);
        let slots = (0..nslots)
            .map(|_| Slot::new(&gpu, batch_size, gopts.max_k, grid, dev.stage_capacity()))
            .collect::<Result<Vec<_>, _>>()?;
        let trace = match crate::cache::tracing() {
            true => Some(Epoch::new(&gpu, &slots[0].stream)?),
            false => None,
        };
        let registered = Registered::for_staging(&gpu, &index, dev.stage_capacity().blocks > 0);
        Ok(GpuSearcher {
            registered,
            gpu,
            scorer,
            gopts,
            dev,
            norms,
            prior,
            gs,
            early,
            slots,
            grid_and,
            grid_or,
            smem_or,
            smem_and,
            // The sort path's arrays take the window's part (the decoders' scratch is in use meanwhile).
            small_or: small_or_limit(gopts.small_or, or_window_bytes(gopts.window)),
            stats: GpuStats::default(),
            trace,
            feed: None,
            host_pool: None,
            calls: Calls::default(),
            next_slot: 0,
        })
    }

    /// The scorer (index and options).
    pub fn scorer(&self) -> &Arc<Scorer> {
        &self.scorer
    }

    /// The GPU.
    pub fn gpu(&self) -> &Gpu {
        &self.gpu
    }

    /// The GPU, shared.
    pub(crate) fn shared_gpu(&self) -> Arc<Gpu> {
        self.gpu.clone()
    }

    /// Device memory the index takes, in bytes.
    pub fn index_bytes(&self) -> usize {
        self.dev.bytes()
    }

    /// Where the lists are on the device.
    pub fn residency(&self) -> &Residency {
        self.dev.residency()
    }

    /// Whether part of the index is cached (else all of it is on the device).
    pub fn caches(&self) -> bool {
        self.gopts.cache.is_some()
    }

    /// The list cache's space (everything's when the whole index is uploaded).
    pub fn cache_capacity(&self) -> Capacity {
        self.dev.cache_capacity()
    }

    /// One batch's staging space.
    pub fn stage_capacity(&self) -> Capacity {
        self.dev.stage_capacity()
    }

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

    /// Runs a batch's host work (its descriptors and the gather of its staged blocks) on `pool`'s
    /// threads, in parallel, instead of rayon's global pool (or this thread, without
    /// [`GpuOptions::parallel_host`]): the hybrid gives the GPU cores of its own this way, where its
    /// CPU workers keep the others busy.
    pub fn set_host_pool(&mut self, pool: Arc<rayon::ThreadPool>) {
        self.host_pool = Some(pool);
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
    fn apply_fed_plan(&mut self, s: usize, wait: bool) {
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

    /// What the cache holds and a batch's staging space, for deciding on any thread where each
    /// query's GPU part ends ([`CacheView::cover`], [`CacheView::fits_staging`]).
    pub fn view(&self) -> CacheView<'_> {
        CacheView {
            index: self.scorer.index(),
            residency: self.dev.residency(),
            stage: self.dev.stage_capacity(),
            caches: self.caches(),
        }
    }

    /// Queries per kernel launch.
    pub fn batch_size(&self) -> usize {
        self.gopts.batch_size
    }

    /// Largest k a request may ask for.
    pub fn max_k(&self) -> usize {
        self.gopts.max_k
    }

    /// Persistent CTAs launched per AND and per OR batch.
    pub fn grid(&self) -> (u32, u32) {
        (self.grid_and, self.grid_or)
    }

    /// Whether `bm25-static` queries stop early on the global-score order.
    pub fn early_termination(&self) -> bool {
        self.early
    }

    /// The counters so far, resetting them.
    pub fn take_stats(&mut self) -> GpuStats {
        std::mem::take(&mut self.stats)
    }

    /// One request (a batch of one).
    pub fn search(&mut self, request: &Request) -> Result<Vec<Scored>, GpuError> {
        let mut answers = self.search_batch(std::slice::from_ref(request));
        answers.pop().expect("one answer per query").map(|a| a.hits)
    }

    /// Answers every request, in order; a request the GPU could not answer (a failed batch, a
    /// malformed block, k above [`GpuSearcher::max_k`]) is an error for the caller to answer elsewhere.
    /// Latency of a GPU query is the time from its batch's preparation to its results being on the host.
    pub fn search_batch(&mut self, requests: &[Request]) -> Vec<Result<Answer, GpuError>> {
        self.search_batch_in(requests, None)
    }

    /// [`GpuSearcher::search_batch`] with request `i` restricted to the documents of `ranges[i]` (a
    /// query split between processors): the top k of that range, to merge with the other parts'.
    pub fn search_batch_in<R: Borrow<Request> + Sync>(
        &mut self,
        requests: &[R],
        ranges: Option<&[DocRange]>,
    ) -> Vec<Result<Answer, GpuError>> {
        let call = self.submit_in(requests, ranges);
        self.wait(call)
    }

    /// Hands over the requests of [`GpuSearcher::search_batch_in`] and returns once they are on the GPU
    /// (and-or's queries once answered: their OR pass depends on their AND pass), collecting the
    /// batches of earlier calls that finished meanwhile. Take the answers back with
    /// [`GpuSearcher::take_done`] or [`GpuSearcher::wait`]: a caller that prepares its next call while
    /// this one computes keeps the GPU busy while the host works.
    pub fn submit_in<R: Borrow<Request> + Sync>(
        &mut self,
        requests: &[R],
        ranges: Option<&[DocRange]>,
    ) -> CallId {
        if let Some(r) = ranges {
            assert_eq!(r.len(), requests.len(), "one range per request");
        }
        let call = self.calls.open(requests.len());
        let num_docs = self.scorer.index().num_docs();
        // The raw driver calls of `launch` need the context current on this thread (the searcher may
        // have moved to another thread since it was made).
        if let Err(e) = self.gpu.ctx.bind_to_thread() {
            let why = format!("the GPU context cannot be used on this thread ({e})");
            for i in 0..requests.len() {
                self.calls.answer(call, i, Err(GpuError::Failed(why.clone())));
            }
            self.calls.close(call);
            return call;
        }
        let empty = |i: usize| ranges.is_some_and(|r| r[i].is_empty() || r[i].first >= num_docs);
        // One launch serves one mode and one k: group the requests (and-or starts with its AND pass).
        let mut groups: BTreeMap<(bool, usize), Vec<usize>> = BTreeMap::new();
        for (i, r) in requests.iter().enumerate() {
            let r = r.borrow();
            let first = if r.mode == Mode::Or { Mode::Or } else { Mode::And };
            let known = if let Err(e) = self.scorer.check(r) {
                Err(GpuError::Index(e))
            } else if r.k > self.gopts.max_k {
                Err(GpuError::Unsupported(format!(
                    "k = {} is above this GPU searcher's limit of {}",
                    r.k, self.gopts.max_k
                )))
            } else if self.caches() && !self.view().fits_staging(r, ranges.map(|x| x[i])) {
                Err(GpuError::Unsupported(
                    "the blocks this query needs outside the GPU cache exceed a batch's staging space".into(),
                ))
            } else if r.query.matches_nothing(first) || empty(i) {
                // and-or sends it to the OR pass below if it has known terms.
                Ok(Answer {
                    hits: Vec::new(),
                    latency: Duration::ZERO,
                })
            } else {
                groups.entry((first == Mode::Or, r.k)).or_default().push(i);
                continue;
            };
            self.calls.answer(call, i, known);
        }
        // The cache may change behind the call's last run: and-or's OR pass, if any, comes after.
        let andor = requests.iter().any(|r| r.borrow().mode == Mode::AndOr);
        for (g, ((or, k), which)) in groups.iter().enumerate() {
            let mode = if *or { Mode::Or } else { Mode::And };
            let last = !andor && g + 1 == groups.len();
            self.run(call, mode, *k, requests, ranges, which, last);
        }
        if andor {
            self.and_or_pass(call, requests, ranges, empty);
        }
        self.calls.close(call);
        call
    }

    /// and-or: the OR pass of call `call`'s queries whose AND found fewer than k, once it is back.
    fn and_or_pass<R: Borrow<Request> + Sync>(
        &mut self,
        call: CallId,
        requests: &[R],
        ranges: Option<&[DocRange]>,
        empty: impl Fn(usize) -> bool,
    ) {
        self.drain(call);
        let mut again: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
        for (i, r) in requests.iter().enumerate() {
            let r = r.borrow();
            if r.mode == Mode::AndOr
                && !r.query.matches_nothing(Mode::Or)
                && !empty(i)
                && matches!(self.calls.answered(call, i), Some(Ok(a)) if a.hits.len() < r.k)
            {
                again.entry(r.k).or_default().push(i);
            }
        }
        for (g, (k, which)) in again.iter().enumerate() {
            let before: Vec<Duration> = which
                .iter()
                .map(|&i| match self.calls.answered(call, i) {
                    Some(Ok(a)) => a.latency,
                    _ => Duration::ZERO,
                })
                .collect();
            self.run(call, Mode::Or, *k, requests, ranges, which, g + 1 == again.len());
            self.drain(call);
            for (&i, d) in which.iter().zip(before) {
                if let Some(Ok(a)) = self.calls.answer_mut(call, i) {
                    a.latency += d;
                }
            }
        }
    }

    /// The answers of call `call`, in request order, once its batches are back (waiting for them).
    pub fn wait(&mut self, call: CallId) -> Vec<Result<Answer, GpuError>> {
        self.drain(call);
        self.calls.take(call)
    }

    /// The oldest call not yet taken back, if all its answers are in (without waiting).
    pub fn take_done(&mut self) -> Option<(CallId, Vec<Result<Answer, GpuError>>)> {
        self.calls.take_done()
    }

    /// Collects every batch of call `call` still on the GPU (waiting for each).
    fn drain(&mut self, call: CallId) {
        for s in 0..self.slots.len() {
            if self.slots[s].in_flight.as_ref().is_some_and(|j| j.call == call) {
                self.harvest(s);
            }
        }
    }

    /// Sends `which` of call `call` in `mode` at `k` through the pipeline (their answers come back as
    /// slots are reused, or by [`GpuSearcher::drain`]); with `last` (the call's last run), applies the
    /// plan feed's ready plan behind its last batch.
    #[allow(clippy::too_many_arguments)]
    fn run<R: Borrow<Request> + Sync>(
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
        // Batches are formed at the coarsest split; an AND batch is then cut finer (Split::for_batch).
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
        let chunks = batches(&index, requests, which, split, self.gopts.batch_size, cap, need);
        for (b, chunk) in chunks.iter().enumerate() {
            let chunk = &chunk[..];
            let s = self.next_slot;
            self.next_slot = (s + 1) % nslots;
            // The batch is prepared and its blocks gathered while the slot's last batch may still
            // compute; only its copies and kernel wait for that batch's answers to be collected. (So
            // the host's work no longer waits for the batch before last: with two slots it did, and a
            // batch's host work, copies and kernel ran one after another, half of them overlapped.)
            let started = Instant::now();
            let mut stage = Stage::new(self.dev.stage_base(s), cap);
            let parallel = self.gopts.parallel_host || self.host_pool.is_some();
            let (scorer, residency) = (&self.scorer, self.dev.residency());
            let (grid, waves, floor, size) = (
                self.grid_and,
                self.gopts.split_waves,
                self.gopts.and_split_cost,
                self.batch_size(),
            );
            let mut split = split;
            let prepared = match on_host(&self.host_pool, || {
                split = split.for_batch(&index, requests, chunk, grid, waves, floor, size, parallel);
                prepare(
                    scorer, residency, requests, chunk, split, ranges, &mut stage, parallel,
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
            self.slots[s].in_flight = Some(InFlight {
                call,
                prepared,
                started,
                k,
                staged,
                spans: stage.spans.len(),
                split_cost: split.cost,
                blocks: (stage.cached_blocks, stage.staged_blocks),
            });
            if last && b + 1 == chunks.len() {
                // The call's last batch: a plan ready now changes the cache while it computes. (Not
                // earlier: the caller chose each query's docID ranges for the cache as it was, and a
                // term is read from the cache only where its cached prefix covers a whole range.)
                self.apply_fed_plan(s, false);
            }
        }
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
        let total = qbytes.len() + tbytes.len();
        let gpu = self.gpu.clone();
        self.slots[s].reserve_desc(&gpu, total)?;
        let ix = self.index_args(&self.slots[s].stream);
        let (grid, smem) = match mode {
            Mode::And => (self.grid_and, self.smem_and),
            _ => (self.grid_or, self.smem_or),
        };
        let slot = &mut self.slots[s];
        let n = p.queries.len();
        let h = slot.h_desc.as_mut_slice();
        h[..qbytes.len()].copy_from_slice(qbytes);
        h[qbytes.len()..total].copy_from_slice(tbytes);
        let desc = ptr(&slot.desc, &slot.stream);
        let tptr = desc + qbytes.len() as u64;
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
            _pad: 0,
            next_query: ptr(&slot.counter, &slot.stream),
            out_doc: ptr(&slot.out_doc, &slot.stream),
            out_score: ptr(&slot.out_score, &slot.stream),
            out_count: ptr(&slot.out_count, &slot.stream),
            scratch_doc: ptr(&slot.scratch_doc, &slot.stream),
            scratch_tf: ptr(&slot.scratch_tf, &slot.stream),
            topbuf: ptr(&slot.topbuf, &slot.stream),
            phase_cycles: if self.gopts.instrument {
                ptr(&slot.phases, &slot.stream)
            } else {
                0
            },
        };
        debug_assert_eq!(qbytes.len() % 8, 0, "TermDesc needs 8-byte alignment");
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
        launch::search_batch(&gpu, st, grid, smem, &ix, &ba)?;
        slot.events[2].record(st)?;
        driver::copy_to_host(st, &mut slot.h_count.as_mut_slice()[..n], ba.out_count)?;
        driver::copy_to_host(st, &mut slot.h_doc.as_mut_slice()[..n * k], ba.out_doc)?;
        driver::copy_to_host(st, &mut slot.h_score.as_mut_slice()[..n * k], ba.out_score)?;
        if self.gopts.instrument {
            let c = slot.phases.len();
            driver::copy_to_host(st, &mut slot.h_phases.as_mut_slice()[..c], ba.phase_cycles)?;
        }
        slot.events[3].record(st)?;
        self.stats.batches += 1;
        self.stats.queries += n as u64;
        self.stats.h2d_bytes += total as u64;
        self.stats.d2h_bytes += (n * 4 + n * k * 8) as u64;
        Ok(())
    }

    /// Waits for slot `s`'s batch, if any, and turns its results into answers.
    fn harvest(&mut self, s: usize) {
        let Some(job) = self.slots[s].in_flight.take() else {
            return;
        };
        let call = job.call;
        self.collect(s, job);
        self.calls.batch_back(call);
    }

    /// Writes the answers of `job`, the batch slot `s` ran (waiting for it).
    fn collect(&mut self, s: usize, job: InFlight) {
        let slot = &self.slots[s];
        let wait = Instant::now();
        let synced = slot.events[3].synchronize();
        self.stats.wait_ms += wait.elapsed().as_secs_f64() * 1e3;
        let waited = synced.and_then(|_| {
            let t = |a: usize, b: usize| slot.events[a].elapsed_ms(&slot.events[b]).map(|x| x as f64);
            Ok((t(0, 1)?, t(1, 2)?, t(2, 3)?))
        });
        let p = &job.prepared;
        let (h2d, kernel, d2h) = match waited {
            Ok(t) => t,
            Err(e) => {
                // The parts of a query cut into docID ranges are adjacent: one answer each.
                let mut which: Vec<usize> = p.slots.clone();
                which.dedup();
                self.fail(job.call, &which, |n| {
                    format!("a GPU batch of {n} queries failed ({e})")
                });
                return;
            }
        };
        self.stats.h2d_ms += h2d;
        self.stats.kernel_ms += kernel;
        self.stats.d2h_ms += d2h;
        if let Some(epoch) = &self.trace {
            eprintln!(
                "gpu batch: {} tasks (cut above {} postings), {:.1} MiB staged in {} spans, hit rate {:.3}; host→device {h2d:.2} ms, \
                 kernel {kernel:.2} ms, device→host {d2h:.2} ms, {:.2} ms from preparation to answers; slot {s}, {}",
                p.queries.len(),
                job.split_cost,
                job.staged as f64 / (1u64 << 20) as f64,
                job.spans,
                job.blocks.0 as f64 / (job.blocks.0 + job.blocks.1).max(1) as f64,
                job.started.elapsed().as_secs_f64() * 1e3,
                epoch.timeline(&slot.events, job.started)
            );
        }
        if self.gopts.instrument {
            let ph = slot.h_phases.as_slice();
            for cta in ph.chunks(PHASE_COUNTERS) {
                for (acc, &c) in self.stats.phase_cycles.iter_mut().zip(cta) {
                    *acc += c;
                }
                self.stats.decoded_blocks += cta[PH_BLOCKS];
            }
        }
        let latency = job.started.elapsed();
        let k = job.k;
        let (counts, docs, scores) = (
            slot.h_count.as_slice(),
            slot.h_doc.as_slice(),
            slot.h_score.as_slice(),
        );
        let mut failed = Vec::new();
        // Descriptors of one query are adjacent: its docID-range parts, whose top-k lists merge into the
        // query's (each document belongs to one part, so the merged top k is exact).
        let mut out = 0;
        while out < p.slots.len() {
            let i = p.slots[out];
            let end = out + p.slots[out..].iter().take_while(|&&j| j == i).count();
            let parts: Option<Vec<Vec<Scored>>> = (out..end)
                .map(|part| {
                    let c = counts[part];
                    (c != COUNT_FAILED && c as usize <= k).then(|| {
                        let base = part * k;
                        (0..c as usize)
                            .map(|j| Scored {
                                doc: docs[base + j],
                                score: scores[base + j],
                            })
                            .collect()
                    })
                })
                .collect();
            match parts {
                Some(mut parts) => {
                    let hits = if parts.len() == 1 {
                        parts.pop().expect("one part")
                    } else {
                        merge_top_k(&parts, k)
                    };
                    self.calls.answer(job.call, i, Ok(Answer { hits, latency }));
                }
                None => failed.push(i),
            }
            out = end;
        }
        self.fail(job.call, &failed, |n| {
            format!("{n} queries failed on the GPU (a malformed block)")
        });
    }

    /// Marks requests `which` of call `call` failed, with `why(number of queries)` as the reason.
    fn fail(&mut self, call: CallId, which: &[usize], why: impl Fn(usize) -> String) {
        if which.is_empty() {
            return;
        }
        let why = why(which.len());
        self.stats.failed_queries += which.len() as u64;
        for &i in which {
            self.calls.answer(call, i, Err(GpuError::Failed(why.clone())));
        }
    }

    /// A short description of the memory held, for logs.
    pub fn describe(&self) -> String {
        format!(
            "{}; index {:.1} MiB on the device; {} + {} CTAs (AND, OR); batch {}{}",
            self.gpu.describe(),
            mib(self.dev.bytes()),
            self.grid_and,
            self.grid_or,
            self.gopts.batch_size,
            match &self.registered {
                Ok(r) => format!(
                    "; {} slots, staged words copied from the index ({:.1} MiB page-locked)",
                    self.slots.len(),
                    mib(r.bytes())
                ),
                Err(why) if self.caches() => format!(
                    "; {} slots, staged words gathered on the host ({why})",
                    self.slots.len()
                ),
                Err(_) => String::new(),
            }
        )
    }
}
/// Runs `f` in `pool` (its parallel iterators on the pool's threads), or where it is called.
fn on_host<T: Send>(pool: &Option<Arc<rayon::ThreadPool>>, f: impl FnOnce() -> T + Send) -> T {
    match pool {
        Some(p) => p.install(f),
        None => f(),
    }
}

/// The sort path's posting limit: a power of two at most `wanted` and `MAX_SMALL_OR`, whose keys and
/// contributions (12 bytes each) fit `smem` bytes (the window's part of the OR launch's dynamic shared
/// memory).
fn small_or_limit(wanted: u32, smem: u32) -> u32 {
    let cap = wanted.min(MAX_SMALL_OR).min(smem / 12);
    if cap == 0 {
        0
    } else {
        1 << (31 - cap.leading_zeros())
    }
}

fn nonempty(v: &[f32]) -> &[f32] {
    if v.is_empty() {
        &[0.0]
    } else {
        v
    }
}
