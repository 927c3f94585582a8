"""The package's surface: properties, DataFrame output, threads, and the GIL released while the engine
runs (other Python threads go on meanwhile, and concurrent calls on one searcher give the same
answers)."""

import gc
import json
import threading
import time

import pytest
import warpsearch
from conftest import shared_data


@pytest.fixture(scope="module")
def index(cacm_cli_index):
    return warpsearch.Index.open(cacm_cli_index)


@pytest.fixture(scope="module")
def trec05():
    """The 50,000 TREC 2005 efficiency queries."""
    return [t for _, t in warpsearch.read_queries(shared_data("queries/trec05-efficiency.txt"))]


def test_properties(index, cacm_cli_index):
    assert index.path == cacm_cli_index
    assert index.num_docs == 3204
    assert index.num_terms > 5000 and index.num_postings > index.num_terms
    assert index.codec == "simdbp" and index.analyzer == "english"
    assert index.bm25 == pytest.approx((0.9, 0.4))
    assert "3204 documents" in repr(index)
    assert index.analyze("The Computers' algorithms") == ["comput", "algorithm"]
    s = index.searcher("cpu")
    assert s.backend == "cpu" and s.choice is None
    assert repr(s).startswith("Searcher(cpu")
    auto = index.searcher()
    assert auto.backend in ("cpu", "gpu")  # auto runs the GPU backend where a GPU serves
    assert auto.choice.startswith("backend auto: ")


def test_frame(index):
    texts = ["parallel algorithms", "compilers", "zzzzunknown"]
    s = index.searcher("cpu")
    try:
        import numpy  # noqa: F401
        import pandas  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError, match=r"as_frame=True needs pandas and numpy \(pip install"):
            s.search_batch(texts, k=5, as_frame=True)
        return
    frame = s.search_batch(texts, k=5, as_frame=True)
    assert list(frame.columns) == ["qid", "docid", "rank", "score"]
    assert str(frame["score"].dtype) == "float32" and str(frame["rank"].dtype) == "int64"
    rows = [
        (str(q), d, r, s)
        for q, hits in enumerate(s.search_batch(texts, k=5), 1)
        for r, (d, s) in enumerate(hits, 1)
    ]
    assert len(frame) == len(rows) == 10
    assert [tuple(r) for r in frame.itertuples(index=False)] == rows
    # qid and docid are categoricals: each distinct id one string, compared and written as strings.
    assert str(frame["qid"].dtype) == "category" and str(frame["docid"].dtype) == "category"
    plain = frame.astype({"qid": str, "docid": str})
    assert [tuple(r) for r in plain.itertuples(index=False)] == rows
    assert len(frame["docid"].cat.categories) == len({d for _, d, _, _ in rows})
    named = s.search_batch(texts, k=5, qids=["q1", "q2", "q3"], as_frame=True)
    assert list(named["qid"].unique()) == ["q1", "q2"]
    # A repeated qid is one category; its queries' hits keep their own ranks.
    repeated = s.search_batch(texts[:2] * 2, k=5, qids=["a", "b", "a", "b"], as_frame=True)
    assert list(repeated["qid"].cat.categories) == ["a", "b"]
    assert list(repeated["qid"]) == ["a"] * 5 + ["b"] * 5 + ["a"] * 5 + ["b"] * 5
    assert list(repeated["rank"]) == list(range(1, 6)) * 4
    empty = s.search_batch([], as_frame=True)
    assert len(empty) == 0 and list(empty.columns) == ["qid", "docid", "rank", "score"]


def test_hits_are_lists_of_str_float_tuples(tmp_path):
    """Hits are made with CPython's own calls (python/src/hits.rs): lists of 2-tuples of str and float,
    ids with non-ASCII characters intact, the same from `search` before any batch (ids read from the
    index) as after one (ids prefetched from the searcher's own table), and lists tracked by the cyclic
    collector as any list is."""
    docs = tmp_path / "docs.jsonl"
    ids = ["café-1", "日本#2", "b", "x" * 300]
    texts = ["black bear", "black bear and a cat", "a cat", "bear bear bear"]
    docs.write_text("".join(json.dumps({"id": i, "contents": t}) + "\n" for i, t in zip(ids, texts)))
    s = warpsearch.Index.build(input=docs, output=tmp_path / "idx").searcher("cpu")
    before = s.search("bear cat", k=10)
    batch = s.search_batch(["bear cat", "zzz", "cat"], k=10)
    assert s.search("bear cat", k=10) == before == batch[0]
    assert sorted(d for d, _ in before) == sorted(ids)
    assert batch[1] == [] and [d for d, _ in batch[2]] == ["b", "日本#2"]
    for hits in batch:
        assert type(hits) is list and gc.is_tracked(hits)
        for hit in hits:
            assert type(hit) is tuple and len(hit) == 2
            assert type(hit[0]) is str and type(hit[1]) is float


def test_batches_of_many_chunks_equal_their_parts(index, trec05):
    """`search_batch` analyses 16 chunks of 4,096 queries in one pass and answers a chunk at a time
    (python/src/searcher.rs): a batch past both boundaries equals its parts, each answered alone."""
    texts = (trec05 * 2)[:70_000]
    s = index.searcher("cpu")
    whole = s.search_batch(texts, k=5, mode="or")
    parts = []
    for i in range(0, len(texts), 3000):
        parts += s.search_batch(texts[i : i + 3000], k=5, mode="or")
    assert len(whole) == len(texts) and sum(map(len, whole)) > len(texts)
    assert whole == parts


