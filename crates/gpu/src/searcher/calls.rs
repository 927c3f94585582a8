//! The searcher's calls in flight: each call's answers, filled as its kernel batches come back, so that
//! a caller may hand over the next call before the last one's answers are in
//! ([`crate::GpuSearcher::submit_in`]): its host work (descriptors, staging) then overlaps the kernels.

use std::collections::VecDeque;

use warpsearch_query::Answer;

use crate::error::GpuError;

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

    /// The oldest call whose answers are all in (a later call's may be in before an earlier one's,
    /// and a short call does not wait behind a long one): its answers, in request order.
    pub fn take_done(&mut self) -> Option<(CallId, Vec<Result<Answer, GpuError>>)> {
        let at = self.open.iter().position(|c| c.submitted && c.batches == 0)?;
        let c = self.open.remove(at).expect("a call at its place");
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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use warpsearch_query::Scored;

    use super::*;

    fn answer(doc: u32) -> Result<Answer, GpuError> {
        Ok(Answer {
            hits: vec![Scored { doc, score: 1.0 }],
            latency: Duration::ZERO,
        })
    }

    fn docs(answers: &[Result<Answer, GpuError>]) -> Vec<u32> {
        answers
            .iter()
            .map(|a| a.as_ref().map_or(u32::MAX, |a| a.hits[0].doc))
            .collect()
    }

    #[test]
    fn a_call_comes_back_when_all_its_batches_are_without_waiting_for_older_calls() {
        let mut calls = Calls::default();
        let a = calls.open(2);
        calls.batch_sent(a);
        calls.batch_sent(a);
        let b = calls.open(1);
        calls.batch_sent(b);
        calls.close(a);
        calls.close(b);
        // b is back, a is not: b comes back (a short call does not wait behind a long one).
        calls.answer(b, 0, answer(7));
        calls.batch_back(b);
        let (id, got) = calls.take_done().expect("b is back");
        assert_eq!((id, docs(&got)), (b, vec![7]));
        assert!(calls.take_done().is_none(), "a is still out");
        // One of a's two batches back: still nothing.
        calls.answer(a, 1, answer(2));
        calls.batch_back(a);
        assert!(calls.take_done().is_none());
        calls.answer(a, 0, answer(1));
        calls.batch_back(a);
        let (id, got) = calls.take_done().expect("a is back");
        assert_eq!(id, a);
        assert_eq!(docs(&got), vec![1, 2], "answers in request order");
        assert!(calls.take_done().is_none());
    }

    #[test]
    fn of_two_calls_done_the_older_comes_back_first() {
        let mut calls = Calls::default();
        let a = calls.open(1);
        let b = calls.open(1);
        for (id, doc) in [(b, 20), (a, 10)] {
            calls.answer(id, 0, answer(doc));
            calls.close(id);
        }
        assert_eq!(calls.take_done().map(|(id, _)| id), Some(a));
        assert_eq!(calls.take_done().map(|(id, _)| id), Some(b));
    }

    #[test]
    fn a_call_still_being_submitted_does_not_come_back() {
        let mut calls = Calls::default();
        let a = calls.open(1);
        calls.answer(a, 0, answer(3));
        // Every answer is in and no batch is out, but more may still be sent.
        assert!(calls.take_done().is_none());
        calls.close(a);
        assert_eq!(docs(&calls.take_done().expect("closed").1), vec![3]);
    }

    #[test]
    fn a_call_is_taken_back_out_of_order_and_the_others_stay() {
        let mut calls = Calls::default();
        let a = calls.open(1);
        let b = calls.open(1);
        calls.batch_sent(a);
        for (id, doc) in [(a, 10), (b, 20)] {
            calls.answer(id, 0, answer(doc));
            calls.close(id);
        }
        // b is waited for first, while a's batch is still out.
        assert_eq!(docs(&calls.take(b)), vec![20]);
        assert!(calls.take_done().is_none());
        calls.batch_back(a);
        assert_eq!(
            calls.take_done().map(|(id, g)| (id, docs(&g))),
            Some((a, vec![10]))
        );
    }

    #[test]
    #[should_panic(expected = "a call is taken back when its batches are")]
    fn a_call_with_batches_out_cannot_be_taken() {
        let mut calls = Calls::default();
        let a = calls.open(0);
        calls.batch_sent(a);
        calls.close(a);
        calls.take(a);
    }

    #[test]
    #[should_panic(expected = "every query answered")]
    fn a_call_missing_an_answer_cannot_be_taken() {
        let mut calls = Calls::default();
        let a = calls.open(2);
        calls.answer(a, 0, answer(1));
        calls.close(a);
        calls.take(a);
    }
}
