//! The scheduler's state: three queues of tasks (papers/001 section 9: GPU-preferred, CPU-preferred,
//! either) plus the parts of split queries, and the choice of what each processor runs next. Pure
//! logic, no threads: the workers call it under one lock.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Instant;

use warpsearch_query::DocRange;

use crate::cost::Features;
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
    /// Predicted seconds it adds to a GPU batch.
    pub gpu_cost: f64,
    /// Postings the GPU touches for it.
    pub work: f64,
    /// Its preferred processor.
    pub preference: Preference,
}

impl Task {
    /// When its query arrived.
    pub fn arrival(&self) -> Instant {
        self.job.arrival
    }

    /// The query's features.
    pub fn features(&self) -> &Features {
        &self.job.features
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

/// One queue, oldest first, with the sums of its tasks' predicted costs kept up to date (the
/// stealing tests read them on every pick).
#[derive(Default)]
pub struct Lane {
    tasks: VecDeque<Task>,
    cpu_sum: f64,
    gpu_sum: f64,
}

impl Lane {
    fn push_back(&mut self, t: Task) {
        self.cpu_sum += t.cpu_cost;
        self.gpu_sum += t.gpu_cost;
        self.tasks.push_back(t);
    }

    /// Queues `t` before every other task.
    pub fn push_front(&mut self, t: Task) {
        self.cpu_sum += t.cpu_cost;
        self.gpu_sum += t.gpu_cost;
        self.tasks.push_front(t);
    }

    fn remove(&mut self, i: usize) -> Option<Task> {
        let t = self.tasks.remove(i)?;
        self.cpu_sum -= t.cpu_cost;
        self.gpu_sum -= t.gpu_cost;
        if self.tasks.is_empty() {
            // Forget the rounding the running sums gathered.
            (self.cpu_sum, self.gpu_sum) = (0.0, 0.0);
        }
        Some(t)
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
    /// Predicted seconds of GPU work taken but not finished.
    pub gpu_in_flight: f64,
}

/// How the queues are served.
#[derive(Debug, Clone, Copy)]
pub struct Policy {
    /// A task that has waited this share of its query's deadline is urgent.
    pub urgency: f64,
    /// CPU workers.
    pub cpu_workers: usize,
    /// Most tasks in one GPU batch.
    pub max_batch: usize,
    /// Predicted GPU batch time not to exceed (the batch's latency target).
    pub batch_target: f64,
}

/// How many tasks at the head of the CPU queue are looked at for the cheapest (small jobs first,
/// papers/001: "small jobs should get priority to minimize average delay").
const CHEAPEST_OF: usize = 16;

impl Queues {
    /// Whether nothing waits.
    pub fn is_empty(&self) -> bool {
        self.gpu.is_empty() && self.cpu.is_empty() && self.either.is_empty() && self.parts.is_empty()
    }

    /// Tasks waiting.
    pub fn len(&self) -> usize {
        self.gpu.len() + self.cpu.len() + self.either.len() + self.parts.len()
    }

    /// Queues a task by its preference.
    pub fn push(&mut self, task: Task) {
        match task.preference {
            Preference::Gpu => self.gpu.push_back(task),
            Preference::Cpu => self.cpu.push_back(task),
            Preference::Either => self.either.push_back(task),
        }
    }

    /// Predicted seconds until the GPU has drained what waits for it and what it runs.
    fn gpu_backlog(&self) -> f64 {
        self.gpu_in_flight + self.gpu.gpu_sum
    }

    /// Predicted seconds until each CPU worker has drained the CPU queue.
    fn cpu_backlog(&self, workers: usize) -> f64 {
        self.cpu.cpu_sum / workers.max(1) as f64
    }

    /// The next task for an idle CPU worker: a split query's part; an urgent CPU-suited task; the
    /// cheapest of the CPU queue's head; the oldest "either"; else one stolen from the GPU queue when
    /// the GPU would take longer to reach it than the CPU takes to run it.
    pub fn next_for_cpu(&mut self, now: Instant, policy: &Policy, has_gpu: bool) -> Option<(Task, Pick)> {
        if let Some(t) = self.parts.pop_front() {
            return Some((t, Pick::Own));
        }
        let urgent = |t: &Task| t.is_urgent(now, policy.urgency);
        if self.cpu.front().is_some_and(urgent) {
            return self.cpu.pop_front().map(|t| (t, Pick::Urgent));
        }
        if let Some(i) = self
            .either
            .tasks
            .iter()
            .position(|t| urgent(t) && (!has_gpu || t.cpu_cost <= t.gpu_cost * policy.cpu_workers as f64))
        {
            return self.either.remove(i).map(|t| (t, Pick::Urgent));
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
        if has_gpu && self.gpu_backlog() <= self.gpu.tasks[i].cpu_cost {
            return None;
        }
        self.gpu.remove(i).map(|t| (t, Pick::Stolen))
    }

    /// The next GPU batch: urgent GPU-suited tasks, then the GPU queue and the "either" queue, oldest
    /// first; when both are empty and the CPU queue would keep every worker busy longer than a batch
    /// takes, tasks stolen from it. Stops at `max_batch` tasks or when the batch's predicted time passes
    /// `batch_target` (at least one task). `batch_time(c)` predicts the seconds of a batch whose tasks'
    /// marginal GPU costs sum to `c`.
    pub fn next_for_gpu(
        &mut self,
        now: Instant,
        policy: &Policy,
        batch_time: impl Fn(f64) -> f64,
    ) -> Vec<(Task, Pick)> {
        let urgent = |t: &Task| t.is_urgent(now, policy.urgency);
        let mut batch: Vec<(Task, Pick)> = Vec::new();
        let mut cost = 0.0;
        // Without deadlines (a closed loop) a batch may take as long as the CPU and the GPU together
        // need to drain what waits, so that neither is left idle at the end while the other works.
        let lanes = [&self.gpu, &self.cpu, &self.either];
        let cpu_time = lanes.iter().map(|l| l.cpu_sum).sum::<f64>() / policy.cpu_workers.max(1) as f64;
        let gpu_time = lanes.iter().map(|l| l.gpu_sum).sum::<f64>();
        let drain = if cpu_time + gpu_time > 0.0 {
            cpu_time * gpu_time / (cpu_time + gpu_time)
        } else {
            0.0
        };
        let closed_target = drain.max(policy.batch_target);
        let full = |batch: &Vec<(Task, Pick)>, cost: f64, next: &Task| {
            let target = if next.job.deadline.is_some() {
                policy.batch_target
            } else {
                closed_target
            };
            !batch.is_empty()
                && (batch.len() >= policy.max_batch || batch_time(cost + next.gpu_cost) > target)
        };
        // Urgent either-tasks that suit the GPU go first.
        let mut i = 0;
        while i < self.either.len() {
            let t = &self.either.tasks[i];
            if urgent(t) && t.gpu_cost * (policy.cpu_workers as f64) < t.cpu_cost {
                if full(&batch, cost, t) {
                    break;
                }
                let t = self.either.remove(i).expect("in range");
                cost += t.gpu_cost;
                batch.push((t, Pick::Urgent));
            } else {
                i += 1;
            }
        }
        for (queue, pick) in [(&mut self.gpu, Pick::Own), (&mut self.either, Pick::Either)] {
            while let Some(t) = queue.front() {
                if full(&batch, cost, t) {
                    return batch;
                }
                let t = queue.pop_front().expect("non-empty");
                cost += t.gpu_cost;
                let pick = if pick == Pick::Own && urgent(&t) {
                    Pick::Urgent
                } else {
                    pick
                };
                batch.push((t, pick));
            }
        }
        while let Some(t) = self.cpu.front() {
            if full(&batch, cost, t) || self.cpu_backlog(policy.cpu_workers) <= batch_time(cost + t.gpu_cost)
            {
                break;
            }
            let t = self.cpu.pop_front().expect("non-empty");
            cost += t.gpu_cost;
            batch.push((t, Pick::Stolen));
        }
        batch
    }
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc::channel;
    use std::time::Duration;

    use warpsearch_query::{Mode, Query, Request};

    use super::*;

    fn task(cpu: f64, gpu: f64, preference: Preference, deadline: Option<Duration>) -> Task {
        let (tx, _) = channel();
        let f = Features {
            shortest: 1,
            second: 0,
            sum: 1,
            terms: 1,
        };
        let request = Request::new(Query::default(), Mode::Or, 10);
        Task {
            job: Arc::new(Job::new(0, request, f, deadline, tx, 1)),
            range: None,
            cpu_cost: cpu,
            gpu_cost: gpu,
            work: 1.0,
            preference,
        }
    }

    fn policy() -> Policy {
        Policy {
            urgency: 0.5,
            cpu_workers: 2,
            max_batch: 3,
            batch_target: 0.010,
        }
    }

    #[test]
    fn cpu_takes_parts_then_its_cheapest_then_either_then_steals_only_when_the_gpu_lags() {
        let now = Instant::now();
        let mut q = Queues::default();
        q.push(task(0.004, 1.0, Preference::Cpu, None));
        q.push(task(0.001, 1.0, Preference::Cpu, None));
        q.push(task(0.1, 0.1, Preference::Either, None));
        q.push(task(0.05, 0.001, Preference::Gpu, None));
        q.parts.push_front(task(0.2, 0.0, Preference::Cpu, None));
        let p = policy();
        let picks: Vec<(f64, Pick)> = std::iter::from_fn(|| q.next_for_cpu(now, &p, true))
            .map(|(t, pick)| (t.cpu_cost, pick))
            .collect();
        // The GPU task is not stolen: the GPU's backlog (1 ms) is below its CPU cost (50 ms).
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
        q.gpu_in_flight = 1.0;
        let (t, pick) = q.next_for_cpu(now, &p, true).unwrap();
        assert_eq!((t.cpu_cost, pick), (0.05, Pick::Stolen));
        assert!(q.is_empty());
    }

    #[test]
    fn urgent_tasks_jump_the_queue() {
        let mut q = Queues::default();
        let deadline = Some(Duration::from_millis(10));
        q.push(task(0.001, 1.0, Preference::Cpu, None));
        q.push(task(0.009, 1.0, Preference::Cpu, deadline));
        // Not yet urgent: the cheapest goes first; 6 ms later (past half the deadline) the old one is urgent.
        let later = Instant::now() + Duration::from_millis(6);
        let mut q2 = Queues::default();
        q2.push(task(0.009, 1.0, Preference::Cpu, deadline));
        q2.push(task(0.001, 1.0, Preference::Cpu, None));
        let (t, pick) = q2.next_for_cpu(later, &policy(), true).unwrap();
        assert_eq!((t.cpu_cost, pick), (0.009, Pick::Urgent));
        let (t, _) = q.next_for_cpu(Instant::now(), &policy(), true).unwrap();
        assert_eq!(t.cpu_cost, 0.001);
    }

    #[test]
    fn gpu_batches_stop_at_the_latency_target_or_the_size_limit() {
        let now = Instant::now();
        let deadline = Some(Duration::from_millis(100));
        let mut q = Queues::default();
        for _ in 0..5 {
            q.push(task(1.0, 0.004, Preference::Gpu, deadline));
        }
        // 1 ms fixed + 4 ms per task: two fit a 10 ms target.
        let batch = q.next_for_gpu(now, &policy(), |c| 0.001 + c);
        assert_eq!(batch.len(), 2);
        // Without deadlines the size limit (3) applies while the queue is long (the CPU and the GPU
        // together need 11 ms for 12 such tasks: 12 s / 2 workers and 48 ms on the GPU)...
        let mut q = Queues::default();
        for _ in 0..12 {
            q.push(task(1.0, 0.004, Preference::Gpu, None));
        }
        assert_eq!(q.next_for_gpu(now, &policy(), |c| 0.001 + c).len(), 3);
        // ... and the batch shrinks as the queue drains, so that the GPU does not finish last.
        let mut q = Queues::default();
        for _ in 0..2 {
            q.push(task(0.004, 0.1, Preference::Gpu, None));
        }
        assert_eq!(q.next_for_gpu(now, &policy(), |c| 0.001 + c).len(), 1);
        // One task always goes, whatever its cost.
        let mut q = Queues::default();
        q.push(task(1.0, 1.0, Preference::Either, deadline));
        assert_eq!(q.next_for_gpu(now, &policy(), |c| 0.001 + c).len(), 1);
    }

    #[test]
    fn the_gpu_steals_only_while_the_cpu_queue_outlasts_the_batch() {
        let now = Instant::now();
        let mut q = Queues::default();
        // Two workers, 30 ms of CPU work queued: 15 ms each; a batch of one takes 1 ms + 2 ms.
        for _ in 0..3 {
            q.push(task(0.010, 0.002, Preference::Cpu, None));
        }
        let batch = q.next_for_gpu(now, &policy(), |c| 0.001 + c);
        assert!(batch.iter().all(|(_, p)| *p == Pick::Stolen));
        assert_eq!(
            batch.len(),
            2,
            "stops once the CPU's backlog is below the batch time"
        );
        let mut idle = Queues::default();
        idle.push(task(0.0001, 0.002, Preference::Cpu, None));
        assert!(idle.next_for_gpu(now, &policy(), |c| 0.001 + c).is_empty());
    }
}
