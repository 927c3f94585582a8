#!/usr/bin/env bash
# The engine's front door checked on the lent GPU machine against an earlier build, in one call:
#   1. tests: the GPU test suite (kernels; the engine, the hybrid and the front door against the oracle,
#      with the passages when WARPSEARCH_WIKI_INDEX's index is there; TESTS names the binaries);
#   2. identical: `search` on the first 5,000 queries, AND and OR at k 10 and 1000, with --backend cpu, gpu
#      and hybrid of both builds (IDENT_BUILDS, default "base new"), and with CACHE_OPTS the new build's gpu
#      and hybrid with a list cache, every run compared byte for byte with the earlier build's CPU run;
#   3. ab: `warpsearch bench` of both builds in alternation (ROUNDS, default 2) on each backend of BACKENDS
#      (default "cpu gpu hybrid") and mode of MODES (default "and or"), top-10 over the query file REPEAT
#      times (default 10): closed-loop queries/s, and open-loop p50/p99/p99.9 at 30% and 70% of the earlier
#      build's closed-loop rate (measured first, once per backend and mode), Poisson arrivals.
# Parts are the arguments (default: tests identical ab). Builds: BASE (default .device/warpsearch-base) and
# NEW (default .device/warpsearch); test binaries .device/gpu-tests, .device/engine-tests,
# .device/submit-tests. Output under $OUT: engine-ab.log, ab.tsv (one row per run) and the table last.
# usage: scripts/device-engine-ab.sh [tests] [identical] [ab]   (from the repository root)
set -uo pipefail
source scripts/device-common.sh
log=$out/engine-ab.log
: >"$log"
base=${BASE:-$dev/warpsearch-base}
new=${NEW:-$dev/warpsearch}
queries=$dev/trec05-efficiency.txt
parts=${*:-tests identical ab}
rc=0
command -v nvidia-smi >/dev/null &&
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | sed 's/^/device: /' | tee -a "$log"
say "cores: $(nproc); date: $(date -u +%FT%TZ); base: $base; new: $new; index: $wiki"
tmp=$(mktemp -d)

if [[ " $parts " == *" tests "* ]]; then
  say "== tests"
  # shellcheck disable=SC2086
  run_tests ${TESTS:-gpu-tests engine-tests submit-tests}
fi

if [[ " $parts " == *" identical "* ]]; then
  say "== identical"
  head -n 5000 "$queries" >"$tmp/q5000.txt"
  for mode in and or; do
    for k in 10 1000; do
      $base search --index "$wiki" --queries "$tmp/q5000.txt" --mode $mode --k $k --backend cpu \
        --output "$tmp/want.txt" --force 2>>"$log"
      for build in ${IDENT_BUILDS:-base new}; do
        bin=$base
        [ $build = new ] && bin=$new
        for backend in ${IDENT_BACKENDS:-cpu gpu hybrid}; do
          # A run that fails leaves no output: an earlier run's file must not pass for it.
          rm -f "$tmp/got.txt"
          if ! $bin search --index "$wiki" --queries "$tmp/q5000.txt" --mode $mode --k $k --backend $backend \
            --output "$tmp/got.txt" --force 2>>"$log"; then
            say "$mode k $k: $build $backend FAILED"
            rc=1
          elif cmp -s "$tmp/want.txt" "$tmp/got.txt"; then
            say "$mode k $k: $build $backend identical to base cpu"
          else
            say "$mode k $k: $build $backend DIFFERS from base cpu"
            rc=1
          fi
        done
      done
      # CACHE_OPTS (e.g. "--gpu-memory 40M --gpu-cache dynamic"): the new build's GPU and hybrid with a
      # list cache, compared with the same run.
      if [ -n "${CACHE_OPTS:-}" ]; then
        for backend in gpu hybrid; do
          rm -f "$tmp/got.txt"
          if ! $new search --index "$wiki" --queries "$tmp/q5000.txt" --mode $mode --k $k --backend $backend \
            $CACHE_OPTS --output "$tmp/got.txt" --force 2>>"$log"; then
            say "$mode k $k: new $backend with a list cache FAILED"
            rc=1
          elif cmp -s "$tmp/want.txt" "$tmp/got.txt"; then
            say "$mode k $k: new $backend with a list cache identical to base cpu"
          else
            say "$mode k $k: new $backend with a list cache DIFFERS from base cpu"
            rc=1
          fi
        done
      fi
    done
  done
fi

if [[ " $parts " == *" ab "* ]]; then
  say "== ab"
  for _ in $(seq "${REPEAT:-10}"); do cat "$queries"; done >"$tmp/queries.txt"
  tsv=$out/ab.tsv
  printf "round\tbuild\tbackend\tmode\tclosed_qps\trate\tachieved\tp50_ms\tp99_ms\tp99.9_ms\n" >"$tsv"
  # row <json> <round> <build> <backend> <mode>: the closed loop and each open-loop rate, one row each.
  rows() { python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
c = r["closed_loop"]
tag = "\t".join(sys.argv[2:])
lat = lambda l: "\t".join("%.3f" % l[p] for p in ("p50", "p99", "p99.9"))
print("%s\t%.0f\tclosed\t%.0f\t%s" % (tag, c["qps"], c["qps"], lat(c["latency_ms"])))
for o in r["open_loop"]:
    print("%s\t%.0f\t%.0f\t%.0f\t%s" % (tag, c["qps"], o["rate"], o["achieved_qps"], lat(o["latency_ms"])))
' "$@"; }
  for backend in ${BACKENDS:-cpu gpu hybrid}; do
    for mode in ${MODES:-and or}; do
      $base bench --index "$wiki" --queries "$tmp/queries.txt" --mode $mode --k 10 --backend $backend ${BENCH_OPTS:-} \
        --warmup 1 --json "$tmp/cal.json" >>"$log" 2>&1
      rates=$(python3 -c 'import json, sys; q = json.load(open(sys.argv[1]))["closed_loop"]["qps"]; print("%d,%d" % (0.3 * q, 0.7 * q))' "$tmp/cal.json")
      for round in $(seq "${ROUNDS:-2}"); do
        for build in base new; do
          bin=$base
          [ $build = new ] && bin=$new
          $bin bench --index "$wiki" --queries "$tmp/queries.txt" --mode $mode --k 10 --backend $backend ${BENCH_OPTS:-} \
            --warmup 1 --rates "$rates" --duration "${DURATION:-2}" --json "$tmp/run.json" >>"$log" 2>&1 || rc=1
          rows "$tmp/run.json" "$round" $build $backend $mode | tee -a "$tsv"
        done
      done
    done
  done
  cat "$tsv"
fi
rm -rf "$tmp"
say "exit $rc"
exit $rc
