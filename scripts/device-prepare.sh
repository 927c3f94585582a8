#!/usr/bin/env bash
# Builds what scripts/device-check.sh needs and packs it into .device/ (ignored by git; add `/.device/` to
# .git/info/exclude). The Wikipedia passage index (`warpsearch index --title`) is too large for one call's
# 64 MiB, so it is packed in two parts: .device/part1 holds postings.bin, .device/ the rest and the binaries.
# usage: scripts/device-prepare.sh <passage-index-dir>
set -euo pipefail
index=$1
dev=.device
mkdir -p $dev/part1
cargo build --release
cargo test --release -p warpsearch-gpu --no-run 2>&1 | tee /tmp/device-prepare.log
test_bin=$(grep -oE 'target/release/deps/gpu-[0-9a-f]+' /tmp/device-prepare.log | head -n 1)
cp target/release/warpsearch "$test_bin" $dev/
mv $dev/"$(basename "$test_bin")" $dev/gpu-tests
strip $dev/warpsearch $dev/gpu-tests
cp ../shared/data/queries/trec05-efficiency.txt $dev/
xz -T2 -3 -c "$index/postings.bin" >$dev/part1/wiki-postings.bin.xz
tar -C "$index" -cf - $(cd "$index" && ls | grep -v '^postings.bin$') | xz -T2 -3 -c >$dev/wiki-rest.tar.xz
du -sh $dev $dev/part1
