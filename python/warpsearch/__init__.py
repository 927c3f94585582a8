"""warpsearch: exact top-k BM25 search over a compressed inverted index, on CPUs and GPUs.

`Index`, `Searcher`, `read_queries` and `evaluate` come from the Rust extension (`warpsearch._warpsearch`);
`warpsearch.pyterrier` is the PyTerrier integration (imported on its own: it needs python-terrier)."""

from ._warpsearch import MAX_K, Index, NoSearchableTermsWarning, Searcher, UnknownTermsWarning, __version__, read_queries
from ._warpsearch import evaluate as _evaluate

__all__ = [
    "Index",
    "Searcher",
    "read_queries",
    "evaluate",
    "MAX_K",
    "NoSearchableTermsWarning",
    "UnknownTermsWarning",
    "__version__",
]


def _as_dict(obj, value, what):
    """A pandas DataFrame (qid, docno or docid, and `value`) as the dict {qid: {docno: value}}
    `evaluate` reads; anything else as it is."""
    columns = getattr(obj, "columns", None)
    if columns is None:
        return obj
    doc = "docno" if "docno" in columns else "docid"
    missing = [c for c in ("qid", doc, value) if c not in columns]
    if missing:
        raise ValueError(
            f"the {what} frame lacks the column(s) {', '.join(missing)}: it needs qid, docno (or docid) "
            f"and {value}; it has {', '.join(map(str, columns))}"
        )
    out = {}
    for q, d, v in zip(obj["qid"].astype(str), obj[doc].astype(str), obj[value]):
        out.setdefault(q, {})[d] = v
    return out


def evaluate(qrels, run, measures=None, *, per_query=False, all_queries=False):
    """Scores `run` against `qrels` with trec_eval's measures, as `warpsearch evaluate` does.

    `measures`: trec_eval's names ("map", "ndcg_cut.10", "P.5,10", "recall.1000", "recip_rank") or
    ir_measures' ("AP", "nDCG@10", "R@100", "RR@10"); default ndcg_cut.10, map, P.10 and recall.1000.
    `qrels`: a TREC or BEIR qrels file, a dict {qid: {docno: relevance}}, or a DataFrame with qid, docno
    and label (PyTerrier's). `run`: a TREC run file, a dict {qid: {docno: score}}, or a DataFrame with
    qid, docno (or docid) and score (`search_batch(..., as_frame=True)`'s, or a PyTerrier result).
    Returns {measure: mean}; with `per_query=True`, also {qid: {measure: value}}."""
    qrels = _as_dict(qrels, "label" if hasattr(qrels, "columns") and "label" in qrels.columns else "relevance", "qrels")
    if isinstance(qrels, dict):
        qrels = {str(q): {str(d): int(r) for d, r in docs.items()} for q, docs in qrels.items()}
    run = _as_dict(run, "score", "run")
    if isinstance(run, dict):
        run = {str(q): {str(d): float(s) for d, s in docs.items()} for q, docs in run.items()}
    if isinstance(measures, str):
        measures = [measures]
    return _evaluate(qrels, run, None if measures is None else list(measures), per_query=per_query,
                     all_queries=all_queries)
