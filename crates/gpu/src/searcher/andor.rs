//! and-or: the OR pass of the queries whose AND pass found fewer than k, once that pass is back.

use std::borrow::Borrow;
use std::collections::BTreeMap;
use std::time::Duration;

use warpsearch_query::{DocRange, Mode, Request};

use super::calls::CallId;
use super::GpuSearcher;

impl GpuSearcher {
    /// and-or: the OR pass of call `call`'s queries whose AND found fewer than k, once it is back.
    pub(super) fn and_or_pass<R: Borrow<Request> + Sync>(
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
}
