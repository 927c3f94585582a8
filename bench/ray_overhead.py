#!/usr/bin/env python3
"""Latency of one request through `warpsearch.ray`'s Serve application against the in-process searcher,
and against Ray Serve's own round trip with no search in it (its floor on this machine).

Measured, for requests of each size in `--sizes` (queries a request, consecutive lines of `--queries`),
one request at a time from this process (closed loop, one client), `--requests` requests a variant:

- `direct`: `Index.searcher(backend=B, threads=T).search_batch(texts, k, mode)` (B: `--backend`, default
  cpu) on the whole sharded index in this process (the engine merges its shards), lists of (docid,
  score) out;
- `noop`: a Serve deployment whose method returns its argument, called through a handle
  (`handle.m.remote(texts).result()`): one hop, Ray's floor for any deployment;
- `noop-fanout`: a no-op root that awaits a no-op call to each of the index's shards, as
  `warpsearch.ray`'s root does (concurrently, by value over Serve's gRPC channel): the floor of that
  shape, two hops;
- `ray`: `warpsearch.ray.app(index, replicas=1, num_cpus=..., num_gpus=..., searcher={"backend": B,
  "threads": T})`,
  `handle.search.remote(texts, k, mode).result()`: the same lists as `direct`, checked equal once;
- `client`: `warpsearch.ray.Client("warpsearch").search(texts, k, mode)` on the same application: the
  root's fan-out and merge in this process, straight to the shards (one hop);
- `noop-fanout/v`, `ray/v`: the same through a handle that calls the root by value
  (`handle.options(_by_reference=False)`, Serve's gRPC channel) rather than through the object store.

The variants alternate in rounds of `--round` requests, so that a shared machine's drift slows them alike;
a request's latency is taken around the handle's call and its `.result()` (or the searcher's call). Prints
p50 and p99 (ms) per variant and size, as a table and as JSON, and Serve's overhead: `ray` − `direct`
(p50) beside `noop-fanout` (what Ray itself takes for that shape).

    python bench/ray_overhead.py --index wiki03-2 --queries ../shared/data/queries/trec05-efficiency.txt

(`wiki03-2`: `warpsearch index --input ../shared/data/wiki/articles-03.jsonl.zst --output wiki03-2
--shards 2`.) Needs Ray Serve (`pip install "ray[serve]"`) and numpy.
"""

import argparse
import asyncio
import json
import time
import warnings

import ray
from ray import serve

import warpsearch
import warpsearch.ray
from ray_common import percentiles


@serve.deployment(ray_actor_options={"num_cpus": 0.1})
class Noop:
    def m(self, texts, *rest):
        return texts


