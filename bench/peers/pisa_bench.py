#!/usr/bin/env python3
"""PISA on exactly our postings: throughput, latency and a TREC run, for the side-by-side tables.

usage: pisa_bench.py EXPORT_DIR ANALYZED_QUERIES OUT_PREFIX [--threads T] [--k K] [--passes P]
                     [--latency-queries N] [--and ALG,...] [--or ALG,...] [--deadline-s S]

EXPORT_DIR is `warpsearch export INDEX --pisa EXPORT_DIR [--terms-from QUERIES]`: PISA's binary
collection of our lists, document lengths and ids. ANALYZED_QUERIES is `warpsearch analyze` output
(`qid<TAB>term term …`), so PISA gets the very terms our engine searches; a repeated term counts as
many times (query_weighted, as our engine and Anserini weigh it), and an AND query with a term the
collection lacks matches nothing, as in our engine (PISA itself would drop the term).

PISA (pyterrier-pisa's bundled library) compresses the collection (block_simdbp, 64-posting blocks)
and builds its block-max data for BM25 k1 0.9, b 0.4, then for each algorithm: one warm-up pass,
P timed passes over all queries on T threads (q/s = queries / mean pass), and every one of the first
N queries alone on one thread for latency percentiles (nearest rank). Each result is a JSON line on
stdout; OUT_PREFIX.ALG.run is the TREC run of the last timed pass, for bench/peers/overlap.py. With
--deadline-s, an algorithm that would start after S seconds is skipped (and says so), to fit a call.

Only the compiled module `_pisathon` is loaded, straight from the installed pyterrier_pisa package
without importing the package (which pulls in python-terrier and Java): that module and libtbb are
all PISA needs, so two wheels suffice on a machine without network. The timing calls PISA's retrieve
directly, as the package's transformer does. Every query passes through Python once (the iterator and
the result strings); the JSON line "harness" measures that cost with a query of no terms.
"""
import argparse
import glob
import importlib.util
import json
import math
import os
import sys
import time

import numpy as np


def load_pisathon():
    for base in sys.path:
        for path in glob.glob(os.path.join(base or ".", "pyterrier_pisa", "_pisathon*.so")):
            spec = importlib.util.spec_from_file_location("_pisathon", path)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            return module
    sys.exit("pisa_bench.py: pyterrier_pisa's _pisathon module is not on sys.path; "
             "pip install pyterrier-pisa (and tbb), or set PYTHONPATH")


def read_queries(path):
    queries = []
    for n, line in enumerate(open(path, encoding="utf-8"), 1):
        qid, sep, text = line.rstrip("\n").partition("\t")
        if not sep:
            sys.exit(f"{path}:{n}: expected `qid<TAB>terms` (warpsearch analyze output)")
        weights = {}
        for t in text.split():
            weights[t] = weights.get(t, 0.0) + 1.0
        queries.append((qid, weights))
    return queries


def pct(sorted_ms, p):
    """Nearest-rank percentile of a sorted list."""
    return sorted_ms[max(1, math.ceil(p / 100 * len(sorted_ms))) - 1]


