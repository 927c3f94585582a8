# Session 28, call 3 (H100, warm): HEAD's CPU server (AND REPEAT=40 three rounds; OR REPEAT=4 two rounds),
# then Python search_batch (arrays and lists) against the CLI with HEAD's wheel.
export WARPSEARCH_WIKI_INDEX=/root/wiki-simdbp
source scripts/device-common.sh >/dev/null 2>&1
date -u; mkdir -p /tmp/o3
OUT=/tmp/o3/and BINS="head:.device/warpsearch-head" ROUNDS=3 BACKENDS=cpu MODES=and OVERLOAD=0 REPEAT=40 \
  LOADS="256x16 1024x16" CLOSED_OPTS="--max-in-flight 65536" bash scripts/device-serve-ab.sh > /tmp/o3/and.txt 2>&1
cut -c1-150 /tmp/o3/and.txt; date -u
OUT=/tmp/o3/or BINS="head:.device/warpsearch-head" ROUNDS=2 BACKENDS=cpu MODES=or OVERLOAD=0 REPEAT=4 \
  LOADS="256x16 1024x16" CLOSED_OPTS="--max-in-flight 65536" bash scripts/device-serve-ab.sh > /tmp/o3/or.txt 2>&1
cut -c1-150 /tmp/o3/or.txt; date -u
python3 -m pip install --quiet --no-deps --target /tmp/py-head .device/pywhl/*.whl
PYTHONPATH=/tmp/py-head python3 bench/python_search_batch.py --index $wiki --queries .device/trec05-efficiency.txt \
  --bin .device/warpsearch-head --modes and --ks 10 --arrays --reps 3 > /tmp/o3/python-and.log 2>&1
PYTHONPATH=/tmp/py-head python3 bench/python_search_batch.py --index $wiki --queries .device/trec05-efficiency.txt \
  --bin .device/warpsearch-head --modes or --ks 10 --arrays --reps 3 > /tmp/o3/python-or.log 2>&1
tail -12 /tmp/o3/python-and.log; tail -12 /tmp/o3/python-or.log; date -u
tar czf $OUT/call3.tgz -C /tmp/o3 .
