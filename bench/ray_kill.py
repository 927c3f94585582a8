#!/usr/bin/env python3
"""A replica's process killed under load: `warpsearch.ray`'s Serve application answers every request,
exactly, while one replica of shard 0 is killed with SIGKILL and Serve starts another.

`--clients` threads send requests of `--batch` consecutive queries of `--queries` through the
application's handle, one after another (closed loop), for `--before` seconds; then the process of
one replica of shard 0 is killed, and the load goes on for `--after` seconds. Every answer is compared
with the in-process CPU searcher's for the same queries (precomputed), and every failed request is
counted. Prints, per second (by when each request was sent, so that those on the killed replica count
in the second of the kill or before): requests, their p50 and p99 latency (ms), failures, and the
replicas shard 0 has running; then a JSON summary: requests, wrong answers, failures, the seconds from
the kill until Serve's status showed shard 0 short of a replica and until it had all of them running
again, and the root's retries.

    python bench/ray_kill.py --index wiki --queries ../shared/data/queries/trec05-efficiency.txt \\
        --backend gpu --num-gpus 0.5

Needs Ray Serve (`pip install "ray[serve]"`) and numpy.
"""

import argparse
import json
import os
import signal
import threading
import time
import warnings

import numpy as np
import ray
from ray import serve

import warpsearch
import warpsearch.ray
from ray_common import percentiles, requests_of


def replica_pids(deployment, app, want, tries=400):
    """Process ids of `want` distinct replicas of `deployment`, asked until that many answered."""
    handle = serve.get_deployment_handle(deployment, app)
    found = set()
    for _ in range(tries):
        found.add(handle.replica.remote().result()[1])
        if len(found) == want:
            return sorted(found)
    raise SystemExit(f"{deployment}: {len(found)} replicas answered, {want} expected")


def running(app, deployment):
    return serve.status().applications[app].deployments[deployment].replica_states.get("RUNNING", 0)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--index", required=True, help="an index, sharded or not")
    p.add_argument("--queries", required=True, help="one query a line")
    p.add_argument("--backend", default="cpu", help="the replicas' searcher backend")
    p.add_argument("--replicas", type=int, default=2, help="replicas a shard")
    p.add_argument("--num-cpus", type=float, default=1.0, help="Ray CPUs a replica")
    p.add_argument("--num-gpus", type=float, default=0.0, help="Ray GPUs a replica")
    p.add_argument("--threads", type=int, default=0, help="each replica's searcher threads (0: its default)")
    p.add_argument("--batch", type=int, default=64, help="queries a request")
    p.add_argument("--clients", type=int, default=4, help="requests in flight")
    p.add_argument("--k", type=int, default=10)
    p.add_argument("--mode", default="or")
    p.add_argument("--before", type=float, default=5.0, help="seconds of load before the kill")
    p.add_argument("--after", type=float, default=15.0, help="seconds of load after it")
    args = p.parse_args()
    warnings.filterwarnings("ignore", message=".*(terms the index does not have|no searchable terms)")

    chunks = requests_of(args.queries, args.batch)
    oracle = warpsearch.Index.open(args.index).searcher("cpu")
    flat = oracle.search_batch([t for c in chunks for t in c], k=args.k, mode=args.mode)
    want = [flat[i * args.batch : (i + 1) * args.batch] for i in range(len(chunks))]
    del oracle

    ray.init(include_dashboard=False, logging_level="ERROR", log_to_driver=False)
    searcher = {"backend": args.backend, **({"threads": args.threads} if args.threads else {})}
    app = warpsearch.ray.app(
        args.index, replicas=args.replicas, num_cpus=args.num_cpus, num_gpus=args.num_gpus,
        searcher=searcher, timeout_s=60, shard_options={"max_constructor_retry_count": 100},
    )
    handle = serve.run(app, name="kill", route_prefix=None)
    for c in chunks[:5]:  # warm-up, untimed
        handle.search.remote(c, args.k, args.mode).result()

    start = time.perf_counter()
    done, failed, wrong = [], [], 0
    lock, stop, counter = threading.Lock(), threading.Event(), iter(range(10**12))

    def client():
        nonlocal wrong
        while not stop.is_set():
            with lock:
                c = next(counter) % len(chunks)
            t = time.perf_counter()
            try:
                got = handle.search.remote(chunks[c], args.k, args.mode).result()
            except Exception as e:  # noqa: BLE001 - a failed request is counted, not fatal
                with lock:
                    failed.append((t - start, repr(e)[:200]))
                continue
            with lock:
                done.append((t - start, (time.perf_counter() - t) * 1e3))
                wrong += got != want[c]

    threads = [threading.Thread(target=client) for _ in range(args.clients)]
    for th in threads:
        th.start()
    time.sleep(args.before)
    victim = replica_pids("shard-0", "kill", args.replicas)[0]
    killed = time.perf_counter() - start
    os.kill(victim, signal.SIGKILL)
    # Serve's status sees the death a few seconds late: shard 0 is back once it has been seen short
    # of a replica and then whole again.
    states, down, recovered = [], None, None
    while time.perf_counter() - start < killed + args.after:
        n = running("kill", "shard-0")
        now = time.perf_counter() - start
        states.append((now, n))
        if down is None and n < args.replicas:
            down = now - killed
        if down is not None and recovered is None and n == args.replicas:
            recovered = now - killed
        time.sleep(0.25)
    stop.set()
    for th in threads:
        th.join(timeout=120)

    print(f"killed replica process {victim} of shard-0 at {killed:.1f} s")
    print(f"{'second':>6} {'requests':>8} {'p50 ms':>8} {'p99 ms':>8} {'failed':>6} {'running':>7}")
    for s in range(int(killed + args.after) + 1):
        ms = [m for t, m in done if s <= t < s + 1]
        fails = sum(1 for t, _ in failed if s <= t < s + 1)
        run = [n for t, n in states if s <= t < s + 1]
        p50, p99 = (np.percentile(ms, 50), np.percentile(ms, 99)) if ms else (float("nan"),) * 2
        print(f"{s:>6} {len(ms):>8} {p50:>8.2f} {p99:>8.2f} {fails:>6} {min(run) if run else '':>7}")
    summary = {
        "index": args.index, "backend": args.backend, "replicas": args.replicas, "num_gpus": args.num_gpus,
        "batch": args.batch, "clients": args.clients, "k": args.k, "mode": args.mode,
        "requests": len(done), "wrong": wrong, "failed": len(failed), "failures": failed[:5],
        "killed_at_s": killed, "seen_short_after_s": down, "running_again_after_s": recovered,
        "latency_ms": {
            "before": percentiles([m for t, m in done if t < killed]),
            "after": percentiles([m for t, m in done if t >= killed]),
        },
        "root": handle.stats.remote().result(),
    }
    print(json.dumps(summary))
    serve.shutdown()
    ray.shutdown()


if __name__ == "__main__":
    main()
