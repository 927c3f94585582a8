//! Which processor answers queries, and what the user asked for.

/// What the user asked for (`--backend`).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Default,
    strum::Display,
    strum::EnumString,
    strum::IntoStaticStr,
    strum::VariantNames,
    serde::Serialize,
    serde::Deserialize,
)]
#[strum(serialize_all = "lowercase")]
#[serde(rename_all = "lowercase")]
pub enum BackendChoice {
    /// The GPU (the CPU answering what it fails) where a GPU can serve the options, else the CPU; the
    /// engine says which and why.
    #[default]
    Auto,
    /// The CPU engine on all threads.
    Cpu,
    /// The GPU engine; an error where it cannot serve the options.
    Gpu,
    /// The CPU and the GPU together (the hybrid scheduler); the CPU alone where no GPU serves.
    Hybrid,
}

impl BackendChoice {
    /// The command-line name.
    pub fn name(self) -> &'static str {
        self.into()
    }

    /// Parses a command-line name.
    pub fn by_name(name: &str) -> Result<Self, String> {
        warpsearch_query::named("backend", name)
    }
}

/// The processor an engine runs queries on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// The CPU engine, one query per thread.
    Cpu,
    /// The GPU engine in batches; the CPU answers what it fails.
    Gpu,
    /// The hybrid scheduler over CPU workers and, where one serves, the GPU.
    Hybrid,
}
