//! What a user should hear of (the GPU's failures answered on the CPU), noted by the engine's threads and
//! kept until the binary asks for it: the engine never prints.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use crate::reply::lock;

/// What a user should hear of, kept until the binary asks ([`crate::Engine::take_notes`]); written by the
/// engine's threads.
#[derive(Default)]
pub(crate) struct Notes {
    lines: Mutex<Vec<String>>,
    /// Requests the CPU answered after the GPU failed them, since the engine was made.
    fallbacks: AtomicU64,
}

impl Notes {
    /// `n` requests the GPU failed were answered on the CPU; `line` says why.
    pub fn fallback(&self, n: u64, line: String) {
        self.fallbacks.fetch_add(n, Ordering::Relaxed);
        lock(&self.lines).push(line);
    }

    /// The lines noted since the last call.
    pub fn take(&self) -> Vec<String> {
        std::mem::take(&mut *lock(&self.lines))
    }

    /// Requests the CPU answered after the GPU failed them, in all.
    pub fn fallbacks(&self) -> u64 {
        self.fallbacks.load(Ordering::Relaxed)
    }
}
