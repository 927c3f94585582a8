# Session 28, call 9 (H100): more rounds at HEAD 37b9b32, in process and through the server alternating
# within each round: the CPU server (AND, REPEAT=40, four rounds), then the hybrid server at its default
# (AND and OR, REPEAT=40, 1 s deadline, 1024x64 with 65,536 in flight, two rounds).
export WARPSEARCH_WIKI_INDEX=/root/wiki-simdbp
source scripts/device-common.sh >/dev/null 2>&1
date -u; mkdir -p /tmp/o9
OUT=/tmp/o9/cpu BINS="head:.device/warpsearch-head" ROUNDS=4 BACKENDS=cpu MODES=and OVERLOAD=0 REPEAT=40 \
  LOADS="1024x16" CLOSED_OPTS="--max-in-flight 65536" bash scripts/device-serve-ab.sh > /tmp/o9/cpu.txt 2>&1
cut -c1-150 /tmp/o9/cpu.txt; date -u
OUT=/tmp/o9/hybrid BINS="head:.device/warpsearch-head" ROUNDS=2 BACKENDS=hybrid MODES="and or" OVERLOAD=0 REPEAT=40 \
  DEADLINE_MS=1000 LOADS="1024x64" CLOSED_OPTS="--max-in-flight 65536" bash scripts/device-serve-ab.sh > /tmp/o9/hybrid.txt 2>&1
cut -c1-150 /tmp/o9/hybrid.txt; date -u
tar czf $OUT/call9.tgz -C /tmp/o9 .
