#!/usr/bin/env bash
# The index build on the lent GPU machine: the CPU build's scaling with threads and the GPU build against
# it, on the Wikipedia passages (776,864 passages, 517 MB of JSON lines). The device has no Rust: `pack`
# (here) builds the binary and the GPU build tests and packs the passages as two xz parts under 64 MiB,
# one call's carry each; on the device, each call unpacks what it carried and runs the asked mode once every
# part is there.
#
#   here:   scripts/device-build.sh pack passages.jsonl
#           (fills .device/build/bin and .device/build/part1 and part2; `/.device/` is ignored by git)
#   device: two calls carrying .device/build/part1 and part2 with `scripts/device-build.sh unpack`, then
#           a call carrying .device/build/bin with one of:
#     scripts/device-build.sh cpu     # --build-on cpu at 1, 4, 8 and 16 threads, timed; every index
#                                     # compared byte for byte with the 16-thread one
#     scripts/device-build.sh gpu     # the GPU build tests (CPU vs GPU files, random collections and the
#                                     # passages), then --build-on gpu vs cpu at 16 threads, timed, twice
#                                     # each, and the two indexes compared byte for byte
#     scripts/device-build.sh all     # both
#     scripts/device-build.sh peers   # tantivy (.device/build/bin/tantivy-peer, bench/peers/tantivy) on
#                                     # the passages with 16 indexing threads fed by 16 parsing threads,
#                                     # and with its default writer fed by one thread, between warpsearch's
#                                     # CPU and GPU builds at 16 threads
#     scripts/device-build.sh large   # the passages repeated REPEAT times (default 10) with new ids,
#                                     # about 5 GB: warpsearch's CPU and GPU builds and tantivy's, 16 threads
#                                     # (large-input: that collection only, in /root/passages-large)
#     scripts/device-build.sh ab      # .device/build/bin/warpsearch-base (an earlier build) against this
#                                     # one, CPU and GPU at 16 threads, alternating, twice, on the passages
#                                     # and on /root/passages-large where large-input made it; each pair
#                                     # of indexes compared byte for byte (AB_INPUTS: other directories)
#     scripts/device-build.sh same-dirs A B   # compares two index directories built before
#     scripts/device-build.sh pisa    # PISA (bench/peers/pisa_index.py; pyterrier-pisa's and tbb's wheels
#                                     # in .device/build/bin/whl) at 16 threads on the passages, and on
#                                     # /root/passages-large where it is there
# Logs and a summary go under $OUT (or ./device-out); the passages and indexes stay in /root.
set -uo pipefail
mode=${1:?usage: scripts/device-build.sh pack FILE | unpack | cpu | gpu | all}
dev=.device/build
passages=${WARPSEARCH_PASSAGES_DIR:-/root/passages}
parts=2

if [ "$mode" = pack ]; then
  set -e
  input=${2:?pack needs the passages file}
  mkdir -p $dev/bin
  cargo build --release -p warpsearch
  cargo test --release -p warpsearch-gpu --test build --no-run 2>&1 | tee /tmp/device-build-pack.log
  test_bin=$(grep -oE 'target/release/deps/build-[0-9a-f]+' /tmp/device-build-pack.log | head -n 1)
  cp target/release/warpsearch $dev/bin/warpsearch
  cp "$test_bin" $dev/bin/gpu-build-tests
  strip $dev/bin/warpsearch $dev/bin/gpu-build-tests
  lines=$(wc -l <"$input")
  per=$(((lines + parts - 1) / parts))
  rm -rf /tmp/device-build-split && mkdir -p /tmp/device-build-split
  split -d -a 1 -l "$per" "$input" /tmp/device-build-split/p
  for i in $(seq 1 $parts); do
    mkdir -p $dev/part$i
    xz -T2 -9 -c /tmp/device-build-split/p$((i - 1)) >$dev/part$i/passages-$i.jsonl.xz
  done
  rm -rf /tmp/device-build-split
  du -sh $dev/bin $dev/part*
  exit 0
fi

# The shared helpers (say, unxz, pisa_setup); this script's own places after them.
source scripts/device-common.sh
dev=.device/build
mkdir -p "$passages"
log=$out/device-build.log
# Each part becomes passages/passages-N.jsonl; a directory input is read in path order, so the
# documents keep the single file's order.
for i in $(seq 1 $parts); do
  packed=$dev/part$i/passages-$i.jsonl.xz
  if [ -f "$packed" ] && [ ! -f "$passages/passages-$i.jsonl" ]; then
    unxz "$packed" >"$passages/passages-$i.jsonl.tmp" && mv "$passages/passages-$i.jsonl.tmp" "$passages/passages-$i.jsonl"
  fi
