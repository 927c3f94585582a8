//! The scheduler's state: three queues of tasks (docs/references.md#ding-gpu-query-processing section 9: GPU-preferred, CPU-preferred,
//! either) plus the parts of split queries, and the choice of what each processor runs next. Pure
//! logic, no threads: the workers call it under one lock.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use warpsearch_query::DocRange;

use crate::hybrid::job::Job;

/// Which processor a task suits better, by predicted cost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Preference {
    /// Predicted markedly cheaper on the GPU.
    Gpu,
    /// Predicted markedly cheaper on the CPU.
    Cpu,
    /// Neither by a margin: whichever is idle first.
    Either,
}

/// A unit of work: a whole query, or one docID range of a split one.
pub struct Task {
    /// The query it belongs to.
    pub job: Arc<Job>,
    /// The documents it covers (None: the whole query).
    pub range: Option<DocRange>,
    /// Predicted seconds on one CPU core.
    pub cpu_cost: f64,
    /// Postings the GPU touches for it.
    pub work: f64,
    /// Its preferred processor.
    pub preference: Preference,
    /// The GPU's answer on part of `range` when the list cache lacked the rest: the CPU completes it.
    pub completion: Option<Box<crate::split::Partial>>,
}

impl Task {
    /// When its query arrived.
    pub fn arrival(&self) -> Instant {
        self.job.arrival
    }

    /// What its query's deadline has left at `now` (zero once past it; None without a deadline).
    pub fn deadline_left(&self, now: Instant) -> Option<Duration> {
        let waited = now.saturating_duration_since(self.arrival());
        self.job.deadline.map(|d| d.saturating_sub(waited))
    }

    /// Whether it has waited `urgency` (a share) of its query's deadline by `now`.
    pub fn is_urgent(&self, now: Instant, urgency: f64) -> bool {
        self.job
            .deadline
            .is_some_and(|d| now.duration_since(self.arrival()) >= d.mul_f64(urgency))
    }
}

/// Why a task went where it went (for the statistics).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pick {
    /// From its own processor's queue or the parts queue.
    Own,
    /// From the "either" queue.
    Either,
    /// Taken from the other processor's queue (work stealing).
    Stolen,
    /// Past the urgency point of its deadline: run at once on its preferred processor.
    Urgent,
}

/// One queue, oldest first.
#[derive(Default)]
pub struct Lane {
    tasks: VecDeque<Task>,
}

impl Lane {
    fn push_back(&mut self, t: Task) {
        self.tasks.push_back(t);
    }

    /// Queues `t` before every other task.
    pub fn push_front(&mut self, t: Task) {
        self.tasks.push_front(t);
    }

    fn remove(&mut self, i: usize) -> Option<Task> {
        self.tasks.remove(i)
    }

    fn pop_front(&mut self) -> Option<Task> {
        self.remove(0)
    }

    fn front(&self) -> Option<&Task> {
        self.tasks.front()
    }

    /// Tasks waiting.
    pub fn len(&self) -> usize {
        self.tasks.len()
    }

    /// Whether none waits.
    pub fn is_empty(&self) -> bool {
        self.tasks.is_empty()
    }
}

/// The queues.
#[derive(Default)]
pub struct Queues {
    /// GPU-preferred tasks.
    pub gpu: Lane,
    /// CPU-preferred tasks.
    pub cpu: Lane,
    /// Tasks that suit both.
    pub either: Lane,
    /// CPU parts of split queries (run before anything else: their query is already under way).
    pub parts: Lane,
    /// Tasks the GPU has taken and not finished.
    pub gpu_in_flight: usize,
    /// Tasks of closed-loop bursts still being made, to be queued: a closed loop's GPU batch is its
    /// share of these too, or it would be its share of the first chunks only.
    pub incoming: usize,
}

/// How the queues are served: limits, and the processors' measured speeds. Waits are estimated from
/// task counts and measured rates rather than from summed predictions, so that an error of the cost
/// model skews which queue a query joins, never how long a processor is believed to be busy.
#[derive(Debug, Clone, Copy)]
pub struct Policy {
    /// A task that has waited this share of its query's deadline is urgent.
    pub urgency: f64,
    /// Most tasks in one GPU batch.
    pub max_batch: usize,
    /// Seconds a GPU batch of tasks with deadlines may be predicted to take (at least twice the GPU's
    /// latency floor, and at least half of what its oldest task's deadline has left).
    pub batch_target: f64,
    /// Tasks per second a GPU batch adds (measured: the marginal rate of `batch_time`'s line).
    pub gpu_rate: f64,
    /// Tasks per second all CPU workers together complete (measured).
    pub cpu_rate: f64,
    /// Seconds a small GPU batch takes (measured): the GPU's latency floor.
    pub gpu_latency: f64,
}

