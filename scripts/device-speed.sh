#!/usr/bin/env bash
# Issue 14 on the lent GPU machine: the GPU's OR windows best bound first (`--gpu-or-order bounds`, the
# default) against docID order, on the synthetic 25M collection (bench/RESULTS.md, issue 14 section).
# Run scripts/device-check.sh first in the same warm session (it unpacks the passages, which `synth
# --like` calibrates against, and checks exactness on them).
#
# Parts (arguments, in order; default: all):
#   synth      generates the collection into /root/synth (kept for later parts and calls);
#   identical  OR and and-or at k 10 and 1000 over the first 5,000 queries: the GPU's run in both orders
#              and the CPU's, compared byte for byte;
#   bench      closed-loop top-10 throughput (bench, one warm-up pass) of the first 20,000 TREC 2005
#              queries, OR and AND, both orders (AND has no windows: a control), and the binary before
#              this work if carried as .device/warpsearch-old;
#   sweep      OR best bound first at windows of 8,192 and 32,768;
#   profile    kernel phases and OR blocks decoded against all blocks of the queries' lists (--gpu-profile).
# Output under $OUT: speed.log, speed-table.txt, reports/*.json.
set -uo pipefail
source scripts/device-common.sh
log=$out/speed.log
table=$out/speed-table.txt
synth=/root/synth
work=/tmp/speed-work
mkdir -p "$out/reports" $work
touch "$log"
parts=${*:-synth identical bench profile}
head -n 20000 $dev/trec05-efficiency.txt >$work/q20000.txt
head -n 5000 $dev/trec05-efficiency.txt >$work/q5000.txt
[ -f "$table" ] || printf "%-5s %-7s %10s %8s %8s\n" mode order "queries/s" p50_ms p99_ms >"$table"
rc=0

for part in $parts; do
  case $part in
  synth)
    if [ ! -f $synth/meta.json ]; then
      say "[${SECONDS}s] synth: 25M documents like $wiki"
      $bin synth --like "$wiki" --output $synth --docs 25000000 --force 2>"$work/synth.err" ||
        { tail -n 5 "$work/synth.err" | tee -a "$log"; exit 1; }
    fi
    $bin inspect $synth | head -n 6 | tee -a "$log"
    ;;
  identical)
    for mode in or and-or; do
      for k in 10 1000; do
        for order in cpu docid bounds; do
          backend=(--backend gpu --gpu-or-order $order)
          [ $order = cpu ] && backend=(--backend cpu)
          $bin search --index $synth --queries $work/q5000.txt --mode $mode --k $k "${backend[@]}" --force \
            --output $work/run-$order.txt 2>"$work/search.err" || { tail -n 3 "$work/search.err" | tee -a "$log"; rc=1; }
        done
        for order in docid bounds; do
          if cmp -s $work/run-cpu.txt $work/run-$order.txt; then
            say "$mode k $k: GPU ($order) run identical to the CPU run"
          else
            say "$mode k $k: GPU ($order) run DIFFERS from the CPU run"
            rc=1
          fi
        done
      done
    done
    ;;
  bench)
    # "before": the binary of the commit before this work (.device/warpsearch-old, carried when present).
    for mode in or and; do
      for order in before docid bounds; do
        flags=(--gpu-or-order $order) exe=$bin
        if [ $order = before ]; then
          [ -x $dev/warpsearch-old ] || continue
          flags=() exe=$dev/warpsearch-old
        fi
        json=$out/reports/synth-$mode-$order.json
        $exe bench --index $synth --queries $work/q20000.txt --mode $mode --k 10 --backend gpu "${flags[@]}" \
          --warmup 1 --json $json 2>"$work/bench.err" >"$work/bench.out"
        line=$(grep -hE "^closed" "$work/bench.out" "$work/bench.err" | tail -n 1)
        say "$mode $order: $line"
        read -r qps p50 p99 < <(python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
c = r.get("closed_loop") or r
print(round(c["qps"]), round(c["latency_ms"]["p50"], 1), round(c["latency_ms"]["p99"], 1))' "$json" 2>/dev/null || echo "- - -")
        printf "%-5s %-7s %10s %8s %8s\n" $mode $order "$qps" "$p50" "$p99" >>"$table"
      done
    done
    ;;
  sweep)
    # OR best cell bound first at other windows (cells of window / 32 documents); the last field is
    # WARPSEARCH_GPU_MIN_CTAS (1: as many registers as the compiler wants).
    for run in "or 8192 bounds 2" "or 32768 bounds 2"; do
      set -- $run
      json=$out/reports/synth-$1-w$2-$3-c$4.json
      WARPSEARCH_GPU_MIN_CTAS=$4 $bin bench --index $synth --queries $work/q20000.txt --mode $1 --k 10 \
        --backend gpu --gpu-window $2 --gpu-or-order $3 --warmup 1 --json $json 2>"$work/bench.err" >"$work/bench.out"
      say "$1 window $2 $3, min CTAs $4: $(grep -hE "^closed" "$work/bench.out" "$work/bench.err" | tail -n 1)"
    done
    ;;
  profile)
    $bin gpu-check | grep -E "search_batch" | tee -a "$log"
    for run in "or docid" "or bounds" "and bounds"; do
      set -- $run
      say "profile $1 $2:"
      $bin search --index $synth --queries $work/q20000.txt --mode $1 --k 10 --backend gpu --gpu-or-order $2 \
        --gpu-profile --warmup 1 --stats --output /dev/null 2>&1 | grep -E "queries/s|^GPU" | tee -a "$log"
    done
    ;;
  esac
done
echo
cat "$table"
exit $rc
