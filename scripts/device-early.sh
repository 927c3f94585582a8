#!/usr/bin/env bash
# Early termination (bm25-static on a global-score-ordered index, docs/references.md#pruned-list-caching Algorithm 1), CPU on all cores
# vs GPU, on the lent GPU machine. Packing, here:
#   xz -T2 -3 -c wiki-gs/postings.bin > .device/gs1/postings.bin.xz
#   tar -C wiki-gs -cf - $(cd wiki-gs && ls | grep -v '^postings.bin$') | xz -T2 -3 -c > .device/gs-rest.tar.xz
# (two calls: .device/gs1 first, then this script with .device/gs-rest.tar.xz, the binary and the queries).
set -uo pipefail
dev=.device
gs=/root/wiki-gs
queries=${1:-$dev/trec05-efficiency.txt}
unxz() { python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), sys.stdout.buffer)' "$1"; }
mkdir -p $gs
[ -f $dev/gs1/postings.bin.xz ] && [ ! -f $gs/postings.bin ] && unxz $dev/gs1/postings.bin.xz >$gs/postings.bin
[ -f $dev/gs-rest.tar.xz ] && [ ! -f $gs/meta.json ] && unxz $dev/gs-rest.tar.xz | tar -x -C $gs
tmp=$(mktemp -d)
rc=0
for mode in and or; do
  for backend in cpu gpu; do
    $dev/warpsearch search --index $gs --queries "$queries" --ranking bm25-static --mode $mode --k 10 \
      --backend $backend --warmup 1 --stats --output $tmp/$mode-$backend.txt 2>&1 | grep -E "queries/s|^GPU|backend"
  done
  if cmp -s $tmp/$mode-cpu.txt $tmp/$mode-gpu.txt; then echo "$mode: GPU run identical to the CPU run"
  else echo "$mode: GPU run DIFFERS from the CPU run"; rc=1; fi
done
exit $rc
