//! Where a command writes: standard output, or a file written under a temporary name and renamed
//! when complete.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

/// Standard output, or a file written under a temporary name and renamed when complete.
pub(crate) struct Output {
    pub(crate) writer: Box<dyn Write>,
    paths: Option<(PathBuf, PathBuf)>,
}

impl Output {
    pub(crate) fn create(path: Option<&Path>, force: bool) -> Result<Output> {
        let Some(path) = path else {
            return Ok(Output {
                writer: Box::new(BufWriter::new(std::io::stdout().lock())),
                paths: None,
            });
        };
        if path.exists() && !path.is_file() {
            // A device or pipe (/dev/null, a FIFO): write to it as it is, never rename over it.
            let file = std::fs::OpenOptions::new()
                .write(true)
                .open(path)
                .with_context(|| format!("opening {}", path.display()))?;
            return Ok(Output {
                writer: Box::new(BufWriter::new(file)),
                paths: None,
            });
        }
        Output::check(Some(path), force)?;
        // `.NAME.tmp-PID`: a later run removes it if this process is killed before the rename.
        warpsearch_index::replace::clean_stale(path)?;
        let tmp = warpsearch_index::replace::hidden_beside(path, "tmp");
        let file = File::create(&tmp).with_context(|| format!("creating {}", tmp.display()))?;
        Ok(Output {
            writer: Box::new(BufWriter::new(file)),
            paths: Some((tmp, path.to_owned())),
        })
    }

    /// Refuses an existing regular file at `path` unless `force`.
    pub(crate) fn check(path: Option<&Path>, force: bool) -> Result<()> {
        if let Some(path) = path {
            if path.is_file() && !force {
                bail!("{} exists: pass --force to replace it", path.display());
            }
        }
        Ok(())
    }

    /// Writes `report` as pretty JSON to `path`, under a temporary name renamed when complete (it
    /// replaces an older report): `bench --json` and `load --json`.
    pub(crate) fn json_report(path: &Path, report: &serde_json::Value) -> Result<()> {
        let mut out = Output::create(Some(path), true)?;
        out.writer
            .write_all((serde_json::to_string_pretty(report)? + "\n").as_bytes())?;
        out.finish()
    }

    pub(crate) fn finish(mut self) -> Result<()> {
        self.writer.flush()?;
        // Close the file before the rename.
        self.writer = Box::new(std::io::sink());
        if let Some((tmp, path)) = self.paths.take() {
            std::fs::rename(&tmp, &path)
                .with_context(|| format!("renaming {} to {}", tmp.display(), path.display()))?;
        }
        Ok(())
    }
}

impl Drop for Output {
    /// A run that failed half-way (a full disk, a bad query) leaves no temporary file behind.
    fn drop(&mut self) {
        if let Some((tmp, _)) = self.paths.take() {
            self.writer = Box::new(std::io::sink());
            let _ = std::fs::remove_file(tmp);
        }
    }
}
