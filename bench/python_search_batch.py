#!/usr/bin/env python3
"""Python `search_batch` throughput against the CLI's closed loop, on the same index and queries.

Measured: for each mode and k, `warpsearch bench --backend cpu` (one warm-up pass, then every query at
once; queries/s of the closed loop, which leaves out query analysis and output), `warpsearch search
--backend cpu --warmup 1 --stats > /dev/null` (queries/s of the timed pass, writing the TREC run
included) and, in one Python process, `Searcher.search_batch(texts, k, mode)` on a `cpu` searcher (one
warm-up call, then one timed call; queries/s from texts in to Python lists of (docid, score) out, query
analysis included; `--threads` sets the searcher's threads, the CLI keeps every core). With `--frame`,
also `search_batch(texts, k, mode, as_frame=True)` (a pandas DataFrame out); with `--arrays`,
`search_batch(texts, k, mode, as_arrays=True)` (numpy arrays of document numbers and scores out, against
`search`: the CLI's run names documents by id, the arrays by number). The measurements alternate,
`--reps` times, so that a busy machine slows them alike; the table gives the median of each and Python's
ratio to the medians.

    python3 bench/python_search_batch.py --index wiki-pfor \
        --queries ../shared/data/queries/trec05-efficiency.txt --bin target/release/warpsearch
"""

import argparse
import os
import re
import statistics
import subprocess
import time

import warpsearch


def cli_qps(args, mode, k):
    out = subprocess.run(
        [args.bin, "bench", "--index", args.index, "--queries", args.queries, "--mode", mode,
         "--k", str(k), "--backend", "cpu", "--warmup", "1"],
        capture_output=True, text=True, check=True,
    ).stdout
    return float(re.search(r"^closed\s+(\d+)", out, re.M).group(1))


def cli_search_qps(args, mode, k):
    err = subprocess.run(
        [args.bin, "search", "--index", args.index, "--queries", args.queries, "--mode", mode,
         "--k", str(k), "--backend", "cpu", "--warmup", "1", "--stats", "--output", "/dev/null"],
        capture_output=True, text=True, check=True,
    ).stderr
    return float(re.search(r": (\d+) queries/s", err).group(1))


def python_qps(searcher, texts, mode, k, **output):
    searcher.search_batch(texts, k=k, mode=mode, **output)
    started = time.perf_counter()
    searcher.search_batch(texts, k=k, mode=mode, **output)
    return len(texts) / (time.perf_counter() - started)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--index", required=True)
    p.add_argument("--queries", required=True)
    p.add_argument("--bin", default="target/release/warpsearch")
    p.add_argument("--modes", default="and,or")
    p.add_argument("--ks", default="10,1000")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--frame", action="store_true", help="also measure search_batch(..., as_frame=True)")
    p.add_argument("--arrays", action="store_true", help="also measure search_batch(..., as_arrays=True)")
    p.add_argument("--threads", type=int, default=None, help="the searcher's threads (default: every core)")
    args = p.parse_args()
    texts = [t for _, t in warpsearch.read_queries(args.queries)]
    searcher = warpsearch.Index.open(args.index).searcher("cpu", threads=args.threads)
    print(f"{len(texts)} queries, {searcher!r}, load average {os.getloadavg()[0]:.2f}", flush=True)
    frame = " frame q/s | frame / bench |" if args.frame else ""
    arrays = " arrays q/s | arrays / search |" if args.arrays else ""
    extra = (", frame" if args.frame else "") + (", arrays" if args.arrays else "")
    print("| mode | k | CLI bench q/s | CLI search q/s | Python search_batch q/s | Python / bench | "
          f"Python / search |{frame}{arrays} runs (bench, search, Python{extra}) |")
    print("|---|---|---|---|---|---|---|" + ("---|---|" if args.frame else "") + ("---|---|" if args.arrays else "")
          + "---|")
    for mode in args.modes.split(","):
        for k in map(int, args.ks.split(",")):
            bench, search, py, fr, ar = [], [], [], [], []
            for _ in range(args.reps):
                bench.append(cli_qps(args, mode, k))
                search.append(cli_search_qps(args, mode, k))
                py.append(python_qps(searcher, texts, mode, k))
                if args.frame:
                    fr.append(python_qps(searcher, texts, mode, k, as_frame=True))
                if args.arrays:
                    ar.append(python_qps(searcher, texts, mode, k, as_arrays=True))
            b, s, q = (statistics.median(x) for x in (bench, search, py))
            cols = [bench, search, py] + ([fr] if args.frame else []) + ([ar] if args.arrays else [])
            runs = "; ".join(" ".join(f"{x:,.0f}" for x in run) for run in zip(*cols))
            f = statistics.median(fr) if args.frame else 0
            frame = f" {f:,.0f} | {f / b:.2f} |" if args.frame else ""
            a = statistics.median(ar) if args.arrays else 0
            arrays = f" {a:,.0f} | {a / s:.2f} |" if args.arrays else ""
            print(f"| {mode} | {k} | {b:,.0f} | {s:,.0f} | {q:,.0f} | {q / b:.2f} | {q / s:.2f} |{frame}{arrays} "
                  f"{runs} |", flush=True)
    print(f"load average at the end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