impl Policy {
    /// Predicted seconds of a GPU batch of `n` tasks.
    pub fn batch_time(&self, n: usize) -> f64 {
        self.gpu_latency + n as f64 / self.gpu_rate.max(1e-9)
    }
}

/// How many tasks at the head of the CPU queue are looked at for the cheapest (small jobs first,
/// docs/references.md#ding-gpu-query-processing: "small jobs should get priority to minimize average delay").
const CHEAPEST_OF: usize = 16;

impl Queues {
    /// Whether nothing waits.
    pub fn is_empty(&self) -> bool {
        self.gpu.is_empty() && self.cpu.is_empty() && self.either.is_empty() && self.parts.is_empty()
    }

    /// Queues a task by its preference.
    pub fn push(&mut self, task: Task) {
        match task.preference {
            Preference::Gpu => self.gpu.push_back(task),
            Preference::Cpu => self.cpu.push_back(task),
            Preference::Either => self.either.push_back(task),
        }
    }

    /// Seconds until the GPU has run what it holds and what waits for it.
    fn gpu_wait(&self, p: &Policy) -> f64 {
        p.batch_time(self.gpu_in_flight + self.gpu.len())
    }

    /// Seconds until the CPU workers have run the CPU queue.
    fn cpu_wait(&self, p: &Policy) -> f64 {
        self.cpu.len() as f64 / p.cpu_rate.max(1e-9)
    }

    /// The next task for an idle CPU worker: a split query's part; an urgent CPU task, or an urgent
    /// "either" task that the GPU would not reach in time; the cheapest of the CPU queue's head; the
    /// oldest "either"; else one stolen from the GPU queue when the GPU would take longer to reach it
    /// than the CPU takes to run it.
    pub fn next_for_cpu(&mut self, now: Instant, policy: &Policy, has_gpu: bool) -> Option<(Task, Pick)> {
        if let Some(t) = self.parts.pop_front() {
            return Some((t, Pick::Own));
        }
        let urgent = |t: &Task| t.is_urgent(now, policy.urgency);
        if self.cpu.front().is_some_and(urgent) {
            return self.cpu.pop_front().map(|t| (t, Pick::Urgent));
        }
        let gpu_wait = self.gpu_wait(policy);
        if self
            .either
            .front()
            .is_some_and(|t| urgent(t) && (!has_gpu || gpu_wait > t.cpu_cost))
        {
            return self.either.pop_front().map(|t| (t, Pick::Urgent));
        }
        if !self.cpu.is_empty() {
            let head = self.cpu.len().min(CHEAPEST_OF);
            let i = (0..head)
                .min_by(|&a, &b| self.cpu.tasks[a].cpu_cost.total_cmp(&self.cpu.tasks[b].cpu_cost))
                .expect("non-empty");
            return self.cpu.remove(i).map(|t| (t, Pick::Own));
        }
        if let Some(t) = self.either.pop_front() {
            return Some((t, Pick::Either));
        }
        // Steal the task cheapest on the CPU among the GPU queue's newest (the GPU takes the oldest).
        let n = self.gpu.len();
        let i = (n.saturating_sub(CHEAPEST_OF)..n)
            .min_by(|&a, &b| self.gpu.tasks[a].cpu_cost.total_cmp(&self.gpu.tasks[b].cpu_cost))?;
        if has_gpu && gpu_wait <= self.gpu.tasks[i].cpu_cost {
            return None;
        }
        self.gpu.remove(i).map(|t| (t, Pick::Stolen))
    }

