#!/usr/bin/env bash
# The CPU engine on an index with a query file: every algorithm, AND and OR, k 10 and 1000, 1 and all
# threads; one warm-up pass, then one timed pass. Prints one line per run (from `search --stats`).
# usage: bench/cpu-wiki.sh <index> <queries> [threads...]
set -euo pipefail
index=$1 queries=$2
shift 2
threads=("${@:-1}")
bin=${WARPSEARCH:-target/release/warpsearch}
for t in "${threads[@]}"; do
  for k in 10 1000; do
    for run in "and daat" "and exhaustive" "or maxscore" "or bmw" "or exhaustive" "and-or auto"; do
      set -- $run
      "$bin" --threads "$t" search --index "$index" --queries "$queries" --mode "$1" --algorithm "$2" \
        --k "$k" --warmup 1 --stats 2>&1 >/dev/null | tail -n 1
    done
  done
done