def retrieve(pisa, ctx, alg, batch, k, threads, pretokenised):
    """PISA's retrieve on a batch of (index, query) pairs, as pyterrier-pisa's transformer calls it;
    returns the result arrays (query index, docno, rank, score). Pretokenised queries are term weight
    dicts, weighted by count; otherwise text for PISA's own analysis, unweighted."""
    n = len(batch) * k
    out = [np.empty(n, dtype=np.int32), np.empty(n, dtype=object), np.empty(n, dtype=np.int32),
           np.empty(n, dtype=np.float32)]
    size = pisa.retrieve(ctx, alg, batch, k=k, threads=threads, pretokenised=int(pretokenised),
                         query_weighted=int(pretokenised), result_qidxs=out[0], result_docnos=out[1],
                         result_ranks=out[2], result_scores=out[3])
    return [o[:size] for o in out]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("export_dir")
    ap.add_argument("queries")
    ap.add_argument("out_prefix")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--passes", type=int, default=2)
    ap.add_argument("--latency-queries", type=int, default=None)
    ap.add_argument("--and", dest="and_algs", default="ranked_and,block_max_ranked_and")
    ap.add_argument("--or", dest="or_algs", default="block_max_maxscore,block_max_wand,maxscore")
    ap.add_argument("--deadline-s", type=float, default=None)
    a = ap.parse_args()

    pisa = load_pisathon()
    d = a.export_dir
    started = time.time()
    if not os.path.exists(f"{d}/fwd.termlex"):
        pisa.build_binlex(f"{d}/fwd.terms", f"{d}/fwd.termlex")
    if not os.path.exists(f"{d}/fwd.doclex"):
        pisa.build_binlex(f"{d}/fwd.documents", f"{d}/fwd.doclex")
    ctx = pisa.RetrievalContext()
    pisa.prepare_index(ctx, d, "block_simdbp", "bm25", "", block_size=64, quantize=0,
                       bm25_k1=0.9, bm25_b=0.4)
    print(json.dumps({"prepare_s": round(time.time() - started, 1), "docs": pisa.num_docs(d),
                      "terms": pisa.num_terms(d)}), flush=True)

    queries = read_queries(a.queries)
    # PISA drops a term its lexicon lacks, so an AND query with one would match the other terms; ours
    # (like Anserini's and Lucene's conjunctions) matches nothing, and so does this with no terms.
    lexicon = {t.rstrip("\n") for t in open(f"{d}/fwd.terms", encoding="utf-8")}
    inputs = {
        "and": [(i, w if all(t in lexicon for t in w) else {}) for i, (_, w) in enumerate(queries)],
        "or": [(i, w) for i, (_, w) in enumerate(queries)],
    }
    k = a.k

    def run(alg, batch, threads):
        return retrieve(pisa, ctx, alg, batch, k, threads, pretokenised=True)

    def latencies(alg, batch):
        lat = []
        for q in batch:
            t = time.perf_counter()
            run(alg, [q], 1)
            lat.append((time.perf_counter() - t) * 1e3)
        lat.sort()
        return lat

    empty = latencies("ranked_and", [(0, {})] * 2000)
    print(json.dumps({"harness": "one query of no terms, one thread",
                      "p50_ms": round(pct(empty, 50), 4), "p99_ms": round(pct(empty, 99), 4)}),
          flush=True)

    for mode, algs in [("and", a.and_algs), ("or", a.or_algs)]:
        inp = inputs[mode]
        sample = inp[: a.latency_queries] if a.latency_queries else inp
        for alg in filter(None, algs.split(",")):
            if a.deadline_s is not None and time.time() - started > a.deadline_s:
                print(json.dumps({"mode": mode, "algorithm": alg, "skipped": f"past --deadline-s {a.deadline_s}"}),
                      flush=True)
                continue
            run(alg, inp, a.threads)
            times = []
            for _ in range(a.passes):
                t = time.perf_counter()
                res = run(alg, inp, a.threads)
                times.append(time.perf_counter() - t)
            with open(f"{a.out_prefix}.{alg}.run", "w", encoding="utf-8") as f:
                for qidx, docno, rank, score in zip(*res):
                    f.write(f"{queries[qidx][0]} Q0 {docno} {rank + 1} {score:.6f} pisa-{alg}\n")
            lat = latencies(alg, sample)
            print(json.dumps({
                "mode": mode, "algorithm": alg, "k": k, "threads": a.threads,
                "queries": len(inp), "qps": round(len(inp) / (sum(times) / len(times))),
                "passes_s": [round(t, 3) for t in times], "latency_queries": len(sample),
                **{f"p{p}_ms": round(pct(lat, p), 4) for p in [50, 99, 99.9]},
            }), flush=True)


if __name__ == "__main__":
    main()
