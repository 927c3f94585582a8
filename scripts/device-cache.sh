#!/usr/bin/env bash
# On the lent GPU machine: the list cache's GPU tests, then the synthetic 25M collection with a
# quarter, a tenth … of the index in GPU memory (bench/RESULTS.md, the list cache).
#
# Parts (arguments, in order; default: all of them):
#   tests  the engine's GPU tests (the cache tests on random indexes and on the passages included) and
#          the kernel tests;
#   synth  generates the synthetic collection (`warpsearch synth --like` the passages; kept in
#          /root/synth for the parts after it in the same or the next call);
#   and|or closed-loop top-10 throughput with the whole index resident, then at budgets of 100%, 50%,
#          25% and 10% of the index under vfb, qtf, qtfdf and dynamic, trained on TREC 2005 queries
#          1-25,000 and measured on 25,001-30,000 (QUERIES_TEST to change);
#   base   AND and OR with the whole index resident (no cache): what the budgets' shares are of;
#   drift  trained on the log's queries whose first word sorts before "m", run on the others (25%);
#   vfb    vfb at 25% and 10%, and qtf at 25%, AND and OR (after a change to the staging path);
#   hybrid vfb at 25%, AND and OR, on the GPU alone and on the hybrid (HYBRID_RUNS, "workers:host threads" pairs: those to try
#          besides the defaults);
#   dyn    vfb and dynamic alone at 25% and 10% (after a change to the dynamic policy);
#   long   vfb and dynamic (LONG_POLICIES) on longer streams (LONG_TEST queries, 20,000) at budgets
#          LONG_SHARES (0.25), for LONG_MODES (and or) and LONG_STREAMS (long drift-long):
#          the stationary one (TREC 2005 queries from 25,001) and the drift (queries from "m" on,
#          trained on those before "m");
#   gs     the passages in global-score order with bm25-static (early termination; the CPU completes):
#          cache S_c of 25% and 10% of the index plus 64 MiB of staging (carried as .device/gs-part1 and
#          .device/wiki-gs-rest.tar.xz);
#   synth-gs  the synthetic collection in global-score order (`synth --static-scores --doc-order
#          global-score`, α 0.5): a document takes its first passage's static score 1/(1 + passage
#          number), from .device/static.tsv.xz (scripts/device-prepare.sh makes it); kept in /root/synth-gs;
#   gs-synth  the gs table on it (GS_MODES, default "and or"), budgets of 25% and 10% of the index with
#          S_b a quarter of the budget, as the plain collection's table;
#   chunks  on the synthetic collection in global-score order (after synth-gs), bm25-static: all
#          resident, then vfb, dynamic and qtf at 25% and vfb at 10%, a call's queries in CHUNKS (1 4 8)
#          chunks (`--gpu-cache-chunks`: sent while the one before computes), for CHUNK_MODES (and or);
#   runs   the runs RUNS names, ';'-separated "mode policy share label [more bench options]" (policy none:
#          all resident; S_b a quarter of the budget), on RUNS_INDEX (synth-gs, else the plain synth);
#          e.g. RUNS="and dynamic 0.25 no-replan --gpu-cache-epoch 1000000000" EXTRA="--ranking bm25-static";
#          RUNS_STREAM=drift: trained and run as `long`'s drift-long stream;
#   identical  `search` with a cache vs the CPU's run, byte for byte (after gs; IDENT_INDEX=synth-gs:
#          on the synthetic collection in global-score order, after synth-gs);
#   identical-synth  the same on the synthetic collection (plain BM25), AND, and-or and OR (IDENT_MODES) at 25% and 10%;
#   sweep  at a 25% budget, the split between cache S_c and staging S_b, five splits (for the throughput
#          model: python3 bench/cache_model.py OUT.svg <their reports>).
# Output under $OUT: cache.log, cache-table.txt (one row per run; warm_pl: plans applied over the
# warm-up and its settle, the first included), reports.tgz (reports/*.json of every run on this machine
# so far).
# usage: scripts/device-cache.sh [tests] [synth] [and] [or] [base] [vfb] [hybrid] [drift] [dyn] [long] [gs] [synth-gs]
#        [gs-synth] [chunks] [runs] [identical] [identical-synth] [sweep]
set -uo pipefail
source scripts/device-common.sh
log=$out/cache.log
table=$out/cache-table.txt
synth=/root/synth
synth_gs=/root/synth-gs
idx=$synth
extra=${EXTRA:-}  # more `bench` options for every run (EXTRA="--gpu-split 50000")
# WARMUP=0: no warm-up pass (the dynamic policy then meets the measured queries for the first time).
# BACKEND=hybrid: the hybrid (CPU workers beside the GPU, which keeps its cache) instead of the GPU alone.
touch "$log"
parts=${*:-tests synth and or drift sweep}
work=/tmp/cache-work
mkdir -p $work
sed -n '1,25000p' $dev/trec05-efficiency.txt >$work/train.txt
sed -n "${QUERIES_TEST:-25001,30000}p" $dev/trec05-efficiency.txt >$work/test.txt
awk '$1 < "m"' $dev/trec05-efficiency.txt | head -n 25000 >$work/drift-train.txt
awk '$1 >= "m"' $dev/trec05-efficiency.txt | head -n 5000 >$work/drift-test.txt
long=${LONG_TEST:-20000}
awk '$1 >= "m"' $dev/trec05-efficiency.txt | head -n "$long" >$work/drift-long.txt
sed -n "25001,$((25000 + long))p" $dev/trec05-efficiency.txt >$work/test-long.txt
[ -f "$table" ] || printf "%-5s %-8s %-7s %-8s %10s %8s %8s %6s %9s %7s %7s %8s %8s %8s %8s %8s %7s %s\n" mode policy budget buffer \
  "queries/s" p50_ms p99_ms hit "KiB/q" partial cpu_only "compl_s" "replan_s" host_ms wait_ms kern_ms warm_pl run >"$table"