    /// The next GPU batch: the GPU queue, then the "either" queue, oldest first; then, while the CPU
    /// queue would keep the workers busy longer than the batch takes, tasks stolen from it. A batch
    /// holds at most `max_batch` tasks; with deadlines, no more than fit `batch_target` or half of what
    /// the oldest task's deadline has left, whichever is longer (a GPU whose queries cost milliseconds
    /// needs long batches to be busy; the deadline says how long they may be); without (a closed loop),
    /// or once the oldest task is past its deadline (a backlog, which drains fastest so), no more than
    /// the GPU's share of what waits at the two processors' measured rates, so that neither is left
    /// idle at the end while the other works.
    pub fn next_for_gpu(&mut self, now: Instant, policy: &Policy) -> Vec<(Task, Pick)> {
        let urgent = |t: &Task| t.is_urgent(now, policy.urgency);
        let waiting = self.gpu.len() + self.cpu.len() + self.either.len() + self.incoming;
        let share = policy.gpu_rate / (policy.gpu_rate + policy.cpu_rate).max(1e-9);
        let closed_cap = ((waiting as f64 * share).ceil() as usize).max(1);
        let mut batch: Vec<(Task, Pick)> = Vec::new();
        let full = |batch: &Vec<(Task, Pick)>, next: &Task| {
            let n = batch.len();
            let oldest_left = batch.first().and_then(|(t, _)| t.deadline_left(now));
            n > 0
                && (n >= policy.max_batch
                    || match next.job.deadline {
                        // Past the oldest task's deadline a short batch saves no deadline: the
                        // backlog drains fastest in batches sized as a closed loop's.
                        Some(_) if oldest_left.is_some_and(|l| l.is_zero()) => n >= closed_cap,
                        // Never below twice the GPU's latency floor: a target the GPU cannot meet
                        // would make every batch one task.
                        Some(_) => {
                            let left = oldest_left.map_or(0.0, |d| d.as_secs_f64());
                            let target = policy.batch_target.max(2.0 * policy.gpu_latency).max(0.5 * left);
                            policy.batch_time(n + 1) > target
                        }
                        None => n >= closed_cap,
                    })
        };
        for (queue, pick) in [(&mut self.gpu, Pick::Own), (&mut self.either, Pick::Either)] {
            while let Some(t) = queue.front() {
                if full(&batch, t) {
                    return batch;
                }
                let t = queue.pop_front().expect("non-empty");
                let pick = if pick == Pick::Own && urgent(&t) {
                    Pick::Urgent
                } else {
                    pick
                };
                batch.push((t, pick));
            }
        }
        while let Some(t) = self.cpu.front() {
            if full(&batch, t) || self.cpu_wait(policy) <= policy.batch_time(batch.len() + 1) {
                break;
            }
            let t = self.cpu.pop_front().expect("non-empty");
            batch.push((t, Pick::Stolen));
        }
        batch
    }
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc::channel;

    use warpsearch_query::{Mode, Query, Request};

    use super::*;
    use crate::cost::Features;

    fn task(cpu: f64, preference: Preference, deadline: Option<Duration>) -> Task {
        let (tx, _) = channel();
        let f = Features {
            shortest: 1,
            second: 0,
            sum: 1,
            terms: 1,
        };
        let request = Request::new(Query::default(), Mode::Or, 10);
        Task {
            job: Arc::new(Job::new(0, request, f, deadline, Arc::new(tx), 1)),
            range: None,
            cpu_cost: cpu,
            work: 1.0,
            preference,
            completion: None,
        }
    }

    /// A GPU of 1 ms latency and 250 tasks/s (4 ms a task); CPU workers of 500 tasks/s together.
    fn policy() -> Policy {
        Policy {
            urgency: 0.5,
            max_batch: 3,
            batch_target: 0.010,
            gpu_rate: 250.0,
            cpu_rate: 500.0,
            gpu_latency: 0.001,
        }
    }

    #[test]
    fn cpu_takes_parts_then_its_cheapest_then_either_then_steals_only_when_the_gpu_lags() {
        let now = Instant::now();
        let mut q = Queues::default();
        q.push(task(0.004, Preference::Cpu, None));
        q.push(task(0.001, Preference::Cpu, None));
        q.push(task(0.1, Preference::Either, None));
        q.push(task(0.05, Preference::Gpu, None));
        q.parts.push_front(task(0.2, Preference::Cpu, None));
        let p = policy();
        let picks: Vec<(f64, Pick)> = std::iter::from_fn(|| q.next_for_cpu(now, &p, true))
            .map(|(t, pick)| (t.cpu_cost, pick))
            .collect();
        // The GPU task is not stolen: the GPU reaches it (5 ms) before the CPU would finish it (50 ms).
        assert_eq!(
            picks,
            [
                (0.2, Pick::Own),
                (0.001, Pick::Own),
                (0.004, Pick::Own),
                (0.1, Pick::Either)
            ]
        );
        assert_eq!(q.gpu.len(), 1);
        q.gpu_in_flight = 20;
        let (t, pick) = q.next_for_cpu(now, &p, true).unwrap();
        assert_eq!((t.cpu_cost, pick), (0.05, Pick::Stolen));
        assert!(q.is_empty());
    }

