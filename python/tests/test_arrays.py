"""`search_batch(..., as_arrays=True)`: (docs, scores) numpy arrays of one row per query, equal to the
lists (document numbers that `Index.doc_ids` names as the lists do, the same float32 scores), padded
with -1 and NaN past a query's last hit; and the document numbers' own errors."""

import math

import pytest
import warpsearch
from conftest import shared_data


@pytest.fixture(scope="module")
def index(cacm_cli_index):
    return warpsearch.Index.open(cacm_cli_index)


@pytest.fixture(scope="module")
def texts():
    """The first TREC 2005 efficiency queries, a query of no known term, and an empty one."""
    queries = warpsearch.read_queries(shared_data("queries/trec05-efficiency.txt"))
    return [t for _, t in queries[:600]] + ["zzzzunknown qqqqnothing", ""]


def check_rows(index, docs, scores, lists, k):
    """Each row of the arrays is the query's list in place, then padding."""
    assert docs.shape == scores.shape == (len(lists), k)
    assert str(docs.dtype) == "int64" and str(scores.dtype) == "float32"
    for row, (d, s, hits) in enumerate(zip(docs.tolist(), scores.tolist(), lists)):
        n = len(hits)
        assert index.doc_ids(d[:n]) == [doc for doc, _ in hits], f"row {row}"
        assert s[:n] == [score for _, score in hits], f"row {row}: the engine's f32 scores, exactly"
        assert d[n:] == [-1] * (k - n) and all(math.isnan(x) for x in s[n:]), f"row {row}: padding"


@pytest.mark.parametrize("mode", ["and", "or", "and-or"])
@pytest.mark.parametrize("k", [1, 10, 1000])
def test_arrays_equal_the_lists(index, texts, mode, k):
    pytest.importorskip("numpy")
    lists = index.searcher("cpu").search_batch(texts, k=k, mode=mode)
    assert any(len(h) < k for h in lists) and any(len(h) > 0 for h in lists), "rows of both kinds"
    for threads in [1, None]:
        docs, scores = index.searcher("cpu", threads=threads).search_batch(texts, k=k, mode=mode, as_arrays=True)
        check_rows(index, docs, scores, lists, k)


def test_arrays_of_many_tasks_and_no_queries(index, texts):
    """Rows are written by tasks of 1,024 queries: 2,404 queries make three, the last one short."""
    pytest.importorskip("numpy")
    many = texts * 4
    s = index.searcher("cpu")
    docs, scores = s.search_batch(many, k=7, as_arrays=True)
    check_rows(index, docs, scores, s.search_batch(many, k=7), 7)
    docs, scores = s.search_batch([], k=5, as_arrays=True)
    assert docs.shape == scores.shape == (0, 5)


def test_arrays_refuse_frames_and_qids(index):
    s = index.searcher("cpu")
    for extra in [{"as_frame": True}, {"qids": ["1"]}]:
        with pytest.raises(ValueError, match=r"as_arrays=True returns \(docs, scores\) in query order"):
            s.search_batch(["compilers"], k=5, as_arrays=True, **extra)


def test_document_numbers(index):
    hits = index.searcher("cpu").search("parallel algorithms", k=3)
    s = index.searcher("cpu")
    try:
        import numpy  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError, match=r"as_arrays=True needs numpy \(pip install numpy\)"):
            s.search_batch(["parallel algorithms"], k=3, as_arrays=True)
        return
    docs, _ = s.search_batch(["parallel algorithms"], k=3, as_arrays=True)
    assert [index.doc_id(int(n)) for n in docs[0]] == [d for d, _ in hits]
    assert index.doc_ids(docs[0]) == [d for d, _ in hits], "a numpy row is a sequence of ints"
    assert index.doc_ids([-1, int(docs[0][0])]) == [None, hits[0][0]]
    last = index.num_docs - 1
    assert isinstance(index.doc_id(last), str) and index.doc_id(0) != index.doc_id(last)
    for bad in [index.num_docs, -2]:
        with pytest.raises(IndexError, match=rf"document number {bad} is out of range: the index numbers its"):
            index.doc_id(bad)
    with pytest.raises(IndexError, match=r"document number -5 is out of range"):
        index.doc_ids([0, -5])
