//! The list cache as a user asks for it, by the names of the CLI's `--gpu-cache` options or of
//! Python's `gpu_cache` arguments: checked, and turned into the GPU's memory split and the cache's
//! options. One place for both front ends, so that they accept and refuse the same things.

use warpsearch_gpu::device::BLOCK_LEN;
use warpsearch_gpu::CacheBudget;
use warpsearch_query::Request;

use super::{CacheOptions, Completion, Policy};

/// What a user asked of the list cache.
#[derive(Debug, Clone)]
pub struct CacheChoice {
    /// qtf, qtfdf, vfb or dynamic.
    pub policy: String,
    /// GPU memory for the cache and the staging buffers together, in bytes.
    pub memory: Option<usize>,
    /// The staging buffers S_b, in bytes (default [`default_buffer`]); the cache S_c takes the rest.
    pub buffer: Option<usize>,
    /// The training log, analysed (None where none was given: only dynamic may go without).
    pub train: Option<Vec<Request>>,
    /// VFB's block, in postings (a multiple of the index's blocks).
    pub block: u32,
    /// auto, cpu or transfer.
    pub completion: String,
    /// The rest of the options (λ, epoch, decay, gain, headroom, chunks, slots); its policy, training log,
    /// group and completion are replaced by the fields above.
    pub tuning: CacheOptions,
}

impl Default for CacheChoice {
    fn default() -> CacheChoice {
        CacheChoice {
            policy: Policy::Vfb.name().to_owned(),
            memory: None,
            buffer: None,
            train: None,
            block: 256,
            completion: Completion::Auto.name().to_owned(),
            tuning: CacheOptions::default(),
        }
    }
}

/// The most pipeline slots a cached GPU may be given (each holds per-CTA scratch of its own).
pub const MAX_SLOTS: usize = 16;

/// Staging buffers S_b when not given: a quarter of the budget (the best split measured on the 25M
/// collection at a quarter of the index, `bench/RESULTS.md`), from 64 MiB to 4 GiB.
pub fn default_buffer(budget: usize) -> usize {
    (budget / 4).clamp(64 << 20, 4 << 30).min(budget / 2)
}

