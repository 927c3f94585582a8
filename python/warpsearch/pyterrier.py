"""PyTerrier integration: an indexer over iterables of {'docno', 'text'} dicts and a retriever
transformer returning PyTerrier's result frame (qid, docno, score, rank, and the topics' columns),
each query batch answered by one call into the engine.

    import pyterrier as pt
    from warpsearch.pyterrier import WarpsearchIndexer, WarpsearchRetriever

    index = WarpsearchIndexer("idx", store=True).index(dataset.get_corpus_iter())
    bm25 = WarpsearchRetriever(index, k=1000)
    pt.Experiment([bm25], topics, qrels, eval_metrics=["map", "ndcg_cut_10"])

The classes derive from `pyterrier.Transformer` where python-terrier is installed (so `>>`, `%` and
`pt.Experiment` work) and are plain classes with the same `transform` otherwise."""

import os

from . import Index

try:  # python-terrier is optional: without it the classes keep their interface, minus PyTerrier's operators.
    import pyterrier as _pt

    _Transformer = _pt.Transformer
    HAVE_PYTERRIER = True
except ImportError:  # pragma: no cover - depends on the environment
    _Transformer = object
    HAVE_PYTERRIER = False

__all__ = ["WarpsearchIndexer", "WarpsearchRetriever", "HAVE_PYTERRIER"]


class WarpsearchIndexer:
    """Builds a warpsearch index at `path` from an iterable of documents (dicts with 'docno' and 'text',
    or any fields named by `fields` / `id_field`), streamed. Keyword arguments are `Index.build`'s
    (store=True keeps the documents; title=True, k1=, b=, codec=, force=True, …)."""

    def __init__(self, path, **build_options):
        self.path = os.fspath(path)
        self.options = build_options

    def index(self, docs):
        """Indexes `docs` (any iterable of dicts) and returns the open `warpsearch.Index`."""
        return Index.build(docs, output=self.path, **self.options)


class WarpsearchRetriever(_Transformer):
    """BM25 retrieval over a warpsearch index (an `Index`, or its path): `transform(topics)` takes a
    frame with qid and query and returns one row per hit with qid, docno, score, rank (from 0, as
    PyTerrier numbers ranks) and the topics' other columns. `k` hits a query (1000 by default), `mode`
    "or", "and" or "and-or"; other keyword arguments make the searcher (`Index.searcher`: backend=,
    k1=, b=, threads=, …). `text=True` adds the stored documents (an index built with store=True) as a
    column `text`."""

    def __init__(self, index, k=1000, mode="or", text=False, **searcher_options):
        if not isinstance(index, Index):
            index = Index.open(os.fspath(index))
        self.index = index
        self.k = k
        self.mode = mode
        self.text = text
        self.searcher = index.searcher(**searcher_options)

    def transform(self, topics):
        import pandas as pd

        missing = [c for c in ("qid", "query") if c not in topics.columns]
        if missing:
            raise ValueError(
                f"the topics frame lacks {', '.join(missing)}: a retriever takes PyTerrier topics, "
                f"columns qid and query (it has {', '.join(map(str, topics.columns))})"
            )
        qids = [str(q) for q in topics["qid"]]
        if len(set(qids)) != len(qids):
            raise ValueError("the topics frame names a qid twice: each query needs its own qid")
        frame = self.searcher.search_batch(list(topics["query"].astype(str)), k=self.k, mode=self.mode,
                                           qids=qids, as_frame=True)
        frame = frame.rename(columns={"docid": "docno"})
        frame["qid"] = frame["qid"].astype(str)
        frame["docno"] = frame["docno"].astype(str)
        frame["score"] = frame["score"].astype("float64")
        frame["rank"] = frame["rank"].astype("int64") - 1
        if self.text:
            frame["text"] = self.index.docs(list(frame["docno"]))
        extra = topics.drop(columns=[c for c in ("docno", "score", "rank") if c in topics.columns])
        extra = extra.assign(qid=extra["qid"].astype(str))
        out = extra.merge(frame, on="qid", how="inner")
        columns = ["qid", "docno", "score", "rank"]
        return out[columns + [c for c in out.columns if c not in columns]].reset_index(drop=True)

    if not HAVE_PYTERRIER:

        def __call__(self, topics):
            return self.transform(topics)

    def __repr__(self):
        return f"WarpsearchRetriever({self.index!r}, k={self.k}, mode={self.mode!r})"
