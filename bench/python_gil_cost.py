#!/usr/bin/env python3
"""CPU time of the thread that holds the GIL during `Searcher.search_batch`, beside its wall time.

That thread's work (texts in, Python objects or a DataFrame out) is the serial part of `search_batch`:
however many cores answer the queries, a call takes at least that long, so queries / CPU time bounds its
throughput on any machine. Measured with `time.thread_time()` around one call after a warm-up call, on a
`cpu` searcher over all cores.

    python3 bench/python_gil_cost.py --index wiki-simdbp --queries ../shared/data/queries/trec05-efficiency.txt \\
        [--modes and,or] [--ks 10,1000] [--outputs lists,frame] [--reps 3]
"""

import argparse
import time

import warpsearch


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--index", required=True)
    p.add_argument("--queries", required=True)
    p.add_argument("--count", type=int, default=50000)
    p.add_argument("--modes", default="and,or")
    p.add_argument("--ks", default="10,1000")
    p.add_argument("--outputs", default="lists,frame")
    p.add_argument("--reps", type=int, default=3, help="timed calls per case; the least CPU time is shown")
    a = p.parse_args()
    texts = [line.rstrip("\n") for line in open(a.queries, encoding="utf-8")][: a.count]
    searcher = warpsearch.Index.open(a.index).searcher("cpu")
    for mode in a.modes.split(","):
        for k in map(int, a.ks.split(",")):
            for output in a.outputs.split(","):
                frame = output == "frame"
                searcher.search_batch(texts, k=k, mode=mode, as_frame=frame)
                best = None
                for _ in range(a.reps):
                    wall, cpu = time.perf_counter(), time.thread_time()
                    result = searcher.search_batch(texts, k=k, mode=mode, as_frame=frame)
                    wall, cpu = time.perf_counter() - wall, time.thread_time() - cpu
                    hits = len(result) if frame else sum(map(len, result))
                    del result
                    if best is None or cpu < best[1]:
                        best = (wall, cpu)
                wall, cpu = best
                print(
                    f"{mode} k {k} {output}: wall {wall * 1e3:.0f} ms, GIL thread CPU {cpu * 1e3:.0f} ms, "
                    f"{hits} hits; bound {len(texts) / cpu:,.0f} queries/s",
                    flush=True,
                )


if __name__ == "__main__":
    main()
