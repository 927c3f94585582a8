#!/usr/bin/env python3
"""Throughput of `warpsearch.ray`'s Serve application under a closed loop: through the root's handle
and through `Client` (the root's fan-out and merge in the caller), for each count of root replicas.

`--clients` threads of this process send requests of `--batch` consecutive queries of `--queries`, each
its next as soon as the last is answered, for `--seconds` a variant. Each variant's first answers are
checked against the in-process searcher's. The same loop on one in-process searcher with every
replica's threads (`direct`) comes first. Prints requests and queries a second per variant, and JSON.

    python bench/ray_throughput.py --index wiki03-2 --queries ../shared/data/queries/trec05-efficiency.txt

Needs Ray Serve (`pip install "ray[serve]"`).
"""

import argparse
import json
import threading
import time
import warnings

import ray
from ray import serve

import warpsearch
import warpsearch.ray
from ray_common import requests_of


def closed_loop(call, chunks, clients, seconds):
    """Requests answered a second by `clients` threads calling `call(chunk)` one after another; a
    request that fails stops the run with its error."""
    done, failed, stop = [0] * clients, [], threading.Event()

    def client(i):
        j = i
        while not stop.is_set():
            try:
                call(chunks[j % len(chunks)])
            except Exception as e:  # noqa: BLE001 - reported below, not lost with the thread
                failed.append(e)
                stop.set()
                return
            done[i] += 1
            j += clients

    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    time.sleep(seconds)
    stop.set()
    for t in threads:
        t.join()
    if failed:
        raise SystemExit(f"a request failed: {failed[0]!r}")
    return sum(done) / (time.perf_counter() - start)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--index", required=True, help="an index, sharded or not")
    p.add_argument("--queries", required=True, help="one query a line")
    p.add_argument("--batch", type=int, default=64, help="queries a request")
    p.add_argument("--clients", type=int, default=4, help="requests in flight")
    p.add_argument("--seconds", type=float, default=8.0, help="seconds a variant")
    p.add_argument("--roots", default="1,2", help="counts of root replicas")
    p.add_argument("--replicas", type=int, default=2, help="replicas a shard")
    p.add_argument("--backend", default="cpu", help="the replicas' searcher backend")
    p.add_argument("--threads", type=int, default=1, help="each replica's searcher threads")
    p.add_argument("--num-cpus", type=float, default=0.25, help="Ray CPUs a shard replica")
    p.add_argument("--num-gpus", type=float, default=0.0, help="Ray GPUs a shard replica")
    p.add_argument("--k", type=int, default=10)
    p.add_argument("--mode", default="or")
    args = p.parse_args()
    warnings.filterwarnings("ignore", message=".*(terms the index does not have|no searchable terms)")

    chunks = requests_of(args.queries, args.batch)
    want = warpsearch.Index.open(args.index).searcher("cpu").search_batch(chunks[0], k=args.k, mode=args.mode)

    searcher = {"backend": args.backend, "threads": args.threads}
    # The same closed loop on one in-process searcher with every replica's threads (replicas of every
    # shard): no Ray at all.
    index = warpsearch.Index.open(args.index)
    direct = index.searcher(args.backend, threads=args.threads * args.replicas * (index.shards or 1))
    call = lambda c: direct.search_batch(c, k=args.k, mode=args.mode)  # noqa: E731
    for c in chunks[1:5]:  # warm-up, untimed
        call(c)
    rps = closed_loop(call, chunks, args.clients, args.seconds)
    results = {"direct": {"requests_s": rps, "queries_s": rps * args.batch}}
    print(f"direct (in process): {rps:8.1f} requests/s, {rps * args.batch:9.0f} queries/s", flush=True)
    del direct
    ray.init(include_dashboard=False, logging_level="ERROR", log_to_driver=False)
    for roots in [int(r) for r in args.roots.split(",")]:
        name = f"throughput-{roots}"
        app = warpsearch.ray.app(
            args.index, replicas=args.replicas, num_cpus=args.num_cpus, num_gpus=args.num_gpus,
            searcher=searcher, root_replicas=roots, root_cpus=0.1,
        )
        handle = serve.run(app, name=name, route_prefix=None)
        client = warpsearch.ray.Client(name)
        calls = {
            "root": lambda c, h=handle: h.search.remote(c, args.k, args.mode).result(),
            "client": lambda c, cl=client: cl.search(c, args.k, args.mode),
        }
        for path, call in calls.items():
            assert call(chunks[0]) == want, f"{path}'s answer differs from the searcher's"
            for c in chunks[1:5]:  # warm-up, untimed
                call(c)
            rps = closed_loop(call, chunks, args.clients, args.seconds)
            results[f"{path}, {roots} root replicas"] = {"requests_s": rps, "queries_s": rps * args.batch}
            print(f"{path:<7} {roots} root replicas: {rps:8.1f} requests/s, {rps * args.batch:9.0f} queries/s",
                  flush=True)
        serve.delete(name)
    print(json.dumps({"batch": args.batch, "clients": args.clients, "replicas": args.replicas,
                      "backend": args.backend, "results": results}))
    serve.shutdown()
    ray.shutdown()


if __name__ == "__main__":
    main()
