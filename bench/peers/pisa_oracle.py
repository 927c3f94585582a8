#!/usr/bin/env python3
"""Why PISA's top-10 differs from ours: both runs against an exhaustive numpy oracle, under both BM25s.

usage: pisa_oracle.py EXPORT_DIR ANALYZED_QUERIES MODE OURS.run PISA.run [K] [SAMPLE]
                      [--k1 K1] [--b B] [--one-byte-norms]

EXPORT_DIR is a `warpsearch export --pisa` directory (inv.docs and inv.freqs still there), the queries
are `warpsearch analyze` output, MODE is and|or. For the first SAMPLE queries (default 500) it scores
every matching document in float64 under
  ours (Anserini's):  idf = ln(1 + (N - df + 0.5) / (df + 0.5))
  PISA's:             idf = max(1e-6, ln((N - df + 0.5) / (df + 0.5)))
with the same tf part, tf (k1 + 1) / (tf + k1 (1 - b + b dl / avgdl)), k1 0.9, b 0.4, a repeated query
term counted as often as it occurs. A run's top-K is exact when it holds every document that scores
above the K-th best score and the rest of it ties with that score (to 1e-4, for float32). It prints how
many queries each run gets exactly right under each formula, and how many have the same set in both
runs. Each run exact under its own formula, and not under the other, means the runs differ by the
ranking function alone; both exact under one formula with different sets means tied documents.

--k1/--b change both formulas' parameters, and --one-byte-norms rounds document lengths down to
Lucene's one-byte SmallFloat values, as tantivy stores them (the average stays exact, as in tantivy).
With `--k1 1.2 --b 0.75 --one-byte-norms` the "ours" formula is tantivy's BM25: pass a tantivy run as
both runs to check it against an exhaustive oracle.
"""
import argparse
import numpy as np


def load_run(path, k):
    run = {}
    for line in open(path, encoding="utf-8"):
        qid, _, doc, rank, *_ = line.split()
        run.setdefault(qid, []).append((int(rank), doc))
    return {q: [d for _, d in sorted(v)[:k]] for q, v in run.items()}


def lucene_byte4(b):
    """Lucene's SmallFloat.byte4ToInt: the length a one-byte norm stands for (tantivy's table)."""
    if b < 24:
        return b
    i = b - 24
    bits, shift = i & 0x07, (i >> 3) - 1
    return 24 + (bits if shift == -1 else (bits | 0x08) << shift)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    for name in ["export", "queries_path", "mode", "ours_path", "pisa_path"]:
        ap.add_argument(name)
    ap.add_argument("k", nargs="?", type=int, default=10)
    ap.add_argument("sample", nargs="?", type=int, default=500)
    ap.add_argument("--k1", type=float, default=0.9)
    ap.add_argument("--b", type=float, default=0.4)
    ap.add_argument("--one-byte-norms", action="store_true")
    a = ap.parse_args()
    export, queries_path, mode, ours_path, pisa_path, k, sample = (
        a.export, a.queries_path, a.mode, a.ours_path, a.pisa_path, a.k, a.sample)
    K1, B = a.k1, a.b
    docs = np.memmap(f"{export}/inv.docs", dtype=np.uint32, mode="r")
    freqs = np.memmap(f"{export}/inv.freqs", dtype=np.uint32, mode="r")
    sizes = np.fromfile(f"{export}/inv.sizes", dtype=np.uint32)[1:].astype(np.float64)
    n = len(sizes)
    avgdl = sizes.mean()
    if a.one_byte_norms:
        table = np.array([lucene_byte4(b) for b in range(256)], dtype=np.float64)
        sizes = table[np.searchsorted(table, sizes, side="right") - 1]
    names = [t.rstrip("\n") for t in open(f"{export}/fwd.terms", encoding="utf-8")]
    doc_ids = [d.rstrip("\n") for d in open(f"{export}/fwd.documents", encoding="utf-8")]
    where, at = {}, 2  # inv.docs: [1, N] then [df, docs…] per term; inv.freqs: [df, freqs…]
    for name in names:
        df = int(docs[at])
        where[name] = (at + 1, at - 1, df)  # offsets of the docs and freqs, and df
        at += df + 1
    ours, pisa = load_run(ours_path, k), load_run(pisa_path, k)

    def exact(scored, got):
        """Is `got` (document ordinals) a correct top-k of `scored` (sorted ordinals, their scores)?"""
        ids, scores = scored
        if len(ids) == 0:
            return not got
        m = min(k, len(ids))
        kth = -np.partition(-scores, m - 1)[m - 1]
        tol = 1e-4 * max(1.0, abs(kth))
        must = set(ids[scores > kth + tol].tolist())
        at = np.searchsorted(ids, np.asarray(got, dtype=ids.dtype))
        found = all(i < len(ids) and ids[i] == d for i, d in zip(at.tolist(), got))
        return (len(got) == m and must <= set(got) and found
                and bool(np.all(scores[at] >= kth - tol)))

    counts = dict(queries=0, ours_exact_ours=0, pisa_exact_pisa=0, ours_exact_pisa=0, pisa_exact_ours=0,
                  same_sets=0)
    by_name = {d: i for i, d in enumerate(doc_ids)}
    for line in list(open(queries_path, encoding="utf-8"))[:sample]:
        qid, _, text = line.rstrip("\n").partition("\t")
        terms = {}
        for t in text.split():
            terms[t] = terms.get(t, 0) + 1
        if mode == "and" and not all(t in where for t in terms):
            terms = {}
        terms = {t: c for t, c in terms.items() if t in where}
        all_d, all_ours, all_pisa = [], [], []
        for t, c in terms.items():
            d0, f0, df = where[t]
            d = np.asarray(docs[d0:d0 + df], dtype=np.int64)
            f = np.asarray(freqs[f0:f0 + df], dtype=np.float64)
            x = (n - df + 0.5) / (df + 0.5)
            part = c * f * (K1 + 1) / (f + K1 * (1 - B + B * sizes[d] / avgdl))
            all_d.append(d)
            all_ours.append(np.log1p(x) * part)
            all_pisa.append(max(1e-6, np.log(x)) * part)
        empty = (np.zeros(0, dtype=np.int64), np.zeros(0))
        s_ours, s_pisa = empty, empty
        if all_d:
            uniq, inv, hits = np.unique(np.concatenate(all_d), return_inverse=True, return_counts=True)
            keep = hits == len(terms) if mode == "and" else np.ones(len(uniq), dtype=bool)
            s_ours, s_pisa = [
                (uniq[keep], np.bincount(inv, weights=np.concatenate(parts), minlength=len(uniq))[keep])
                for parts in (all_ours, all_pisa)
            ]
        got_ours = [by_name[d] for d in ours.get(qid, [])]
        got_pisa = [by_name[d] for d in pisa.get(qid, [])]
        counts["queries"] += 1
        counts["ours_exact_ours"] += exact(s_ours, got_ours)
        counts["pisa_exact_pisa"] += exact(s_pisa, got_pisa)
        counts["ours_exact_pisa"] += exact(s_pisa, got_ours)
        counts["pisa_exact_ours"] += exact(s_ours, got_pisa)
        counts["same_sets"] += set(got_ours) == set(got_pisa)
    print(" ".join(f"{key} {value}" for key, value in counts.items()))


if __name__ == "__main__":
    main()
