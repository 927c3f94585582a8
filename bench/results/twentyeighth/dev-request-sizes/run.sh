# The development machine (2 cores): the CPU server's OR by queries per request, against in-process bench.
# Run from the repository root after `cargo build --release`.
q=../shared/data/queries/trec05-efficiency.txt
b=target/release/warpsearch
git rev-parse --short HEAD; date -u
$b bench --index /root/wiki-simdbp --queries $q --mode or --k 10 --backend cpu 2>&1 | grep -E "^closed" | sed 's/^/in-process /'
$b serve --index /root/wiki-simdbp --addr 127.0.0.1:8199 --shed-ms 0 >/tmp/rs.out 2>/tmp/rs.err &
pid=$!
sleep 3
for round in 1 2; do
  for l in 1x32 32x32 256x4; do
    echo "round $round ${l}: $($b load --url http://127.0.0.1:8199 --queries $q --mode or --batch ${l%x*} --clients ${l#*x} \
      --threads 1 --warmup 0 --closed-duration 8 2>&1 | grep -E '^closed')"
  done
  $b bench --index /root/wiki-simdbp --queries $q --mode or --k 10 --backend cpu 2>&1 | grep -E "^closed" | sed 's/^/in-process /'
done
kill -TERM $pid; wait $pid
