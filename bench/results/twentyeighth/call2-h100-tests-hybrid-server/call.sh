# Session 28, call 2 (H100): HEAD's GPU tests and identity, then the hybrid server A/B (b1f457c "new4",
# its server defaulting to 8 CPU workers, against HEAD 37b9b32, whose server defaults to 4).
export WARPSEARCH_WIKI_INDEX=/root/wiki-simdbp
source scripts/device-common.sh >/dev/null 2>&1
date -u; mkdir -p /tmp/o
.device/gpu-tests --test-threads=4 > /tmp/o/gpu-tests.log 2>&1; echo "gpu-tests rc $?"
WARPSEARCH_WIKI_INDEX=$wiki WARPSEARCH_QUERIES=.device/trec05-efficiency.txt .device/engine-tests --test-threads=4 --nocapture > /tmp/o/engine-tests.log 2>&1; echo "engine-tests rc $?"
WARPSEARCH_WIKI_INDEX=$wiki .device/hybrid-tests --test-threads=4 --nocapture > /tmp/o/hybrid-tests.log 2>&1; echo "hybrid-tests rc $?"
grep -hE "^test result|skipped" /tmp/o/gpu-tests.log /tmp/o/engine-tests.log /tmp/o/hybrid-tests.log | sort | uniq -c
b=.device/warpsearch-head
head -5000 .device/trec05-efficiency.txt > /tmp/q5k
for m in and or; do
  $b search --index $wiki --queries /tmp/q5k --k 10 --mode $m --backend cpu > /tmp/cpu-$m.txt 2>/dev/null
  for be in gpu hybrid; do
    $b search --index $wiki --queries /tmp/q5k --k 10 --mode $m --backend $be > /tmp/x.txt 2>/dev/null
    cmp -s /tmp/cpu-$m.txt /tmp/x.txt && echo "identical $be $m ($(wc -l </tmp/x.txt) lines)" || echo "DIFFER $be $m"
  done
done | tee /tmp/o/id.log
date -u
OUT=/tmp/o/ab BINS="new4:.device/warpsearch-new4 head:.device/warpsearch-head" ROUNDS=2 BACKENDS=hybrid MODES="and or" \
  OVERLOAD=0 REPEAT=40 DEADLINE_MS=1000 LOADS="1024x64" CLOSED_OPTS="--max-in-flight 65536" \
  bash scripts/device-serve-ab.sh > /tmp/o/ab.txt 2>&1
cut -c1-150 /tmp/o/ab.txt
for f in /tmp/o/ab/serve-*.log.gz; do echo "$f: $(zcat $f | grep -oE 'serve: hybrid \([^)]*\)' | sort -u | tr '\n' ' ')"; done
date -u
tar czf $OUT/call2.tgz -C /tmp/o .
