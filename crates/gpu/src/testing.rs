//! For the GPU tests of this crate and the engine's: the device opened once per test process, and
//! lines that show in every log however the harness captures output (a skipped test says why).

use std::sync::{Arc, OnceLock};

use crate::Gpu;

/// The first GPU, opened once per process; None, after saying "skipped: no CUDA device (why)" on
/// standard error, where there is none.
pub fn gpu() -> Option<Arc<Gpu>> {
    static GPU: OnceLock<Result<Arc<Gpu>, String>> = OnceLock::new();
    match GPU.get_or_init(|| Gpu::open(0).map(Arc::new).map_err(|e| e.to_string())) {
        Ok(g) => Some(g.clone()),
        Err(why) => {
            say(&format!("skipped: no CUDA device ({why})"));
            None
        }
    }
}

/// Writes a line to standard error past the test harness's capture, so that skips show in every log.
pub fn say(line: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "{line}");
}