impl CacheChoice {
    /// The GPU's memory split and the cache's options, or what is wrong in words that name each option
    /// as `name` spells it (`name("gpu-cache-buffer")`: `--gpu-cache-buffer` on the command line,
    /// `gpu_cache_buffer` in Python).
    pub fn resolve(self, name: impl Fn(&str) -> String) -> Result<(CacheBudget, CacheOptions), String> {
        let policy = [Policy::Qtf, Policy::QtfDf, Policy::Vfb, Policy::Dynamic]
            .into_iter()
            .find(|p| p.name() == self.policy)
            .ok_or_else(|| {
                format!(
                    "{} '{}' is not a policy: use qtf, qtfdf, vfb or dynamic",
                    name("gpu-cache"),
                    self.policy
                )
            })?;
        let Some(budget) = self.memory else {
            return Err(format!(
                "{} needs {}: the GPU memory for the cache and the staging buffers",
                name("gpu-cache"),
                name("gpu-memory")
            ));
        };
        let buffer = self.buffer.unwrap_or_else(|| default_buffer(budget));
        if buffer >= budget {
            return Err(format!(
                "{} ({buffer} bytes) must be below {} ({budget} bytes): the cache takes the rest",
                name("gpu-cache-buffer"),
                name("gpu-memory")
            ));
        }
        let t = &self.tuning;
        if let Some(r) = t.ratio.filter(|&r| !(r > 0.0 && r <= 1.0)) {
            return Err(format!(
                "{} must be above 0 and at most 1, not {r}",
                name("gpu-cache-ratio")
            ));
        }
        if t.chunks == 0 {
            return Err(format!(
                "{} must be at least 1 (1: one chunk per GPU batch of queries)",
                name("gpu-cache-chunks")
            ));
        }
        if t.slots == 1 || t.slots > MAX_SLOTS {
            return Err(format!(
                "{} must be from 2 to {MAX_SLOTS}, not {} (each slot stages a batch)",
                name("gpu-cache-slots"),
                t.slots
            ));
        }
        let block = BLOCK_LEN as u32;
        if self.block == 0 || !self.block.is_multiple_of(block) {
            return Err(format!(
                "{} must be a multiple of {block} postings, not {}",
                name("gpu-cache-block"),
                self.block
            ));
        }
        let completion = [Completion::Auto, Completion::Cpu, Completion::Transfer]
            .into_iter()
            .find(|c| c.name() == self.completion)
            .ok_or_else(|| {
                format!(
                    "{} '{}' is not a completion: use auto, cpu or transfer",
                    name("gpu-cache-complete"),
                    self.completion
                )
            })?;
        let train = match self.train {
            Some(train) => train,
            None if policy != Policy::Dynamic => {
                return Err(format!(
                    "{} {} needs a training log: {} (only dynamic learns from the stream)",
                    name("gpu-cache"),
                    policy.name(),
                    name("gpu-cache-train")
                ))
            }
            None => Vec::new(),
        };
        let budget = CacheBudget {
            cache_bytes: (budget - buffer) as u64,
            stage_bytes: buffer as u64,
            shape: None,
            slots: self.tuning.slots,
        };
        let options = CacheOptions {
            policy,
            train,
            group: self.block / block,
            completion,
            epoch: t.epoch.max(1),
            min_gain: t.min_gain.max(0.0),
            ..self.tuning
        };
        Ok((budget, options))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flag(s: &str) -> String {
        format!("--{s}")
    }

    fn vfb(memory: usize) -> CacheChoice {
        CacheChoice {
            memory: Some(memory),
            train: Some(Vec::new()),
            ..CacheChoice::default()
        }
    }

    /// The split, the defaults and the options carried over.
    #[test]
    fn a_choice_becomes_the_split_and_options_asked_for() {
        let (budget, options) = vfb(1 << 30).resolve(flag).unwrap();
        assert_eq!(
            budget.stage_bytes,
            256 << 20,
            "a quarter of the budget by default"
        );
        assert_eq!(budget.cache_bytes, 768 << 20);
        assert_eq!(budget.slots, 0, "the GPU's default number of slots");
        assert_eq!((options.policy, options.group), (Policy::Vfb, 2));
        let choice = CacheChoice {
            policy: "dynamic".into(),
            buffer: Some(100 << 20),
            train: None,
            block: 512,
            completion: "cpu".into(),
            tuning: CacheOptions {
                ratio: Some(0.5),
                epoch: 0,
                slots: 3,
                ..CacheOptions::default()
            },
            ..vfb(1 << 30)
        };
        let (budget, options) = choice.resolve(flag).unwrap();
        assert_eq!(budget.stage_bytes, 100 << 20);
        assert_eq!(budget.slots, 3);
        assert_eq!(
            (options.policy, options.group, options.completion),
            (Policy::Dynamic, 4, Completion::Cpu)
        );
        assert_eq!(
            (options.ratio, options.epoch),
            (Some(0.5), 1),
            "an epoch of at least one query"
        );
        assert!(options.train.is_empty(), "dynamic may start without a log");
    }

    /// Each mistake is refused in words naming the option as the front end spells it.
    #[test]
    fn mistakes_are_named_as_the_front_end_spells_them() {
        let python = |s: &str| s.replace('-', "_");
        type Change = fn(&mut CacheChoice);
        let cases: [(Change, &str); 10] = [
            (|c| c.policy = "lru".into(), "gpu_cache 'lru' is not a policy"),
            (|c| c.memory = None, "gpu_cache needs gpu_memory"),
            (
                |c| c.buffer = Some(1 << 30),
                "gpu_cache_buffer (1073741824 bytes) must be below",
            ),
            (|c| c.block = 100, "gpu_cache_block must be a multiple of 128"),
            (|c| c.completion = "gpu".into(), "gpu_cache_complete 'gpu'"),
            (
                |c| c.train = None,
                "gpu_cache vfb needs a training log: gpu_cache_train",
            ),
            (
                |c| c.tuning.ratio = Some(1.5),
                "gpu_cache_ratio must be above 0 and at most 1, not 1.5",
            ),
            (|c| c.tuning.chunks = 0, "gpu_cache_chunks must be at least 1"),
            (
                |c| c.tuning.slots = 1,
                "gpu_cache_slots must be from 2 to 16, not 1",
            ),
            (
                |c| c.tuning.slots = 17,
                "gpu_cache_slots must be from 2 to 16, not 17",
            ),
        ];
        for (change, want) in cases {
            let mut choice = vfb(1 << 30);
            change(&mut choice);
            let got = choice.resolve(python).unwrap_err();
            assert!(got.starts_with(want), "{got:?} should start with {want:?}");
        }
        let mut choice = vfb(0);
        choice.memory = None;
        let got = choice.resolve(flag).unwrap_err();
        assert!(got.starts_with("--gpu-cache needs --gpu-memory"), "{got}");
    }
}
