//! Putting a finished directory or file in place atomically, and cleaning what a killed run left.
//!
//! Everything is written under a hidden name beside its destination, `.NAME.tmp-PID`, synced, then put
//! in place by one rename. An existing index is replaced by exchanging the two directories in one
//! `renameat2(RENAME_EXCHANGE)` (Linux), so the output path holds the old or the new complete index at
//! every instant; the old one is then removed from the temporary name. Where the exchange is not
//! available the old index is first renamed aside to `.NAME.old-PID`: a kill between the two renames
//! leaves NAME missing, and the next open or build of NAME renames the old index back.
//!
//! Leftovers of processes that no longer run (`.NAME.tmp-PID`, `.NAME.old-PID`,
//! `.warpsearch-runs-PID-*`) are removed by the next build or write to the same path; leftovers of a
//! live process are left alone.
//!
//! Removing an old index (after a replacement, or one a killed replacement left aside) removes the
//! files an index holds and nothing else: a directory that also holds other things is kept, with them.
//!
//! `WARPSEARCH_FAIL_AT=POINT` (a test hook) aborts the process at a named point, as a kill would;
//! `POINT:error` returns an I/O error there instead. The points are in [`FAIL_POINTS`].

use std::fs;
use std::path::{Path, PathBuf};

use crate::error::{IndexError, IoContext, Result};

/// The points `WARPSEARCH_FAIL_AT` can name, in the order a build reaches them.
pub const FAIL_POINTS: &[&str] = &[
    "runs-created",
    "files-written",
    "renamed-aside",
    "exchanged",
    "file-written",
];

/// Aborts (or fails, with `POINT:error`) when `WARPSEARCH_FAIL_AT` names `point`; only in builds with
/// the `failpoints` feature (the tests'), so that no other build reads the environment.
#[cfg(feature = "failpoints")]
pub fn fail_point(point: &str, path: &Path) -> Result<()> {
    let Ok(want) = std::env::var("WARPSEARCH_FAIL_AT") else {
        return Ok(());
    };
    match want.split_once(':') {
        None if want == point => std::process::abort(),
        Some((p, "error")) if p == point => Err(IndexError::Io {
            path: path.to_owned(),
            cause: std::io::Error::other(format!("injected failure at {point}")),
        }),
        _ => Ok(()),
    }
}

/// Without the `failpoints` feature no failure is injected.
#[cfg(not(feature = "failpoints"))]
pub fn fail_point(_point: &str, _path: &Path) -> Result<()> {
    Ok(())
}

/// Whether `WARPSEARCH_FAIL_AT` names `point` at all (to take the path that reaches it).
#[cfg(feature = "failpoints")]
fn fail_point_named(point: &str) -> bool {
    std::env::var("WARPSEARCH_FAIL_AT").is_ok_and(|w| w.split(':').next() == Some(point))
}

#[cfg(not(feature = "failpoints"))]
fn fail_point_named(_point: &str) -> bool {
    false
}

/// `.NAME.KIND-PID` beside `out`.
pub fn hidden_beside(out: &Path, kind: &str) -> PathBuf {
    out.with_file_name(format!(".{}.{kind}-{}", file_name(out), std::process::id()))
}

fn file_name(out: &Path) -> String {
    out.file_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "index".into())
}

fn parent(out: &Path) -> &Path {
    out.parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
}

/// Whether process `pid` runs (unknowable outside Linux: then assumed to run, so nothing is removed).
fn alive(pid: u32) -> bool {
    if !cfg!(target_os = "linux") {
        return true;
    }
    pid == std::process::id() || Path::new("/proc").join(pid.to_string()).exists()
}

/// Leftovers beside `out` of processes that no longer run: (path, kind, pid).
fn leftovers(out: &Path) -> Vec<(PathBuf, String)> {
    let name = file_name(out);
    let Ok(entries) = fs::read_dir(parent(out)) else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for entry in entries.flatten() {
        let entry_name = entry.file_name().to_string_lossy().into_owned();
        let rest = entry_name
            .strip_prefix(&format!(".{name}."))
            .and_then(|r| r.split_once('-'))
            .filter(|(kind, _)| ["tmp", "old"].contains(kind))
            .map(|(kind, pid)| (kind.to_owned(), pid.parse::<u32>().ok()));
        let runs = entry_name
            .strip_prefix(".warpsearch-runs-")
            .and_then(|r| r.split('-').next())
            .map(|pid| ("runs".to_owned(), pid.parse::<u32>().ok()));
        if let Some((kind, Some(pid))) = rest.or(runs) {
            if !alive(pid) {
                found.push((entry.path(), kind));
            }
        }
    }
    found.sort();
    found
}

