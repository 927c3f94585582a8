#!/usr/bin/env bash
# The server's load test: `warpsearch serve` driven over HTTP by `warpsearch load`, against the
# in-process `warpsearch bench` on the same index, queries, mode and k (top-10 on the Wikipedia passages
# with the TREC 2005 efficiency queries). For each backend (BACKENDS, default "hybrid gpu"; the server's
# `--backend gpu` is the hybrid scheduler required to have the GPU) and mode (MODES, default "and or"):
#   1. in-process: `warpsearch bench --backend B` (closed loop after one warm-up pass, every query at once),
#      the engine alone, and `bench --text`: the same from each query's text (analysis and the hits'
#      document ids inside the clock, as the server has them);
#   2. the server (with --shed-ms 0) in closed loop: `warpsearch load --batch b --clients c` for each "bxc"
#      of LOADS (queries per request x clients; default "1x64 32x32 256x16"), one warm-up pass each; the
#      best throughput is the server's capacity, and its ratios to both in-process throughputs the issue's
#      first target (>= 0.9);
#   3. overload: open loop at twice that capacity for OVERLOAD_S seconds (default 10), then at half of it
#      for as long (the load drops at once), Poisson arrivals, deadline DEADLINE_MS: the share shed with 429,
#      the p99 of accepted queries against the deadline, and how many seconds the server took to settle
#      after the drop; once with the server's default --max-in-flight (4096) and once with it sized to
#      half a deadline of capacity (capacity x DEADLINE_MS / 2, at least 8 requests). Requests carry the best
#      closed-loop batch, at most an eighth of that sized queue (OVERLOAD_BATCH to choose).
# With `rss` as argument instead: one server (RSS_BACKEND, default hybrid; OR; --max-in-flight sized as
# above from a closed loop of 32 queries per request and 32 clients) for RSS_S seconds (default 300) of
# open loop alternating 2x and 0.5x its capacity every RSS_S/5 seconds, its resident memory read each
# second (`load --server-pid`): is it flat?
#
# What travels: what scripts/device-bench.sh needs (scripts/device-prepare.sh packs .device/: the binary,
# the passage index in two parts, the queries). Full output under $OUT: serve.log, serve-table.txt, the
# servers' stderr and a .tgz of every JSON report; the short table is printed last. BIN=…,
# WARPSEARCH_WIKI_INDEX=…, QUERIES=…, REPEAT=…, DEADLINE_MS=… (default 100), ENGINE_OPTS=… and BACKENDS=cpu run it
# on any machine (the development machine's figures in bench/RESULTS.md came from it); OVERLOAD=0 runs the
# closed loops only; CLOSED_OPTS=… adds options to the closed loop's server (e.g. --max-in-flight 65536 for
# LOADS beyond 4,096 queries in flight).
# usage: scripts/device-serve.sh [all|rss|profile]   (from the repository root)
set -uo pipefail
source scripts/device-common.sh
bin=${BIN:-$bin}
queries=${QUERIES:-$dev/trec05-efficiency.txt}
# REPEAT=N: the query file N times over (the in-process run and every closed loop then last N times
# longer; on the passages 50,000 CPU AND queries take 0.1-0.3 s, too short to compare throughputs).
if [ "${REPEAT:-1}" -gt 1 ]; then
  for _ in $(seq "$REPEAT"); do cat "$queries"; done >"/tmp/queries-x$REPEAT.txt"
  queries=/tmp/queries-x$REPEAT.txt
fi
backends=${BACKENDS:-hybrid gpu}
modes=${MODES:-and or}
loads=${LOADS:-1x64 32x32 256x16}
overload_s=${OVERLOAD_S:-10}
gen_threads=${GEN_THREADS:-4}  # the load generator's threads (`--threads`), beside the server's
deadline_ms=${DEADLINE_MS:-100}  # the server's --deadline-ms, and the overload runs'
engine_opts=${ENGINE_OPTS:-}  # options for both the in-process bench and the server (e.g. --hybrid-batch-ms 100)
log=$out/serve.log
table=$out/serve-table.txt
work=$(mktemp -d)
: >"$log"
command -v nvidia-smi >/dev/null &&
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | sed 's/^/device: /' | tee -a "$log"
say "cores: $(nproc); date: $(date -u +%F); binary: $bin; index: $wiki; queries: $queries ($(wc -l <"$queries"))"
printf "%-7s %-4s %-30s %10s %8s %8s %8s %7s %6s  %s\n" backend mode run "queries/s" p50_ms p99_ms \
  p99.9_ms "429%" errors note >"$table"
