#!/usr/bin/env bash
# Latency against load on the lent GPU machine, builds in alternation, in one call: for each collection
# named (wiki: the passages at $WARPSEARCH_WIKI_INDEX; synth: SYNTH_DOCS documents, default 5,000,000,
# generated from the passages by `warpsearch synth --like`, as SYNTH_SHARDS shards where set, and
# reused by later calls on the same machine), backend of BACKENDS (default "gpu auto hybrid cpu"),
# mode of MODES (default "and or"), round (ROUNDS, default 1) and variant of VARIANTS (default "base=.device/warpsearch-base;new=.device/warpsearch":
# `name=binary [bench options]`, separated by `;`), `warpsearch bench --loads LOADS` (default
# 0.1,0.3,0.5,0.7,0.9 of the run's own closed-loop throughput; LOADS=none: the closed loop alone), top-K (default 10),
# Poisson arrivals, DURATION seconds a load (default 1), over the TREC 2005 queries REPEAT times (default
# 2; on synth the first 20,000 once). Writes a row per run and load to $OUT/latency.tsv, the log to
# $OUT/latency.log (both appended to) and every JSON report in $OUT/latency[-$TAG].tar.gz. Plot the reports here with
# `warpsearch bench-plot --svg bars.svg --latency curves.svg REPORTS…`.
# usage: scripts/device-latency.sh [wiki] [synth]   (from the repository root)
# A collection larger than one GPU, a shard on each of 4: SYNTH_DOCS=250000000 SYNTH_SHARDS=4
#   BACKENDS=gpu VARIANTS="four=.device/warpsearch --gpus 4" LOADS=0.7 scripts/device-latency.sh synth
set -uo pipefail
source scripts/device-common.sh
log=$out/latency.log
variants=${VARIANTS:-base=$dev/warpsearch-base;new=$dev/warpsearch}
queries=$dev/trec05-efficiency.txt
mkdir -p "$out/latency"
tsv=$out/latency.tsv
[ -f "$tsv" ] || printf "collection\tvariant\tround\tbackend\tmode\tclosed_qps\tload\trate\tachieved\tp50_ms\tp99_ms\tp99.9_ms\tgpu\tcpu\tboth\n" >"$tsv"
rc=0
command -v nvidia-smi >/dev/null &&
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | sed 's/^/device: /' | tee -a "$log"
say "cores: $(nproc); date: $(date -u +%FT%TZ); variants: $variants"
tmp=$(mktemp -d)

# rows <json> <collection> <variant> <round> <backend> <mode>: the closed loop, then a row per load.
rows() { python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
c = r["closed_loop"]
tag = "\t".join(sys.argv[2:])
print("%s\t%.0f\tclosed\t-\t%.0f\t-\t-\t-\t-\t-\t-" % (tag, c["qps"], c["qps"]))
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
    index=/root/synth-${SYNTH_DOCS:-5000000}${SYNTH_SHARDS:+-shards-$SYNTH_SHARDS}
    if [ ! -f "$index/meta.json" ]; then
      say "[${SECONDS}s] synth: ${SYNTH_DOCS:-5000000} documents like $wiki${SYNTH_SHARDS:+, $SYNTH_SHARDS shards}"
      ${SYNTH_BIN:-$dev/warpsearch} synth --like "$wiki" --output "$index" --docs "${SYNTH_DOCS:-5000000}" \
        ${SYNTH_SHARDS:+--shards $SYNTH_SHARDS} --force 2>>"$log" || rc=1
      say "[${SECONDS}s] synth done"
    fi
    head -n 20000 "$queries" >"$tmp/q.txt"
    ;;
  *) say "unknown collection $collection"; rc=1; continue ;;
  esac
  IFS=';' read -ra vs <<<"$variants"
  for backend in ${BACKENDS:-gpu auto hybrid cpu}; do
    for mode in ${MODES:-and or}; do
      for round in $(seq "${ROUNDS:-1}"); do
        for v in "${vs[@]}"; do
          name=${v%%=*}
          read -r bin opts <<<"${v#*=}"
          json=$out/latency/$collection-$name-$backend-$mode-$round.json
          say "[${SECONDS}s] $collection $name (${bin} ${opts}) $backend $mode, round $round"
          run() { $bin bench --index "$index" --queries "$tmp/q.txt" --mode $mode --k "${K:-10}" --backend $backend \
            --warmup 1 $opts "$@" >>"$log" 2>&1 || rc=1; }
          if [ "${LOADS:-}" = none ]; then
            run --json "$json"
          elif $bin bench --help | grep -q -- --loads; then
            run --loads "${LOADS:-0.1,0.3,0.5,0.7,0.9}" --duration "${DURATION:-1}" --json "$json"
          else
            # A build without --loads: its rates are the same fractions of its own closed loop.
            run --json "$tmp/cal.json"
            rates=$(python3 -c 'import json, sys; q = json.load(open(sys.argv[1]))["closed_loop"]["qps"]; print(",".join("%d" % (float(l) * q) for l in sys.argv[2].split(",")))' "$tmp/cal.json" "${LOADS:-0.1,0.3,0.5,0.7,0.9}")
            run --rates "$rates" --duration "${DURATION:-1}" --json "$json"
          fi
          [ -f "$json" ] && rows "$json" $collection $name $round $backend $mode | tee -a "$tsv"
        done
      done
    done
  done
done
tar -C "$out" -czf "$out/latency${TAG:+-$TAG}.tar.gz" latency && rm -rf "$out/latency"
rm -rf "$tmp"
say "[${SECONDS}s] exit $rc"
exit $rc
