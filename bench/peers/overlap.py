#!/usr/bin/env python3
"""Top-k agreement of two TREC runs: for every query with results in either run, the fraction of the
reference run's top k documents that the other run also has in its top k (ties and order ignored).

usage: overlap.py reference.run other.run [k]
Prints the mean over queries, and how many queries agree fully and not at all. A query only one run
answers counts as 0 (or 1 if both are empty, which the union excludes).
"""
import sys
from collections import defaultdict


def top(path, k):
    runs = defaultdict(list)
    for line in open(path, encoding="utf-8"):
        qid, _, doc, rank, *_ = line.split()
        runs[qid].append((int(rank), doc))
    return {q: {d for _, d in sorted(v)[:k]} for q, v in runs.items()}


ref_path, other_path = sys.argv[1:3]
k = int(sys.argv[3]) if len(sys.argv) > 3 else 10
ref, other = top(ref_path, k), top(other_path, k)
qids = set(ref) | set(other)
scores = []
for q in qids:
    a, b = ref.get(q, set()), other.get(q, set())
    scores.append(len(a & b) / max(len(a), len(b)) if (a or b) else 1.0)
n = len(scores)
print(f"{n} queries with results; mean top-{k} agreement {sum(scores) / max(n, 1):.3f}; "
      f"identical sets {sum(s == 1.0 for s in scores)}; disjoint {sum(s == 0.0 for s in scores)}")
