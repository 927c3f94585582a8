#!/usr/bin/env bash
# What HTTP adds to a query's latency: for each mode of MODES (default "and or") and open-loop arrival
# rate of RATES (default 10000,50000,100000 queries/s, Poisson), the in-process `warpsearch bench
# --backend B` (BACKEND, default auto) and `warpsearch serve --backend B` driven by `warpsearch load`,
# with BATCH queries a request (default 1; in process `bench --batch` submits a request's queries
# together, and both report a request's latency). The generator runs on GEN_THREADS threads (default
# 4) with CONNECTIONS connections (default 512); SERVE_OPTS: more options of `serve`; ENGINE_CPUS and
# GEN_CPUS: cores to pin each to. The passages with the TREC 2005 queries, top-10, DURATION seconds a
# rate (default 2). Writes a row per run and rate to $OUT/serve-latency.tsv, the log to
# $OUT/serve-latency.log; the table is printed last.
# usage: scripts/device-serve-latency.sh   (from the repository root)
set -uo pipefail
source scripts/device-common.sh
log=$out/serve-latency.log
: >"$log"
queries=$dev/trec05-efficiency.txt
backend=${BACKEND:-auto}
rates=${RATES:-10000,50000,100000}
tsv=$out/serve-latency.tsv
printf "mode\tpath\trate\tachieved\tp50_ms\tp99_ms\tp99.9_ms\tserver_took_p99_ms\tsend_lag_p99_ms\twaited_for_connection\n" >"$tsv"
work=$(mktemp -d)
say "cores: $(nproc); date: $(date -u +%FT%TZ); binary: $bin; backend: $backend; rates: $rates; queries a request: ${BATCH:-1}"
# rows <json> <mode> <path>: a row per open-loop rate of a `bench` or `load` report.
rows() { python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
for o in r["open_loop"]:
    l = o["latency_ms"]
    # The server took, the generator lag and its waits for a connection (HTTP runs only).
    took = (o.get("server_took_ms") or {}).get("p99")
    lag = (o.get("send_lag_ms") or {}).get("p99")
    extra = ["%.3f" % x if isinstance(x, (int, float)) else "-" for x in (took, lag)]
    extra.append(str(o.get("waited_for_connection", "-")))
    print("%s\t%s\t%.0f\t%.0f\t%.3f\t%.3f\t%.3f\t%s" % (sys.argv[2], sys.argv[3], o["rate"], o["achieved_qps"], l["p50"], l["p99"], l["p99.9"], "\t".join(extra)))
' "$@"; }
# ENGINE_CPUS / GEN_CPUS: cores (a taskset list) for the engine (in-process bench and serve) and for
# the load generator, so that the two do not share cores; unset, neither is pinned.
# (taskset execs the command: a server started through it keeps the pid `$!` names.)
engine_pin=() gen_pin=()
if command -v taskset >/dev/null; then
  [ -n "${ENGINE_CPUS:-}" ] && engine_pin=(taskset -c "$ENGINE_CPUS")
  [ -n "${GEN_CPUS:-}" ] && gen_pin=(taskset -c "$GEN_CPUS")
fi
[ -n "${ENGINE_CPUS:-}${GEN_CPUS:-}" ] && say "engine on cores ${ENGINE_CPUS:-any}, generator on ${GEN_CPUS:-any}$(command -v taskset >/dev/null || echo ' (no taskset here: not pinned)')"
pid=""
stop_server() { [ -n "$pid" ] && kill -TERM "$pid" 2>/dev/null && wait "$pid"; pid=""; }
trap stop_server EXIT
for mode in ${MODES:-and or}; do
  "${engine_pin[@]}" $bin bench --index "$wiki" --queries "$queries" --mode $mode --k 10 --backend $backend --warmup 1 \
    --rates "$rates" --batch "${BATCH:-1}" --duration "${DURATION:-2}" --json "$work/bench.json" >>"$log" 2>&1
  rows "$work/bench.json" $mode in-process | tee -a "$tsv"
  "${engine_pin[@]}" $bin serve --index "$wiki" --backend $backend --addr 127.0.0.1:0 ${SERVE_OPTS:-} >"$work/serve.out" 2>>"$log" &
  pid=$! url=""
  for _ in $(seq 600); do
    url=$(sed -n 's/^listening on //p' "$work/serve.out")
    [ -n "$url" ] && break
    kill -0 $pid 2>/dev/null || break
    sleep 0.5
  done
  if [ -z "$url" ]; then say "serve did not start"; stop_server; continue; fi
  "${gen_pin[@]}" $bin --threads "${GEN_THREADS:-4}" load --url "$url" --queries "$queries" --mode $mode --k 10 --batch "${BATCH:-1}" \
    --connections "${CONNECTIONS:-512}" --warmup 0 --rates "$rates" --duration "${DURATION:-2}" --json "$work/load.json" >>"$log" 2>&1
  rows "$work/load.json" $mode http | tee -a "$tsv"
  stop_server
done
rm -rf "$work"
cat "$tsv"
