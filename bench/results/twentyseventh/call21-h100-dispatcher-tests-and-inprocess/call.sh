export WARPSEARCH_WIKI_INDEX=/root/wiki-simdbp
source scripts/device-common.sh >/dev/null 2>&1
date -u; mkdir -p /tmp/o
.device/gpu-tests --test-threads=4 > /tmp/o/gpu-tests.log 2>&1; echo "gpu-tests rc $?"
WARPSEARCH_WIKI_INDEX=$wiki WARPSEARCH_QUERIES=.device/trec05-efficiency.txt .device/engine-tests --test-threads=4 --nocapture > /tmp/o/engine-tests.log 2>&1; echo "engine-tests rc $?"
grep -hE "^test result" /tmp/o/gpu-tests.log /tmp/o/engine-tests.log
b=.device/warpsearch-new4
head -5000 .device/trec05-efficiency.txt > /tmp/q5k
for m in and or; do
  $b search --index $wiki --queries /tmp/q5k --k 10 --mode $m --backend cpu > /tmp/cpu-$m.txt 2>/dev/null
  for be in gpu hybrid; do
    $b search --index $wiki --queries /tmp/q5k --k 10 --mode $m --backend $be > /tmp/x.txt 2>/dev/null
    cmp -s /tmp/cpu-$m.txt /tmp/x.txt && echo "identical $be $m ($(wc -l </tmp/x.txt) lines)" || echo "DIFFER $be $m"
  done
done | tee /tmp/o/id.log
date -u
for r in 1 2 3 4; do cat .device/trec05-efficiency.txt; done > /tmp/q200k
for r in 1 2 3 4 5 6 7 8; do cat /tmp/q200k; done > /tmp/q1600k
for r in 1 2 3; do for m in and or; do for v in new3 new4; do
  .device/warpsearch-$v bench --index $wiki --queries /tmp/q1600k --k 10 --backend hybrid --mode $m --json /tmp/b.json > /tmp/b.log 2>&1
  echo "round $r $m $v $(grep -E '^closed' /tmp/b.log | awk '{print $2}') $(grep -oE 'host preparation [0-9.]+ ms' /tmp/b.log | head -1) $(grep -oE 'queries by CPU [0-9.]+%' /tmp/b.log) $(grep -oE '[0-9]+ GPU batches of [0-9.]+' /tmp/b.log)"
done; done; done | tee /tmp/o/inprocess.txt
for m in and or; do for v in new3 new4; do
  .device/warpsearch-$v bench --index $wiki --queries /tmp/q1600k --k 10 --backend gpu --mode $m > /tmp/g.log 2>&1
  echo "gpu backend $m $v $(grep -E '^closed' /tmp/g.log | awk '{print $2}')"
done; done | tee -a /tmp/o/inprocess.txt
date -u
tar czf $OUT/call21.tgz -C /tmp/o .
