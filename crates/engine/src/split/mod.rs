//! A query cut between processors: the GPU answers one docID range (or two, adjacent), the CPU
//! completes the rest exactly ([`complete()`]), and the parts' top-k lists merge. The list cache's
//! policy decides the cut ([`crate::cache::CacheCtl::split`]); the GPU backend and the hybrid run it.

mod complete;

use warpsearch_query::{Answer, DocRange, Request};

pub use complete::{complete, gpu_mode, join_two, Partial};

/// Where a query (or a task's docID range) runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Split {
    /// All on the GPU.
    Gpu,
    /// The GPU answers the first range, the CPU completes the second.
    Partial(DocRange, DocRange),
    /// Both ranges on the GPU, as two parts of one batch: the first where the cached prefixes
    /// reach, the second with the blocks after them staged (so a partly cached list is staged only
    /// from where its cached prefix ends).
    Two(DocRange, DocRange),
    /// All on the CPU (the GPU could not even stage the first document's blocks).
    Cpu,
}

impl Split {
    /// The docID ranges the GPU runs for this split of `whole` (the range it was cut from), in order:
    /// none for `Cpu`, the two adjacent ones of `Two`, else one. Each is one GPU request.
    pub fn gpu_ranges(self, whole: DocRange) -> impl Iterator<Item = DocRange> {
        let (a, b) = match self {
            Split::Cpu => (None, None),
            Split::Gpu => (Some(whole), None),
            Split::Partial(g, _) => (Some(g), None),
            Split::Two(a, b) => (Some(a), Some(b)),
        };
        a.into_iter().chain(b)
    }
}

/// A query's answer from the GPU's answers to its ranges ([`Split::gpu_ranges`]), taken in order from
/// `answers`: `Two`'s two joined ([`join_two`]); and whether and-or still needs its OR pass.
pub fn take_answer<E>(
    split: Split,
    request: &Request,
    answers: &mut impl Iterator<Item = std::result::Result<Answer, E>>,
) -> (std::result::Result<Answer, E>, bool) {
    let mut next = || answers.next().expect("one answer per GPU range");
    let first = next();
    match split {
        Split::Two(..) => join_two(request, first, next()),
        _ => (first, false),
    }
}

/// The request the GPU runs for a query it answers in part (and-or's AND pass).
pub fn gpu_request(request: &Request, split: Split) -> Request {
    match split {
        Split::Partial(..) | Split::Two(..) => Request {
            mode: gpu_mode(request.mode),
            ..request.clone()
        },
        _ => request.clone(),
    }
}
