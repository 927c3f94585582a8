//! Helpers for the test suites of every crate (not part of the API).
//!
//! - [`shared_data`]: where tests find `../shared/data`, and whether its absence skips or fails a test.
//! - [`without_build_id`]: an index file's bytes with its build identity and checksum zeroed, to compare
//!   two builds byte for byte.
//! - [`replace_file`] and [`write_in_place`]: damage to an index file, whose files are read-only.

use std::path::{Path, PathBuf};

/// `../shared/data/REL` (from the workspace root) when it exists. When it does not: `None`, after
/// printing `skipped: …` (a test then returns early), unless `WARPSEARCH_REQUIRE_DATA=1` is set (as
/// `.ci/run` does), where it panics: where CI runs, a missing data set is a failure, not a skip.
pub fn shared_data(rel: &str) -> Option<PathBuf> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data");
    let path = root.join(rel);
    if path.exists() {
        return Some(path);
    }
    if std::env::var("WARPSEARCH_REQUIRE_DATA").is_ok_and(|v| v == "1") {
        panic!(
            "{} is absent and WARPSEARCH_REQUIRE_DATA=1: this test must run here",
            path.display()
        );
    }
    eprintln!("skipped: {} is absent", path.display());
    None
}

/// The bytes of an index file with the header's build identity and the footer's checksum zeroed: two
/// builds of the same input compare equal.
pub fn without_build_id(mut bytes: Vec<u8>) -> Vec<u8> {
    let n = bytes.len();
    if n >= crate::container::HEADER_LEN + crate::container::FOOTER_LEN {
        bytes[20..28].fill(0);
        bytes[n - 16..n - 12].fill(0);
    }
    bytes
}

/// Makes `bytes` the contents of the (read-only) index file `path` as a new file: the old one is
/// removed, so an index that has it open keeps the old contents.
pub fn replace_file(path: &Path, bytes: &[u8]) {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => panic!("{}: {e}", path.display()),
        _ => {}
    }
    std::fs::write(path, bytes).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
}

/// Writes `bytes` over the (read-only) index file `path` in place, as someone who overrides its
/// permissions would: made writable, truncated to their length, written. An index that has the file
/// open sees the change.
pub fn write_in_place(path: &Path, bytes: &[u8]) {
    use std::io::Write;
    fn fail<T>(path: &Path) -> impl FnOnce(std::io::Error) -> T + '_ {
        move |e| panic!("{}: {e}", path.display())
    }
    #[cfg(unix)]
    let permissions = std::os::unix::fs::PermissionsExt::from_mode(0o644);
    #[cfg(not(unix))]
    let permissions = {
        let mut p = std::fs::metadata(path).unwrap_or_else(fail(path)).permissions();
        #[allow(clippy::permissions_set_readonly_false)]
        p.set_readonly(false);
        p
    };
    std::fs::set_permissions(path, permissions).unwrap_or_else(fail(path));
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .unwrap_or_else(fail(path));
    file.set_len(bytes.len() as u64).unwrap_or_else(fail(path));
    file.write_all(bytes).unwrap_or_else(fail(path));
}