# The index's bytes on the device (postings words and 20 bytes of skip data per block).
index_bytes() { python3 -c "import os,sys; d=sys.argv[1]; print(os.path.getsize(d+'/postings.bin') + os.path.getsize(d+'/blocks.bin'))" "$1"; }

# run <mode> <policy|none> <budget share> <buffer share of budget> <train> <test> <tag>
run() {
  local mode=$1 policy=$2 share=$3 buf=$4 train=$5 test=$6 tag=$7
  local name=${TAG:+$TAG-}$tag-$mode-$policy-$share-$buf json
  json=$work/reports/$name.json
  mkdir -p "$work/reports"
  local args=(--index $idx --queries $test --mode $mode --k 10 --backend ${BACKEND:-gpu} --warmup ${WARMUP:-1} --json $json $extra)
  if [ "$policy" != none ]; then
    local total=$(( $(index_bytes $idx) ))
    local budget
    budget=$(python3 -c "print(int($total * $share))")
    local buffer
    buffer=$(python3 -c "print(max(64 << 20, int($budget * $buf)))")
    # buf = fixed: S_c is the share of the index, S_b 64 MiB on top (an index too small to split).
    [ "$buf" = fixed ] && buffer=$((64 << 20))
    budget=$(python3 -c "print(int($total * $share) + ($buffer if $share >= 1 or '$buf' == 'fixed' else 0))")
    args+=(--gpu-memory $budget --gpu-cache $policy --gpu-cache-buffer $buffer --gpu-cache-train $train)
  fi
  say "== $name: ${args[*]}"
  $bin bench "${args[@]}" >>"$log" 2>&1 || { say "$name failed"; return; }
  grep -E "^(closed|GPU cache|GPU:)" "$log" | tail -n 4
  python3 - "$json" "$mode" "$policy" "$share" "$buf" "$table" "${LABEL:-${TAG:--}}" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["closed_loop"]
c = r.get("cache") or {}
n = json.load(open(sys.argv[1]))["num_queries"]
l = r["latency_ms"]
g = r.get("gpu") or {}
w = r.get("warmup_cache") or {}
row = "%-5s %-8s %-7s %-8s %10.0f %8.3f %8.3f %6s %9s %7s %7s %8s %8s %8.0f %8.0f %8.0f %7s %s\n" % (
    sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5], r["qps"], l["p50"], l["p99"],
    "%.3f" % c["hit_rate"] if c.get("hit_rate") is not None else "-",
    "%.1f" % (c["staged_bytes_per_query"] / 1024) if c.get("staged_bytes_per_query") is not None else "-",
    c.get("partial", "-"), c.get("cpu_only", "-"),
    "%.2f" % c["completion_seconds"] if "completion_seconds" in c else "-",
    "%.3f" % c["replan_seconds"] if "replan_seconds" in c else "-",
    g.get("prepare_ms", 0) + g.get("stage_ms", 0), g.get("wait_ms", 0), g.get("kernel_ms", 0),
    w.get("replans", "-"), sys.argv[7])
