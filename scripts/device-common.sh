# Shared by the scripts/device-*.sh scripts (sourced, from the repository root): where things are on the
# lent GPU machine, logging, and unpacking the Wikipedia passage index that scripts/device-prepare.sh packs
# in two parts (one call carries at most 64 MiB: postings.bin first, the rest with the binaries). xz is
# unpacked with Python's lzma: the machine may lack the xz and zstd tools.
# Expects $log (the log file under $OUT) to be set by the caller after sourcing.
out=${OUT:-device-out}
mkdir -p "$out"
dev=.device
bin=${BIN:-$dev/warpsearch}  # BIN=.device/warpsearch-old: an earlier build
wiki=${WARPSEARCH_WIKI_INDEX:-/root/wiki-pfor}
say() { echo "$@" | tee -a "$log"; }
# run_tests <binary names…>: each test binary carried in $dev (those absent are passed over), with the
# passages and queries where the tests look for them; its summary lines (and lines matching
# $TEST_LINES) into $log, every test's output into $out/tests.log; rc=1 where one fails.
run_tests() {
  local t dir
  dir=$(mktemp -d)
  for t in "$@"; do
    [ -x $dev/$t ] || continue
    WARPSEARCH_WIKI_INDEX=$wiki WARPSEARCH_QUERIES=$dev/trec05-efficiency.txt $dev/$t --test-threads=4 --nocapture \
      >"$dir/$t.log" 2>&1 || rc=1
    grep -E "^test result|FAILED|panicked|skipped${TEST_LINES:+|$TEST_LINES}" "$dir/$t.log" | sed "s/^/$t: /" | tee -a "$log"
  done
  cat "$dir"/*.log >"$out/tests.log" 2>/dev/null
  rm -rf "$dir"
}
unxz() { python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), sys.stdout.buffer)' "$1"; }
if [ -f $dev/wiki-rest.tar.xz ] && [ ! -f "$wiki/meta.json" ]; then
  mkdir -p "$wiki" && unxz $dev/wiki-rest.tar.xz | tar -x -C "$wiki"
fi
for part in $dev/wiki-postings.bin.xz $dev/part1/wiki-postings.bin.xz; do
  if [ -f $part ] && [ ! -f "$wiki/postings.bin" ]; then
    mkdir -p "$wiki" && unxz $part >"$wiki/postings.bin"
  fi
done

# pisa_setup [DIR]: PISA from two carried wheels (pyterrier-pisa and tbb, in DIR, default $dev/whl),
# unpacked rather than pip-installed: the scripts load only PISA's compiled module, which needs libtbb
# beside it. Sets pisa_ready to 1 when present.
pisa_setup() {
  local whl=${1:-$dev/whl}
  pisa_ready=""
  if ! compgen -G "$whl/*.whl" >/dev/null; then  # or an installed pyterrier-pisa (a local try-out)
    python3 -c 'import importlib.util as u, sys; sys.exit(u.find_spec("pyterrier_pisa") is None)' 2>/dev/null && pisa_ready=1
    return 0
  fi
  python3 -c 'import glob, sys, zipfile; [zipfile.ZipFile(w).extractall("/tmp/site") for w in glob.glob(sys.argv[1] + "/*.whl")]' "$whl"
  local tbb
  tbb=$(dirname "$(ls /tmp/site/tbb-*.data/data/lib/libtbb.so.2)")
  export PYTHONPATH=/tmp/site LD_LIBRARY_PATH=$tbb${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  pisa_ready=1
}

# perf_setup: perf from the carried .device/perfkit.tar.xz (scripts/device-prepare.sh packs it; the image
# has none) unpacked into /root/perfkit; sets perf to the command, or to "" when none was carried.
perf_setup() {
  perf=""
  if [ ! -x /root/perfkit/perf ] && [ -f $dev/perfkit.tar.xz ]; then
    unxz $dev/perfkit.tar.xz | tar -x -C /root
  fi
  [ -x /root/perfkit/perf ] && perf="env LD_LIBRARY_PATH=/root/perfkit/lib /root/perfkit/perf"
  return 0
}

# perf_top <perf.data> [sort keys]: the functions by share of the samples (sorted by dso,sym unless given;
# those over PERF_LIMIT percent, default 0.4; the first PERF_LINES lines, default 45).
perf_top() {
  $perf report -i "$1" --stdio --sort "${2:-dso,sym}" --percent-limit "${PERF_LIMIT:-0.4}" 2>/dev/null | grep -v "^#" | grep -v "^$" | head -n "${PERF_LINES:-45}"
}
