#!/usr/bin/env bash
# Latency against load on the lent GPU machine, two builds in alternation, in one call: for each
# collection named (wiki: the passages at $WARPSEARCH_WIKI_INDEX; synth: SYNTH_DOCS documents, default
# 5,000,000, generated from the passages by `warpsearch synth --like` and reused by later calls on the
# same machine), backend of BACKENDS (default "gpu auto hybrid cpu"), mode of MODES (default "and or")
# and build (BUILDS, default "base new": BASE, default .device/warpsearch-base, and NEW, default
# .device/warpsearch), `warpsearch bench --loads LOADS` (default 0.1,0.3,0.5,0.7,0.9 of the run's own
# closed-loop throughput), top-10, Poisson arrivals, DURATION seconds a load (default 1), over the TREC
# 2005 queries REPEAT times (default 2; on synth the first 20,000 once). Writes each run's JSON report
# under $OUT/latency/, a row per load to $OUT/latency.tsv, and the log to $OUT/latency.log. Plot the
# reports here with `warpsearch bench-plot --latency FILE.svg REPORTS…`.
# usage: scripts/device-latency.sh [wiki] [synth]   (from the repository root)
set -uo pipefail
source scripts/device-common.sh
log=$out/latency.log
: >"$log"
base=${BASE:-$dev/warpsearch-base}
new=${NEW:-$dev/warpsearch}
queries=$dev/trec05-efficiency.txt
mkdir -p "$out/latency"
tsv=$out/latency.tsv
[ -f "$tsv" ] || printf "collection\tbuild\tbackend\tmode\tclosed_qps\tload\trate\tachieved\tp50_ms\tp99_ms\tp99.9_ms\tgpu\tcpu\tboth\n" >"$tsv"
rc=0
command -v nvidia-smi >/dev/null &&
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | sed 's/^/device: /' | tee -a "$log"
say "cores: $(nproc); date: $(date -u +%FT%TZ); base: $base; new: $new"
tmp=$(mktemp -d)

# rows <json> <collection> <build> <backend> <mode>: one row per open-loop load.
rows() { python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
c = r["closed_loop"]
tag = "\t".join(sys.argv[2:])
for o in r["open_loop"]:
    l, s = o["latency_ms"], o.get("served") or {}
    print("%s\t%.0f\t%s\t%.0f\t%.0f\t%.3f\t%.3f\t%.3f\t%s\t%s\t%s" % (tag, c["qps"], o.get("load"), o["rate"],
          o["achieved_qps"], l["p50"], l["p99"], l["p99.9"], s.get("gpu", "-"), s.get("cpu", "-"), s.get("both", "-")))
' "$@"; }

for collection in ${*:-wiki}; do
  case $collection in
  wiki)
    index=$wiki
    for _ in $(seq "${REPEAT:-2}"); do cat "$queries"; done >"$tmp/q.txt"
    ;;
  synth)
    index=/root/synth-${SYNTH_DOCS:-5000000}
    if [ ! -f "$index/meta.json" ]; then
      say "[${SECONDS}s] synth: ${SYNTH_DOCS:-5000000} documents like $wiki"
      $new synth --like "$wiki" --output "$index" --docs "${SYNTH_DOCS:-5000000}" --force 2>>"$log" || rc=1
      say "[${SECONDS}s] synth done"
    fi
    head -n 20000 "$queries" >"$tmp/q.txt"
    ;;
  *) say "unknown collection $collection"; rc=1; continue ;;
  esac
  for backend in ${BACKENDS:-gpu auto hybrid cpu}; do
    for mode in ${MODES:-and or}; do
      for build in ${BUILDS:-base new}; do
        bin=$base
        [ $build = new ] && bin=$new
        # The earlier build has no --loads: its rates are the same fractions of its own closed loop.
        json=$out/latency/$collection-$build-$backend-$mode.json
        say "[${SECONDS}s] $collection $build $backend $mode"
        if $bin bench --help | grep -q -- --loads; then
          $bin bench --index "$index" --queries "$tmp/q.txt" --mode $mode --k 10 --backend $backend --warmup 1 \
            --loads "${LOADS:-0.1,0.3,0.5,0.7,0.9}" --duration "${DURATION:-1}" --json "$json" >>"$log" 2>&1 || rc=1
        else
          $bin bench --index "$index" --queries "$tmp/q.txt" --mode $mode --k 10 --backend $backend --warmup 1 \
            --json "$tmp/cal.json" >>"$log" 2>&1 || rc=1
          rates=$(python3 -c 'import json, sys; q = json.load(open(sys.argv[1]))["closed_loop"]["qps"]; print(",".join("%d" % (float(l) * q) for l in sys.argv[2].split(",")))' "$tmp/cal.json" "${LOADS:-0.1,0.3,0.5,0.7,0.9}")
          $bin bench --index "$index" --queries "$tmp/q.txt" --mode $mode --k 10 --backend $backend --warmup 1 \
            --rates "$rates" --duration "${DURATION:-1}" --json "$json" >>"$log" 2>&1 || rc=1
        fi
        [ -f "$json" ] && rows "$json" $collection $build $backend $mode | tee -a "$tsv"
      done
    done
  done
done
rm -rf "$tmp"
say "[${SECONDS}s] exit $rc"
exit $rc
