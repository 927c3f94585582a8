//! The searcher's calls: requests handed over ([`GpuSearcher::submit_in`]: validated, grouped by mode
//! and k, sent through the pipeline), and their answers taken back, waiting or not.

use std::borrow::Borrow;
use std::collections::BTreeMap;

use warpsearch_query::{Answer, DocRange, Mode, Request, Scored};

use super::calls::CallId;
use super::GpuSearcher;
use crate::driver;
use crate::error::GpuError;

impl GpuSearcher {
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
            // and-or's empty answers go to its OR pass below if it has known terms.
            match self.answer_without_gpu(r, ranges.map(|x| x[i]), empty(i)) {
                Some(known) => self.calls.answer(call, i, known),
                None => {
                    let or = r.mode == Mode::Or;
                    groups.entry((or, r.k)).or_default().push(i);
                }
            }
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

    /// [`GpuSearcher::submit_in`] for a caller that polls ([`GpuSearcher::poll`]): each query's answer
    /// can be taken as soon as the GPU has it ([`GpuSearcher::take_early`]), where
    /// [`crate::GpuOptions::map_answers`] lets the kernel write it into host memory. A call taken back
    /// whole is better handed over by `submit_in`: its answers are copied back in bulk after each
    /// kernel, which costs the host less than reading them task by task.
    pub fn submit_polled_in<R: Borrow<Request> + Sync>(
        &mut self,
        requests: &[R],
        ranges: Option<&[DocRange]>,
    ) -> CallId {
        self.early_call = self.gopts.map_answers;
        let call = self.submit_in(requests, ranges);
        self.early_call = false;
        call
    }

    /// The answers of call `call`, in request order, once its batches are back (waiting for them).
    pub fn wait(&mut self, call: CallId) -> Vec<Result<Answer, GpuError>> {
        self.drain(call);
        self.calls.take(call)
    }

    /// The oldest call not yet taken back whose answers are all in (without waiting): with
    /// [`GpuSearcher::poll`], a short call comes back while an older, longer one still computes.
    pub fn take_done(&mut self) -> Option<(CallId, Vec<Result<Answer, GpuError>>)> {
        self.calls.take_done()
    }

    /// Collects every batch the GPU has finished, without waiting for the others, so that the calls
    /// they complete come back by [`GpuSearcher::take_done`] as soon as they are done; and, of the
    /// batches still running, answers the queries already done ([`GpuSearcher::take_early`]).
    /// Whether it found anything: a batch finished or a query answered.
    pub fn poll(&mut self) -> bool {
        // The events are queried in the searcher's context, which may not be current on this thread.
        if self.gpu.ctx.bind_to_thread().is_err() {
            return false;
        }
        let early = self.answered_early.len();
        let mut found = false;
        for s in 0..self.slots.len() {
            let slot = &self.slots[s];
            if slot.in_flight.is_none() {
                continue;
            }
            if driver::event_done(&slot.events[3]) {
                self.harvest(s);
                found = true;
            } else {
                self.answer_early(s);
            }
        }
        found || self.answered_early.len() > early
    }

    /// The answers [`GpuSearcher::poll`] found before their batches ended, not taken before: (call,
    /// request, answer). Each is also among its call's answers when the call is taken back
    /// ([`GpuSearcher::take_done`]); a caller that hands these over skips them there.
    pub fn take_early(&mut self) -> Vec<(CallId, usize, Answer)> {
        std::mem::take(&mut self.answered_early)
    }

    /// Kernel batches on the GPU now (at most [`GpuSearcher::slots`]).
    pub fn batches_in_flight(&self) -> usize {
        self.slots.iter().filter(|s| s.in_flight.is_some()).count()
    }

    /// Pipeline slots: the most kernel batches on the GPU at once.
    pub fn slots(&self) -> usize {
        self.slots.len()
    }

    /// Collects every batch of call `call` still on the GPU (waiting for each).
    pub(super) fn drain(&mut self, call: CallId) {
        for s in 0..self.slots.len() {
            if self.slots[s].in_flight.as_ref().is_some_and(|j| j.call == call) {
                self.harvest(s);
            }
        }
    }
}
