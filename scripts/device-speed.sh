#!/usr/bin/env bash
# Issue 14 on the lent GPU machine: the GPU engine's speed on the synthetic 25M collection, against the
# binary of an earlier commit when one is carried as .device/warpsearch-old (bench/RESULTS.md, issue 14).
# Needs the passages unpacked on the machine (a call carrying .device/part1 first): `synth --like`
# calibrates against them.
#
# Parts (arguments, in order; default: all):
#   tests      the GPU test suite (kernels, then the engine and the hybrid against the oracle, with the
#              passages), and the engine's tests again at 128 threads a CTA; full output in tests.log;
#   synth      generates the collection into $SYNTH (default /root/synth; kept for later parts and calls)
#              in the codec $CODEC (default simdbp, the index's default);
#   identical  OR, AND and and-or at k 10 and 1000 over the first 5,000 queries: the GPU's run and the CPU's,
#              compared byte for byte;
#   bench      closed-loop top-10 throughput (bench, one warm-up pass) of the first 20,000 TREC 2005
#              queries, OR and AND, this binary and the earlier one, on each backend of $BACKENDS
#              (default gpu; "gpu cpu" adds the CPU engine on all cores);
#   decode     gpu-check's decode throughput on the collection's own blocks;
#   sweep      the GPU's parameters, closed loop, top-10: AND by --gpu-merge-ratio, OR by --gpu-window,
#              and both at 128 threads a CTA (WARPSEARCH_GPU_THREADS);
#   ab         this binary against the earlier one in alternation, two rounds: OR at k 10 and 1000, AND at
#              k 10 (closed loop, as bench; rows in the table, with k in the backend column);
#   profile    kernel phases (--gpu-profile) and the kernel's registers and CTAs per SM.
# Output under $OUT: speed.log, speed-table.txt, reports.tgz (the JSON reports).
set -uo pipefail
source scripts/device-common.sh
log=$out/speed.log
table=$out/speed-table.txt
synth=${SYNTH:-/root/synth}
codec=${CODEC:-simdbp}
backends=${BACKENDS:-gpu}
name=$(basename "$synth")
work=/tmp/speed-work
mkdir -p "$out/reports" $work
touch "$log"
parts=${*:-tests synth identical bench profile}
head -n 20000 $dev/trec05-efficiency.txt >$work/q20000.txt
head -n 5000 $dev/trec05-efficiency.txt >$work/q5000.txt
[ -f "$table" ] || printf "%-14s %-5s %-7s %-7s %10s %8s %8s\n" index mode backend build "queries/s" p50_ms p99_ms >"$table"
rc=0

# closed_run <binary> <label> <mode> <backend> <bench options…>: a closed-loop run at top $RUN_K (default 10)
# of the first 20,000 queries, with one warm-up pass, logged with its label (the environment is the caller's).
closed_run() {
  local exe=$1 label=$2 mode=$3 backend=$4
  shift 4
  $exe bench --index $synth --queries $work/q20000.txt --mode $mode --k ${RUN_K:-10} --backend $backend \
    --warmup 1 "$@" 2>"$work/bench.err" >"$work/bench.out"
  say "$name $label: $(grep -hE "^closed" "$work/bench.out" "$work/bench.err" | tail -n 1)"
}

# build_exe <before|now>: the earlier binary (if carried) or this one; fails when there is none.
build_exe() {
  if [ "$1" = now ]; then echo $bin; else [ -x $dev/warpsearch-old ] && echo $dev/warpsearch-old; fi
}

