#!/usr/bin/env python3
"""GPU brute force on exactly our postings: PyTorch scatter-add of BM25 impacts, then topk.

usage: torch_bruteforce.py EXPORT_DIR ANALYZED_QUERIES OUT_PREFIX [--k K] [--mode and|or ...]
                           [--batch B] [--passes P] [--device cuda|cpu] [--meta INDEX/meta.json]

The floor a GPU engine must beat, and the method of bm25-pt, SPARe and GPUSparse: for a batch of B
queries, every posting of every query term adds its BM25 contribution into a dense [B, N] float32
array (`index_add_`, atomics on the GPU), then `torch.topk` picks each row's top K. No pruning, no
skipping: the cost is the queries' postings plus B·N per batch.

EXPORT_DIR is `warpsearch export INDEX --pisa EXPORT_DIR --terms-from QUERIES` (the format is in
crates/index/src/pisa.rs) and ANALYZED_QUERIES is `warpsearch analyze` output (`qid<TAB>term term …`),
as for pisa_bench.py. A repeated term counts as many times (its weight is its count); an AND query with
a term the export lacks matches nothing, as in our engine; an OR query ignores such a term.

Scores are our BM25 (crates/index/src/bm25.rs and crates/query/src/plan.rs) in the same float32
arithmetic: a posting contributes `weight · tf_part` with `weight = f32(idf) · count` per query term and
`tf_part = tf · (k1 + 1) / (tf + k1 · (1 − b + b · dl / avgdl))`, `avgdl = f32(Σ dl / N)`. k1 and b are
the index's with --meta (its meta.json), else 0.9 and 0.4. Preprocessing, once and not in q/s (as
PISA's index build is not): every posting's tf part goes to the device, all lists in one docID tensor
and one tf-part tensor; its time and memory are the first JSON line.

Per mode: one warm-up pass, P timed passes over all queries in batches of B (q/s = queries / mean
pass). A pass's time includes building each batch's postings on the device, the scatter, topk and the
copy of the top K to the host. Each result is a JSON line on stdout. There is no per-query latency: a
query's answer comes with its whole batch, so the batch times' percentiles are given instead.
OUT_PREFIX.MODE.run is the TREC run of the last timed pass, for bench/peers/overlap.py; ties are in
the order topk gives them. On the GPU the atomics add a document's contributions in any order, so
its scores may differ from ours in the last bits; on the CPU they are added in our order (the query's
term order) and match ours exactly.
"""
import argparse
import json
import math
import os
import sys
import time

try:
    import numpy as np
    import torch
except ImportError as e:
    sys.exit(f"torch_bruteforce.py: {e.name} is not installed (pip install numpy torch)")

# Postings scattered at once: bounds a batch's temporaries (about 64 bytes a posting, 2 GiB) whatever
# its queries' lists hold.
CHUNK = 1 << 25
# The default batch: as many queries as fit dense arrays of this size (scores, and counts for AND).
DENSE_BYTES = 8 << 30
TAG = "torch_scatter_topk"


def fail(msg):
    sys.exit(f"torch_bruteforce.py: {msg}")


def read_queries(path):
    """(qid, {term: count}) per line, terms in order of first appearance (our engine's term order)."""
    queries = []
    for n, line in enumerate(open(path, encoding="utf-8"), 1):
        qid, sep, text = line.rstrip("\n").partition("\t")
        if not sep:
            fail(f"{path}:{n}: expected `qid<TAB>terms` (warpsearch analyze output)")
        counts = {}
        for t in text.split():
            counts[t] = counts.get(t, 0) + 1
        queries.append((qid, counts))
    return queries


def read_meta(path):
    """k1 and b of an index's meta.json: plain JSON, or, in an index of format version 1, JSON inside
    warpsearch's file envelope (crates/index/src/container.rs)."""
    raw = open(path, "rb").read()
    if raw[:8] == b"WARPSRCH":
        if len(raw) < 56 or raw[8:16] != b"META\0\0\0\0" or raw[-8:] != b"WSFOOTER":
            fail(f"{path} is not an index's meta.json")
        raw = raw[32:-24]
    try:
        bm25 = json.loads(raw)["bm25"]
    except (ValueError, KeyError, TypeError):
        fail(f"{path} is not an index's meta.json")
    return bm25["k1"], bm25["b"]


