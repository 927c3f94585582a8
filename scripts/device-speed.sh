#!/usr/bin/env bash
# On the lent GPU machine: the GPU engine's speed on the synthetic 25M collection, against the
# binary of an earlier commit when one is carried as .device/warpsearch-old (bench/RESULTS.md).
# Needs the passages unpacked on the machine (a call carrying .device/part1 first): `synth --like`
# calibrates against them.
#
# Parts (arguments, in order; default: all):
#   tests      the GPU test suite (kernels, then the engine and the hybrid against the oracle, with the
#              passages), and the engine's tests again at 128 threads a CTA (TESTS_128=0: not) and, with the
#              passages, under the environment TESTS_ENV (e.g. WARPSEARCH_GPU_THREADS=128) if set; full output
#              in tests.log; where it fails, the suite of .device/gpu-tests-head and engine-tests-head (an
#              earlier commit's, if carried) in tests-head.log;
#   synth      generates the collection into $SYNTH (default /root/synth; kept for later parts and calls)
#              in the codec $CODEC (default simdbp, the index's default), of $SYNTH_DOCS documents
#              (default 25,000,000);
#   identical  OR, AND and and-or at k 10 and 1000 over the first 5,000 queries: the GPU's run and the CPU's,
#              compared byte for byte (the GPU's under each of GPU_ENVS, space-separated, "-" for none, e.g.
#              "- WARPSEARCH_GPU_THREADS=128"; default "-");
#   bench      closed-loop top-10 throughput (bench, one warm-up pass) of the first 20,000 TREC 2005
#              queries, OR and AND, this binary and the earlier one, on each backend of $BACKENDS
#              (default gpu; "gpu cpu" adds the CPU engine on all cores);
#   decode     gpu-check's decode throughput on the collection's own blocks;
#   sweep      the GPU's parameters, closed loop, top-10: AND by --gpu-merge-ratio, OR by --gpu-window,
#              and both at 128 threads a CTA (WARPSEARCH_GPU_THREADS);
#   ab         this binary against the earlier one in alternation, two rounds: OR at k 10 and 1000, AND at
#              k 10, or AB_RUNS (e.g. "or 10,and 10"); AB_BUILDS="label=path …" compares those builds
#              instead (closed loop, as bench; rows in the table, with k in the backend column);
#   profile    kernel phases (--gpu-profile) and the kernel's registers and CTAs per SM (under each of
#              GPU_ENVS, as identical);
#   cpu        the CPU engine against PISA on the same postings (PISA's best per mode here:
#              block_max_ranked_and, block_max_maxscore): all cores on the 20,000 queries, then one and all cores on
#              the first 2,000 (how each scales), with perf's cpu-clock profiles of both at all cores and
#              perf stat's faults and switches (perf from .device/perfkit.tar.xz; needs .device/whl);
#              CPU_SCALING=0 leaves out the runs on 2,000 queries;
#   cpuab      the CPU engine, this binary against the earlier one in alternation, two rounds: AND and OR
#              on all cores (closed loop, as bench);
#   hybab      the hybrid (CPU workers beside the GPU), this binary against the earlier one and, where
#              carried, .device/warpsearch-mid (a build between them), in alternation, two rounds, AND
#              and OR (closed loop, as bench; SYNTH=/root/wiki-simdbp RUN_QUERIES=… for the passages);
#   hybw       the hybrid with each of HYB_WORKERS (default "15 13 11 7") as --hybrid-workers, beside the
#              GPU alone, two rounds;
#   hybhost    the hybrid with each of HOST_THREADS (default "0 2 4") as --hybrid-host-threads, in
#              alternation, two rounds, AND and OR (the table's backend column says h<N>);
#   ctas       the query kernel compiled for CTAS (default "1 2 3") resident CTAs per SM
#              (WARPSEARCH_GPU_MIN_CTAS): registers, then AND and OR (windows 16,384 and 8,192), two rounds;
#   cpu1       one thread each, the first 2,000 queries: perf.data of our engine and of PISA under $OUT, for
#              `perf annotate` at home (run after cpu, which makes PISA's export);
#   ncu        Nsight Compute on one launch of each of NCU_MODES (default "or and"), top-10, the first 2,000
#              queries (after one launch's warm-up): warp states, stall sampling by source line, occupancy and
#              memory (ncu-<mode>.txt; the lines' samples in ncu-<mode>-source.csv where ncu can print them).
# A build in AB_BUILDS may be a wrapper script, e.g. one that sets WARPSEARCH_GPU_KERNELS to a directory of
# kernel files (a variant of crates/gpu/kernels, compiled at start-up by the same binary).
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
# of the first 20,000 queries (or $RUN_QUERIES, on $RUN_THREADS threads if set), with one warm-up pass, logged with its label (the environment is the caller's).
closed_run() {
  local exe=$1 label=$2 mode=$3 backend=$4
  shift 4
  $exe ${RUN_THREADS:+--threads $RUN_THREADS} bench --index $synth --queries ${RUN_QUERIES:-$work/q20000.txt} --mode $mode --k ${RUN_K:-10} --backend $backend \
    --warmup 1 "$@" 2>"$work/bench.err" >"$work/bench.out"
  say "$name $label: $(grep -hE "^closed" "$work/bench.out" "$work/bench.err" | tail -n 1)"
}

