#!/usr/bin/env bash
# Runs fuzz targets on the lent machine's 16 cores: libFuzzer's fork mode, one child per core, each target
# for a given time, one after the other. The 2-core development machine reaches ~1,000 executions a second
# on the slow targets; ten million take hours there and minutes here.
#
# Here: build the targets without a sanitizer (the code under test is safe Rust) and strip them:
#   (cd fuzz && RUSTC_BOOTSTRAP=1 cargo fuzz build --sanitizer none --release TARGET)
#   strip -o .device/fuzz/TARGET fuzz/target/x86_64-unknown-linux-gnu/release/TARGET
#   tar -czf .device/fuzz/corpora.tgz -C fuzz corpus/TARGET… regressions
# Device (carry .device/fuzz): OUT=$OUT bash scripts/device-fuzz.sh TARGET:SECONDS …
# Logs go to $OUT/fuzz-TARGET.log, findings to $OUT/artifacts.tgz; the table is printed last.
set -uo pipefail
out=${OUT:?set OUT}
dev=.device/fuzz
work=/dev/shm/fuzz  # temporary indexes and CIFF files on tmpfs: the targets write files per input
rm -rf $work && mkdir -p $work/artifacts
tar -xzf $dev/corpora.tgz -C $work
export TMPDIR=$work
table=$out/fuzz-table.txt
echo "| target | seconds | workers | executions | exec/s | crashes / timeouts / ooms |" >$table
echo "|---|---:|---:|---:|---:|---|" >>$table
for spec in "$@"; do
  target=${spec%%:*} seconds=${spec##*:}
  mkdir -p $work/corpus/$target $work/regressions/$target
  log=$out/fuzz-$target.log
  # -fork: crash-resistant children that share one corpus; -ignore_crashes=1 keeps going and counts them
  # (each is saved under artifacts/); -timeout=10: an input that runs 10 s is a hang.
  $dev/$target $work/corpus/$target $work/regressions/$target -fork="$(nproc)" -ignore_crashes=1 \
    -ignore_timeouts=1 -ignore_ooms=1 -timeout=10 -rss_limit_mb=2048 -max_total_time="$seconds" \
    -artifact_prefix=$work/artifacts/$target- >"$log" 2>&1
  # The parent's last status line: "#N: cov: … exec/s: E oom/timeout/crash: O/T/C time: Ts …".
  last=$(grep -E '^#[0-9]+: cov' "$log" | tail -n 1)
  execs=$(sed -E 's/^#([0-9]+):.*/\1/' <<<"$last")
  rate=$(sed -E 's/.*exec\/s: ([0-9]+).*/\1/' <<<"$last")
  otc=$(sed -E 's/.*oom\/timeout\/crash: ([0-9]+)\/([0-9]+)\/([0-9]+).*/\3 \/ \2 \/ \1/' <<<"$last")
  echo "| \`$target\` | $seconds | $(nproc) | $execs | $rate | $otc |" >>$table
done
(cd $work && tar -czf "$out/artifacts.tgz" artifacts)
ls $work/artifacts | head -n 20
echo
cat $table
