//! The Python package's build (python/, a Cargo workspace of its own) reuses what `cargo build
//! --release` compiled: it shares the root's target directory, and its lockfile holds the root's
//! version of every crate both use (a crate at another version is compiled again, with all above it).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

fn root() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

/// Every package of a Cargo.lock, by name, with its versions.
fn locked(path: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let text = std::fs::read_to_string(path).unwrap();
    let lock: toml::Table = toml::from_str(&text).unwrap();
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for p in lock["package"].as_array().unwrap() {
        let name = p["name"].as_str().unwrap().to_string();
        out.entry(name)
            .or_default()
            .insert(p["version"].as_str().unwrap().to_string());
    }
    out
}

#[test]
fn python_lockfile_holds_the_root_versions_of_shared_crates() {
    let workspace = locked(&root().join("Cargo.lock"));
    let python = locked(&root().join("python/Cargo.lock"));
    let differ: Vec<String> = python
        .iter()
        .filter_map(|(name, versions)| {
            let ours = workspace.get(name)?;
            (!versions.is_subset(ours)).then(|| format!("{name}: python {versions:?}, root {ours:?}"))
        })
        .collect();
    assert!(
        differ.is_empty(),
        "python/Cargo.lock differs from Cargo.lock (`cargo update --manifest-path python/Cargo.toml -p NAME \
         --precise VERSION`): {differ:?}"
    );
}

#[test]
fn pip_builds_into_the_root_target_directory() {
    let text = std::fs::read_to_string(root().join("python/.cargo/config.toml")).unwrap();
    let config: toml::Table = toml::from_str(&text).unwrap();
    assert_eq!(config["build"]["target-dir"].as_str(), Some("../target"));
}
