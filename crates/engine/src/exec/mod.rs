//! The two executors every query runs on, whatever the backend: [`cpu::CpuExecutor`] (threads that
//! take queries from one first-come queue) and [`gpu::GpuExecutor`] (one thread that hands the GPU a
//! call of whatever has arrived while earlier calls compute). Both take a [`Batch`] and hand each
//! answer to the batch's [`Reply`] as soon as it is ready. The scheduler ([`crate::Scheduler`])
//! decides which executor takes what; nothing else runs a query.
//!
//! - What the GPU fails goes to the CPU executor as a batch of its own ([`gpu`]'s one fallback site),
//!   so that every query gets exactly one answer.
//! - A query cut into docID-range parts answers to a [`gather::Gather`], which merges the parts
//!   exactly and sends the one answer.
//! - [`Learn`] is how the executors report what they measured to the scheduler's cost model.

mod cached;
pub(crate) mod cpu;
pub(crate) mod gather;
pub(crate) mod gpu;

use std::sync::Arc;
use std::time::{Duration, Instant};

use warpsearch_query::{DocRange, Mode, Request};

use crate::cost::Features;
use crate::reply::Reply;
use gather::Gather;

/// Queries handed to an executor together, with where their answers go.
pub(crate) struct Batch {
    /// The id of the first of [`Items::Queries`] (the others are numbered on from it).
    pub first_id: u64,
    pub items: Items,
    /// When the queries were submitted: the time they wait counts in their latency and deadline.
    pub submitted: Instant,
    /// Time allowed from `submitted` (None: none).
    pub deadline: Option<Duration>,
    pub reply: Arc<dyn Reply>,
}

/// What a batch asks.
pub(crate) enum Items {
    /// Whole queries, numbered from the batch's first id (a caller's submission, untouched).
    Queries(Vec<Request>),
    /// Queries or parts of them, each with its id and documents (the hybrid's, and the GPU's
    /// failures).
    Tasks(Vec<Task>),
}

/// One query, or one docID range of it.
#[derive(Clone)]
pub(crate) struct Task {
    pub id: u64,
    pub request: Request,
    /// The documents it covers ([`DocRange::ALL`]: the whole query).
    pub range: DocRange,
    /// The query's other parts, whose best k-th score a part starts from (None: a whole query).
    pub gather: Option<Arc<Gather>>,
    /// Its features, where its measured time teaches the cost model (a whole query of the hybrid's).
    pub learn: Option<Features>,
    /// Its predicted seconds on one CPU core (what it adds to the CPU's backlog).
    pub cost: f64,
    /// A hedge's copy for the GPU: the CPU runs the query already, so no CPU thread takes it back.
    pub copy: bool,
}

impl Task {
    /// A whole query that teaches nothing and predicts nothing.
    pub fn whole(id: u64, request: Request) -> Task {
        Task {
            id,
            request,
            range: DocRange::ALL,
            gather: None,
            learn: None,
            cost: 0.0,
            copy: false,
        }
    }
}

impl Items {
    pub fn len(&self) -> usize {
        match self {
            Items::Queries(q) => q.len(),
            Items::Tasks(t) => t.len(),
        }
    }
}

impl Batch {
    /// A caller's submission, submitted now.
    pub fn queries(
        first_id: u64,
        requests: Vec<Request>,
        deadline: Option<Duration>,
        reply: Arc<dyn Reply>,
    ) -> Batch {
        Batch {
            first_id,
            items: Items::Queries(requests),
            submitted: Instant::now(),
            deadline,
            reply,
        }
    }

    /// Tasks submitted at `submitted`.
    pub fn tasks(
        tasks: Vec<Task>,
        submitted: Instant,
        deadline: Option<Duration>,
        reply: Arc<dyn Reply>,
    ) -> Batch {
        Batch {
            first_id: 0,
            items: Items::Tasks(tasks),
            submitted,
            deadline,
            reply,
        }
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Whether its deadline has passed.
    pub fn missed(&self) -> bool {
        self.deadline.is_some_and(|d| self.submitted.elapsed() > d)
    }
}

/// What the executors measured, for the scheduler's cost model and rates (the hybrid's; the other
/// backends learn nothing).
pub(crate) trait Learn: Send + Sync {
    /// A CPU thread ran `tasks` tasks in `seconds`; `queries` are the whole queries among them that
    /// teach the model, each with its mode, features and seconds.
    fn cpu(&self, queries: &[(Mode, Features, f64)], tasks: u32, seconds: f64);

    /// A GPU call of `tasks` tasks took `seconds` of the GPU's time; `mode` where they share one, and
    /// the work predicted for them.
    fn gpu(&self, tasks: usize, seconds: f64, mode: Option<Mode>, work: f64);

    /// The CPU took `queries` queries the GPU's queue held (they had waited for the GPU).
    fn stolen(&self, queries: usize);

    /// The GPU failed `queries` tasks, which the CPU answers.
    fn failed(&self, queries: u64);
}