def test_threads_give_the_same_answers(index, trec05):
    texts = trec05[:3000]
    expected = index.searcher("cpu").search_batch(texts, k=50)
    one = index.searcher("cpu", threads=1)
    assert repr(one) == "Searcher(cpu (1 threads))", "it names its own pool's threads"
    assert one.search_batch(texts, k=50) == expected
    assert index.searcher("hybrid", threads=2).search_batch(texts, k=50) == expected


def test_frames_written_on_many_threads_equal_the_lists(index, trec05):
    """The frame's columns are written by tasks of 512 queries on the searcher's threads (python/src/
    frame.rs): with several tasks, one thread or all, every row is the lists' hit in place."""
    pandas = pytest.importorskip("pandas")
    texts = trec05[:3000]
    lists = index.searcher("cpu").search_batch(texts, k=30, mode="or")
    rows = [(str(q), d, r, s) for q, hits in enumerate(lists, 1) for r, (d, s) in enumerate(hits, 1)]
    for threads in [1, None]:
        frame = index.searcher("cpu", threads=threads).search_batch(texts, k=30, mode="or", as_frame=True)
        assert isinstance(frame, pandas.DataFrame) and len(frame) == len(rows)
        assert [tuple(r) for r in frame.itertuples(index=False)] == rows
        docs = list(frame["docid"].cat.categories)
        assert len(docs) == len({d for _, d, _, _ in rows})


def test_concurrent_calls_share_one_searcher(index, trec05):
    texts = trec05[:2000]
    s = index.searcher("cpu")
    expected = s.search_batch(texts, k=20, mode="and-or")
    results = [None] * 4

    def run(i):
        results[i] = s.search_batch(texts, k=20, mode="and-or")

    threads = [threading.Thread(target=run, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(r == expected for r in results)


def test_search_batch_releases_the_gil(index, trec05):
    """While one thread's batch is in the engine, another Python thread keeps running: the longest
    pause between its steps stays well below the batch's own time. (Holding the GIL, the pause would
    be the whole engine time.)"""
    s = index.searcher("cpu", algorithm="exhaustive")
    texts = trec05 * 2
    started = time.perf_counter()
    s.search_batch(texts, k=1)
    alone = time.perf_counter() - started
    assert alone > 0.05, "the batch is too quick to tell"
    done = threading.Event()

    def run():
        s.search_batch(texts, k=1)
        done.set()

    worker = threading.Thread(target=run)
    worker.start()
    longest, last = 0.0, time.perf_counter()
    while not done.is_set():
        now = time.perf_counter()
        longest, last = max(longest, now - last), now
    worker.join()
    assert longest < alone / 2, f"a pause of {longest:.3f} s in a batch of {alone:.3f} s"


@pytest.mark.parametrize("backend", ["cpu", "hybrid"])
def test_ctrl_c_interrupts_a_batch_at_once(index, trec05, backend):
    """KeyboardInterrupt arrived only when `search_batch` returned, seconds late. Now Ctrl-C (SIGINT)
    during the call drops the queries not yet started and raises it at once: the interrupted call
    takes a small part of the batch's own time (the CPU backend answers this batch in many chunks, the
    hybrid in one), and the searcher answers the next call as before."""
    import signal

    s = index.searcher(backend, algorithm="exhaustive", threads=2)
    texts = trec05 * 4
    started = time.perf_counter()
    expected = s.search_batch(texts, k=1)
    alone = time.perf_counter() - started
    assert alone > 0.2, "the batch is too quick to tell"
    # The interrupted batch is ten times that one and Ctrl-C comes a hundredth of the way into it: an
    # interrupt honoured only at the end takes the whole batch, one honoured between parts a small share
    # of it; a quarter leaves a loaded machine a wide margin.
    timer = threading.Timer(alone / 10, lambda: signal.pthread_kill(threading.main_thread().ident, signal.SIGINT))
    # Python's own Ctrl-C handler, as in an interactive session: a shell that starts the tests in the
    # background starts them with SIGINT ignored.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        started = time.perf_counter()
        timer.start()
        with pytest.raises(KeyboardInterrupt):
            s.search_batch(texts * 10, k=1)
        interrupted = time.perf_counter() - started
        timer.join()
    finally:
        signal.signal(signal.SIGINT, previous)
    assert interrupted < 10 * alone / 4, f"interrupted after {interrupted:.3f} s of a batch of about {10 * alone:.1f} s"
    assert s.search_batch(texts[:500], k=1) == expected[:500]


def test_a_query_beyond_max_query_terms_is_refused(index):
    s = index.searcher("cpu", max_query_terms=3)
    assert s.search("algorithm matrix", k=5)
    with pytest.raises(ValueError, match="4 distinct terms, more than the limit of 3"):
        s.search("algorithm matrix computer language", k=5)
    with pytest.raises(ValueError, match="max_query_terms"):
        index.searcher("cpu", max_query_terms=0)


def test_gpu_feeders_where_they_do_not_apply_are_refused(index):
    with pytest.raises(ValueError, match="gpu_feeders is 0: give 1 to 16"):
        index.searcher("cpu", gpu_feeders=0)
    with pytest.raises(ValueError, match="gpu_feeders 2 does not apply to backend hybrid"):
        index.searcher("hybrid", gpu_feeders=2)
    # On the CPU the option changes nothing.
    assert index.searcher("cpu", gpu_feeders=2).search("algorithm matrix", k=5)