/// When `out` is missing but a replaced-aside old index of a dead process survives as
/// `.NAME.old-PID`, renames it back; returns whether it did.
pub fn recover(out: &Path) -> bool {
    if out.exists() {
        return false;
    }
    for (path, kind) in leftovers(out) {
        if kind == "old"
            && path.join(crate::format::files::META.0).is_file()
            && fs::rename(&path, out).is_ok()
        {
            return true;
        }
    }
    false
}

/// Recovers `out` (see [`recover`]) and removes every other leftover of a dead process beside it; an
/// old index directory that also holds what no build wrote is left as it is.
pub fn clean_stale(out: &Path) -> Result<()> {
    recover(out);
    for (path, kind) in leftovers(out) {
        let removed = if kind != "old" && path.is_dir() {
            // A temporary directory or the runs of a build: what is in it, the writer wrote.
            fs::remove_dir_all(&path)
        } else if path.is_dir() {
            match remove_index_dir(&path) {
                Err(IndexError::Invalid(_)) => Ok(()),
                other => other.map_err(|e| std::io::Error::other(e.to_string())),
            }
        } else {
            fs::remove_file(&path)
        };
        match removed {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e).at(&path),
            _ => {}
        }
    }
    Ok(())
}

/// The entries of directory `dir` that are not index files (a folder is never one, but a sharded
/// index's shard directory that holds index files only), sorted.
pub fn foreign_entries(dir: &Path) -> Result<Vec<String>> {
    let mut foreign = Vec::new();
    for entry in fs::read_dir(dir).at(dir)? {
        let entry = entry.at(dir)?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let is_dir = entry.file_type().at(entry.path())?.is_dir();
        if is_dir && is_shard(&entry.path(), &name) {
            foreign.extend(
                foreign_entries(&entry.path())?
                    .into_iter()
                    .map(|inner| format!("{name}/{inner}")),
            );
        } else if is_dir {
            foreign.push(format!("{name}/"));
        } else if !crate::format::files::is_index_file(&name) {
            foreign.push(name);
        }
    }
    foreign.sort();
    Ok(foreign)
}

/// Whether `path`, named `name`, is a shard's directory of a sharded index (one holding an index).
fn is_shard(path: &Path, name: &str) -> bool {
    crate::format::files::is_shard_dir(name) && path.join(crate::format::files::META.0).is_file()
}

/// Up to five of `names`, then how many more.
pub fn show_names(names: &[String]) -> String {
    let mut shown = names.iter().take(5).cloned().collect::<Vec<_>>().join(", ");
    if names.len() > 5 {
        shown += &format!(" and {} more", names.len() - 5);
    }
    shown
}

/// Removes the index directory `dir`: its index files, then the directory. What else it holds (which
/// no build wrote) is kept, with the directory, and named in an `Invalid` error.
pub(crate) fn remove_index_dir(dir: &Path) -> Result<()> {
    let entries = match fs::read_dir(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        entries => entries.at(dir)?,
    };
    for entry in entries {
        let entry = entry.at(dir)?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let is_dir = entry.file_type().at(entry.path())?.is_dir();
        if is_dir && is_shard(&entry.path(), &name) {
            remove_index_dir(&entry.path())?;
        } else if crate::format::files::is_index_file(&name) && !is_dir {
            fs::remove_file(entry.path()).at(entry.path())?;
        }
    }
    match fs::remove_dir(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => match foreign_entries(dir)? {
            foreign if foreign.is_empty() => Err(e).at(dir),
            foreign => Err(IndexError::Invalid(format!(
                "{} was kept: it holds what an index does not ({}); move that elsewhere, then remove \
                 the directory",
                dir.display(),
                show_names(&foreign)
            ))),
        },
    }
}

/// A directory written under a temporary name beside its destination (`.NAME.tmp-PID`) and removed on
/// drop unless `keep` is set, i.e. unless it was put into place.
pub(crate) struct TmpDir {
    pub(crate) path: PathBuf,
    pub(crate) keep: bool,
}

impl TmpDir {
    /// A fresh, empty temporary directory for `out`; stale leftovers beside `out` are removed first.
    pub(crate) fn beside(out: &Path) -> Result<Self> {
        clean_stale(out)?;
        let path = hidden_beside(out, "tmp");
        if path.is_dir() {
            fs::remove_dir_all(&path).at(&path)?;
        } else if path.exists() {
            fs::remove_file(&path).at(&path)?;
        }
        fs::create_dir_all(&path).at(&path)?;
        Ok(TmpDir { path, keep: false })
    }
}

