//! Replicas: engines over the same index, one per GPU, as one. A submission goes to the replica with the
//! fewest queries in flight (a large one is cut among them), and a closed loop's batch is cut into one
//! contiguous part per replica, run side by side. Each replica answers exactly (its CPU answers what
//! its GPU fails), so any replica's answer is the answer; which one takes a query changes only when.
//!
//! A replica whose GPU fails queries is taken out of the rotation for a while ([`TAKE_OUT`]) and then
//! tried again; while every replica is out, they still take work, their CPUs answering it: nothing is
//! lost.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use warpsearch_index::Result;
use warpsearch_query::{Answer, Request};

use crate::reply::{lock, Done, Reply, Submit};

/// How long a replica whose GPU failed is left out of the rotation before it is tried again.
pub(crate) const TAKE_OUT: Duration = Duration::from_secs(30);

/// A submission at least this large is cut among the replicas in rotation (a GPU call of fewer is
/// cheaper whole).
const CUT: usize = 512;

/// What a replica does besides taking submissions.
pub(crate) trait Replica: Submit {
    /// Answers every request in order, on the calling thread where the replica can.
    fn search_batch(&self, requests: &[Request]) -> Vec<Result<Answer>>;

    /// Queries its GPU failed (answered on its CPU) since it was made.
    fn gpu_failures(&self) -> u64;
}

/// One replica's load and health.
#[derive(Default)]
struct Health {
    /// Queries submitted to it and not yet answered (or dropped).
    in_flight: Arc<AtomicUsize>,
    /// Its GPU failures when last looked at.
    failures_seen: AtomicU64,
    /// Until when it is out of the rotation.
    out_until: Mutex<Option<Instant>>,
}

/// Engines over the same index, as one.
pub(crate) struct Replicas<R> {
    members: Vec<R>,
    health: Vec<Health>,
}

impl<R: Replica> Replicas<R> {
    /// `members`, at least one, each over the same index with the same options.
    pub(crate) fn new(members: Vec<R>) -> Replicas<R> {
        assert!(!members.is_empty(), "replicas need at least one member");
        let health = members.iter().map(|_| Health::default()).collect();
        Replicas { members, health }
    }

    /// The replicas.
    pub(crate) fn members(&self) -> &[R] {
        &self.members
    }

    /// The replicas in the rotation now (every one, where every one is out), after taking out those
    /// whose GPU failed since the last look.
    fn rotation(&self) -> Vec<usize> {
        let now = Instant::now();
        let mut live = Vec::with_capacity(self.members.len());
        for (i, (m, h)) in self.members.iter().zip(&self.health).enumerate() {
            let failures = m.gpu_failures();
            let mut out = lock(&h.out_until);
            if h.failures_seen.fetch_max(failures, Ordering::Relaxed) < failures {
                *out = Some(now + TAKE_OUT);
            }
            if out.is_some_and(|until| until <= now) {
                *out = None;
            }
            if out.is_none() {
                live.push(i);
            }
        }
        if live.is_empty() {
            (0..self.members.len()).collect()
        } else {
            live
        }
    }

    /// Whether replica `i` is out of the rotation now.
    #[cfg(test)]
    fn is_out(&self, i: usize) -> bool {
        !self.rotation().contains(&i)
    }

    /// Queues `requests`: to the live replica with the fewest queries in flight, or, for a large
    /// submission, cut into one contiguous part per live replica.
    pub(crate) fn submit(
        &self,
        first_id: u64,
        mut requests: Vec<Request>,
        deadline: Option<Duration>,
        reply: Arc<dyn Reply>,
    ) {
        let rotation = self.rotation();
        if requests.len() < CUT || rotation.len() == 1 {
            let i = *rotation
                .iter()
                .min_by_key(|&&i| self.health[i].in_flight.load(Ordering::Relaxed))
                .expect("the rotation is never empty");
            self.send(i, first_id, requests, deadline, reply);
            return;
        }
        let parts = cut(requests.len(), rotation.len());
        // Parts taken off the end, so that each is moved, not copied.
        for (&i, range) in rotation.iter().zip(parts).rev() {
            let part = requests.split_off(range.start);
            self.send(i, first_id + range.start as u64, part, deadline, reply.clone());
        }
    }

