#!/usr/bin/env python3
"""PISA (pyterrier-pisa) on the Wikipedia passages with the TREC 2005 queries: q/s and latency.

usage: pisa.py passages.jsonl queries.txt index_dir [k ...]
Indexes title + " " + contents (PISA's tokenizer, porter2, no stopping at index time) unless index_dir
exists, then for each query stopword setting, algorithm and k: one warm-up pass, two timed passes over
all queries with 1 and 2 threads (q/s = queries / mean pass), then every query alone on one thread for
latency percentiles (nearest rank). Calls PISA's retrieve directly, as the transformer does, so pandas
is not timed. BM25 k1 0.9, b 0.4.
"""
import json, os, sys, time

from pyterrier_pisa import PisaIndex, _pisathon

from pisa_bench import pct, retrieve as pisa_retrieve

passages, queries_path, index_dir = sys.argv[1:4]
ks = [int(k) for k in sys.argv[4:]] or [10]
queries = [l.rstrip("\n") for l in open(queries_path, encoding="utf-8")]
index = PisaIndex(index_dir, stemmer="porter2", threads=2)
if not index.built():
    def docs():
        for line in open(passages, encoding="utf-8"):
            d = json.loads(line)
            yield {"docno": d["id"], "text": d["title"] + " " + d["contents"]}
    t = time.time()
    index.index(docs())
    print(f"indexed in {time.time() - t:.1f} s", file=sys.stderr)


def retrieve(retr, inp, k, threads):
    return pisa_retrieve(_pisathon, retr._ctxt, retr.query_algorithm.value, inp, k, threads, pretokenised=False)


inp = list(enumerate(queries))
for stops in ["none", "terrier"]:
    for alg in ["ranked_and", "maxscore", "block_max_wand"]:
        for k in ks:
            stopped = PisaIndex(index_dir, stemmer="porter2", stops=stops)
            retr = stopped.bm25(k1=0.9, b=0.4, num_results=k, query_algorithm=alg, threads=1)
            retr.reset_retrieval_context()
            row = {"stops": stops, "algorithm": alg, "k": k}
            for threads in [1, 2]:
                retrieve(retr, inp, k, threads)
                times = []
                for _ in range(2):
                    t = time.perf_counter()
                    retrieve(retr, inp, k, threads)
                    times.append(time.perf_counter() - t)
                row[f"qps_t{threads}"] = round(len(inp) / (sum(times) / len(times)))
            lat = []
            for q in inp:
                t = time.perf_counter()
                retrieve(retr, [q], k, 1)
                lat.append((time.perf_counter() - t) * 1e3)
            lat.sort()
            row.update({f"p{p}": round(pct(lat, p), 3) for p in [50, 95, 99]})
            print(json.dumps(row), flush=True)
