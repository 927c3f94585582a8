//! Which processor answers queries, and what the user asked for.

/// What the user asked for (`--backend`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackendChoice {
    /// The CPU and the GPU together where a GPU can serve the options, else the CPU; the engine says
    /// which and why.
    Auto,
    /// The CPU engine on all threads.
    Cpu,
    /// The GPU engine; an error where it cannot serve the options.
    Gpu,
    /// The CPU and the GPU together (the hybrid scheduler); the CPU alone where no GPU serves.
    Hybrid,
}

impl BackendChoice {
    /// Every choice, in the order the command line lists them.
    pub const ALL: [BackendChoice; 4] = [
        BackendChoice::Auto,
        BackendChoice::Cpu,
        BackendChoice::Gpu,
        BackendChoice::Hybrid,
    ];

    /// The command-line name.
    pub fn name(self) -> &'static str {
        match self {
            BackendChoice::Auto => "auto",
            BackendChoice::Cpu => "cpu",
            BackendChoice::Gpu => "gpu",
            BackendChoice::Hybrid => "hybrid",
        }
    }

    /// Parses a command-line name.
    pub fn by_name(name: &str) -> Result<Self, String> {
        BackendChoice::ALL
            .into_iter()
            .find(|b| b.name() == name)
            .ok_or_else(|| format!("unknown backend '{name}': expected auto, cpu, gpu or hybrid"))
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
