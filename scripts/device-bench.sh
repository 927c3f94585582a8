#!/usr/bin/env bash
# The benchmark of bench/RESULTS.md on a fresh GPU machine: side by side on the same queries,
# warpsearch GPU, warpsearch CPU (all cores), PISA (all cores) and tantivy (all cores), AND and OR top-10, on
#   wiki:  the Wikipedia passages (the index travels from here: scripts/device-prepare.sh), all 50,000
#          TREC 2005 queries;
#   synth: the synthetic GOV2-scale collection, generated here from the passages (`warpsearch synth`,
#          25M documents by default: SYNTH_DOCS=…), the first 20,000 queries.
# `warpsearch bench` gives closed-loop throughput and latency, then open-loop latency under Poisson
# arrivals at rates from 10% to 90% of the closed-loop throughput. PISA (pyterrier-pisa's compiled
# library, bench/peers/pisa_bench.py) indexes exactly our postings of the terms the queries use
# (`warpsearch export --pisa --terms-from`) and answers our analyzed queries, so its answers differ from
# ours only by its BM25 idf. tantivy indexes the passages' text, and the synthetic collection from the
# same export (`tantivy-peer index-pisa`). The GPU brute-force floor (bench/peers/torch_bruteforce.py,
# the method of bm25-pt, SPARe and GPUSparse) scatter-adds the BM25 impacts of the same export's postings
# into a dense array per query with PyTorch, then takes torch.topk. Top-10 agreement of each peer with our
# CPU run is reported (bench/peers/overlap.py).
#
# What travels (scripts/device-prepare.sh packs it): .device/part1 (call 1: the passages' postings),
# .device/tantivy-wiki.tar.xz (call 2), then .device/{warpsearch,tantivy-peer,wiki-rest.tar.xz,
# trec05-efficiency.txt,whl} with this script (call 3 and on). The argument says what runs:
#   (none)      both collections in one call (460 s on an H200 at a7f22f0), all engines but tantivy on
#               the synthetic collection;
#   wiki        the passages (88 s);
#   synth-prep  generates the synthetic collection, exports it and builds tantivy's index of it;
#   synth       the synthetic collection, every engine; after `synth-prep` on the same machine (at once:
#               it is given back after 30 s idle) it reuses what that call made and runs tantivy too.
#               Together they do not fit one call: tantivy indexes 9.75 billion tokens. SYNTH_REUSE=1
#               reuses a collection that `scripts/device-speed.sh synth` made on the same machine.
# Full output under $OUT: bench.log, table.txt and one .tgz of JSON reports, PISA's JSON lines and SVG
# plots per collection. QUERIES=file, BACKENDS=cpu and SYNTH_DOCS=n make a small run possible on any
# machine.
# usage: scripts/device-bench.sh [wiki|synth-prep|synth]   (from the repository root)
set -uo pipefail
source scripts/device-common.sh
synth=/root/synth
docs=${SYNTH_DOCS:-25000000}
queries=${QUERIES:-$dev/trec05-efficiency.txt}
backends=${BACKENDS:-cpu gpu hybrid}  # BACKENDS=cpu runs the script on a machine without a GPU
log=$out/bench.log
table=$out/table.txt
work=$(mktemp -d)
: >"$log"
if [ -f $dev/tantivy-wiki.tar.xz ] && [ ! -d /root/tantivy-wiki ]; then  # packed as tantivy-wiki/
  unxz $dev/tantivy-wiki.tar.xz | tar -x -C /root
fi
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | sed 's/^/device: /' | tee -a "$log"
say "cores: $(nproc); date: $(date -u +%F)"
part=${1:-all}
printf "%-6s %-4s %-10s %12s %9s %9s %9s  %s\n" collection mode engine "queries/s" p50_ms p99_ms p99.9_ms note >"$table"
row() { printf "%-6s %-4s %-10s %12s %9s %9s %9s  %s\n" "$@" >>"$table"; }

pisa_setup
[ -n "$pisa_ready" ] || say "no .device/whl: PISA is skipped (scripts/device-prepare.sh downloads its wheels)"
# The machine's own PyTorch, for the brute-force peer; it needs a GPU.
torch_ready=""
if python3 -c 'import sys, torch; sys.exit(not torch.cuda.is_available())' 2>/dev/null; then
  torch_ready=1
else
  say "no PyTorch with CUDA: the torch brute-force peer is skipped"
