#!/usr/bin/env bash
# The Python package on the lent machine: `search_batch` against the CLI on the passages
# (bench/python_search_batch.py), for the wheel in .device/pywhl ("new") and, where carried, the one in
# .device/pywhl-old ("old"), in alternation, ROUNDS rounds (default 2); then the GIL thread's CPU time per
# call for each (bench/python_gil_cost.py). THREADS="15" adds runs of the new wheel's searcher on that many
# threads (the CLI keeps every core). ARRAYS=1 also measures the new wheel's `as_arrays=True` (fca9e50 on;
# an older "old" wheel lacks it). Needs the passages unpacked (a call carrying .device/part1 first) and
# numpy and pandas on the machine. Wheels are built here with `pip wheel --no-deps -w .device/pywhl
# ./python` (abi3) and unpacked with `pip install --no-deps --target`. Output under $OUT: python.log.
# usage: WARPSEARCH_WIKI_INDEX=/root/wiki-simdbp scripts/device-python.sh   (from the repository root)
set -uo pipefail
source scripts/device-common.sh
log=$out/python.log
: >"$log"
queries=${QUERIES:-$dev/trec05-efficiency.txt}
builds=new
for b in new old; do
  w=$dev/pywhl; [ $b = old ] && w=$dev/pywhl-old
  compgen -G "$w/*.whl" >/dev/null || continue
  python3 -m pip install --quiet --no-deps --target /tmp/py-$b $w/*.whl >>"$log" 2>&1 || say "installing $w failed"
  [ $b = old ] && builds="new old"
done
say "cores: $(nproc); date: $(date -u +%FT%TZ); binary: $bin; index: $wiki; builds: $builds; python: $(python3 -V)"
for round in $(seq "${ROUNDS:-2}"); do
  for b in $builds; do
    say "== round $round build $b"
    arrays=""
    [ -n "${ARRAYS:-}" ] && [ $b = new ] && arrays=--arrays
    PYTHONPATH=/tmp/py-$b python3 bench/python_search_batch.py --index "$wiki" --queries "$queries" \
      --bin "$bin" --frame $arrays --reps 1 2>&1 | tee -a "$log"
  done
  for t in ${THREADS:-}; do
    say "== round $round build new, $t threads"
    PYTHONPATH=/tmp/py-new python3 bench/python_search_batch.py --index "$wiki" --queries "$queries" \
      --bin "$bin" --frame --reps 1 --threads "$t" 2>&1 | tee -a "$log"
  done
done
for b in $builds; do
  say "== GIL thread, build $b"
  PYTHONPATH=/tmp/py-$b python3 bench/python_gil_cost.py --index "$wiki" --queries "$queries" 2>&1 | tee -a "$log"
done
