//! `warpsearch gpu-check`: the engine's measurements of GPU 0, printed as they come.

use anyhow::Result;

use crate::args::GpuCheckArgs;

/// `warpsearch gpu-check`.
pub fn gpu_check(a: GpuCheckArgs) -> Result<()> {
    let index = a.index.as_deref().map(crate::open).transpose()?;
    warpsearch_engine::devices::gpu_check(&a.kernels, index.as_ref(), a.reps, |line| println!("{line}"))?;
    Ok(())
}