row() { printf "%-7s %-4s %-30s %10s %8s %8s %8s %7s %6s  %s\n" "$@" >>"$table"; }

# start_server <backend> <serve options…>: `serve` on a free port; sets $pid and $url (empty on failure).
pid="" url=""
start_server() {
  local backend=$1
  shift
  $bin serve --index "$wiki" --backend "$backend" --addr 127.0.0.1:0 --deadline-ms "$deadline_ms" $engine_opts "$@" \
    >"$work/serve.out" 2>>"$out/serve-stderr.log" &
  pid=$! url=""
  for _ in $(seq 1200); do  # up to 10 minutes to load the index (and the GPU's copy of it)
    url=$(sed -n 's/^listening on //p' "$work/serve.out")
    [ -n "$url" ] && return 0
    kill -0 $pid 2>/dev/null || break
    sleep 0.5
  done
  say "serve --backend $backend $* did not start (see serve-stderr.log)"
  url=""
  return 1
}
stop_server() {
  [ -n "$pid" ] && kill -TERM "$pid" 2>/dev/null && wait "$pid"
  pid=""
}
trap stop_server EXIT

# The in-process `warpsearch bench` on the same index, queries and k; add --backend, --mode and the rest.
# (An array, not a function: started with `&`, its $! is the bench itself, for perf to attach to.)
bench_inprocess=($bin bench --index "$wiki" --queries "$queries" --k 10 $engine_opts)

# load <json> <load options…>: `warpsearch load` against the running server, its table in the log.
load() {
  local json=$1
  shift
  $bin --threads "$gen_threads" load --url "$url" --queries "$queries" --k 10 --server-pid "$pid" \
    --json "$json" "$@" 2>&1 | grep -v "^warning" >>"$log"
}

