//! The searcher's calls in flight: each call's answers, filled as its kernel batches come back, so that
//! a caller may hand over the next call before the last one's answers are in
//! ([`crate::GpuSearcher::submit_in`]): its host work (descriptors, staging) then overlaps the kernels.

use std::collections::VecDeque;

use warpsearch_query::Answer;

use crate::GpuError;

/// Which call a request belongs to.
pub type CallId = u64;

/// One call: an answer per request, and its kernel batches still on the GPU.
struct Call {
    id: CallId,
    answers: Vec<Option<Result<Answer, GpuError>>>,
    batches: usize,
    /// Whether all its batches have been submitted (no more will come).
    submitted: bool,
}

/// The calls not yet taken back, oldest first.
#[derive(Default)]
pub(crate) struct Calls {
    open: VecDeque<Call>,
    next: CallId,
}

impl Calls {
    /// A new call of `n` requests, its answers all missing.
    pub fn open(&mut self, n: usize) -> CallId {
        let id = self.next;
        self.next += 1;
        self.open.push_back(Call {
            id,
            answers: (0..n).map(|_| None).collect(),
            batches: 0,
            submitted: false,
        });
        id
    }

    fn get(&mut self, id: CallId) -> &mut Call {
        self.open
            .iter_mut()
            .find(|c| c.id == id)
            .expect("a batch belongs to a call not yet taken back")
    }

    /// Request `i` of call `id`'s answer.
    pub fn answer(&mut self, id: CallId, i: usize, answer: Result<Answer, GpuError>) {
        self.get(id).answers[i] = Some(answer);
    }

    /// Whether request `i` of call `id` has its answer.
    pub fn answered(&mut self, id: CallId, i: usize) -> Option<&Result<Answer, GpuError>> {
        self.get(id).answers[i].as_ref()
    }

    /// Request `i` of call `id`'s answer, to change in place.
    pub fn answer_mut(&mut self, id: CallId, i: usize) -> Option<&mut Result<Answer, GpuError>> {
        self.get(id).answers[i].as_mut()
    }

    /// A kernel batch of call `id` went to the GPU.
    pub fn batch_sent(&mut self, id: CallId) {
        self.get(id).batches += 1;
    }

    /// A kernel batch of call `id` came back (its answers written).
    pub fn batch_back(&mut self, id: CallId) {
        self.get(id).batches -= 1;
    }

    /// Call `id` will send no more batches.
    pub fn close(&mut self, id: CallId) {
        self.get(id).submitted = true;
    }

    /// The oldest call, if every answer of it is in: its answers, in request order.
    pub fn take_done(&mut self) -> Option<(CallId, Vec<Result<Answer, GpuError>>)> {
        let c = self.open.front()?;
        if !c.submitted || c.batches > 0 {
            return None;
        }
        let c = self.open.pop_front().expect("a front call");
        Some((c.id, finish(c)))
    }

    /// Call `id`'s answers (every batch of it back).
    pub fn take(&mut self, id: CallId) -> Vec<Result<Answer, GpuError>> {
        let at = self
            .open
            .iter()
            .position(|c| c.id == id)
            .expect("a call is taken back once");
        let c = self.open.remove(at).expect("a call at its place");
        assert_eq!(c.batches, 0, "a call is taken back when its batches are");
        finish(c)
    }
}

fn finish(c: Call) -> Vec<Result<Answer, GpuError>> {
    c.answers
        .into_iter()
        .map(|a| a.expect("every query answered"))
        .collect()
}
