//! Helpers for the test suites of every crate (not part of the API).
//!
//! - [`shared_data`]: where tests find `../shared/data`, and whether its absence skips or fails a test.
//! - [`without_build_id`]: an index file's bytes with its build identity and checksum zeroed, to compare
//!   two builds byte for byte.

use std::path::PathBuf;

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