class Postings:
    """The export's lists on the device: one docID tensor and one tf-part tensor for all of them.

    inv.docs is [1, N] then [df, docID …] per term and inv.freqs is [df, tf …] per term, so past
    inv.docs' first two numbers the two files align number for number. The lists stay where they are
    in them, with the df slots in between, which no query reads. The u32 files are read as int32
    (docIDs and frequencies are below 2^31)."""

    def __init__(self, d, k1, b, device):
        for f in ["inv.docs", "inv.freqs", "inv.sizes", "fwd.terms", "fwd.documents"]:
            if not os.path.exists(f"{d}/{f}"):
                fail(f"{d}/{f} is missing: EXPORT_DIR must be `warpsearch export INDEX --pisa DIR "
                     "--terms-from QUERIES` output, with inv.docs and inv.freqs still there")
        docs = np.memmap(f"{d}/inv.docs", dtype="<i4", mode="r")
        freqs = np.memmap(f"{d}/inv.freqs", dtype="<i4", mode="r")
        sizes = np.fromfile(f"{d}/inv.sizes", dtype="<u4")
        self.terms = [t.rstrip("\n") for t in open(f"{d}/fwd.terms", encoding="utf-8")]
        self.doc_names = [t.rstrip("\n") for t in open(f"{d}/fwd.documents", encoding="utf-8")]
        n = int(sizes[0])
        if docs[0] != 1 or docs[1] != n or len(sizes) != n + 1 or len(self.doc_names) != n \
                or len(freqs) != len(docs) - 2:
            fail(f"{d}: inv.docs, inv.freqs, inv.sizes and fwd.documents disagree")
        if n == 0:
            fail(f"{d}: the collection has no document")
        self.n = n

        # Where each list starts (positions past inv.docs' [1, N]) and its df.
        starts, dfs, at = [], [], 0
        for _ in self.terms:
            if at >= len(freqs):
                fail(f"{d}: fwd.terms names more terms than inv.docs holds")
            df = int(freqs[at])
            starts.append(at + 1)
            dfs.append(df)
            at += df + 1
        if at != len(freqs):
            fail(f"{d}: inv.docs holds more lists than fwd.terms names")
        heads = np.asarray(starts, dtype=np.int64) - 1
        if not np.array_equal(docs[heads + 2], freqs[heads]):
            fail(f"{d}: the dfs of inv.docs and inv.freqs differ")

        # BM25 as crates/index/src/bm25.rs: idf in f64 rounded to f32; avgdl f64 rounded to f32; the
        # length part per document in f32 (numpy's f32 arithmetic rounds like Rust's, in this order).
        f32 = np.float32
        self.k1, self.b = f32(k1), f32(b)
        self.idf = [f32(math.log(1.0 + (n - df + 0.5) / (df + 0.5))) for df in dfs]
        avgdl = f32(float(sizes[1:].sum(dtype=np.uint64)) / n)
        dl = sizes[1:].astype(f32)
        norm = dl / avgdl if avgdl > 0 else np.zeros(n, dtype=f32)  # as bm25.rs: empty documents only
        length_norm = self.k1 * ((f32(1) - self.b) + self.b * norm)

        self.device = device
        total = len(freqs)
        self.docids = torch.empty(total, dtype=torch.int32, device=device)
        self.tf_part = torch.empty(total, dtype=torch.float32, device=device)
        norms = torch.from_numpy(length_norm).to(device)
        k1p1 = float(self.k1 + f32(1))  # exact in float32, so multiplying by it rounds as Rust does
        for a in range(0, total, CHUNK):
            e = min(a + CHUNK, total)
            chunk_docs = np.array(docs[a + 2:e + 2])
            # A df slot would be read as a docID (up to N, out of range): make it document 0.
            h = heads[np.searchsorted(heads, a):np.searchsorted(heads, e)]
            chunk_docs[h - a] = 0
            did = torch.from_numpy(chunk_docs).to(device)
            tf = torch.from_numpy(np.array(freqs[a:e])).to(device).float()
            self.docids[a:e] = did
            # Tensor by tensor: CUDA divides by a scalar through its reciprocal, which can round
            # differently.
            self.tf_part[a:e] = tf * k1p1 / (tf + norms.index_select(0, did))
        self.start = torch.tensor(starts, dtype=torch.int64, device=device)
        self.df = torch.tensor(dfs, dtype=torch.int64, device=device)
        self.postings = sum(dfs)
        self.bytes = total * 8


