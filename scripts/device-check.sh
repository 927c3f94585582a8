#!/usr/bin/env bash
# The GPU checks and a short benchmark in one call on the lent GPU machine (see scripts/device-prepare.sh,
# which builds the binaries here and packs the Wikipedia passage index into .device/).
#
#   1. the GPU test suite (kernels against CPU references, the engine against the CPU oracle on random
#      indexes and on 5,000 TREC 2005 queries over the Wikipedia passages);
#   2. `warpsearch gpu-check`: decode throughput against the device's copy bandwidth;
#   3. CPU (all cores) vs GPU vs hybrid on the same index and queries, AND and OR at k 10 and 1000, each
#      run once as a warm-up and once timed, with the GPU's and the hybrid's outputs compared byte for
#      byte with the CPU's;
#   4. sweeps of the GPU engine's parameters (the older ones only with FULL=1).
#
# Full output goes under $OUT (or ./device-out); a short table is printed last.
# usage: scripts/device-check.sh [queries-for-the-benchmark]   (run from the repository root)
set -uo pipefail
source scripts/device-common.sh
queries=${1:-$dev/trec05-efficiency.txt}
log=$out/device-check.log
tmp=$(mktemp -d)  # large run files stay out of $OUT (at most 8 files come back)
: >"$log"
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.mem --format=csv | tee -a "$log"
nproc | sed 's/^/cores: /' | tee -a "$log"

say "== GPU tests: kernels (gpu crate), then the GPU engine and the hybrid against the oracle (engine crate)"
$dev/gpu-tests --test-threads=4 >"$out/gpu-tests.log" 2>&1
tests_rc=$?
WARPSEARCH_WIKI_INDEX=$wiki WARPSEARCH_QUERIES=$dev/trec05-efficiency.txt \
  $dev/engine-tests --test-threads=4 --nocapture >>"$out/gpu-tests.log" 2>&1 || tests_rc=1
grep -E "^test |test result|skipped|wiki |^hybrid seed" "$out/gpu-tests.log" | tee -a "$log"

for t in 128; do
  for b in gpu-tests engine-tests; do
    WARPSEARCH_GPU_THREADS=$t $dev/$b --test-threads=4 --skip wikipedia --skip hybrid >"$tmp/tests-$t.log" 2>&1 || tests_rc=1
    grep -E "^test result" "$tmp/tests-$t.log" | sed "s/^/$b with $t threads per CTA: /" | tee -a "$log"
  done
done

say "== gpu-check"
$bin gpu-check --index "$wiki" 2>&1 | tee -a "$log"

say "== benchmark: $queries"
table=$out/table.txt
printf "%-6s %-5s %-22s %12s %9s %9s %9s %9s\n" mode k backend "queries/s" p50_ms p95_ms p99_ms p99.9_ms >"$table"
for mode in and or; do
  for k in 10 1000; do
    for backend in cpu gpu hybrid; do
      run=$tmp/run-$mode-$k-$backend.txt
      $bin search --index "$wiki" --queries "$queries" --mode $mode --k $k --backend $backend \
        --warmup 1 --stats --force --output "$run" 2>"$tmp/stats.txt"
      cat "$tmp/stats.txt" >>"$log"
      line=$(grep -E "queries/s" "$tmp/stats.txt" | tail -n 1)
      grep -E "^hybrid:" "$tmp/stats.txt" | sed "s/^/$mode k $k /" | tee -a "$log"
      qps=$(sed -E 's/.*: ([0-9]+) queries\/s.*/\1/' <<<"$line")
      lat=$(sed -E 's/.*p50 ([0-9.]+) p95 ([0-9.]+) p99 ([0-9.]+) p99.9 ([0-9.]+).*/\1 \2 \3 \4/' <<<"$line")
      printf "%-6s %-5s %-22s %12s %9s %9s %9s %9s\n" $mode $k "$backend" "$qps" $lat >>"$table"
    done
    for backend in gpu hybrid; do
      if cmp -s "$tmp/run-$mode-$k-cpu.txt" "$tmp/run-$mode-$k-$backend.txt"; then
        say "$mode k $k: $backend run identical to the CPU run"
      else
        say "$mode k $k: $backend run DIFFERS from the CPU run"
        tests_rc=1
      fi
    done
    rm -f "$tmp"/run-$mode-$k-*.txt
  done
done
say "== GPU kernel phases and OR window sizes (k 10)"
for mode in and or; do
  $bin search --index "$wiki" --queries "$queries" --mode $mode --k 10 --backend gpu --gpu-profile \
    --warmup 1 --stats --output /dev/null 2>&1 | grep -E "queries/s|^GPU" | tee -a "$log"
done
# sweep <label> <mode> [options…]: one GPU search over the benchmark queries at k 10, its queries/s line
# logged under the label. Environment settings go before it: `WARPSEARCH_GPU_THREADS=128 sweep …`.
sweep() {
  local label=$1 mode=$2
  shift 2
  $bin search --index "$wiki" --queries "$queries" --mode $mode --k 10 --backend gpu "$@" \
    --warmup 1 --stats --output /dev/null 2>&1 | grep -E "queries/s" | sed "s/^/$label: /" | tee -a "$log"
}

# The sweeps below were measured at 99b243a / 7f7c397 / 57999aa (bench/RESULTS.md); FULL=1 runs them again.
if [ "${FULL:-0}" = 1 ]; then
say "== AND steps: merge (merge-find + merge-path) vs binary search, --gpu-merge-ratio (k 10)"
for r in 0 1 2 4 8 32 4294967295; do
  sweep "merge ratio $r" and --gpu-merge-ratio $r
done
for w in 4096 8192 32768; do
  sweep "window $w" or --gpu-window $w
done
say "== register cap: WARPSEARCH_GPU_MIN_CTAS (k 10)"
for m in 2 4 5 6; do
  WARPSEARCH_GPU_MIN_CTAS=$m $bin gpu-check | grep search_and | sed "s/^/min CTAs $m: /" | tee -a "$log"
  for mode in and or; do
    WARPSEARCH_GPU_MIN_CTAS=$m sweep "min CTAs $m" $mode
  done
done
say "== long queries cut into docID ranges: --gpu-split-and, --gpu-split-or (k 10)"
for split in 0 5000 50000 1000000; do
  for mode in and or; do
    sweep "split $split" $mode --gpu-split-$mode $split
  done
done
say "== small OR queries sorted: --gpu-small-or (k 10)"
for small in 0 1024; do
  sweep "small-or $small" or --gpu-small-or $small
done
say "== threads per CTA: WARPSEARCH_GPU_THREADS (k 10)"
for t in 128; do
  for mode in and or; do
    WARPSEARCH_GPU_THREADS=$t sweep "threads $t" $mode
  done
done
say "== GPU latency with small batches (k 10)"
for mode in and or; do
  for b in 64 512; do
    sweep "batch $b" $mode --gpu-batch $b
  done
done
fi
echo
grep -E "^test result" "$out/gpu-tests.log" | tail -n 1
grep -E "decode \(" "$log" | tail -n 1
cat "$table"
exit $tests_rc
