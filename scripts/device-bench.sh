#!/usr/bin/env bash
# The benchmark of bench/RESULTS.md in one call on a fresh GPU machine (issue 5): side by side on the same
# queries, warpsearch GPU, warpsearch CPU (all cores) and tantivy (all cores), AND and OR top-10, on
#   1. the Wikipedia passages (the index travels from here: scripts/device-prepare.sh), and
#   2. the synthetic GOV2-scale collection, generated here from the passages (`warpsearch synth`,
#      25M documents by default: SYNTH_DOCS=…), on which tantivy cannot run (it indexes text; the
#      synthetic collection is posting lists).
# `warpsearch bench` gives closed-loop throughput and latency, then open-loop latency under Poisson
# arrivals at rates from 10% to 90% of the closed-loop throughput. Top-10 agreement of tantivy with our
# CPU run is reported (bench/peers/overlap.py).
#
# What travels (scripts/device-prepare.sh packs it): .device/part1 (call 1: the passages' postings),
# .device/tantivy-wiki.tar.xz (call 2), then .device/{warpsearch,tantivy-peer,wiki-rest.tar.xz,
# trec05-efficiency.txt} with this script (call 3). Full output under $OUT: bench.log, table.txt and one
# .tgz of JSON reports and SVG plots per collection (a call returns at most 8 files).
# usage: scripts/device-bench.sh   (from the repository root)
set -uo pipefail
source scripts/device-common.sh
synth=/root/synth
docs=${SYNTH_DOCS:-25000000}
queries=$dev/trec05-efficiency.txt
log=$out/bench.log
table=$out/table.txt
work=$(mktemp -d)
: >"$log"
if [ -f $dev/tantivy-wiki.tar.xz ] && [ ! -d /root/tantivy-wiki ]; then  # packed as tantivy-wiki/
  unxz $dev/tantivy-wiki.tar.xz | tar -x -C /root
fi
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | sed 's/^/device: /' | tee -a "$log"
say "cores: $(nproc); date: $(date -u +%F)"
printf "%-6s %-4s %-10s %12s %9s %9s %9s  %s\n" collection mode engine "queries/s" p50_ms p99_ms p99.9_ms note >"$table"

# Closed-loop q/s and latency of a bench JSON report.
closed() { python3 -c '
import json, sys
c = json.load(open(sys.argv[1]))["closed_loop"]
l = c["latency_ms"]
print(round(c["qps"]), "%.3f" % l["p50"], "%.3f" % l["p99"], "%.3f" % l["p99.9"])' "$1"; }

# bench <collection> <index> <mode> <backend> <queries>: closed loop, then open loop at 10-90% of it.
bench() {
  local name=$1-$3-$4
  $bin bench --index "$2" --queries "$5" --mode $3 --k 10 --backend $4 --json "$work/$name-closed.json" \
    2>&1 | grep -v "^warning" >>"$log"
  read -r qps p50 p99 p999 < <(closed "$work/$name-closed.json")
  printf "%-6s %-4s %-10s %12s %9s %9s %9s  %s\n" $1 $3 "$4" $qps $p50 $p99 $p999 "closed loop" >>"$table"
  local rates
  rates=$(python3 -c "q=$qps; print(','.join(str(round(q*f)) for f in (0.1, 0.3, 0.5, 0.7, 0.9)))")
  $bin bench --index "$2" --queries "$5" --mode $3 --k 10 --backend $4 --rates "$rates" --duration 1 \
    --deadline-ms 100 --json "$work/$name.json" --svg "$work/$name" 2>&1 | grep -v "^warning" >>"$log"
  tail -n 8 "$log"
}

say "== Wikipedia passages ($(wc -l <$queries) TREC 2005 queries)"
for mode in and or; do
  for backend in cpu gpu; do bench wiki "$wiki" $mode $backend $queries; done
  $bin search --index "$wiki" --queries $queries --mode $mode --k 10 --backend cpu --output "$work/ours-$mode.run" \
    --force 2>/dev/null
  if [ -d /root/tantivy-wiki ]; then
    line=$($dev/tantivy-peer search /root/tantivy-wiki $queries $mode 10 "$(nproc)" "$work/tantivy-$mode.run" 2>&1 | tail -n 1)
    say "$line"
    agree=$(python3 bench/peers/overlap.py "$work/ours-$mode.run" "$work/tantivy-$mode.run" 10 | head -n 1)
    say "tantivy $mode top-10 agreement with ours: $agree"
    qps=$(sed -E 's/.*: ([0-9]+) queries\/s.*/\1/' <<<"$line")
    lat=$(sed -E 's/.*p50 ([0-9.]+) p95 [0-9.]+ p99 ([0-9.]+) p99.9 ([0-9.]+).*/\1 \2 \3/' <<<"$line")
    printf "%-6s %-4s %-10s %12s %9s %9s %9s  %s\n" wiki $mode tantivy $qps $lat "top-10 agreement $(sed -E 's/.*agreement ([0-9.]+).*/\1/' <<<"$agree")" >>"$table"
  fi
done
(cd "$work" && tar -czf "$out/wiki-reports.tgz" wiki-*.json wiki-*.svg)

say "== synthetic collection: $docs documents from the passages"
timer=""
[ -x /usr/bin/time ] && timer="/usr/bin/time -v"
$timer $bin synth --like "$wiki" --output $synth --docs $docs --force --report "$work/synth-report.json" \
  2>"$work/synth.err"
grep -E "synthetic collection|calibration|Maximum resident|Elapsed" "$work/synth.err" | tee -a "$log"
$bin inspect $synth | head -n 10 | tee -a "$log"
# The first 20,000 queries: the CPU's OR runs would not fit the call's 10 minutes with all 50,000.
head -n 20000 $queries >"$work/q20000.txt"
for mode in and or; do
  for backend in cpu gpu; do bench synth $synth $mode $backend "$work/q20000.txt"; done
done
cp "$work/synth-report.json" "$work/synth-generation.json"
(cd "$work" && tar -czf "$out/synth-reports.tgz" synth-*.json synth-*.svg)
echo
cat "$table"