done
have=$(ls "$passages"/passages-*.jsonl 2>/dev/null | wc -l)
say "passages: $have of $parts parts unpacked in $passages"
[ "$mode" = unpack ] && exit 0
[ "$have" = $parts ] || { say "missing parts: carry .device/build/part1 … part$parts with 'unpack' first"; exit 1; }
bin=$dev/bin/warpsearch
[ -x $bin ] || { say "no $bin: carry .device/build/bin"; exit 1; }
nproc | sed 's/^/cores: /' | tee -a "$log"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null | sed 's/^/gpu: /' | tee -a "$log"
summary=$out/build-summary.txt
: >"$summary"

# Every index file's bytes, build identities aside, compared between two index directories: in a binary
# file the header's identity (bytes 20..28) and the footer's checksum (bytes -16..-12) zeroed, in
# meta.json the values of "build_id", "set" and "checksum" (as crates/index/src/testdata.rs does).
same() {
  python3 - "$1" "$2" <<'PY'
import os, re, sys
a, b = sys.argv[1], sys.argv[2]
def norm(p):
    d = bytearray(open(p, 'rb').read())
    if d.startswith(b"WARPSRCH"):
        if len(d) >= 56:
            d[20:28] = bytes(8)
            d[-16:-12] = bytes(4)
        return bytes(d)
    for key, n in [(b'"build_id": "', 16), (b'"set": "', 16), (b'"checksum": "', 8)]:
        d = re.sub(re.escape(key) + b'.{%d}' % n, lambda m: key + b'0' * n, bytes(d), flags=re.S)
    return bytes(d)
fa, fb = sorted(os.listdir(a)), sorted(os.listdir(b))
bad = [f for f in fa if f not in fb or norm(os.path.join(a, f)) != norm(os.path.join(b, f))]
if fa != fb or bad:
    print("DIFFERENT:", bad or (fa, fb)); sys.exit(1)
print("identical,", len(fa), "files")
PY
}

# same-dirs A B: only compares two index directories built before.
if [ "$mode" = same-dirs ]; then say "$2 vs $3: $(same "$2" "$3")"; exit 0; fi

# build NAME THREADS ON: one timed build into /root/build-NAME; its summary line into the summary.
build() {
  local name=$1 threads=$2 on=$3
  local start end
  start=$(date +%s.%N)
  $bin --threads "$threads" index --input "$passages" --output /root/build-$name --title --force \
    --build-on "$on" ${BUILD_OPTS:-} >"$out/build-$name.log" 2>&1
  local rc=$?
  end=$(date +%s.%N)
  local wall
  wall=$(python3 -c "print(f'{$end - $start:.1f}')")
  say "$name: --threads $threads --build-on $on: rc $rc, ${wall} s wall"
  grep -E "^indexed|^on the GPU|^note" "$out/build-$name.log" | tee -a "$log"
  printf "%-14s threads %-3s on %-4s %8s s  %s %s\n" "$name" "$threads" "$on" "$wall" \
    "$(grep -oE '\(read and analyse.*' "$out/build-$name.log" | head -n 1)" \
    "$(grep -E '^on the GPU' "$out/build-$name.log" | head -n 1)" >>"$summary"
}

if [ "$mode" = cpu ] || [ "$mode" = all ]; then
  say "== the CPU build at 1, 4, 8 and 16 threads"
  for t in 16 8 4 1; do build cpu-$t $t cpu; done
  for t in 8 4 1; do
    say "cpu-$t vs cpu-16: $(same /root/build-cpu-$t /root/build-cpu-16)"
  done
fi

if [ "$mode" = gpu ] || [ "$mode" = all ]; then
  say "== GPU build tests (CPU vs GPU files; WARPSEARCH_PASSAGES: the passages)"
  WARPSEARCH_PASSAGES=$passages $dev/bin/gpu-build-tests --test-threads=1 --nocapture >"$out/gpu-build-tests.log" 2>&1
  say "tests rc $?"
  grep -E "^test |test result|skipped|panicked" "$out/gpu-build-tests.log" | tee -a "$log"
  say "== --build-on gpu vs cpu at 16 threads (each twice: the first warms the page cache and the GPU)"
  for round in 1 2; do
    build gpu16-$round 16 gpu
    build cpu16-$round 16 cpu
  done
  say "gpu vs cpu: $(same /root/build-gpu16-2 /root/build-cpu16-2)"
  # A build that fell back to the CPU compares the CPU with itself: say so loudly.
  if grep -q "on the CPU;" "$out/build-gpu16-2.log"; then
    say "WARNING: --build-on gpu inverted on the CPU (see its note): the comparison above is CPU vs CPU"
  fi
