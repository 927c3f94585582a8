//! [`GpuError`]: what can go wrong on the GPU side, typed, for the caller to answer elsewhere.

/// What can go wrong on the GPU side.
#[derive(Debug, thiserror::Error)]
pub enum GpuError {
    /// No usable GPU here (the reason says what is missing).
    #[error("{0}")]
    Unavailable(String),
    /// A CUDA driver call failed.
    #[error("CUDA driver: {0}")]
    Driver(#[from] cudarc::driver::DriverError),
    /// NVRTC rejected the kernel source.
    #[error("kernel compilation failed: {0}")]
    Compile(String),
    /// The request does not fit the GPU engine (k, memory budget, algorithm).
    #[error("{0}")]
    Unsupported(String),
    /// The GPU could not answer a query (a failed batch or a malformed block); another backend can.
    #[error("{0}")]
    Failed(String),
    /// The index could not be read.
    #[error(transparent)]
    Index(#[from] warpsearch_index::IndexError),
}
