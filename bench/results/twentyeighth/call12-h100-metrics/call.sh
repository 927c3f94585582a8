# Session 28, call 12 (H100): 2ebd5fd's /metrics with a GPU. The serve integration tests (their binary
# spawns /work/main/target/release/warpsearch and reads docs/openapi.yaml under /work/main), then a server
# on a small index (--backend gpu) answering 200 queries, and its /metrics' GPU and latency lines.
set -u
mkdir -p /work/main/target/release && cp -r docs /work/main/ && cp .device/warpsearch-metrics /work/main/target/release/warpsearch
nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv
.device/serve-tests --test-threads=2 --nocapture 2>&1 | grep -E "^test |test result|skipped|panicked" 
python3 - <<'PY'
import json, random
random.seed(1)
words = [f"w{i}" for i in range(300)]
with open("/tmp/docs.jsonl", "w") as f:
    for d in range(20000):
        f.write(json.dumps({"id": f"d{d}", "contents": " ".join(random.choices(words, k=40))}) + "\n")
PY
b=.device/warpsearch-metrics
$b index --input /tmp/docs.jsonl -o /tmp/idx --analyzer whitespace >/dev/null 2>&1 || echo "index failed"
$b serve --index /tmp/idx --backend gpu --addr 127.0.0.1:0 > /tmp/serve.out 2>/tmp/serve.err &
pid=$!
for i in $(seq 60); do url=$(sed -n 's/^listening on //p' /tmp/serve.out); [ -n "$url" ] && break; sleep 0.5; done
echo "url: $url"
python3 - "$url" <<'PY'
import json, sys, urllib.request, random
url = sys.argv[1]
random.seed(2)
qs = [{"id": str(i), "text": f"w{random.randrange(300)} w{random.randrange(300)}"} for i in range(200)]
req = urllib.request.Request(url + "/search", data=json.dumps({"queries": qs, "k": 10, "mode": "or"}).encode(),
                             headers={"content-type": "application/json"})
r = json.load(urllib.request.urlopen(req))
print("answered", len(r["results"]), "first hits", len(r["results"][0]["hits"]))
m = urllib.request.urlopen(url + "/metrics").read().decode()
for l in m.splitlines():
    if l.startswith(("warpsearch_gpu_", "warpsearch_query_latency_seconds_count", "warpsearch_hybrid_served", "warpsearch_queries_total")):
        print(l)
PY
kill -TERM $pid; wait $pid; tail -3 /tmp/serve.err
nvidia-smi --query-gpu=memory.used,memory.total --format=csv