    fn send(
        &self,
        i: usize,
        first_id: u64,
        requests: Vec<Request>,
        deadline: Option<Duration>,
        reply: Arc<dyn Reply>,
    ) {
        if requests.is_empty() {
            return;
        }
        let n = requests.len();
        let in_flight = self.health[i].in_flight.clone();
        in_flight.fetch_add(n, Ordering::Relaxed);
        let counted = Arc::new(Counted {
            inner: reply,
            in_flight,
            left: AtomicUsize::new(n),
        });
        self.members[i].submit(first_id, requests, deadline, counted);
    }

    /// Answers every request, in order: one contiguous part per live replica, side by side.
    pub(crate) fn search_batch(&self, requests: &[Request]) -> Vec<Result<Answer>> {
        let rotation = self.rotation();
        if requests.len() < CUT || rotation.len() == 1 {
            return self.members[rotation[0]].search_batch(requests);
        }
        let parts: Vec<_> = rotation.iter().zip(cut(requests.len(), rotation.len())).collect();
        side_by_side(&parts, |(i, range)| {
            self.members[**i].search_batch(&requests[range.clone()])
        })
        .into_iter()
        .flatten()
        .collect()
    }
}

/// `f` of every item, each on a thread of its own, side by side; the results in the items' order (a
/// panic in one is resumed here).
pub(crate) fn side_by_side<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    std::thread::scope(|scope| {
        let f = &f;
        let running: Vec<_> = items.iter().map(|item| scope.spawn(move || f(item))).collect();
        running
            .into_iter()
            .map(|t| t.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)))
            .collect()
    })
}

/// `n` items cut into `parts` contiguous ranges whose sizes differ by at most one.
fn cut(n: usize, parts: usize) -> Vec<std::ops::Range<usize>> {
    (0..parts).map(|p| n * p / parts..n * (p + 1) / parts).collect()
}

/// A reply that counts its submission's queries out of its replica's load as they are answered, and
/// what is left when the engine lets go of it (queries dropped as unwanted).
struct Counted {
    inner: Arc<dyn Reply>,
    in_flight: Arc<AtomicUsize>,
    left: AtomicUsize,
}

impl Counted {
    fn answered(&self, n: usize) {
        self.left.fetch_sub(n, Ordering::Relaxed);
        self.in_flight.fetch_sub(n, Ordering::Relaxed);
    }
}

impl Reply for Counted {
    fn send(&self, done: Done) {
        self.answered(1);
        self.inner.send(done);
    }

    fn send_many(&self, done: Vec<Done>) {
        self.answered(done.len());
        self.inner.send_many(done);
    }

