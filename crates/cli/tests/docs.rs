//! Every path that ARCHITECTURE.md names exists (so the map cannot go stale).

use std::path::Path;

#[test]
fn architecture_paths_exist() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let text = std::fs::read_to_string(root.join("ARCHITECTURE.md")).unwrap();
    let mut section = root.clone();
    let mut checked = 0;
    for line in text.lines() {
        for (i, piece) in line.split('`').enumerate() {
            let looks_like_path = piece.contains('/') || piece.ends_with(".rs") || piece.ends_with(".md");
            if i % 2 == 0 || !looks_like_path || piece.contains(' ') {
                continue;
            }
            let from_root = ["crates/", "docs/", "bench/", "scripts/", "fuzz/", "python/"]
                .iter()
                .any(|p| piece.starts_with(p))
                || (piece.ends_with(".md") && !piece.contains('/'));
            let path = if from_root {
                root.join(piece)
            } else {
                section.join(piece)
            };
            let part = ["crates/", "fuzz/", "python/"]
                .iter()
                .any(|p| piece.starts_with(p));
            if line.starts_with("## ") && part {
                section = root.join(piece);
            }
            assert!(
                path.exists(),
                "ARCHITECTURE.md names {piece}, which does not exist ({})",
                path.display()
            );
            checked += 1;
        }
    }
    assert!(
        checked > 10,
        "only {checked} paths found: is the parser still right?"
    );
}