# summary <json> <closed|N>: "qps p50 p99 p99.9 refused% errors" of the closed loop or open-loop run N.
summary() { python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
s = r["closed_loop"] if sys.argv[2] == "closed" else r["open_loop"][int(sys.argv[2])]
l = s["latency_ms"] or {"p50": 0, "p99": 0, "p99.9": 0}
print(round(s["qps"]), "%.3f" % l["p50"], "%.3f" % l["p99"], "%.3f" % l["p99.9"],
      "%.1f" % (100 * s["refused_share"]), sum(s["errors"].values()))' "$1" "$2"; }

# The in-process bench's closed loop: "qps p50 p99 p99.9".
inprocess() { python3 -c '
import json, sys
c = json.load(open(sys.argv[1]))["closed_loop"]
l = c["latency_ms"]
print(round(c["qps"]), "%.3f" % l["p50"], "%.3f" % l["p99"], "%.3f" % l["p99.9"])' "$1"; }

# The queue sized to half a deadline (DEADLINE_MS) of capacity <cap>, and the batch that fits it 8 times (at
# most <best>): "max_in_flight batch".
sizes() { python3 -c "
cap, best, half = $1, $2, $deadline_ms / 2000
batch = min(best, max(1, round(cap * half / 8)))
print(max(8 * batch, round(cap * half)), batch)"; }
# Open-loop connections enough for <batch> x connections to pass the default --max-in-flight (4096).
connections() { python3 -c "print(max(512, 2 * 4096 // $1 + 1))"; }

# overload <backend> <mode> <capacity> <batch> <label> <serve options…>: 2x then 0.5x capacity.
overload() {
  local backend=$1 mode=$2 cap=$3 batch=$4 label=$5
  shift 5
  start_server "$backend" "$@" || return 0
  local name=$work/$backend-$mode-overload-$label.json
  say "[${SECONDS}s] $backend $mode: overload ($label), $((2 * cap)) then $((cap / 2)) queries/s"
  load "$name" --mode "$mode" --batch "$batch" --clients 16 --closed-queries 0 --connections "$(connections "$batch")" \
    --rates $((2 * cap)),$((cap / 2)) --duration "$overload_s" --deadline-ms "$deadline_ms"
  stop_server
  local i
  local i missed settled
  for i in 0 1; do
    read -r qps p50 p99 p999 refused errors < <(summary "$name" $i)
    read -r missed settled < <(python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))["open_loop"][int(sys.argv[2])]
print(r["missed"], "never" if r["settled_after_s"] is None else "after %d s" % r["settled_after_s"])' "$name" $i)
    row "$backend" "$mode" "$([ $i = 0 ] && echo 2x || echo then 0.5x) ($label)" "$qps" "$p50" "$p99" "$p999" \
      "$refused" "$errors" "b$batch; $missed accepted past $deadline_ms ms; settled $settled"
  done
}

part=${1:-all}
if [ "$part" = all ]; then
for backend in $backends; do
  for mode in $modes; do
    say "[${SECONDS}s] == $backend $mode: in-process bench"
    if ! "${bench_inprocess[@]}" --backend "$backend" --mode "$mode" \
      --json "$work/$backend-$mode-inprocess.json" >>"$log" 2>"$work/bench.err"; then
      say "bench --backend $backend failed: $(tail -n 1 "$work/bench.err")"
      continue
    fi
    read -r qps p50 p99 p999 < <(inprocess "$work/$backend-$mode-inprocess.json")
    inproc=$qps
    row "$backend" "$mode" "in-process bench" "$qps" "$p50" "$p99" "$p999" - - "every query at once"
    # The same from each query's text (analysis and document ids inside the clock, as the server has them).
    say "[${SECONDS}s] == $backend $mode: in-process bench --text"
    text=0  # an older binary has no --text
    if "${bench_inprocess[@]}" --backend "$backend" --mode "$mode" \
      --text --json "$work/$backend-$mode-text.json" >>"$log" 2>"$work/bench.err"; then
      read -r qps p50 p99 p999 < <(inprocess "$work/$backend-$mode-text.json")
      text=$qps
      row "$backend" "$mode" "in-process bench --text" "$qps" "$p50" "$p99" "$p999" - - "from text"
    fi
    # Capacity is measured without shedding by time (--shed-ms 0): a closed loop keeps its clients' queries
    # in flight, which on a collection whose batches take longer than the deadline would be refused.
    start_server "$backend" --shed-ms 0 ${CLOSED_OPTS:-} || continue
    cap=0 best=1
    for l in $loads; do
      b=${l%x*} c=${l#*x}
      say "[${SECONDS}s] $backend $mode: server, closed loop, $b queries per request, $c clients"
      load "$work/$backend-$mode-closed-$l.json" --mode "$mode" --batch "$b" --clients "$c"
      # The scheduler's counters so far (cumulative over this server's loads): who answered, GPU batches.
      python3 -c "import urllib.request, sys; t = urllib.request.urlopen(sys.argv[1] + '/metrics').read().decode()
print('  metrics after $l:', ' '.join(l.split('warpsearch_')[1] for l in t.splitlines()
      if l.startswith(('warpsearch_hybrid_', 'warpsearch_queries_total', 'warpsearch_deadline'))))" "$url" >>"$log" 2>&1
      read -r qps p50 p99 p999 refused errors < <(summary "$work/$backend-$mode-closed-$l.json" closed)
      row "$backend" "$mode" "serve closed b$b c$c" "$qps" "$p50" "$p99" "$p999" "$refused" "$errors" \
        "$(python3 -c "print('%.2f of in-process' % ($qps / $inproc) + ($text and ', %.2f from text' % ($qps / ($text or 1)) or ''))")"
      [ "$qps" -gt "$cap" ] && cap=$qps best=$b
    done
    stop_server
    [ "$cap" -gt 0 ] || continue
    [ "${OVERLOAD:-1}" = 0 ] && continue  # OVERLOAD=0: closed loops only
    read -r sized batch < <(sizes "$cap" "$best")
    batch=${OVERLOAD_BATCH:-$batch}
    overload "$backend" "$mode" "$cap" "$batch" "max-in-flight 4096"
    overload "$backend" "$mode" "$cap" "$batch" "max-in-flight $sized" --max-in-flight "$sized"
  done
done
fi

# profile: perf's cpu-clock profiles (PROFILE_S seconds, default 4) of the in-process bench and of the server
# in a closed loop (the last of LOADS), the first backend of BACKENDS, each mode of MODES; each attaches
# once its process keeps more than 1.5 cores busy (the bench first reads and analyses its queries on one
# thread; REPEAT long enough that the run outlasts the profile), after 1 s of perf stat (switches, migrations).
# Under $OUT: perf-<run>.txt by function, perf-<run>-threads.txt by thread name (tokio's workers against
# the pool's), perf-<run>-tids.txt by thread (one saturated thread shows there),
# perf-<run>-thread-functions.txt by thread name and function, stat-<run>.txt. Needs .device/perfkit.tar.xz.
if [ "$part" = profile ]; then
  perf_setup
  [ -n "$perf" ] || { say "profile needs .device/perfkit.tar.xz"; exit 1; }
  backend=${backends%% *} l=${loads##* } profile_s=${PROFILE_S:-4}
  b=${l%x*} c=${l#*x}
  # busy <pid>: returns once <pid> kept more than 1.5 cores busy over half a second (or after a minute).
  busy() {
    local t0 t1 tick
    tick=$(getconf CLK_TCK)
    for _ in $(seq 120); do
      t0=$(awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null) || return 0
      sleep 0.5
      t1=$(awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null) || return 0
      [ $((t1 - t0)) -gt $((tick * 3 / 4)) ] && return 0
    done
  }
  # attach <pid> <run>: perf stat, then perf record, on the running process <pid>.
  attach() {
    busy "$1"
    $perf stat -e task-clock,context-switches,cpu-migrations,page-faults -p "$1" -o "$out/stat-$2.txt" -- sleep 1
    $perf record -e cpu-clock -F 499 -p "$1" -o "$work/$2.data" -- sleep "$profile_s" 2>/dev/null
    perf_top "$work/$2.data" >"$out/perf-$2.txt"
    perf_top "$work/$2.data" comm >"$out/perf-$2-threads.txt"
    perf_top "$work/$2.data" pid >"$out/perf-$2-tids.txt"
    PERF_LIMIT=0.02 PERF_LINES=400 perf_top "$work/$2.data" comm,sym >"$out/perf-$2-thread-functions.txt"
  }
  for mode in $modes; do
    say "[${SECONDS}s] profile $backend $mode: in-process bench"
    "${bench_inprocess[@]}" --backend "$backend" --mode "$mode" >>"$log" 2>&1 &
    running=$!
    attach $running "inprocess-$mode"
    wait $running
    start_server "$backend" --shed-ms 0 ${CLOSED_OPTS:-} || continue
    say "[${SECONDS}s] profile $backend $mode: server, closed loop, $b queries per request, $c clients"
    load "$work/profile-$mode.json" --mode "$mode" --batch "$b" --clients "$c" &
    running=$!
    attach "$pid" "serve-$mode"
    wait $running
    stop_server
  done
fi

if [ "$part" = rss ]; then
  backend=${RSS_BACKEND:-hybrid} rss_s=${RSS_S:-300}
  start_server "$backend" || exit 1
  say "[${SECONDS}s] == $backend or: capacity (closed loop, 32 queries per request, 32 clients)"
  load "$work/rss-capacity.json" --mode or --batch 32 --clients 32
  read -r cap _ < <(summary "$work/rss-capacity.json" closed)
  stop_server
  read -r sized b < <(sizes "$cap" 32)
  b=${OVERLOAD_BATCH:-$b}
  start_server "$backend" --max-in-flight "$sized" || exit 1
  phase=$((rss_s / 5))
  say "[${SECONDS}s] $backend or: $rss_s s of open loop, 2x and 0.5x of $cap queries/s every $phase s, $b queries per request, --max-in-flight $sized"
  load "$work/rss.json" --mode or --batch "$b" --clients 32 --closed-queries 0 --connections "$(connections "$b")" \
    --rates $((2 * cap)),$((cap / 2)),$((2 * cap)),$((cap / 2)),$((2 * cap)) --duration "$phase"
  stop_server
  for i in 0 1 2 3 4; do
    read -r qps p50 p99 p999 refused errors < <(summary "$work/rss.json" $i)
    row "$backend" or "rss run, phase $((i + 1))" "$qps" "$p50" "$p99" "$p999" "$refused" "$errors" \
      "b$b; $([ $((i % 2)) = 0 ] && echo 2x || echo 0.5x) capacity"
  done
  python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))["server_rss"]
s = r["samples_s_kib"]
m = [kib / 1024 for _, kib in s]
minute = lambda t: [kib / 1024 for u, kib in s if t <= u - s[0][0] < t + 60]
print("server RSS MiB: first %.1f, min %.1f, max %.1f, last %.1f; max per minute %s (%d samples)" % (
    r["first_mib"], r["min_mib"], r["max_mib"], r["last_mib"],
    " ".join("%.1f" % max(minute(t)) for t in range(0, int(s[-1][0] - s[0][0]), 60) if minute(t)), len(s)))
' "$work/rss.json" | tee -a "$log" >>"$table"
fi
(cd "$work" && tar -czf "$out/serve-reports.tgz" ./*.json 2>/dev/null)
say "[${SECONDS}s] done"
echo
cat "$table"
