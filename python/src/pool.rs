//! The searcher's threads, where it was given a number of them.

/// Runs `work` on `pool`, or where it is called (rayon's global pool serves its parallel iterators): the
/// searcher's threads when it was given a number of them.
pub(crate) fn on_pool<R: Send>(pool: Option<&rayon::ThreadPool>, work: impl FnOnce() -> R + Send) -> R {
    match pool {
        Some(p) => p.install(work),
        None => work(),
    }
}
