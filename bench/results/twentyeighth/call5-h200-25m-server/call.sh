# Session 28, call 5 (H200): the 25M collection with HEAD: generated, hybrid and GPU identical to the CPU on
# 2,000 queries, then the hybrid server against in-process (deadline 400 ms): whole index at serve's default
# (a quarter of the cores as CPU workers) and with --hybrid-workers 8; then with a VFB list cache at 25%.
export WARPSEARCH_WIKI_INDEX=/root/wiki-simdbp
source scripts/device-common.sh >/dev/null 2>&1
b=.device/warpsearch-head
date -u; mkdir -p /tmp/o5
OUT=/tmp/o5/speed BIN=$b bash scripts/device-speed.sh synth 2>&1 | tail -8
date -u
s=/root/synth
head -2000 .device/trec05-efficiency.txt > /tmp/q2k
for m in and or; do
  $b search --index $s --queries /tmp/q2k --k 10 --mode $m --backend cpu > /tmp/cpu-$m.txt 2>/dev/null
  for be in gpu hybrid; do
    $b search --index $s --queries /tmp/q2k --k 10 --mode $m --backend $be > /tmp/x.txt 2>/dev/null
    cmp -s /tmp/cpu-$m.txt /tmp/x.txt && echo "25M identical $be $m ($(wc -l </tmp/x.txt) lines)" || echo "25M DIFFER $be $m"
  done
done | tee /tmp/o5/id.log
date -u
head -20000 .device/trec05-efficiency.txt > /tmp/q20000.txt
for v in default w8; do
  o=""; [ $v = w8 ] && o="--hybrid-workers 8"
  OUT=/tmp/o5/$v BIN=$b WARPSEARCH_WIKI_INDEX=$s QUERIES=/tmp/q20000.txt BACKENDS=hybrid MODES="or and" \
    LOADS="64x16 256x16" OVERLOAD=0 DEADLINE_MS=400 CLOSED_OPTS="$o" bash scripts/device-serve.sh all >/dev/null 2>&1
  echo "== $v"; grep -v "^backend" /tmp/o5/$v/serve-table.txt | cut -c1-150
  grep -oE "serve: hybrid \([^)]*\)" /tmp/o5/$v/serve.log | sort -u
  date -u
done
total=$(python3 -c "import os; print(os.path.getsize('$s/postings.bin') + os.path.getsize('$s/blocks.bin'))")
budget=$((total / 4)); buffer=$((budget / 4))
sed -n '1,25000p' .device/trec05-efficiency.txt > /tmp/train.txt
sed -n '25001,45000p' .device/trec05-efficiency.txt > /tmp/test.txt
OUT=/tmp/o5/cache BIN=$b WARPSEARCH_WIKI_INDEX=$s QUERIES=/tmp/test.txt BACKENDS=hybrid MODES="and or" \
  LOADS="64x16 256x16" OVERLOAD=0 DEADLINE_MS=400 \
  ENGINE_OPTS="--gpu-memory $budget --gpu-cache vfb --gpu-cache-buffer $buffer --gpu-cache-train /tmp/train.txt" \
  bash scripts/device-serve.sh all >/dev/null 2>&1
echo "== cache vfb 25% (budget $budget, buffer $buffer)"; grep -v "^backend" /tmp/o5/cache/serve-table.txt | cut -c1-150
grep -oE "serve: hybrid \([^)]*\)" /tmp/o5/cache/serve.log | sort -u
date -u
tar czf $OUT/call5.tgz -C /tmp/o5 .