    fn wanted(&self) -> bool {
        self.inner.wanted()
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.in_flight.fetch_sub(*self.left.get_mut(), Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicBool;

    use warpsearch_query::{Mode, Query, Scored};

    use super::*;
    use crate::reply::{Collect, ServedBy};

    /// A submission's answers held back, with where they go.
    type Held = (Arc<dyn Reply>, Vec<Done>);

    /// A replica that answers each request with its id as the one hit, counting what it took, and
    /// says its GPU failed when told to.
    #[derive(Default)]
    struct Fake {
        took: AtomicUsize,
        failures: AtomicU64,
        /// Holds its submissions' answers back until released.
        hold: AtomicBool,
        held: Mutex<Vec<Held>>,
    }

    fn answer(r: &Request) -> Answer {
        Answer {
            hits: vec![Scored {
                doc: r.k as u32,
                score: 1.0,
            }],
            latency: Duration::ZERO,
        }
    }

    impl Submit for Fake {
        fn submit(&self, first_id: u64, requests: Vec<Request>, _: Option<Duration>, reply: Arc<dyn Reply>) {
            self.took.fetch_add(requests.len(), Ordering::Relaxed);
            let done: Vec<Done> = requests
                .iter()
                .enumerate()
                .map(|(i, r)| Done {
                    id: first_id + i as u64,
                    result: Ok(answer(r)),
                    served_by: ServedBy::Gpu,
                    missed_deadline: false,
                })
                .collect();
            if self.hold.load(Ordering::Relaxed) {
                lock(&self.held).push((reply, done));
            } else {
                reply.send_many(done);
            }
        }
    }

    impl Replica for Fake {
        fn search_batch(&self, requests: &[Request]) -> Vec<Result<Answer>> {
            self.took.fetch_add(requests.len(), Ordering::Relaxed);
            requests.iter().map(|r| Ok(answer(r))).collect()
        }

        fn gpu_failures(&self) -> u64 {
            self.failures.load(Ordering::Relaxed)
        }
    }

    /// Requests told apart by their k (1 to n).
    fn requests(n: usize) -> Vec<Request> {
        (1..=n)
            .map(|k| Request::new(Query::default(), Mode::Or, k))
            .collect()
    }

    fn ks(answers: Vec<Result<Answer>>) -> Vec<u32> {
        answers.into_iter().map(|a| a.unwrap().hits[0].doc).collect()
    }

    #[test]
    fn a_batch_is_cut_among_replicas_and_comes_back_in_order() {
        let r = Replicas::new(vec![Fake::default(), Fake::default(), Fake::default()]);
        for n in [0, 1, CUT - 1, CUT, 3 * CUT + 2] {
            let expected: Vec<u32> = (1..=n as u32).collect();
            assert_eq!(ks(r.search_batch(&requests(n))), expected, "{n} requests");
        }
        // The large batches were shared by all three.
        assert!(r
            .members()
            .iter()
            .all(|m| m.took.load(Ordering::Relaxed) >= CUT / 3));
    }

    #[test]
    fn submissions_go_to_the_least_loaded_replica_and_large_ones_are_cut() {
        let r = Replicas::new(vec![Fake::default(), Fake::default()]);
        r.members()[0].hold.store(true, Ordering::Relaxed);
        let collect = Arc::new(Collect::new(3));
        for id in 0..3 {
            r.submit(id, requests(1), None, collect.clone());
        }
        // The first went to replica 0, which holds it: the others went to replica 1.
        assert_eq!(r.members()[0].took.load(Ordering::Relaxed), 1);
        assert_eq!(r.members()[1].took.load(Ordering::Relaxed), 2);
        assert_eq!(r.health[0].in_flight.load(Ordering::Relaxed), 1);
        for (reply, done) in lock(&r.members()[0].held).drain(..) {
            reply.send_many(done);
        }
        assert_eq!(collect.wait().len(), 3);
        assert!(r.health.iter().all(|h| h.in_flight.load(Ordering::Relaxed) == 0));

        let n = 2 * CUT + 1;
        let collect = Arc::new(Collect::new(n));
        r.members()[0].hold.store(false, Ordering::Relaxed);
        r.submit(0, requests(n), None, collect.clone());
        assert_eq!(ks(collect.wait()), (1..=n as u32).collect::<Vec<u32>>());
        assert!(r.members()[0].took.load(Ordering::Relaxed) >= CUT);
    }

    #[test]
    fn a_reply_let_go_of_unanswered_takes_its_queries_off_the_load() {
        let r = Replicas::new(vec![Fake::default()]);
        r.members()[0].hold.store(true, Ordering::Relaxed);
        let collect = Arc::new(Collect::new(4));
        r.submit(0, requests(4), None, collect);
        assert_eq!(r.health[0].in_flight.load(Ordering::Relaxed), 4);
        // The engine drops the queries unanswered (their reply no longer wanted).
        lock(&r.members()[0].held).clear();
        assert_eq!(r.health[0].in_flight.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn a_replica_whose_gpu_fails_is_taken_out_and_the_rest_answer() {
        let r = Replicas::new(vec![Fake::default(), Fake::default()]);
        r.members()[1].failures.store(3, Ordering::Relaxed);
        assert!(r.is_out(1));
        assert!(!r.is_out(0));
        let n = 4 * CUT;
        assert_eq!(
            ks(r.search_batch(&requests(n))),
            (1..=n as u32).collect::<Vec<u32>>()
        );
        assert_eq!(r.members()[1].took.load(Ordering::Relaxed), 0);
        let collect = Arc::new(Collect::new(n));
        r.submit(0, requests(n), None, collect.clone());
        assert_eq!(collect.wait().len(), n);
        assert_eq!(r.members()[1].took.load(Ordering::Relaxed), 0);

        // With every replica out, they still answer.
        r.members()[0].failures.store(1, Ordering::Relaxed);
        assert_eq!(ks(r.search_batch(&requests(3))), vec![1, 2, 3]);
        // The time out ends.
        *lock(&r.health[1].out_until) = Some(Instant::now());
        assert!(!r.is_out(1));
    }
}
