//! CPU completion of what the GPU answered on part of a query's documents (docs/references.md#pruned-list-caching section 3.4,
//! generalised): the GPU answered the documents of one docID range from its cache and the blocks its
//! batch carried; the CPU searches the rest of the query's range starting from the GPU's k-th score,
//! and the two top-k lists merge exactly. On a global-score-ordered index the CPU's early termination
//! stops at once when the GPU's answer is already final (the paper's m rule).

use warpsearch_cpu::CpuSearcher;
use warpsearch_index::Result;
use warpsearch_query::{merge_top_k, Answer, DocRange, Mode, Part, Request, Scored};

/// What the GPU answered of a query and what is left.
#[derive(Debug, Clone)]
pub struct Partial {
    /// The GPU's top k over its range (AND's, for and-or).
    pub hits: Vec<Scored>,
    /// The documents left for the CPU.
    pub rest: DocRange,
    /// All the documents of the task (the GPU's range and `rest`): and-or's OR pass runs over them.
    pub whole: DocRange,
}

/// The mode the GPU runs a query in when it answers part of it: and-or's first pass (AND), since its
/// OR pass depends on the AND result over all documents.
pub fn gpu_mode(mode: Mode) -> Mode {
    if mode == Mode::AndOr {
        Mode::And
    } else {
        mode
    }
}

/// The top k of `request` over `partial.whole`, from the GPU's part and the CPU's search of the rest
/// (starting from the larger of `floor` and the GPU's k-th score).
pub fn complete(cpu: &CpuSearcher, request: &Request, partial: &Partial, floor: f32) -> Result<Vec<Scored>> {
    let k = request.k;
    let mode = gpu_mode(request.mode);
    let kth = if k > 0 && partial.hits.len() >= k {
        partial.hits[k - 1].score
    } else {
        f32::NEG_INFINITY
    };
    let rest = if partial.rest.is_empty() {
        Vec::new()
    } else {
        cpu.search_part(
            request,
            mode,
            Part {
                range: partial.rest,
                floor: floor.max(kth),
            },
        )?
    };
    let merged = merge_top_k(&[partial.hits.clone(), rest], k);
    if request.mode == Mode::AndOr && merged.len() < k {
        // Fewer than k documents hold every term: and-or answers with OR over the same documents.
        return cpu.search_part(
            request,
            Mode::Or,
            Part {
                range: partial.whole,
                floor: f32::NEG_INFINITY,
            },
        );
    }
    Ok(merged)
}

/// A query the GPU ran as two adjacent ranges ([`super::Split::Two`]): its two answers merged into
/// one top k, and whether and-or still needs its OR pass (fewer than k documents hold every term; the
/// GPU ran its AND pass only).
pub fn join_two<E>(
    request: &Request,
    first: Result<Answer, E>,
    second: Result<Answer, E>,
) -> (Result<Answer, E>, bool) {
    let both = first.and_then(|x| {
        second.map(|y| Answer {
            hits: merge_top_k(&[x.hits, y.hits], request.k),
            latency: x.latency.max(y.latency),
        })
    });
    let or_pass = request.mode == Mode::AndOr && both.as_ref().is_ok_and(|a| a.hits.len() < request.k);
    (both, or_pass)
}