fi
# tantivy NAME INPUT [THREADS]: one timed tantivy build into /root/tantivy-NAME.
tantivy() {
  local name=$1 input=$2 threads=${3:-}
  local start end
  [ -x $dev/bin/tantivy-peer ] || { say "no $dev/bin/tantivy-peer: build bench/peers/tantivy and carry it"; return; }
  rm -rf /root/tantivy-$name
  start=$(date +%s.%N)
  $dev/bin/tantivy-peer index "$input" /root/tantivy-$name $threads >"$out/tantivy-$name.log" 2>&1
  local rc=$?
  end=$(date +%s.%N)
  local wall
  wall=$(python3 -c "print(f'{$end - $start:.1f}')")
  say "tantivy $name: threads ${threads:-default}: rc $rc, ${wall} s wall; $(tail -n 1 "$out/tantivy-$name.log")"
  printf "%-14s threads %-3s tantivy %6s s\n" "tantivy-$name" "${threads:-def}" "$wall" >>"$summary"
}

if [ "$mode" = peers ]; then
  # tantivy reads one file: the parts concatenated.
  cat "$passages"/passages-*.jsonl >/root/passages.jsonl
  for round in 1 2; do
    build cpu16-$round 16 cpu
    tantivy t16-$round /root/passages.jsonl 16
    build gpu16-$round 16 gpu
  done
  tantivy default /root/passages.jsonl
fi

if [ "$mode" = ab ]; then
  [ -x $dev/bin/warpsearch-base ] || { say "no $dev/bin/warpsearch-base: copy the earlier build there"; exit 1; }
  this=$bin
  saved=$passages
  for input in ${AB_INPUTS:-$passages /root/passages-large}; do
    [ -d "$input" ] || continue
    passages=$input
    tag=$(basename "$input")
    for round in 1 2; do
      for on in cpu gpu; do
        bin=$dev/bin/warpsearch-base
        build "base-$tag-$on-$round" 16 $on
        bin=$this
        build "this-$tag-$on-$round" 16 $on
      done
    done
    for on in cpu gpu; do
      say "$tag $on, base vs this: $(same /root/build-base-$tag-$on-2 /root/build-this-$tag-$on-2)"
    done
  done
  passages=$saved
fi

# pisa NAME INPUT: PISA's build at 16 threads (bench/peers/pisa_index.py), its JSON line in the summary.
pisa() {
  local name=$1 input=$2
  pisa_setup $dev/bin/whl
  [ -n "$pisa_ready" ] || { say "pisa $name: no PISA (carry its wheels in $dev/bin/whl)"; return; }
  PYTHONPATH=${PYTHONPATH:+$PYTHONPATH:}bench/peers \
    python3 bench/peers/pisa_index.py "$input" /root/pisa-$name 16 --fields ${PISA_FIELDS:-title,contents} \
    >"$out/pisa-$name.log" 2>"$out/pisa-$name.err"
  say "pisa $name: rc $?; $(tail -n 1 "$out/pisa-$name.log")"
  printf "%-14s threads 16  pisa %s\n" "pisa-$name" "$(tail -n 1 "$out/pisa-$name.log")" >>"$summary"
}

if [ "$mode" = pisa ]; then
  pisa passages "$passages"
  [ -d /root/passages-large ] && pisa large /root/passages-large
fi

if [ "$mode" = large ] || [ "$mode" = large-input ]; then
  large=/root/passages-large
  rm -rf $large && mkdir -p $large
  say "== the passages ${REPEAT:-10} times over with new ids"
  python3 - "$passages" $large "${REPEAT:-10}" <<'PY'
import glob, os, sys
src, dst, times = sys.argv[1], sys.argv[2], int(sys.argv[3])
with open(os.path.join(dst, "all.jsonl"), "wb") as out:
    for r in range(times):
        new = b'"id": "r%d-' % r
        for path in sorted(glob.glob(os.path.join(src, "passages-*.jsonl"))):
            with open(path, "rb") as f:
                for line in f:
                    out.write(line.replace(b'"id": "', new, 1))
PY
  say "$(wc -l <$large/all.jsonl) documents, $(du -sh $large | cut -f1)"
  [ "$mode" = large-input ] && exit 0
  saved=$passages
  passages=$large
  # Inverted in memory (not spilled), so that the GPU build takes the postings.
  BUILD_OPTS="--memory-mb ${LARGE_MEMORY_MB:-60000}" build large-cpu16 16 cpu
  BUILD_OPTS="--memory-mb ${LARGE_MEMORY_MB:-60000}" build large-gpu16 16 gpu
  tantivy large-t16 $large/all.jsonl 16
  passages=$saved
fi
cat "$summary" | tee -a "$log"
