//! What a user should hear of (the GPU's failures answered on the CPU), noted by the engine's threads and
//! kept until the binary asks for it: the engine never prints. [`Failures`] is the one place where a
//! failure the GPU returns becomes a note, for every backend that runs the GPU.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use warpsearch_gpu::GpuError;

use crate::reply::lock;

/// What a user should hear of, kept until the binary asks ([`crate::Engine::take_notes`]); written by the
/// engine's threads.
#[derive(Default)]
pub(crate) struct Notes {
    lines: Mutex<Vec<String>>,
    /// Requests the CPU answered after the GPU failed them, since the engine was made.
    fallbacks: AtomicU64,
    /// Of them, those the GPU failed (a failed batch or call), not refused as beyond its limits.
    gpu_failures: AtomicU64,
}

impl Notes {
    /// `n` requests the GPU failed were answered on the CPU; `line` says why.
    pub fn fallback(&self, n: u64, line: String) {
        self.fallbacks.fetch_add(n, Ordering::Relaxed);
        lock(&self.lines).push(line);
    }

    /// Of `n` requests answered on the CPU, `failed` were failed by the GPU (a failed batch or call).
    pub fn gpu_failed(&self, failed: u64) {
        self.gpu_failures.fetch_add(failed, Ordering::Relaxed);
    }

    /// Requests the GPU failed (not refused), in all.
    pub fn gpu_failures(&self) -> u64 {
        self.gpu_failures.load(Ordering::Relaxed)
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

/// The GPU's failures of one call or batch, by reason, each answered on the CPU by the caller and
/// noted once with its count ([`Failures::note`]), so that a batch of a thousand failures is one line.
#[derive(Default)]
pub(crate) struct Failures {
    reasons: Vec<(String, u64)>,
    /// Of them, those the GPU failed rather than refused.
    failed: u64,
}

impl Failures {
    /// One request the GPU failed with `e`.
    pub fn add(&mut self, e: &GpuError) {
        let why = match e {
            GpuError::Failed(why) => {
                self.failed += 1;
                why.clone()
            }
            other => format!("the GPU cannot answer it ({other})"),
        };
        match self.reasons.iter_mut().find(|(w, _)| *w == why) {
            Some((_, n)) => *n += 1,
            None => self.reasons.push((why, 1)),
        }
    }

    /// Requests counted.
    pub fn count(&self) -> u64 {
        self.reasons.iter().map(|(_, n)| n).sum()
    }

    /// Notes each reason with its count.
    pub fn note(self, notes: &Notes) {
        notes.gpu_failed(self.failed);
        for (why, n) in self.reasons {
            notes.fallback(n, format!("{why}: {n} queries answered on the CPU"));
        }
    }
}
