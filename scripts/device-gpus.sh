#!/usr/bin/env bash
# Several GPUs of one host on the lent machine (nvidia-h200-x2 or larger), in one call:
#   tests:     the replicas' and the shards' tests (.device/gpus-tests, .device/shards-tests), then the
#              engine's and the GPU crate's suites (.device/engine-tests, submit-tests, gpu-tests,
#              gpu-build-tests) where carried;
#   identical: `search` on the first 5,000 queries, AND and OR at k 10 and 1000, on the passages
#              ($WARPSEARCH_WIKI_INDEX) with --backend gpu and auto over --gpus 1, every GPU, and the
#              devices in reverse order, and with queries cut finely into docID ranges, each compared
#              byte for byte with the CPU's run;
#   shards:    with PASSAGES (JSON lines of passages), the single index and --shards 2 and 3 built from
#              them, then `search` of the sharded indexes on every GPU compared with the single index's
#              CPU run (same queries, modes and k);
#   python:    with a wheel in .device/pywhl (`pip wheel --no-deps -w .device/pywhl ./python`), pytest's
#              wheels in .device/pyw and CACM in .device/cacm, the Python package's tests on this machine
#              (its searchers' default backend, auto, runs on every GPU).
# Then `scripts/device-latency.sh` measures one GPU against all of them (call it in the same command).
# Output under $OUT: gpus.log, tests.log, python-tests.log.
# usage: scripts/device-gpus.sh [tests] [identical] [shards] [python]   (from the repository root)
set -uo pipefail
source scripts/device-common.sh
log=$out/gpus.log
: >"$log"
queries=$dev/trec05-efficiency.txt
parts=${*:-tests identical shards python}
rc=0
command -v nvidia-smi >/dev/null &&
  nvidia-smi --query-gpu=index,name,memory.total --format=csv,noheader | sed 's/^/device: /' | tee -a "$log"
gpus=$(nvidia-smi --query-gpu=index --format=csv,noheader 2>/dev/null | wc -l)
all=$(seq -s, 0 $((gpus - 1)))
reverse=$(seq -s, $((gpus - 1)) -1 0)
say "cores: $(nproc); GPUs: $gpus; date: $(date -u +%FT%TZ); index: $wiki"
tmp=$(mktemp -d)
head -n 5000 "$queries" >"$tmp/q5000.txt"

# same <index> <label> <options…>: every mode and k of `search` with the options, against the CPU's run
# on `want_index` (default: the same index).
same() {
  local index=$1 label=$2
  shift 2
  for mode in and or; do
    for k in 10 1000; do
      $dev/warpsearch search --index "${want_index:-$index}" --queries "$tmp/q5000.txt" --mode $mode --k $k \
        --backend cpu --output "$tmp/want.txt" --force 2>>"$log"
      # A run that fails leaves no output: an earlier run's file must not pass for it.
      rm -f "$tmp/got.txt"
      if ! $dev/warpsearch search --index "$index" --queries "$tmp/q5000.txt" --mode $mode --k $k --stats \
        --output "$tmp/got.txt" --force "$@" 2>>"$log"; then
        say "$label $mode k $k: FAILED"
        rc=1
      elif cmp -s "$tmp/want.txt" "$tmp/got.txt"; then
        say "$label $mode k $k: identical to the CPU"
      else
        say "$label $mode k $k: DIFFERS from the CPU"
        rc=1
      fi
    done
  done
}

if [[ " $parts " == *" tests "* ]]; then
  say "== tests"
  TEST_LINES="CUDA devices|replicas" run_tests gpus-tests shards-tests engine-tests submit-tests gpu-tests gpu-build-tests
fi

if [[ " $parts " == *" identical "* ]]; then
  say "== identical (passages)"
  for backend in gpu auto; do
    same "$wiki" "$backend --gpus 1" --backend $backend --gpus 1
    same "$wiki" "$backend --gpus $all" --backend $backend --gpus "$all"
  done
  same "$wiki" "gpu --gpus $reverse" --backend gpu --gpus "$reverse"
  # Queries cut into up to 16 docID ranges, whose parts prune with the best k-th key of any of them.
  same "$wiki" "gpu, queries cut fine" --backend gpu --gpus 1 --gpu-split-or 20000 --gpu-split-and 500 --gpu-split-waves 0
  grep -E "^backend|replicas|gpu [0-9]" "$log" | sort | uniq -c | head -n 20 | tee -a "$log"
fi

if [[ " $parts " == *" shards "* ]] && [ -n "${PASSAGES:-}" ] && [ -f "$PASSAGES" ]; then
  say "== shards ($PASSAGES)"
  built=/root/gpus-shards
  mkdir -p $built
  $dev/warpsearch index --input "$PASSAGES" --output $built/one --title --force 2>>"$log" || rc=1
  for n in 2 3; do
    $dev/warpsearch index --input "$PASSAGES" --output $built/s$n --title --shards $n --force 2>>"$log" || rc=1
    want_index=$built/one same $built/s$n "$n shards, gpu --gpus $all" --backend gpu --gpus "$all"
    want_index=$built/one same $built/s$n "$n shards, auto" --backend auto
  done
  want_index=$built/one same $built/s2 "2 shards, gpu --gpus 1" --backend gpu --gpus 1
fi
if [[ " $parts " == *" python "* ]] && compgen -G "$dev/pywhl/*.whl" >/dev/null; then
  say "== python"
  python3 -m pip install --quiet --no-deps --target /tmp/py $dev/pywhl/*.whl $dev/pyw/*.whl >>"$log" 2>&1 ||
    say "installing the wheels failed"
  # The tests read CACM from ../shared/data, as in CI.
  if [ -d $dev/cacm ] && [ ! -d ../shared/data/cacm ]; then
    mkdir -p ../shared/data && cp -r $dev/cacm ../shared/data/cacm
  fi
  if [ ! -f ../shared/data/queries/trec05-efficiency.txt ]; then
    mkdir -p ../shared/data/queries && cp $queries ../shared/data/queries/
  fi
  say "python: $(python3 -V); numpy: $(python3 -c 'import numpy; print(numpy.__version__)' 2>&1 | tail -n 1); pandas: $(python3 -c 'import pandas; print(pandas.__version__)' 2>&1 | tail -n 1)"
  PYTHONPATH=/tmp/py WARPSEARCH_BIN=$PWD/$dev/warpsearch python3 -m pytest -q -rfEs python/tests >"$out/python-tests.log" 2>&1 || rc=1
  grep -E "^(FAILED|ERROR)|passed|failed" "$out/python-tests.log" | tee -a "$log"
fi
rm -rf "$tmp"
say "exit $rc"
exit $rc
