export WARPSEARCH_WIKI_INDEX=/root/wiki-simdbp; log=/tmp/u.log; source scripts/device-common.sh
for b in pywhl pyvar; do python3 -m pip install -q --no-deps --target /tmp/$b .device/$b/*.whl; done
q=.device/trec05-efficiency.txt
PYTHONPATH=/tmp/pywhl python3 -c "import warpsearch; print(repr(warpsearch.Index.open('$wiki').searcher('cpu', threads=15)))" | tee $OUT/py.log
for r in 1 2; do
  for v in "head -" "var WS_PY_NOCONVERT=1" "var WS_PY_CHUNK=16384" "var WS_PY_CHUNK=1024"; do
    set -- $v; p=/tmp/pywhl; [ $1 = var ] && p=/tmp/pyvar
    echo "== round $r $v" | tee -a $OUT/py.log
    env ${2/#-/X=1} PYTHONPATH=$p python3 bench/python_search_batch.py --index $wiki --queries $q --bin $bin --ks 10 --reps 1 2>&1 | grep -E "^\| (and|or)" | tee -a $OUT/py.log
  done
done