fi

# Closed-loop q/s and latency of a bench JSON report.
closed() { python3 -c '
import json, sys
c = json.load(open(sys.argv[1]))["closed_loop"]
l = c["latency_ms"]
print(round(c["qps"]), "%.3f" % l["p50"], "%.3f" % l["p99"], "%.3f" % l["p99.9"])' "$1"; }

# bench <collection> <index> <mode> <backend> <queries>: closed loop, then open loop at 10-90% of it.
bench() {
  local name=$1-$3-$4
  $bin bench --index "$2" --queries "$5" --mode $3 --k 10 --backend $4 --json "$work/$name-closed.json" \
    2>&1 | grep -v "^warning" >>"$log"
  read -r qps p50 p99 p999 < <(closed "$work/$name-closed.json")
  row $1 $3 "$4" $qps $p50 $p99 $p999 "closed loop"
  local rates
  rates=$(python3 -c "q=$qps; print(','.join(str(round(q*f)) for f in (0.1, 0.3, 0.5, 0.7, 0.9)))")
  # The CPU-only engine's closed-loop rate, so that the hybrid also runs at half of it (the tail target).
  [ "$4" = cpu ] && cpu_qps=$qps
  [ "$4" = hybrid ] && [ -n "${cpu_qps:-}" ] && rates="$(python3 -c "print(round($cpu_qps * 0.5))"),$rates"
  $bin bench --index "$2" --queries "$5" --mode $3 --k 10 --backend $4 --rates "$rates" --duration 1 \
    --deadline-ms 100 --json "$work/$name.json" --svg "$work/$name" 2>&1 | grep -v "^warning" >>"$log"
  tail -n 8 "$log"
}

# ours_run <collection> <index> <queries>: our CPU's top-10 runs, the reference for peers' agreement.
ours_run() {
  for mode in and or; do
    $bin search --index "$2" --queries "$3" --mode $mode --k 10 --backend cpu --output "$work/ours-$1-$mode.run" \
      --force 2>/dev/null
  done
}

# agreement <collection> <mode> <peer run>: the mean top-10 agreement with our run, as a number.
agreement() {
  python3 bench/peers/overlap.py "$work/ours-$1-$2.run" "$3" 10 | tee -a "$log" | sed -E 's/.*agreement ([0-9.]+).*/\1/'
}

# pisa_peer <collection> <index> <queries> <pisa_bench.py options…>: PISA on our postings of the terms the
# queries use, then one table row per algorithm.
# tantivy_row <collection> <mode>: logs tantivy's output ($work/tantivy-<collection>-<mode>.out, whose last
# line is its result) and adds its table row, with the agreement of its run with ours.
tantivy_row() {
  local f=$work/tantivy-$1-$2
  tee -a "$log" <"$f.out"
  local line qps lat
  line=$(tail -n 1 "$f.out")
  qps=$(sed -E 's/.*: ([0-9]+) queries\/s.*/\1/' <<<"$line")
  lat=$(sed -E 's/.*p50 ([0-9.]+) p95 [0-9.]+ p99 ([0-9.]+) p99.9 ([0-9.]+).*/\1 \2 \3/' <<<"$line")
  row $1 $2 tantivy $qps $lat "top-10 agreement $(agreement $1 $2 "$f.run")"
}

# export_for_peers <collection> <index> <queries>: our postings of the queries' terms as PISA's binary
# collection in /root/pisa-<collection> (kept if `synth-prep` made it), and the analyzed queries.
export_for_peers() {
  local name=$1 dir=/root/pisa-$1
  if [ -f $dir/inv.docs ] && [ -n "$prepared" ]; then
    say "reusing the export $dir"
  elif ! $bin export "$2" --pisa $dir --terms-from "$3" --force 2>"$work/export-$name.err"; then
    say "peers skipped: the export failed: $(tail -n 1 "$work/export-$name.err")"
    return 1
  else
    grep -v "^warning" "$work/export-$name.err" | tee -a "$log"
  fi
  $bin analyze --index "$2" --queries "$3" >"$work/$name-analyzed.tsv" 2>/dev/null
}

pisa_peer() {
  [ -n "$pisa_ready" ] || return 0
  local name=$1 index=$2 q=$3 dir=/root/pisa-$1
  shift 3
  say "[${SECONDS}s] PISA on $name"
  export_for_peers $name "$index" "$q" || return 0
  PYTHONUNBUFFERED=1 python3 bench/peers/pisa_bench.py $dir "$work/$name-analyzed.tsv" "$work/pisa-$name" \
    --threads "$(nproc)" "$@" 2>"$work/pisa-$name.err" | tee "$work/$name-pisa.jsonl" | tee -a "$log"
  grep -E "Index compressed|Error|error" "$work/pisa-$name.err" | head -n 5 | tee -a "$log"
  python3 -c '
import json, sys
for line in filter(lambda l: l.startswith("{"), open(sys.argv[1])):
    r = json.loads(line)
    if "algorithm" in r and "qps" in r:
        print(r["mode"], r["algorithm"], r["qps"], r["p50_ms"], r["p99_ms"], r["p99.9_ms"])' "$work/$name-pisa.jsonl" |
    while read -r mode alg qps p50 p99 p999; do
      row $name $mode "pisa" $qps $p50 $p99 $p999 "$alg; latency one query at a time; top-10 agreement $(agreement $name $mode "$work/pisa-$name.$alg.run")"
    done
}

# torch_peer <collection> <index> <queries> <torch_bruteforce.py options…>: PyTorch's brute force on the
# export PISA used (made here if PISA did not run), with the index's k1 and b; a table row per mode. It
# has no per-query latency (a query's answer comes with its batch's), so the note gives the batch time.
torch_peer() {
  [ -n "$torch_ready" ] || return 0
  local name=$1 index=$2 q=$3 dir=/root/pisa-$1
  shift 3
  say "[${SECONDS}s] torch brute force on $name"
  if [ ! -f $dir/inv.docs ] || [ ! -f "$work/$name-analyzed.tsv" ]; then
    export_for_peers $name "$index" "$q" || return 0
  fi
  PYTHONUNBUFFERED=1 python3 bench/peers/torch_bruteforce.py $dir "$work/$name-analyzed.tsv" "$work/torch-$name" \
    --meta "$index/meta.json" "$@" 2>"$work/torch-$name.err" | tee "$work/$name-torch.jsonl" | tee -a "$log"
  tail -n 5 "$work/torch-$name.err" | tee -a "$log"
  python3 -c '
import json, sys
for line in filter(lambda l: l.startswith("{"), open(sys.argv[1])):
    r = json.loads(line)
    if "qps" in r:
        print(r["mode"], r["qps"], r["batch"], r["batch_ms_p50"])' "$work/$name-torch.jsonl" |
    while read -r mode qps batch p50; do
      row $name $mode torch $qps - - - "brute force; batches of $batch queries, p50 $p50 ms; top-10 agreement $(agreement $name $mode "$work/torch-$name.$mode.run")"
    done
}

# `synth` reuses what `synth-prep` made on this machine (header). Set before any export: export_for_peers
# reads it, and `set -u` ends the script on an unset variable (a second run on a warm machine).
prepared=""
[ "$part" = synth ] && [ -f $synth/meta.json ] && [ -f /root/pisa-synth/inv.docs ] && prepared=1
# SYNTH_REUSE=1: keep a collection an earlier call on this machine generated (scripts/device-speed.sh synth).
reuse=""
[ "${SYNTH_REUSE:-0}" = 1 ] && [ -f $synth/meta.json ] && reuse=1

if [ "$part" = all ] || [ "$part" = wiki ]; then
say "[${SECONDS}s] == Wikipedia passages ($(wc -l <$queries) TREC 2005 queries)"
ours_run wiki "$wiki" $queries
for mode in and or; do
  for backend in $backends; do bench wiki "$wiki" $mode $backend $queries; done
  if [ -d /root/tantivy-wiki ]; then
    $dev/tantivy-peer search /root/tantivy-wiki $queries $mode 10 "$(nproc)" "$work/tantivy-wiki-$mode.run" \
      >"$work/tantivy-wiki-$mode.out" 2>&1
    tantivy_row wiki $mode
  fi
done
pisa_peer wiki "$wiki" $queries --passes 2
torch_peer wiki "$wiki" $queries --passes 2
(cd "$work" && tar -czf "$out/wiki-reports.tgz" wiki-*.json wiki-*.svg wiki-pisa.jsonl wiki-torch.jsonl 2>/dev/null)
fi

head -n 20000 $queries >"$work/q20000.txt"  # the CPU's OR runs would not fit a call with all 50,000

if [ "$part" = all ] || [ "$part" = synth ] || [ "$part" = synth-prep ]; then
if [ -n "$prepared" ] || [ -n "$reuse" ]; then
  say "[${SECONDS}s] == synthetic collection: reusing $synth (made by an earlier call on this machine)"
  cp /root/synth-report.json "$work/synth-report.json" 2>/dev/null
else
  say "[${SECONDS}s] == synthetic collection: $docs documents from the passages"
  timer=""
  [ -x /usr/bin/time ] && timer="/usr/bin/time -v"
  $timer $bin synth --like "$wiki" --output $synth --docs $docs --force --report "$work/synth-report.json" \
    2>"$work/synth.err"
  grep -E "synthetic collection|calibration|Maximum resident|Elapsed" "$work/synth.err" | tee -a "$log"
  cp "$work/synth-report.json" /root/synth-report.json
fi
$bin inspect $synth | head -n 10 | tee -a "$log"
fi

if [ "$part" = synth-prep ]; then
  export_for_peers synth $synth "$work/q20000.txt"
  if [ -x $dev/tantivy-peer ]; then
    say "[${SECONDS}s] tantivy: indexing the synthetic collection's exported lists"
    rm -rf /root/tantivy-synth
    $timer $dev/tantivy-peer index-pisa /root/pisa-synth /root/tantivy-synth "$(nproc)" merge \
      2>&1 | grep -E "tantivy|Elapsed|Maximum resident" | tee -a "$log"
  fi
  df -h /root | tail -n 1 | sed 's/^/disk: /' | tee -a "$log"
fi

if [ "$part" = all ] || [ "$part" = synth ]; then
for mode in and or; do
  for backend in $backends; do bench synth $synth $mode $backend "$work/q20000.txt"; done
done
ours_run synth $synth "$work/q20000.txt"
df -h /root | tail -n 1 | sed 's/^/disk: /' | tee -a "$log"
# One timed pass and 1,000 latency queries per algorithm, and a deadline, to fit the call.
pisa_peer synth $synth "$work/q20000.txt" --passes 1 --latency-queries 1000 --deadline-s 330
torch_peer synth $synth "$work/q20000.txt" --passes 1  # reads inv.docs and inv.freqs: before the rm
rm -f /root/pisa-synth/inv.docs /root/pisa-synth/inv.freqs  # PISA's index is built; free the disk
if [ -d /root/tantivy-synth ] && [ -x $dev/tantivy-peer ]; then
  for mode in and or; do
    $dev/tantivy-peer search-terms /root/tantivy-synth "$work/synth-analyzed.tsv" $mode 10 "$(nproc)" \
      "$work/tantivy-synth-$mode.run" /root/pisa-synth >"$work/tantivy-synth-$mode.out" 2>&1
    tantivy_row synth $mode
  done
fi
# (absent where the collection came from scripts/device-speed.sh synth, which keeps no report)
[ -f "$work/synth-report.json" ] && cp "$work/synth-report.json" "$work/synth-generation.json"
(cd "$work" && tar -czf "$out/synth-reports.tgz" synth-*.json synth-*.svg synth-pisa.jsonl synth-torch.jsonl 2>/dev/null)
fi
# split-sweep: the hybrid in open loop at half the CPU engine's rate (AND 1,062/s and OR 728/s, measured
# at 70d82b2) with long queries split at several thresholds and GPU shares: where splitting pays.
if [ "$part" = split-sweep ]; then
  [ -f $synth/meta.json ] || $bin synth --like "$wiki" --output $synth --docs $docs --force 2>"$work/synth.err"
  head -n 20000 $queries >"$work/q20000.txt"
  for run in "and 1062" "or 728"; do
    set -- $run
    for variant in "--hybrid-split-ms 0" "--hybrid-split-ms 2" "--hybrid-split-ms 5" "--hybrid-split-ms 20" \
      "--hybrid-split-ms 5 --hybrid-split-gpu-share 0.3" "--hybrid-split-ms 5 --hybrid-split-gpu-share 0.6"; do
      $bin bench --index $synth --queries "$work/q20000.txt" --mode $1 --k 10 --backend hybrid $variant \
        --rates $2 --duration 2 --deadline-ms 100 2>&1 | grep -E "^$2/s|hybrid:" | tail -n 2 |
        sed "s|^|$1 $variant: |" | tee -a "$log"
    done
  done
fi
say "[${SECONDS}s] done"
echo
cat "$table"