    #[test]
    fn urgent_tasks_jump_the_queue() {
        let mut q = Queues::default();
        let deadline = Some(Duration::from_millis(10));
        q.push(task(0.001, Preference::Cpu, None));
        q.push(task(0.009, Preference::Cpu, deadline));
        // Not yet urgent: the cheapest goes first; 6 ms later (past half the deadline) the old one is urgent.
        let later = Instant::now() + Duration::from_millis(6);
        let mut q2 = Queues::default();
        q2.push(task(0.009, Preference::Cpu, deadline));
        q2.push(task(0.001, Preference::Cpu, None));
        let (t, pick) = q2.next_for_cpu(later, &policy(), true).unwrap();
        assert_eq!((t.cpu_cost, pick), (0.009, Pick::Urgent));
        let (t, _) = q.next_for_cpu(Instant::now(), &policy(), true).unwrap();
        assert_eq!(t.cpu_cost, 0.001);
    }

    #[test]
    fn gpu_batches_stop_at_the_latency_target_or_their_share() {
        let now = Instant::now();
        let deadline = Some(Duration::from_millis(10));
        let mut q = Queues::default();
        for _ in 0..5 {
            q.push(task(1.0, Preference::Gpu, deadline));
        }
        // 1 ms + 4 ms per task: two fit a 10 ms target (half the 10 ms deadline is less).
        assert_eq!(q.next_for_gpu(now, &policy()).len(), 2);
        // Without deadlines the batch takes the GPU's share of what waits (250 of 750 tasks/s: a
        // third), at most 3.
        let mut q = Queues::default();
        for _ in 0..6 {
            q.push(task(1.0, Preference::Gpu, None));
        }
        assert_eq!(q.next_for_gpu(now, &policy()).len(), 2);
        let mut q = Queues::default();
        for _ in 0..30 {
            q.push(task(1.0, Preference::Gpu, None));
        }
        assert_eq!(q.next_for_gpu(now, &policy()).len(), 3);
        // A burst still being queued counts: its share of 6 waiting and 3 to come is 3.
        let mut q = Queues::default();
        for _ in 0..6 {
            q.push(task(1.0, Preference::Gpu, None));
        }
        q.incoming = 3;
        assert_eq!(q.next_for_gpu(now, &policy()).len(), 3);
        // One task always goes, whatever its cost.
        let mut q = Queues::default();
        q.push(task(1.0, Preference::Either, deadline));
        assert_eq!(q.next_for_gpu(now, &policy()).len(), 1);
    }

    #[test]
    fn gpu_batches_grow_to_half_of_what_the_oldest_deadline_has_left() {
        let p = Policy {
            max_batch: 100,
            ..policy()
        };
        let mut q = Queues::default();
        for _ in 0..30 {
            q.push(task(1.0, Preference::Gpu, Some(Duration::from_millis(100))));
        }
        // Times from the oldest waiting task's arrival, so that the test does not depend on its speed.
        let oldest = |q: &Queues| q.gpu.front().expect("queued").arrival();
        // At once: 50 ms of the 100 left, 1 ms + 4 ms per task: 12 tasks.
        assert_eq!(q.next_for_gpu(oldest(&q), &p).len(), 12);
        // 60 ms later: 20 ms of the 40 left: 4 tasks.
        let later = oldest(&q) + Duration::from_millis(60);
        assert_eq!(q.next_for_gpu(later, &p).len(), 4);
        // Past the deadline: sized as a closed loop's, the GPU's share (a third) of the 14 waiting.
        let past = oldest(&q) + Duration::from_millis(200);
        assert_eq!(q.next_for_gpu(past, &p).len(), 5);
    }

    #[test]
    fn the_gpu_steals_only_while_the_cpu_queue_outlasts_the_batch() {
        let now = Instant::now();
        let mut q = Queues::default();
        // 6 CPU tasks wait 12 ms at 500/s; a batch of n takes 1 + 4n ms: it steals while that is less.
        for _ in 0..6 {
            q.push(task(0.010, Preference::Cpu, deadline_free()));
        }
        let p = Policy {
            max_batch: 10,
            ..policy()
        };
        let batch = q.next_for_gpu(now, &p);
        assert!(batch.iter().all(|(_, p)| *p == Pick::Stolen));
        assert_eq!(
            batch.len(),
            2,
            "stops once the CPU's wait is below the batch time"
        );
        let mut idle = Queues::default();
        idle.push(task(0.0001, Preference::Cpu, None));
        assert!(idle.next_for_gpu(now, &policy()).is_empty());
    }

    fn deadline_free() -> Option<Duration> {
        None
    }
}