# engine_suite <suffix> <log>: the engine's tests against the oracle with the passages
# ($dev/engine-tests<suffix>), appended to <log>.
engine_suite() {
  WARPSEARCH_WIKI_INDEX=$wiki WARPSEARCH_QUERIES=$dev/trec05-efficiency.txt \
    $dev/engine-tests$1 --test-threads=4 --nocapture >>"$2" 2>&1
}

# suite <suffix> <log>: the kernel tests ($dev/gpu-tests<suffix>), then engine_suite, into <log>; fails if
# either fails.
suite() {
  local ok=0
  $dev/gpu-tests$1 --test-threads=4 >"$2" 2>&1 || ok=1
  engine_suite "$1" "$2" || ok=1
  return $ok
}

# build_exe <before|now>: the earlier binary (if carried) or this one; fails when there is none.
build_exe() {
  if [ "$1" = now ]; then echo $bin; else [ -x $dev/warpsearch-old ] && echo $dev/warpsearch-old; fi
}

# row_run <binary> <label> <mode> <backend> <column> <build> <json> [bench options…]: closed_run with a
# JSON report (and the options), and a table row of its queries/s, p50 and p99 ("-" where the run
# failed); <column> fills the table's third.
row_run() {
  local exe=$1 label=$2 mode=$3 backend=$4 column=$5 build=$6 json=$7
  shift 7
  closed_run $exe "$label" $mode $backend --json $json "$@"
  read -r qps p50 p99 < <(python3 -c '
import json, sys
c = json.load(open(sys.argv[1]))["closed_loop"]
print(round(c["qps"]), round(c["latency_ms"]["p50"], 1), round(c["latency_ms"]["p99"], 1))' "$json" 2>/dev/null || echo "- - -")
  printf "%-14s %-5s %-7s %-7s %10s %8s %8s\n" $name $mode $column $build "$qps" "$p50" "$p99" >>"$table"
}

# PISA's best algorithm per mode on this collection: block_max_ranked_and for AND; block_max_maxscore for
# OR, ahead of its maxscore at 25M on 16 cores (docs/decisions/023-comparing-with-peers.md).
pisa_algs() { [ "$1" = and ] && echo "--and block_max_ranked_and --or ''" || echo "--and '' --or block_max_maxscore"; }

# pisa_start <mode> <analyzed queries> <threads> <passes> <prefix>: PISA's best algorithm for <mode> in the
# background (JSON lines in <prefix>.jsonl, errors in <prefix>.err); returns once its index is ready (or
# it has exited), its process in pisa_pid, for perf to attach to.
pisa_start() {
  local mode=$1 queries=$2 threads=$3 passes=$4 prefix=$5
  eval "set -- $(pisa_algs $mode)"
  python3 -u bench/peers/pisa_bench.py /root/pisa-$name $queries $prefix --threads $threads --passes $passes \
    --latency-queries 1 "$@" >$prefix.jsonl 2>$prefix.err &
  pisa_pid=$!
  until grep -q harness $prefix.jsonl 2>/dev/null || ! kill -0 $pisa_pid 2>/dev/null; do sleep 0.2; done
}

# pisa_profiled <mode>: PISA on all cores over the 20,000 analyzed queries; once its index is ready, perf
# stat (3 s) and perf record (6 s) attach to it (the profile in $out/perf-pisa-<mode>.txt).
pisa_profiled() {
  say "[${SECONDS}s] cpu $1: PISA, all cores, 20,000 queries${perf:+, perf attached once it is ready}"
  pisa_start $1 $work/a20000.tsv "$(nproc)" 2 $work/pisa
  if [ -n "$perf" ] && kill -0 $pisa_pid 2>/dev/null; then
    $perf stat -e task-clock,page-faults,context-switches,cpu-migrations -p $pisa_pid -o $out/stat-pisa-$1.txt -- sleep 3
    $perf record -e cpu-clock -F 499 -p $pisa_pid -o $work/pisa.data -- sleep 6 2>/dev/null
    perf_top $work/pisa.data >$out/perf-pisa-$1.txt
  fi
  wait $pisa_pid
  grep -hE "qps|Error|error" $work/pisa.jsonl $work/pisa.err | tee -a "$log"
}

# pisa_row <mode> <threads>: PISA over the first 2,000 analyzed queries on <threads>; a table row.
pisa_row() {
  eval "set -- $1 $2 $(pisa_algs $1)"
  local mode=$1 t=$2
  shift 2
  python3 -u bench/peers/pisa_bench.py /root/pisa-$name $work/a2000.tsv $work/pisa2k --threads $t --passes 2 \
    --latency-queries 1 "$@" 2>/dev/null | grep qps | tee -a "$log" | python3 -c '
import json, sys
r = json.loads(sys.stdin.readline())
print("%-14s %-5s %-7s %-7s %10s %8s %8s" % (sys.argv[1], r["mode"], "t" + sys.argv[2], "pisa", r["qps"], "-", "-"))' \
    $name $t >>"$table"
}

# pisa_export: our postings of the 20,000 queries' terms as PISA's collection in /root/pisa-<name> (kept).
pisa_export() {
  if [ -n "$pisa_ready" ] && [ ! -f /root/pisa-$name/inv.docs ]; then
    say "[${SECONDS}s] export for PISA"
    $bin export $synth --pisa /root/pisa-$name --terms-from $work/q20000.txt --force 2>&1 | grep -v "^warning" | tee -a "$log"
  fi
}

for part in $parts; do
  case $part in
  tests)
    say "[${SECONDS}s] tests"
    suite "" "$out/tests.log" || rc=1
    if [ "${TESTS_128:-1}" = 1 ]; then
      WARPSEARCH_GPU_THREADS=128 $dev/engine-tests --test-threads=4 --skip wikipedia >>"$out/tests.log" 2>&1 || rc=1
    fi
    if [ -n "${TESTS_ENV:-}" ]; then
      say "[${SECONDS}s] the engine's tests again with $TESTS_ENV"
      (export $TESTS_ENV && engine_suite "" "$out/tests.log") || rc=1
    fi
    grep -E "^test result|FAILED|panicked|skipped|wiki |damaged" "$out/tests.log" | tee -a "$log"
    # Where this build's suite failed, the earlier commit's (carried as .device/*-tests-head), for a verdict
    # on that commit from the same call.
    if [ $rc != 0 ] && [ -x $dev/gpu-tests-head ]; then
      say "[${SECONDS}s] tests of the earlier build (.device/*-tests-head)"
      suite -head "$out/tests-head.log"
      grep -E "^test result|FAILED|panicked" "$out/tests-head.log" | tee -a "$log"
    fi
    ;;
  synth)
    if [ ! -f $synth/meta.json ]; then
      say "[${SECONDS}s] synth: ${SYNTH_DOCS:-25000000} documents like $wiki"
      $bin synth --like "$wiki" --output $synth --docs ${SYNTH_DOCS:-25000000} --codec $codec --force 2>"$work/synth.err" ||
        { tail -n 5 "$work/synth.err" | tee -a "$log"; exit 1; }
    fi
    $bin inspect $synth | head -n 6 | tee -a "$log"
    ;;
  identical)
    for mode in or and and-or; do
      for k in 10 1000; do
        $bin search --index $synth --queries $work/q5000.txt --mode $mode --k $k --backend cpu --force \
          --output $work/run-cpu.txt 2>"$work/search.err" || { tail -n 3 "$work/search.err" | tee -a "$log"; rc=1; }
        for genv in ${GPU_ENVS:--}; do
          [ "$genv" = - ] && genv=
          env $genv $bin search --index $synth --queries $work/q5000.txt --mode $mode --k $k --backend gpu --force \
            --output $work/run-gpu.txt 2>"$work/search.err" || { tail -n 3 "$work/search.err" | tee -a "$log"; rc=1; }
          if cmp -s $work/run-cpu.txt $work/run-gpu.txt; then
            say "$name $mode k $k${genv:+ ($genv)}: GPU run identical to the CPU run"
          else
            say "$name $mode k $k${genv:+ ($genv)}: GPU run DIFFERS from the CPU run"
            rc=1
          fi
        done
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
    IFS=, read -ra mks <<<"${AB_RUNS:-or 10,or 1000,and 10}"
    read -ra builds <<<"${AB_BUILDS:-before now}"
    for round in 1 2; do
      for mk in "${mks[@]}"; do
        read -r mode k <<<"$mk"
        for b in "${builds[@]}"; do
          case $b in
          *=*) build=${b%%=*} exe=${b#*=} ;;
          *) build=$b && exe=$(build_exe $b) || continue ;;
          esac
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
    for genv in ${GPU_ENVS:--}; do
      [ "$genv" = - ] && genv=
      env $genv $bin gpu-check | grep -E "search_and" | tee -a "$log"
      for mode in or and; do
        say "$name profile $mode${genv:+ ($genv)}:"
        env $genv $bin search --index $synth --queries $work/q20000.txt --mode $mode --k 10 --backend gpu --gpu-profile \
          --warmup 1 --stats --output /dev/null 2>&1 | grep -E "queries/s|^GPU" | tee -a "$log"
      done
    done
    ;;
  hybab)
    for round in 1 2; do
      for mode in and or; do
        for build in before mid now; do
          if [ $build = mid ]; then
            [ -x $dev/warpsearch-mid ] || continue
            exe=$dev/warpsearch-mid
          else
            exe=$(build_exe $build) || continue
          fi
          row_run $exe "hybab round $round $mode $build" $mode hybrid hybrid $build $out/reports/$name-hybab$round-$mode-$build.json
        done
      done
    done
    ;;
  hybw)
    # The hybrid with HYB_WORKERS CPU workers (default "15 13 11 7"), beside the GPU alone.
    for round in 1 2; do
      for mode in and or; do
        row_run $bin "hybw round $round $mode gpu" $mode gpu gpu now $out/reports/$name-hybw$round-$mode-gpu.json
        for w in ${HYB_WORKERS:-15 13 11 7}; do
          row_run $bin "hybw round $round $mode w$w" $mode hybrid w$w now \
            $out/reports/$name-hybw$round-$mode-w$w.json --hybrid-workers $w
        done
      done
    done
    ;;
  hybhost)
    for round in 1 2; do
      for mode in and or; do
        for h in ${HOST_THREADS:-0 2 4}; do
          row_run $bin "hybhost round $round $mode h$h" $mode hybrid h$h now \
            $out/reports/$name-hybhost$round-$mode-h$h.json --hybrid-host-threads $h
        done
      done
    done
    ;;
  ctas)
    # The query kernel compiled for each of CTAS (default "1 2 3") resident CTAs per SM
    # (WARPSEARCH_GPU_MIN_CTAS caps its registers): its resources, then AND, and OR at windows of
    # 16,384 and 8,192 (for PForDelta and Rice three CTAs' shared memory fits an SM only at the smaller;
    # for SIMD-BP128 at both since 241a633), in alternation, two
    # rounds (the table's backend column says c<N>, w<window>).
    for c in ${CTAS:-1 2 3}; do
      WARPSEARCH_GPU_MIN_CTAS=$c $bin gpu-check | grep -E "search_and" | sed "s/^/min CTAs $c: /" | tee -a "$log"
    done
    for round in 1 2; do
      for c in ${CTAS:-1 2 3}; do
        WARPSEARCH_GPU_MIN_CTAS=$c row_run $bin "ctas round $round and c$c" and gpu c$c now \
          $out/reports/$name-ctas$round-and-c$c.json
        for w in 16384 8192; do
          WARPSEARCH_GPU_MIN_CTAS=$c row_run $bin "ctas round $round or c$c w$w" or gpu c$c-w$w now \
            $out/reports/$name-ctas$round-or-c$c-w$w.json --gpu-window $w
        done
      done
    done
    ;;
  cpuab)
    for round in 1 2; do
      for mode in and or; do
        for build in before now; do
          exe=$(build_exe $build) || continue
          row_run $exe "cpuab round $round $mode $build" $mode cpu cpu $build $out/reports/cpuab$round-$mode-$build.json
        done
      done
    done
    ;;
  cpu1)
    pisa_setup
    perf_setup
    [ -n "$perf" ] && [ -n "$pisa_ready" ] || { say "cpu1 needs .device/perfkit.tar.xz and .device/whl"; continue; }
    head -n 2000 $work/q20000.txt >$work/q2000.txt
    pisa_export
    $bin analyze --index $synth --queries $work/q2000.txt >$work/a2000.tsv 2>/dev/null
    for mode in and or; do
      say "[${SECONDS}s] cpu1 $mode: ours under perf record"
      $perf record -e cpu-clock -F 299 -o $out/ours1-$mode.data -- $bin --threads 1 bench --index $synth \
        --queries $work/q2000.txt --mode $mode --k 10 --backend cpu 2>&1 | grep -E "^closed" | tee -a "$log"
      pisa_start $mode $work/a2000.tsv 1 1 $work/pisa1
      $perf record -e cpu-clock -F 299 -p $pisa_pid -o $out/pisa1-$mode.data -- sleep 12 2>/dev/null
      wait $pisa_pid
      grep -h qps $work/pisa1.jsonl | tee -a "$log"
    done
    ;;
  cpu)
    pisa_setup
    perf_setup
    [ -n "$pisa_ready" ] || say "no PISA (.device/whl): our engine only"
    head -n 2000 $work/q20000.txt >$work/q2000.txt
    pisa_export
    for n in 2000 20000; do $bin analyze --index $synth --queries $work/q$n.txt >$work/a$n.tsv 2>/dev/null; done
    for mode in and or; do
      say "[${SECONDS}s] cpu $mode: ours, all cores, 20,000 queries${perf:+, under perf record}"
      ${perf:+$perf record -e cpu-clock -F 499 -o $work/ours-$mode.data --} $bin bench --index $synth \
        --queries $work/q20000.txt --mode $mode --k 10 --backend cpu --warmup 1 2>&1 | grep -E "^closed" | tee -a "$log"
      [ -n "$perf" ] && perf_top $work/ours-$mode.data >$out/perf-ours-$mode.txt
      [ -n "$pisa_ready" ] && pisa_profiled $mode
      for t in $([ "${CPU_SCALING:-1}" = 0 ] || echo 1 "$(nproc)"); do
        RUN_THREADS=$t RUN_QUERIES=$work/q2000.txt row_run $bin "cpu $mode ours $t threads, 2,000 queries" $mode cpu \
          t$t ours $out/reports/cpu-$mode-t$t.json
        [ -n "$pisa_ready" ] && pisa_row $mode $t
      done
      if [ -n "$perf" ]; then
        $perf stat -e task-clock,page-faults,context-switches,cpu-migrations -o $out/stat-ours-$mode.txt -- \
          $bin bench --index $synth --queries $work/q2000.txt --mode $mode --k 10 --backend cpu --warmup 1 >/dev/null 2>&1
      fi
    done
    ;;
  ncu)
    head -n 2000 $dev/trec05-efficiency.txt >$work/q2000.txt
    for mode in ${NCU_MODES:-or and}; do
      say "[${SECONDS}s] ncu $mode"
      ncu --clock-control none -k search_$mode -s 1 -c 1 --section WarpStateStats --section SourceCounters \
        --section Occupancy --section MemoryWorkloadAnalysis --section LaunchStats --section SpeedOfLight \
        -f -o $work/ncu-$mode $bin bench --index $synth --queries $work/q2000.txt --mode $mode --k 10 \
        --backend gpu --gpu-batch 1000 --warmup 0 >$work/ncu.out 2>&1 || { tail -n 20 $work/ncu.out | tee -a "$log"; rc=1; }
      ncu -i $work/ncu-$mode.ncu-rep --page details >$out/ncu-$mode.txt 2>&1
      ncu -i $work/ncu-$mode.ncu-rep --page source --csv --print-source sass >$out/ncu-$mode-source.csv 2>&1 ||
        say "ncu $mode: no source page ($(head -c 300 $out/ncu-$mode-source.csv))"
      grep -E "Duration|Warp Cycles Per Issued|Achieved Occupancy|Stall|Issue Slot|Memory Throughput" $out/ncu-$mode.txt |
        head -n 20 | tee -a "$log"
    done
    ;;
  esac
done
(cd "$out" && tar -czf reports.tgz reports && rm -rf reports)
echo
cat "$table"
exit $rc
