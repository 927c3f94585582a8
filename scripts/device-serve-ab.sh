#!/usr/bin/env bash
# Builds compared through scripts/device-serve.sh on one machine: ROUNDS (default 2) rounds of `all`, the
# builds of BINS ("label:path …", default "base:.device/warpsearch-base new:.device/warpsearch") in turn
# within each round, so that the machine's drift falls on both alike. Every other variable goes through to
# device-serve.sh (REPEAT, BACKENDS, MODES, LOADS, OVERLOAD, CLOSED_OPTS, …). Under $OUT: ab-table.txt (each
# row of each run, its label and round first) and each run's serve.log as serve-<label>-<round>.log.gz; the
# table is printed last.
# usage: scripts/device-serve-ab.sh   (from the repository root)
set -uo pipefail
out=${OUT:-device-out}
mkdir -p "$out"
: >"$out/ab-table.txt"
for round in $(seq "${ROUNDS:-2}"); do
  for build in ${BINS:-base:.device/warpsearch-base new:.device/warpsearch}; do
    label=${build%%:*} run=$(mktemp -d)
    OUT=$run BIN=${build#*:} bash scripts/device-serve.sh all >/dev/null 2>&1
    grep -v "^backend " "$run/serve-table.txt" | sed "s/^/$label $round /" >>"$out/ab-table.txt"
    gzip -c "$run/serve.log" >"$out/serve-$label-$round.log.gz"
    rm -rf "$run"
  done
done
cat "$out/ab-table.txt"