# row_run <binary> <label> <mode> <backend> <column> <build> <json>: closed_run with a JSON report, and a
# table row of its queries/s, p50 and p99 ("-" where the run failed); <column> fills the table's third.
row_run() {
  local exe=$1 label=$2 mode=$3 backend=$4 column=$5 build=$6 json=$7
  closed_run $exe "$label" $mode $backend --json $json
  read -r qps p50 p99 < <(python3 -c '
import json, sys
c = json.load(open(sys.argv[1]))["closed_loop"]
print(round(c["qps"]), round(c["latency_ms"]["p50"], 1), round(c["latency_ms"]["p99"], 1))' "$json" 2>/dev/null || echo "- - -")
  printf "%-14s %-5s %-7s %-7s %10s %8s %8s\n" $name $mode $column $build "$qps" "$p50" "$p99" >>"$table"
}

for part in $parts; do
  case $part in
  tests)
    say "[${SECONDS}s] tests"
    $dev/gpu-tests --test-threads=4 >"$out/tests.log" 2>&1 || rc=1
    WARPSEARCH_WIKI_INDEX=$wiki WARPSEARCH_QUERIES=$dev/trec05-efficiency.txt \
      $dev/engine-tests --test-threads=4 --nocapture >>"$out/tests.log" 2>&1 || rc=1
    WARPSEARCH_GPU_THREADS=128 $dev/engine-tests --test-threads=4 --skip wikipedia >>"$out/tests.log" 2>&1 || rc=1
    grep -E "^test result|FAILED|panicked|skipped|wiki " "$out/tests.log" | tee -a "$log"
    ;;
  synth)
    if [ ! -f $synth/meta.json ]; then
      say "[${SECONDS}s] synth: 25M documents like $wiki"
      $bin synth --like "$wiki" --output $synth --docs 25000000 --codec $codec --force 2>"$work/synth.err" ||
        { tail -n 5 "$work/synth.err" | tee -a "$log"; exit 1; }
    fi
    $bin inspect $synth | head -n 6 | tee -a "$log"
    ;;
  identical)
    for mode in or and and-or; do
      for k in 10 1000; do
        for backend in cpu gpu; do
          $bin search --index $synth --queries $work/q5000.txt --mode $mode --k $k --backend $backend --force \
            --output $work/run-$backend.txt 2>"$work/search.err" || { tail -n 3 "$work/search.err" | tee -a "$log"; rc=1; }
        done
        if cmp -s $work/run-cpu.txt $work/run-gpu.txt; then
          say "$name $mode k $k: GPU run identical to the CPU run"
        else
          say "$name $mode k $k: GPU run DIFFERS from the CPU run"
          rc=1
        fi
      done
    done
    ;;
  bench)
    for mode in or and; do
      for backend in $backends; do
        for build in before now; do
          exe=$(build_exe $build) || continue
          row_run $exe "$mode $backend $build" $mode $backend $backend $build \
            $out/reports/$name-$mode-$backend-$build.json
        done
      done
    done
    ;;
  sweep)
    for r in 0 2 8 64 4294967295; do closed_run $bin "sweep and merge-ratio $r" and gpu --gpu-merge-ratio $r; done
    for w in 8192 16384 32768; do closed_run $bin "sweep or window $w" or gpu --gpu-window $w; done
    for mode in and or; do WARPSEARCH_GPU_THREADS=128 closed_run $bin "sweep $mode 128 threads" $mode gpu; done
    ;;
  ab)
    for round in 1 2; do
      for mk in "or 10" "or 1000" "and 10"; do
        read -r mode k <<<"$mk"
        for build in before now; do
          exe=$(build_exe $build) || continue
          RUN_K=$k row_run $exe "ab round $round $mode k $k $build" $mode gpu k$k $build \
            $out/reports/$name-ab$round-$mode-k$k-$build.json
        done
      done
    done
    ;;
  decode)
    say "$name decode:"
    $bin gpu-check --index $synth 2>&1 | grep -viE "^warning" | tail -n 12 | tee -a "$log"
    ;;
  profile)
    $bin gpu-check | grep -E "search_batch" | tee -a "$log"
    for mode in or and; do
      say "$name profile $mode:"
      $bin search --index $synth --queries $work/q20000.txt --mode $mode --k 10 --backend gpu --gpu-profile \
        --warmup 1 --stats --output /dev/null 2>&1 | grep -E "queries/s|^GPU" | tee -a "$log"
    done
    ;;
  esac
done
(cd "$out" && tar -czf reports.tgz reports && rm -rf reports)
echo
cat "$table"
exit $rc
