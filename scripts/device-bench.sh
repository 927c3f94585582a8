#!/usr/bin/env bash
# `warpsearch bench` on the Wikipedia passages, CPU (all cores) and GPU, AND and OR top-10: closed-loop
# throughput and open-loop latency at several Poisson arrival rates. Run after scripts/device-check.sh has
# unpacked the index (or with the index parts carried as for it). JSON and SVG plots go under $OUT.
# usage: scripts/device-bench.sh [rates]   (default 20000,50000,100000,200000)
set -uo pipefail
out=${OUT:-device-out}
mkdir -p "$out"
dev=.device
wiki=${WARPSEARCH_WIKI_INDEX:-/root/wiki-pfor}
rates=${1:-20000,50000,100000,200000}
unxz() { python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), sys.stdout.buffer)' "$1"; }
if [ -f $dev/wiki-rest.tar.xz ] && [ ! -f "$wiki/meta.json" ]; then
  mkdir -p "$wiki" && unxz $dev/wiki-rest.tar.xz | tar -x -C "$wiki"
fi
for mode in and or; do
  for backend in cpu gpu; do
    name=wiki-$mode-$backend
    $dev/warpsearch bench --index "$wiki" --queries $dev/trec05-efficiency.txt --mode $mode --k 10 \
      --backend $backend --rates "$rates" --duration 2 --deadline-ms 10 \
      --json "$out/$name.json" --svg "$out/$name" 2>&1 | grep -v "^warning"
  done
done
# At most 8 files come back from a call: pack the reports into one.
(cd "$out" && tar -czf bench-reports.tgz wiki-*.json wiki-*.svg && rm -f wiki-*.json wiki-*.svg)