impl Drop for TmpDir {
    fn drop(&mut self) {
        if !self.keep {
            let _ = fs::remove_dir_all(&self.path);
        }
    }
}

/// Syncs a directory's entries to disk.
pub fn sync_dir(dir: &Path) -> Result<()> {
    fs::File::open(dir).and_then(|d| d.sync_all()).at(dir)
}

/// Puts the complete directory `tmp` at `out`, replacing an existing `out` (the caller has checked it
/// may) so that `out` never goes missing where the exchange exists (see the module comment).
pub(crate) fn replace_dir(tmp: &Path, out: &Path) -> Result<()> {
    fail_point("files-written", out)?;
    sync_dir(tmp)?;
    if out.exists() {
        if !fail_point_named("renamed-aside") && exchange(tmp, out)? {
            fail_point("exchanged", out)?;
            sync_dir(parent(out))?;
            // `tmp` now holds the old index: it goes aside first, so that what it holds besides the
            // index (put there after the caller checked) is never taken for the temporary's.
            let old = hidden_beside(out, "old");
            fs::rename(tmp, &old).at(&old)?;
            remove_index_dir(&old).map_err(|e| replaced_but(out, e))?;
        } else {
            let old = hidden_beside(out, "old");
            fs::rename(out, &old).at(out)?;
            let second = fail_point("renamed-aside", out).and_then(|()| fs::rename(tmp, out).at(out));
            if let Err(e) = second {
                // Put the old index back; if even that fails, the next open or build does.
                let _ = fs::rename(&old, out);
                return Err(e);
            }
            sync_dir(parent(out))?;
            remove_index_dir(&old).map_err(|e| replaced_but(out, e))?;
        }
    } else {
        fs::rename(tmp, out).at(out)?;
    }
    sync_dir(parent(out))
}

/// The error of removing the old index after the new one was put in place at `out`.
fn replaced_but(out: &Path, e: IndexError) -> IndexError {
    IndexError::Invalid(format!(
        "the new index is in place at {}, but the old one could not be removed: {e}",
        out.display()
    ))
}

/// Swaps `a` and `b` atomically; `Ok(false)` where the system or file system cannot.
#[cfg(target_os = "linux")]
fn exchange(a: &Path, b: &Path) -> Result<bool> {
    use rustix::fs::{renameat_with, RenameFlags, CWD};
    match renameat_with(CWD, a, CWD, b, RenameFlags::EXCHANGE) {
        Ok(()) => Ok(true),
        Err(e) if e == rustix::io::Errno::INVAL || e == rustix::io::Errno::NOSYS => Ok(false),
        Err(e) => Err(std::io::Error::from(e)).at(b),
    }
}

#[cfg(not(target_os = "linux"))]
fn exchange(_: &Path, _: &Path) -> Result<bool> {
    Ok(false)
}

/// Writes a file through `.NAME.tmp-PID` beside `path` and renames it into place when `write` succeeds
/// (the temporary is removed when it fails); stale leftovers beside `path` are removed first.
pub fn write_file_atomically(path: &Path, write: impl FnOnce(&mut fs::File) -> Result<()>) -> Result<()> {
    clean_stale(path)?;
    let tmp = hidden_beside(path, "tmp");
    let result = (|| {
        let mut file = fs::File::create(&tmp).at(&tmp)?;
        write(&mut file)?;
        file.sync_all().at(&tmp)?;
        fail_point("file-written", path)?;
        fs::rename(&tmp, path).at(path)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file that appears in the old index's directory after the caller's check (a race) is kept,
    /// with its directory, and named; the new index is in place and only index files were removed.
    #[test]
    fn replacing_keeps_what_the_old_index_directory_holds_besides_index_files() {
        let dir = tempfile::tempdir().unwrap();
        let (out, tmp) = (dir.path().join("idx"), dir.path().join(".idx.tmp-new"));
        for (d, text) in [(&out, "old"), (&tmp, "new")] {
            fs::create_dir(d).unwrap();
            fs::write(d.join("meta.json"), text).unwrap();
            fs::write(d.join("postings.bin"), text).unwrap();
        }
        fs::write(out.join("notes.txt"), "keep me").unwrap();
        let err = replace_dir(&tmp, &out).unwrap_err().to_string();
        assert!(
            err.contains("the new index is in place") && err.contains("notes.txt"),
            "{err}"
        );
        assert_eq!(fs::read_to_string(out.join("meta.json")).unwrap(), "new");
        let kept: Vec<String> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p != &out)
            .flat_map(|p| fs::read_dir(p).unwrap())
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(kept, ["notes.txt"]);
    }
}