@serve.deployment(ray_actor_options={"num_cpus": 0.1})
class NoopRoot:
    def __init__(self, *shards):
        # As warpsearch.ray's root asks its shards for small answers: by value, over Serve's gRPC channel.
        self.shards = [s.options(_by_reference=False) for s in shards]

    async def m(self, texts, *rest):
        await asyncio.gather(*(s.m.remote(texts, *rest) for s in self.shards))
        return texts


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--index", required=True, help="a sharded index (index --shards N)")
    p.add_argument("--queries", required=True, help="one query a line")
    p.add_argument("--sizes", default="1,64", help="queries a request")
    p.add_argument("--requests", type=int, default=300, help="requests a variant and size")
    p.add_argument("--round", type=int, default=25, help="requests of one variant before the next")
    p.add_argument("--k", type=int, default=10)
    p.add_argument("--mode", default="or")
    p.add_argument("--threads", type=int, default=1, help="the searchers' threads (each shard's replica's)")
    p.add_argument("--num-cpus", type=float, default=0.5, help="Ray CPUs a shard replica")
    p.add_argument("--backend", default="cpu", help="the searchers' backend (direct's and each replica's)")
    p.add_argument("--num-gpus", type=float, default=0.0, help="Ray GPUs a shard replica")
    p.add_argument("--variants", default="direct,noop,noop-fanout,ray,noop-fanout/v,ray/v,client")
    args = p.parse_args()
    warnings.filterwarnings("ignore", message=".*terms the index does not have")

    lines = [line.strip() for line in open(args.queries, encoding="utf-8") if line.strip()]
    sizes = [int(s) for s in args.sizes.split(",")]
    variants = args.variants.split(",")
    shards = warpsearch.Index.open(args.index).shards or 1
    options = {"backend": args.backend, "threads": args.threads}

    ray.init(include_dashboard=False, logging_level="ERROR", log_to_driver=False)
    calls = {}
    if "direct" in variants:
        searcher = warpsearch.Index.open(args.index).searcher(**options)
        calls["direct"] = lambda texts: searcher.search_batch(texts, k=args.k, mode=args.mode)
    if "noop" in variants:
        h = serve.run(Noop.bind(), name="noop", route_prefix=None)
        calls["noop"] = lambda texts, h=h: h.m.remote(texts).result()
    if "noop-fanout" in variants:
        fan = NoopRoot.options(name="noop-root").bind(
            *(Noop.options(name=f"noop-shard-{i}").bind() for i in range(shards))
        )
        h = serve.run(fan, name="noop-fanout", route_prefix=None)
        calls["noop-fanout"] = lambda texts, h=h: h.m.remote(texts, args.k, args.mode).result()
        v = h.options(_by_reference=False)
        calls["noop-fanout/v"] = lambda texts, h=v: h.m.remote(texts, args.k, args.mode).result()
    if {"ray", "ray/v", "client"} & set(variants):
        app = warpsearch.ray.app(
            args.index, replicas=1, num_cpus=args.num_cpus, num_gpus=args.num_gpus, searcher=options
        )
        h = serve.run(app, name="warpsearch", route_prefix=None)
        calls["ray"] = lambda texts, h=h: h.search.remote(texts, args.k, args.mode).result()
        v = h.options(_by_reference=False)
        calls["ray/v"] = lambda texts, h=v: h.search.remote(texts, args.k, args.mode).result()
        if hasattr(warpsearch.ray, "Client"):
            client = warpsearch.ray.Client("warpsearch")
            calls["client"] = lambda texts: client.search(texts, args.k, args.mode)
        if "direct" in calls:
            texts = lines[: max(sizes)]
            for v in ("ray", "client"):
                if v in calls:
                    assert calls[v](texts) == calls["direct"](texts), f"{v}'s answer differs from the searcher's"

    calls = {v: calls[v] for v in variants if v in calls}
    ms = {(v, s): [] for v in calls for s in sizes}
    for size in sizes:
        batches = [lines[(i * size) % (len(lines) - size) :][:size] for i in range(args.requests)]
        for v in calls:  # warm-up: every variant's first requests, untimed
            for texts in batches[:5]:
                calls[v](texts)
        for start in range(0, args.requests, args.round):
            for v in calls:
                for texts in batches[start : start + args.round]:
                    t = time.perf_counter()
                    calls[v](texts)
                    ms[v, size].append((time.perf_counter() - t) * 1e3)

    results = {f"{v} {s}": percentiles(x) for (v, s), x in ms.items()}
    print(f"{'variant':<14} {'queries':>7} {'p50 ms':>8} {'p99 ms':>8}")
    for (v, s) in ms:
        r = results[f"{v} {s}"]
        print(f"{v:<14} {s:>7} {r['p50']:>8.2f} {r['p99']:>8.2f}")
    for s in sizes:
        if f"ray {s}" in results and f"direct {s}" in results:
            over = results[f"ray {s}"]["p50"] - results[f"direct {s}"]["p50"]
            floor = results.get(f"noop-fanout {s}", {}).get("p50", float("nan"))
            print(f"{s} queries: Serve's overhead (ray - direct, p50) {over:.2f} ms; Ray's floor (noop-fanout) {floor:.2f} ms")
        if f"ray/v {s}" in results and f"direct {s}" in results:
            over = results[f"ray/v {s}"]["p50"] - results[f"direct {s}"]["p50"]
            floor = results.get(f"noop-fanout/v {s}", {}).get("p50", float("nan"))
            print(f"{s} queries, by value: (ray/v - direct, p50) {over:.2f} ms; Ray's floor (noop-fanout/v) {floor:.2f} ms")
        if f"client {s}" in results and f"direct {s}" in results:
            over = results[f"client {s}"]["p50"] - results[f"direct {s}"]["p50"]
            floor = results.get(f"noop {s}", {}).get("p50", float("nan"))
            print(f"{s} queries, client: (client - direct, p50) {over:.2f} ms; Ray's floor (noop, one hop) {floor:.2f} ms")
    print(json.dumps({"k": args.k, "mode": args.mode, "shards": shards, "results": results}))
    serve.shutdown()
    ray.shutdown()


if __name__ == "__main__":
    main()
