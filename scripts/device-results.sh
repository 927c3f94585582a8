#!/usr/bin/env bash
# The benchmark runs whose JSON reports scripts/results.py turns into bench/RESULTS.md's generated
# sections, on the lent GPU machine (or, BACKENDS=cpu, any machine). For each workload named (cacm: the
# CACM collection at $CACM, default ../shared/data/cacm, indexed here, its 64 topics 200 times; wiki: the
# passages at $WARPSEARCH_WIKI_INDEX, the 50,000 TREC 2005 queries twice; synth: the 25M collection,
# SYNTH_DOCS documents generated from the passages by `warpsearch synth --like` unless already there,
# the first 20,000 queries), backend of BACKENDS (default "gpu hybrid cpu") and mode of MODES (default
# "and or"): `warpsearch bench --k 10 --warmup 1 --loads LOADS --duration DURATION` (LOADS default
# 0.1,0.3,0.5,0.7,0.9 of the run's closed loop, LOADS=none: the closed loop alone), its report in
# $OUT/results/<workload>/<backend>-<mode>.json. $OUT/results/commit is COMMIT (the commit built; say it,
# since the machine has no git history) and $OUT/results/machine the GPU's name. Then, here:
#   scripts/results.py <files_at>/results     # rewrites bench/RESULTS.md's generated sections
# usage: COMMIT=$(git rev-parse --short HEAD) scripts/device-results.sh [cacm] [wiki] [synth]
set -uo pipefail
source scripts/device-common.sh
log=$out/results.log
results=$out/results
mkdir -p "$results"
touch "$log"
echo "${COMMIT:-unknown, not given to scripts/device-results.sh}" >"$results/commit"
if command -v nvidia-smi >/dev/null; then
  gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1)
  echo "$(nvidia-smi -L | wc -l) x $gpu" >"$results/machine"
fi
say "cores: $(nproc); date: $(date -u +%FT%TZ); binary: $bin; commit: $(cat "$results/commit")"
# Query files named for what they hold: the reports' commands name them.
work=/tmp/results-work
mkdir -p $work
loads=${LOADS:-0.1,0.3,0.5,0.7,0.9}
rc=0
for workload in ${*:-wiki synth}; do
  case $workload in
  cacm)
    cacm=${CACM:-../shared/data/cacm}
    index=$work/cacm
    $bin index --input "$cacm/docs.jsonl" --output "$index" --force 2>>"$log" || { rc=1; continue; }
    q=$work/cacm-topics-200-times.tsv
    for _ in $(seq 200); do cat "$cacm/topics.tsv"; done >"$q"
    ;;
  wiki)
    index=$wiki
    q=$work/trec05-efficiency-twice.txt
    for _ in 1 2; do cat $dev/trec05-efficiency.txt; done >"$q"
    ;;
  synth)
    index=/root/synth-${SYNTH_DOCS:-25000000}
    if [ ! -f "$index/meta.json" ]; then
      say "[${SECONDS}s] synth: ${SYNTH_DOCS:-25000000} documents like $wiki"
      $bin synth --like "$wiki" --output "$index" --docs "${SYNTH_DOCS:-25000000}" --force 2>>"$log" || { rc=1; continue; }
    fi
    q=$work/trec05-efficiency-first-20000.txt
    head -n 20000 $dev/trec05-efficiency.txt >"$q"
    ;;
  *) say "unknown workload $workload"; rc=1; continue ;;
  esac
  mkdir -p "$results/$workload"
  for backend in ${BACKENDS:-gpu hybrid cpu}; do
    for mode in ${MODES:-and or}; do
      open=()
      [ "$loads" = none ] || open=(--loads "$loads" --duration "${DURATION:-1}")
      say "[${SECONDS}s] $workload $backend $mode"
      $bin bench --index "$index" --queries "$q" --mode $mode --k 10 --backend $backend --warmup 1 \
        "${open[@]}" --json "$results/$workload/$backend-$mode.json" >>"$log" 2>&1 || { say "failed"; rc=1; }
    done
  done
done
exit $rc