class Batches:
    """One mode's queries as term ranges on the device (CSR by query), resolved once before timing."""

    def __init__(self, post, queries, mode, batch, k):
        index = {t: i for i, t in enumerate(post.terms)}
        ptr, terms, weights, rows, need = [0], [], [], [], []
        for i, (_, counts) in enumerate(queries):
            known = [(index[t], c) for t, c in counts.items() if t in index]
            if mode == "and" and len(known) < len(counts):
                known = []  # a term the index lacks: nothing matches
            for t, c in known:
                terms.append(t)
                weights.append(post.idf[t] * np.float32(c))  # f32(idf) · count, in float32
                rows.append(i)
            ptr.append(len(terms))
            need.append(len(known))
        dev = post.device
        self.ptr = ptr
        self.terms = torch.tensor(terms, dtype=torch.int64, device=dev)
        self.weights = torch.tensor(np.asarray(weights, dtype=np.float32), device=dev)
        self.rows = torch.tensor(rows, dtype=torch.int64, device=dev)
        self.need = torch.tensor(need, dtype=torch.int32, device=dev)
        self.batch, self.k, self.post = batch, min(k, post.n), post
        self.scores = torch.empty((batch, post.n), dtype=torch.float32, device=dev)
        # AND: how many of a query's terms each document has; a document needs all of them.
        self.counts = torch.empty((batch, post.n), dtype=torch.int32, device=dev) if mode == "and" else None
        self.ones = torch.ones(CHUNK, dtype=torch.int32, device=dev) if mode == "and" else None

    def search(self, q0, q1):
        """The top k of queries q0..q1: (scores, document ordinals) on the host, [q1 - q0, k] each."""
        post, n = self.post, self.post.n
        scores = self.scores[: q1 - q0]
        scores.zero_()
        if self.counts is not None:
            counts = self.counts[: q1 - q0]
            counts.zero_()
        p0, p1 = self.ptr[q0], self.ptr[q1]
        if p1 > p0:
            # Range j (a query term) holds postings j_start .. j_start + df; posting p of the batch's
            # concatenation of ranges is in the range searchsorted finds among their ends.
            terms = self.terms[p0:p1]
            lens = post.df[terms]
            ends = torch.cumsum(lens, 0)
            shift = post.start[terms] - (ends - lens)  # posting p of range j is at p + shift[j]
            base = (self.rows[p0:p1] - q0) * n  # range j's row in the flattened [B, N] array
            weights = self.weights[p0:p1]
            total = int(ends[-1])
            for c0 in range(0, total, CHUNK):
                p = torch.arange(c0, min(c0 + CHUNK, total), device=post.device)
                j = torch.searchsorted(ends, p, right=True)
                at = p + shift[j]
                cell = base[j] + post.docids[at]
                scores.view(-1).index_add_(0, cell, post.tf_part[at] * weights[j])
                if self.counts is not None:
                    counts.view(-1).index_add_(0, cell, self.ones[: len(p)])
        if self.counts is not None:
            scores.masked_fill_(counts < self.need[q0:q1, None], 0)
        # A document with no query term scores 0 (every contribution is positive): the run drops it.
        vals, docs = torch.topk(scores, self.k, dim=1)
        return vals.cpu(), docs.cpu()

    def run_pass(self, queries):
        """All queries once: the results per batch, and each batch's seconds."""
        results, times = [], []
        for q0 in range(0, len(queries), self.batch):
            t = time.perf_counter()
            results.append(self.search(q0, min(q0 + self.batch, len(queries))))
            times.append(time.perf_counter() - t)  # .cpu() waited for the device
        return results, times


def pct(sorted_ms, p):
    """Nearest-rank percentile of a sorted list."""
    return sorted_ms[max(1, math.ceil(p / 100 * len(sorted_ms))) - 1]


