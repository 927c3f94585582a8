"""The exact merge of answers from searchers over disjoint shards of one sharded index
(`Index.searcher(shards=[...])`), as the engine merges its shards' answers: the k best of their union,
score descending, ties to the smaller document number. Each shard scores with the collection's
statistics, so this merge is the whole index's answer, bit for bit. `warpsearch.ray`'s root merges
with it; `search` is the same fan-out in one process. Needs numpy."""

import numpy as np

__all__ = ["merge", "short_rows", "search"]


def merge(parts, k):
    """The merge of `parts`, each a tuple of arrays of one row per query (`search_batch(...,
    as_arrays=True)`'s docs and scores, and optionally more arrays of the same shape carried along, such
    as the hits' ids): per row the `k` best hits of every part, score descending, ties to the smaller
    document number, padded with -1 (docs), NaN (scores) and None (the rest) past the last hit. The parts
    must come from disjoint shards: a document in two parts would be counted twice."""
    if not parts:
        raise ValueError("merge needs the answers of at least one shard")
    columns = [np.concatenate(c, axis=1) for c in zip(*parts)]
    docs, scores = columns[0], columns[1]
    # Padding (NaN) sorts after every hit: its key is +inf; a hit's key is its negated score, exact in
    # float32, and equal scores fall to the smaller document number.
    key = np.where(np.isnan(scores), np.inf, -scores)
    order = np.lexsort((docs, key), axis=1)[:, :k]
    out = [np.take_along_axis(c, order, axis=1) for c in columns]
    width = out[0].shape[1]
    if width < k:
        pads = [-1, np.nan] + [None] * (len(out) - 2)
        out = [
            np.concatenate([c, np.full((c.shape[0], k - width), p, dtype=c.dtype)], axis=1)
            for c, p in zip(out, pads)
        ]
    return tuple(out)


def short_rows(docs, k):
    """The rows (query positions) of a merged answer with fewer than `k` hits: where and-or's AND step
    leaves the query to its OR step."""
    return np.flatnonzero((docs >= 0).sum(axis=1) < k)


def search(searchers, texts, k=10, mode="or"):
    """`texts` answered by every searcher of `searchers` (each over its own shards of one index, all of
    them together covering it) and merged: the whole index's (docs, scores), as `search_batch(...,
    as_arrays=True)` gives them. and-or runs as the engine runs it over the whole collection: AND on
    every shard, then OR on every shard for the queries whose merged AND has fewer than k hits."""
    texts = list(texts)
    if mode not in ("and", "or", "and-or"):
        raise ValueError(f"unknown mode '{mode}': expected and, or or and-or")

    def ask(batch, step):
        return merge([s.search_batch(batch, k=k, mode=step, as_arrays=True) for s in searchers], k)

    if mode != "and-or":
        return ask(texts, mode)
    docs, scores = ask(texts, "and")
    rows = short_rows(docs, k)
    if len(rows):
        docs[rows], scores[rows] = ask([texts[i] for i in rows], "or")
    return docs, scores