open(sys.argv[6], "a").write(row)
PY
}

# gs_table <index> <buffer share|fixed> <modes> <tag>: bm25-static with early termination on an index in
# global-score order, all resident, then vfb, qtf, qtfdf and dynamic at 25% and 10%, and vfb with λ 0.5 at
# 10% (`run` reads idx and extra from here).
gs_table() {
  local idx=$1 buf=$2 tag=$4 extra="${EXTRA:-} --ranking bm25-static" mode share policy
  for mode in $3; do
    run $mode none 1 0 $work/train.txt $work/test.txt $tag
    for share in 0.25 0.1; do
      for policy in vfb qtf qtfdf dynamic; do
        run $mode $policy $share $buf $work/train.txt $work/test.txt $tag
      done
    done
    extra="$extra --gpu-cache-ratio 0.5" run $mode vfb 0.1 $buf $work/train.txt $work/test.txt $tag-lambda0.5
  done
}

for part in $parts; do
  case $part in
  tests)
    say "== GPU tests (engine: GPU engine, hybrid, list cache; gpu: kernels)"
    WARPSEARCH_WIKI_INDEX=$wiki WARPSEARCH_QUERIES=$dev/trec05-efficiency.txt \
      $dev/engine-tests --test-threads=4 --nocapture >"$out/tests.log" 2>&1
    echo "engine tests rc $?" | tee -a "$log"
    $dev/gpu-tests --test-threads=4 >>"$out/tests.log" 2>&1
    echo "kernel tests rc $?" | tee -a "$log"
    grep -E "^test |test result|skipped|^wiki|^cache seed" "$out/tests.log" | tee -a "$log"
    ;;
  synth)
    if [ ! -f $synth/meta.json ]; then
      $bin synth --like "$wiki" --output $synth --docs ${SYNTH_DOCS:-25000000} 2>&1 | tee -a "$log"
    fi
    say "synthetic index: $(index_bytes $synth) bytes of postings and skip data"
    ;;
  and | or)
    run $part none 1 0 $work/train.txt $work/test.txt base
    for share in 1 0.5 0.25 0.1; do
      for policy in vfb qtf qtfdf dynamic; do
        [ "$share" = 1 ] && [ $policy != vfb ] && continue
        run $part $policy $share 0.25 $work/train.txt $work/test.txt cache
      done
    done
    ;;
  base)
    for mode in and or; do
      run $mode none 1 0 $work/train.txt $work/test.txt base
    done
    ;;
  drift)
    for mode in and or; do
      for policy in vfb dynamic; do
        run $mode $policy 0.25 0.25 $work/drift-train.txt $work/drift-test.txt drift
      done
    done
    ;;
  long)
    for share in ${LONG_SHARES:-0.25}; do
      for mode in ${LONG_MODES:-and or}; do
        for policy in ${LONG_POLICIES:-vfb dynamic}; do
          for stream in ${LONG_STREAMS:-long drift-long}; do
            case $stream in
            long) run $mode $policy $share 0.25 $work/train.txt $work/test-long.txt long ;;
            drift-long) run $mode $policy $share 0.25 $work/drift-train.txt $work/drift-long.txt drift-long ;;
            esac
          done
        done
      done
    done
    ;;
  vfb)
    for mode in and or; do
      for share in 0.25 0.1; do
        run $mode vfb $share 0.25 $work/train.txt $work/test.txt vfb
      done
      run $mode qtf 0.25 0.25 $work/train.txt $work/test.txt vfb
    done
    ;;
  hybrid)
    # vfb at 25%: the GPU alone, then the hybrid with its default workers and host threads, then with
    # each of HYBRID_RUNS ("workers:host threads") instead (the run column says which).
    for mode in and or; do
      LABEL=${TAG:+$TAG-}gpu BACKEND=gpu run $mode vfb 0.25 0.25 $work/train.txt $work/test.txt hyb-gpu
      LABEL=${TAG:+$TAG-}hybrid BACKEND=hybrid run $mode vfb 0.25 0.25 $work/train.txt $work/test.txt hyb
      for wh in ${HYBRID_RUNS-15:4 11:2 8:4}; do
        LABEL=${TAG:+$TAG-}hybrid-$wh BACKEND=hybrid extra="$extra --hybrid-workers ${wh%:*} --hybrid-host-threads ${wh#*:}" \
          run $mode vfb 0.25 0.25 $work/train.txt $work/test.txt hyb-$wh
      done
    done
    ;;
  dyn)
    for mode in and or; do
      for share in 0.25 0.1; do
        for policy in vfb dynamic; do
          run $mode $policy $share 0.25 $work/train.txt $work/test.txt dyn
        done
      done
    done
    ;;
  gs)
    # The passages in global-score order (static score 1/(1 + passage number), α 0.5), bm25-static with
    # early termination: the paper's setting, where VFB prunes list tails and the CPU completes.
    gs=/root/wiki-gs
    mkdir -p $gs
    # Two calls carry it (64 MiB each): the postings first (that call runs this part's unpacking only).
    [ -f $gs/postings.bin ] || [ ! -f $dev/gs-part1/wiki-gs-postings.bin.xz ] ||
      unxz $dev/gs-part1/wiki-gs-postings.bin.xz >$gs/postings.bin
    [ -f $gs/meta.json ] || [ ! -f $dev/wiki-gs-rest.tar.xz ] || unxz $dev/wiki-gs-rest.tar.xz | tar -x -C $gs
    [ -f $gs/meta.json ] || { say "the global-score passages are not all here yet"; continue; }
    gs_table $gs fixed "and or" gs
    ;;
  synth-gs)
    if [ ! -f $synth_gs/meta.json ]; then
      [ -f $dev/static.tsv.xz ] || { say "synth-gs: no $dev/static.tsv.xz (PASSAGES=… scripts/device-prepare.sh)"; continue; }
      unxz $dev/static.tsv.xz >/tmp/static.tsv
      $bin synth --like "$wiki" --output $synth_gs --docs ${SYNTH_DOCS:-25000000} --static-scores /tmp/static.tsv \
        --doc-order global-score --alpha 0.5 2>&1 | tee -a "$log"
      [ "${PIPESTATUS[0]}" = 0 ] || { say "synth-gs failed"; continue; }
    fi
    say "synthetic index in global-score order: $(index_bytes $synth_gs) bytes of postings and skip data"
    ;;
  gs-synth)
    [ -f $synth_gs/meta.json ] || { say "gs-synth: run synth-gs first"; continue; }
    gs_table $synth_gs 0.25 "${GS_MODES:-and or}" gs-synth
    ;;
  chunks)
    [ -f $synth_gs/meta.json ] || { say "chunks: run synth-gs first"; continue; }
    for mode in ${CHUNK_MODES:-and or}; do
      idx=$synth_gs extra="${EXTRA:-} --ranking bm25-static" run $mode none 1 0 $work/train.txt $work/test.txt chunks
      for c in ${CHUNKS:-1 4 8}; do
        for cfg in vfb:0.25 dynamic:0.25 qtf:0.25 vfb:0.1; do
          idx=$synth_gs extra="${EXTRA:-} --ranking bm25-static --gpu-cache-chunks $c" LABEL=chunks-$c \
            run $mode ${cfg%%:*} ${cfg##*:} 0.25 $work/train.txt $work/test.txt chunks$c
        done
      done
    done
    ;;
  runs)
    case ${RUNS_INDEX:-synth-gs} in
    synth-gs) ridx=$synth_gs ;;
    *) ridx=$synth ;;
    esac
    [ -f $ridx/meta.json ] || { say "runs: no index at $ridx (synth-gs or synth first)"; continue; }
    # RUNS_STREAM=drift: trained on the queries before "m", run on LONG_TEST (20,000) from "m" on.
    case ${RUNS_STREAM:-stationary} in
    drift) rtrain=$work/drift-train.txt rtest=$work/drift-long.txt ;;
    *) rtrain=$work/train.txt rtest=$work/test.txt ;;
    esac
    IFS=';' read -ra specs <<<"${RUNS:-}"
    for spec in "${specs[@]}"; do
      read -r rmode rpolicy rshare rlabel ropts <<<"$spec"
      [ -n "${rlabel:-}" ] || { say "runs: \"$spec\" is not \"mode policy share label [options]\""; continue; }
      idx=$ridx extra="${EXTRA:-} ${ropts:-}" LABEL=$rlabel run $rmode $rpolicy $rshare 0.25 $rtrain $rtest $rlabel
    done
    ;;
  identical)
    # `search` with a cache, byte for byte against the CPU's run: the global-score passages (after `gs`
    # unpacked them), bm25-static, the first 5,000 test queries, AND / OR / and-or at k 10 and 1000.
    case ${IDENT_INDEX:-gs} in
    synth-gs) gs=$synth_gs ;;
    *) gs=/root/wiki-gs ;;
    esac
    [ -f $gs/meta.json ] || { say "identical: run gs or synth-gs first ($gs)"; continue; }
    total=$(index_bytes $gs)
    # IDENT_MODES and IDENT_CONFIGS ("backend:policy:share[:completion]" words) to run fewer.
    for mode in ${IDENT_MODES:-and or and-or}; do
      for k in 10 1000; do
        common=(--index $gs --queries $work/test.txt --mode $mode --k $k --ranking bm25-static --force)
        $bin search "${common[@]}" --backend cpu --output $work/cpu.run 2>>"$log"
        for cfg in ${IDENT_CONFIGS:-gpu:vfb:0.1 gpu:qtf:0.25 gpu:dynamic:0.25 hybrid:vfb:0.25 gpu:vfb:0.25:transfer}; do
          set -- ${cfg//:/ }
          budget=$(python3 -c "print(int($total * $3) + (64 << 20))")
          $bin search "${common[@]}" --backend $1 --gpu-memory $budget --gpu-cache $2 --gpu-cache-buffer $((64 << 20)) \
            --gpu-cache-train $work/train.txt --gpu-cache-complete ${4:-auto} --stats --output $work/gpu.run 2>>"$log"
          if cmp -s $work/cpu.run $work/gpu.run; then r=identical; else r=DIFFERENT; fi
          say "$(basename $gs): search $mode k $k --backend $1 --gpu-cache $2 at $3 (${4:-auto}): $r to the CPU's run"
        done
      done
    done
    ;;
  identical-synth)
    # `search` with a cache on the synthetic collection (plain BM25: partly cached lists and staged spans),
    # byte for byte against the CPU's run: the first 5,000 test queries, AND / and-or / OR at k 10 and
    # 1000.
    total=$(index_bytes $idx)
    for mode in ${IDENT_MODES:-and and-or or}; do
      for k in 10 1000; do
        common=(--index $idx --queries $work/test.txt --mode $mode --k $k --force)
        $bin search "${common[@]}" --backend cpu --output $work/cpu.run 2>>"$log"
        for cfg in "vfb 0.25" "vfb 0.1" "dynamic 0.25"; do
          set -- $cfg
          budget=$(python3 -c "print(int($total * $2))")
          buffer=$(python3 -c "print(max(64 << 20, int($budget * 0.25)))")
          $bin search "${common[@]}" --backend gpu --gpu-memory $budget --gpu-cache $1 --gpu-cache-buffer $buffer \
            --gpu-cache-train $work/train.txt --stats --output $work/gpu.run 2>>"$log"
          if cmp -s $work/cpu.run $work/gpu.run; then r=identical; else r=DIFFERENT; fi
          say "synth: search $mode k $k --gpu-cache $1 at $2: $r to the CPU's run"
        done
      done
    done
    ;;
  sweep)
    for buf in 0.0625 0.125 0.25 0.375 0.5; do
      run and vfb 0.25 $buf $work/train.txt $work/test.txt sweep
    done
    ;;
  esac
done
# At most 8 files come back from a call: the reports travel as one archive, of every run's report on this
# machine so far (they are kept under $work, so a later run of this script in the same call or machine
# session adds to them; a run of the same name replaces its report).
[ -d "$work/reports" ] && tar -C "$work" -czf "$out/reports.tgz" reports
say "== table"
cat "$table"