def out_of_memory(e):
    return isinstance(e, torch.cuda.OutOfMemoryError) or "can't allocate memory" in str(e)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("export_dir")
    ap.add_argument("queries")
    ap.add_argument("out_prefix")
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--mode", action="append", choices=["and", "or"],
                    help="and, or; repeat for both (default: both)")
    ap.add_argument("--batch", type=int, default=None,
                    help=f"queries per batch (default: as many as fit {DENSE_BYTES >> 30} GiB of dense arrays)")
    ap.add_argument("--passes", type=int, default=2)
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    ap.add_argument("--meta", help="the index's meta.json, for its k1 and b (default 0.9 and 0.4)")
    a = ap.parse_args()
    if a.device == "cuda" and not torch.cuda.is_available():
        fail(f"PyTorch {torch.__version__} sees no CUDA device (--device cpu runs on the CPU)")
    if a.k < 1 or a.passes < 1 or (a.batch is not None and a.batch < 1):
        fail("--k, --passes and --batch must be at least 1")
    device = torch.device(a.device)
    cuda = device.type == "cuda"
    k1, b = read_meta(a.meta) if a.meta else (0.9, 0.4)
    queries = read_queries(a.queries)
    if not queries:
        fail(f"{a.queries} holds no query")

    started = time.time()
    try:
        post = Postings(a.export_dir, k1, b, device)
        if cuda:
            torch.cuda.synchronize()
    except (torch.cuda.OutOfMemoryError, RuntimeError) as e:
        if not out_of_memory(e):
            raise
        fail(f"out of memory holding the postings of {a.export_dir} on {a.device} "
             f"(8 bytes a posting): export the terms of fewer queries")
    print(json.dumps({
        "prepare_s": round(time.time() - started, 2), "note": "preprocessing, not in q/s",
        "device": torch.cuda.get_device_name(device) if cuda else "cpu", "torch": torch.__version__,
        "docs": post.n, "terms": len(post.terms), "postings": post.postings, "k1": round(float(post.k1), 6),
        "b": round(float(post.b), 6), "postings_gib": round(post.bytes / 2**30, 3),
        **({"device_allocated_gib": round(torch.cuda.memory_allocated(device) / 2**30, 3)} if cuda else {}),
    }), flush=True)

    for mode in dict.fromkeys(a.mode or ["and", "or"]):
        per_doc = 8 if mode == "and" else 4
        batch = min(a.batch or max(1, DENSE_BYTES // (per_doc * post.n)), len(queries))
        try:
            if cuda:
                torch.cuda.reset_peak_memory_stats(device)
            qs = Batches(post, queries, mode, batch, a.k)
            qs.run_pass(queries)  # warm-up
            passes, batch_times = [], []
            for _ in range(a.passes):
                t = time.perf_counter()
                results, times = qs.run_pass(queries)
                passes.append(time.perf_counter() - t)
                batch_times += times
            peak = torch.cuda.max_memory_allocated(device) if cuda else None
            del qs
        except (torch.cuda.OutOfMemoryError, RuntimeError) as e:
            if not out_of_memory(e):
                raise
            fail(f"{mode}: out of memory with {batch} queries per batch ({batch * per_doc * post.n / 2**30:.1f} "
                 "GiB of dense arrays, and about 2 GiB for a chunk of postings): try a smaller --batch")
        with open(f"{a.out_prefix}.{mode}.run", "w", encoding="utf-8") as f:
            i = 0
            for vals, docs in results:
                for row_vals, row_docs in zip(vals.tolist(), docs.tolist()):
                    qid = queries[i][0]
                    for rank, (score, doc) in enumerate(
                            (s, d) for s, d in zip(row_vals, row_docs) if s > 0):
                        f.write(f"{qid} Q0 {post.doc_names[doc]} {rank + 1} {score:.6f} {TAG}\n")
                    i += 1
        ms = sorted(t * 1e3 for t in batch_times)
        print(json.dumps({
            "mode": mode, "algorithm": TAG, "k": a.k, "batch": batch,
            "queries": len(queries), "qps": round(len(queries) / (sum(passes) / len(passes))),
            "passes_s": [round(t, 3) for t in passes],
            "batch_ms_p50": round(pct(ms, 50), 3), "batch_ms_p99": round(pct(ms, 99), 3),
            **({"peak_gib": round(peak / 2**30, 3)} if peak is not None else {}),
        }), flush=True)


if __name__ == "__main__":
    main()
