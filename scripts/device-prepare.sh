#!/usr/bin/env bash
# Builds what scripts/device-check.sh and scripts/device-bench.sh need and packs it into .device/ (ignored by
# git; add `/.device/` to .git/info/exclude). The Wikipedia passage index (`warpsearch index --title`) is
# too large for one call's 64 MiB, so it is packed in two parts: .device/part1 holds postings.bin, .device/
# the rest and the binaries. With a tantivy index of the passages (bench/peers/tantivy: `tantivy-peer
# index`) as second argument, the tantivy peer and its index are packed too (the index alone is a call).
# usage: scripts/device-prepare.sh <passage-index-dir> [tantivy-index-dir]
set -euo pipefail
index=$1
dev=.device
mkdir -p $dev/part1
# The profiling profile: release's code generation with line tables, so that `perf annotate` of a profile
# the device returns reads target/profiling/warpsearch's source lines here (Cargo.toml).
cargo build --profile profiling
cargo test --profile profiling -p warpsearch-gpu -p warpsearch-engine --no-run 2>&1 | tee /tmp/device-prepare.log
# The kernel tests (gpu crate) and the engine's GPU and hybrid tests (engine crate).
test_bin=$(grep -oE 'target/profiling/deps/gpu-[0-9a-f]+' /tmp/device-prepare.log | head -n 1)
engine_bin=$(grep -oE 'target/profiling/deps/gpu_engine-[0-9a-f]+' /tmp/device-prepare.log | head -n 1)
cp target/profiling/warpsearch $dev/
cp "$test_bin" $dev/gpu-tests
cp "$engine_bin" $dev/engine-tests
# The engine keeps its symbol table (not its line tables, to fit a call), so that a profile on the device
# names functions.
strip --strip-debug $dev/warpsearch
strip $dev/gpu-tests $dev/engine-tests
cp ../shared/data/queries/trec05-efficiency.txt $dev/
xz -T2 -3 -c "$index/postings.bin" >$dev/part1/wiki-postings.bin.xz
tar -C "$index" -cf - $(cd "$index" && ls | grep -v '^postings.bin$') | xz -T2 -3 -c >$dev/wiki-rest.tar.xz
# PASSAGES=passages.jsonl: the passages' static scores (bench/static_scores.py) for device-cache.sh's
# synth-gs.
if [ -n "${PASSAGES:-}" ]; then
  python3 bench/static_scores.py "$PASSAGES" | xz -T2 -6 -c >$dev/static.tsv.xz
fi
if [ $# -ge 2 ]; then
  (cd bench/peers/tantivy && cargo build --release)
  cp bench/peers/tantivy/target/release/tantivy-peer $dev/ && strip $dev/tantivy-peer
  tar -C "$(dirname "$2")" --transform "s|^$(basename "$2")|tantivy-wiki|" -cf - "$(basename "$2")" | xz -T2 -6 -c >$dev/tantivy-wiki.tar.xz
fi
# perf with the libraries it needs beyond the C and C++ runtimes (the device has no perf; its kernel counts
# software events such as cpu-clock), for `scripts/device-speed.sh cpu`'s profiles.
if [ -x /usr/bin/perf ]; then
  rm -rf /tmp/perfkit && mkdir -p /tmp/perfkit/lib && cp /usr/bin/perf /tmp/perfkit/
  for lib in $(ldd /usr/bin/perf | awk '/=>/ {print $3}'); do
    case $(basename "$lib") in libc.so.6 | libm.so.6 | libstdc++.so.6 | libgcc_s.so.1) ;; *) cp -L "$lib" /tmp/perfkit/lib/ ;; esac
  done
  tar -C /tmp -cf - perfkit | xz -T2 -6 -c >$dev/perfkit.tar.xz
fi
# PEERS=0 packs no peers (a run of our own engines only).
if [ "${PEERS:-1}" = 0 ]; then rm -rf $dev/whl; du -sh $dev $dev/part1; exit 0; fi
# PISA for the benchmark: pyterrier-pisa's wheel (its compiled PISA) and libtbb, for the device's Python
# 3.12; 3.5 MiB. bench/peers/pisa_bench.py loads only the compiled module, so python-terrier (Java) and
# the rest of its dependency tree are not needed.
mkdir -p $dev/whl
rm -f $dev/whl/*.whl
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux1_x86_64 \
  -d $dev/whl pyterrier-pisa==0.4.9 tbb==2020.3.254
du -sh $dev $dev/part1
