#!/usr/bin/env bash
# Runs one fuzz target for a given time: scripts/fuzz.sh TARGET SECONDS [extra libFuzzer options]
# Targets: decode_pfor decode_ef decode_rice decode_simdbp ciff_import jsonl_line query_file index_open_search
# (fuzz/Cargo.toml). Needs `cargo install cargo-fuzz`; on a stable toolchain RUSTC_BOOTSTRAP=1 lets
# cargo-fuzz pass its nightly flags. FUZZ_SANITIZER=address turns on ASan (default none: the code under
# test is safe Rust, and without ASan a 2-core machine runs several times more executions).
# Findings go to fuzz/artifacts/TARGET/; pin each as a regression test named after the bug and copy it
# to fuzz/regressions/TARGET/, which every run reads as seeds.
set -euo pipefail
cd "$(dirname "$0")/../fuzz"
target=${1:?usage: scripts/fuzz.sh TARGET SECONDS}
seconds=${2:?usage: scripts/fuzz.sh TARGET SECONDS}
shift 2
mkdir -p "corpus/$target" "regressions/$target"
RUSTC_BOOTSTRAP=1 cargo fuzz run --sanitizer "${FUZZ_SANITIZER:-none}" --release "$target" "corpus/$target" "regressions/$target" -- \
    -max_total_time="$seconds" -rss_limit_mb=2048 -print_final_stats=1 "$@"
