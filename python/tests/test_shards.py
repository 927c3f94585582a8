"""A sharded index from Python: its answers are the same collection's built as one index (the same
documents and score bits, AND, OR and and-or, k 10 and 1000), on CACM and on a random collection with
ties across shards, a term in the last shard only and shards smaller than k; and searchers over some of
its shards (`searcher(shards=[...])`) give answers whose merge (`warpsearch.shards`) is the whole
index's, as `warpsearch.ray`'s shard deployments do."""

import json
import math
import random

import pytest
import warpsearch
from conftest import shared_data

np = pytest.importorskip("numpy", reason="skipped: the shards' merge needs numpy")
shards_merge = pytest.importorskip("warpsearch.shards")

# Queries with unknown terms or none (the empty one): the engine's notes on them are not tested here.
pytestmark = [
    pytest.mark.filterwarnings("ignore:.*terms the index does not have"),
    pytest.mark.filterwarnings("ignore:.*have no searchable terms"),
]

MODES = ["and", "or", "and-or"]
SHARDS = 4


def random_docs(n=2000, seed=11):
    """Common and rare terms; `early` in the first fifth only (later shards lack it), `solo` in the last
    document only (the other shards match nothing), and every ninth document a copy of the text of one
    300 documents before, often in another shard (ties across shards)."""
    rng = random.Random(seed)
    densities = [0.9, 0.5, 0.2, 0.05, 0.01, 0.003, 0.3, 0.1]
    texts = []
    for d in range(n):
        if d % 9 == 8 and d >= 300:
            text = texts[d - 300]
        else:
            words = []
            for j, p in enumerate(densities):
                if rng.random() < p:
                    words += [f"t{j}"] * rng.choice([1, 1, 1, 2, 2, 3, 7])
            if d < n // 5 and rng.random() < 0.3:
                words.append("early")
            if d == n - 1:
                words.append("solo")
            text = " ".join(words + ["filler"] * (d % 4))
        texts.append(text)
    return [{"id": f"d{d}", "contents": t} for d, t in enumerate(texts)]


def random_queries(seed=5, n=60):
    rng = random.Random(seed)
    pick = lambda: rng.choice(["early", "solo", "nowhere"] + [f"t{j}" for j in range(8)] * 3)  # noqa: E731
    texts = [" ".join(pick() for _ in range(rng.randint(1, 4))) for _ in range(n)]
    return texts + ["solo", "early", "early t5", "t0 t0 t1", "solo t0", "nowhere", "filler", "t4 t5", ""]


@pytest.fixture(scope="module")
def random_pair(tmp_path_factory):
    """The random collection as one index and as 4 shards (about 500 documents each: fewer than k)."""
    dir = tmp_path_factory.mktemp("random")
    docs = random_docs()
    one = warpsearch.Index.build(docs, output=dir / "one", analyzer="whitespace")
    sharded = warpsearch.Index.build(docs, output=dir / "four", analyzer="whitespace", shards=SHARDS)
    return one, sharded, random_queries()


@pytest.fixture(scope="module")
def cacm_pair(cacm, tmp_path_factory):
    """CACM as one index and as 4 shards, with its topics and the first TREC 2005 efficiency queries."""
    dir = tmp_path_factory.mktemp("cacm-shards")
    one = warpsearch.Index.build(cacm / "docs.jsonl", output=dir / "one")
    sharded = warpsearch.Index.build(cacm / "docs.jsonl", output=dir / "four", shards=SHARDS)
    topics = [t for _, t in warpsearch.read_queries(cacm / "topics.tsv")]
    trec = [t for _, t in warpsearch.read_queries(shared_data("queries/trec05-efficiency.txt"))[:500]]
    return one, sharded, topics + trec


@pytest.fixture(params=["random", "cacm"])
def pair(request):
    return request.getfixturevalue(f"{request.param}_pair")


def same_arrays(a, b):
    """Equal docs and equal score bits (NaN padding equal to NaN padding)."""
    return np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1], equal_nan=True)


def test_a_sharded_index_says_so(random_pair):
    one, sharded, _ = random_pair
    assert sharded.shards == SHARDS and one.shards is None
    assert (sharded.num_docs, sharded.num_terms, sharded.num_postings) == (
        one.num_docs,
        one.num_terms,
        one.num_postings,
    )


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("k", [10, 1000])
def test_sharded_answers_equal_one_index(pair, mode, k):
    one, sharded, texts = pair
    a, b = one.searcher("cpu", threads=2), sharded.searcher("cpu", threads=2)
    lists = a.search_batch(texts, k=k, mode=mode)
    assert sharded.searcher().search_batch(texts, k=k, mode=mode) == lists  # auto: the CPU, saying so
    assert b.search_batch(texts, k=k, mode=mode) == lists
    assert any(h for h in lists) and (k == 10 or any(0 < len(h) < k for h in lists)), "hits, and rows short of k"
    assert same_arrays(b.search_batch(texts, k=k, mode=mode, as_arrays=True),
                       a.search_batch(texts, k=k, mode=mode, as_arrays=True))
    for text in texts[:20]:
        assert b.search(text, k=k, mode=mode) == a.search(text, k=k, mode=mode)


def shard_of(sharded):
    """Each matching document's shard, from every shard's OR answer over every term (a shard of the
    random collection holds fewer than 1000 documents, so its answer holds every one that matches)."""
    every = " ".join([f"t{j}" for j in range(8)] + ["early", "solo", "filler"])
    where = {}
    for i in range(sharded.shards):
        for doc in sharded.searcher("cpu", shards=[i], threads=1).search_batch([every], k=1000, as_arrays=True)[0][0]:
            where[int(doc)] = i
    return where


@pytest.mark.parametrize("mode", ["and", "or"])
@pytest.mark.parametrize("k", [10, 1000])
def test_per_shard_answers_merge_into_the_whole(pair, mode, k):
    one, sharded, texts = pair
    whole = one.searcher("cpu", threads=2).search_batch(texts, k=k, mode=mode, as_arrays=True)
    alone = [sharded.searcher("cpu", shards=[i], threads=1) for i in range(SHARDS)]
    parts = [s.search_batch(texts, k=k, mode=mode, as_arrays=True) for s in alone]
    assert same_arrays(shards_merge.merge(parts, k), whole)
    # Two searchers of two shards each, and one of them named out of order.
    groups = [sharded.searcher("cpu", shards=[3, 0], threads=1), sharded.searcher("cpu", shards=[1, 2], threads=1)]
    assert same_arrays(shards_merge.search(groups, texts, k, mode), whole)
    # Each shard's hits are collection document numbers and scores of the whole index.
    named = one.doc_ids(parts[1][0][parts[1][0] >= 0].tolist())
    assert named == sharded.doc_ids(parts[1][0][parts[1][0] >= 0].tolist())


def test_the_random_collection_has_the_hard_cases(random_pair):
    """Shards with no match, k above a shard's matches, and ties that cross shards, all in the merge."""
    one, sharded, texts = random_pair
    k = 1000
    solo = [sharded.searcher("cpu", shards=[i], threads=1).search("solo", k=k) for i in range(SHARDS)]
    assert [len(h) for h in solo] == [0, 0, 0, 1]
    docs, scores = one.searcher("cpu").search_batch(texts, k=k, mode="or", as_arrays=True)
    part = sharded.searcher("cpu", shards=[0], threads=1).search_batch(["t0"], k=k, as_arrays=True)
    assert 0 < (part[0] >= 0).sum() < k, "a shard with fewer matches than k"
    where = shard_of(sharded)
    crossing = 0
    for d, s in zip(docs, scores):
        hit = d >= 0
        for score in np.unique(s[hit]):
            same = hit & (s == score)
            crossing += len({where[int(x)] for x in d[same]}) > 1
            # Within a tie, the smaller number first.
            assert np.all(np.diff(d[same]) > 0)
    assert crossing > 0, "ties whose documents are in different shards"


def test_and_or_in_two_steps_equals_the_whole(pair):
    one, sharded, texts = pair
    for k in [10, 1000]:
        whole = one.searcher("cpu", threads=2).search_batch(texts, k=k, mode="and-or", as_arrays=True)
        alone = [sharded.searcher("cpu", shards=[i], threads=1) for i in range(SHARDS)]
        assert same_arrays(shards_merge.search(alone, texts, k, "and-or"), whole)


def test_merge_pads_and_carries_columns():
    docs = [np.array([[5, -1]]), np.array([[2, 9]])]
    scores = [np.array([[1.5, np.nan]], dtype=np.float32), np.array([[1.5, 3.0]], dtype=np.float32)]
    ids = [np.array([["e", None]], dtype=object), np.array([["b", "i"]], dtype=object)]
    d, s, i = shards_merge.merge(list(zip(docs, scores, ids)), 5)
    assert d.tolist() == [[9, 2, 5, -1, -1]]
    assert s.tolist()[0][:3] == [3.0, 1.5, 1.5] and all(math.isnan(x) for x in s.tolist()[0][3:])
    assert i.tolist() == [["i", "b", "e", None, None]]


def test_unknown_shards_are_refused(random_pair):
    one, sharded, _ = random_pair
    with pytest.raises(ValueError, match=r"shards \[4\]: .* has shards 0 to 3, each named at most once"):
        sharded.searcher("cpu", shards=[4])
    with pytest.raises(ValueError, match=r"shards \[1, 1\]: .* has shards 0 to 3"):
        sharded.searcher("cpu", shards=[1, 1])
    with pytest.raises(ValueError, match="shards is empty"):
        sharded.searcher("cpu", shards=[])
    with pytest.raises(ValueError, match="shards applies to a sharded index; .* is one index"):
        one.searcher("cpu", shards=[0])
    with pytest.raises(OverflowError):
        sharded.searcher("cpu", shards=[-1])


def test_a_sharded_index_built_part_by_part_answers_as_one(random_pair, tmp_path):
    """The head (`part="head"`), then each shard on its own, the last first (as other processes or hosts
    would, `warpsearch.ray.build`): the index answers as the one built whole; it does not open before
    its last shard is built, and a part without shards=N is refused."""
    one, _, texts = random_pair
    source = tmp_path / "docs.jsonl"
    source.write_text("".join(json.dumps(d) + "\n" for d in random_docs()))
    out = tmp_path / "parts"
    assert warpsearch.Index.build(source, output=out, analyzer="whitespace", shards=SHARDS, part="head") is None
    for i in reversed(range(SHARDS)):
        with pytest.raises(ValueError, match="is not built yet"):
            warpsearch.Index.open(out)
        assert warpsearch.Index.build(source, output=out, analyzer="whitespace", shards=SHARDS, part=i) is None
    parts = warpsearch.Index.open(out)
    assert parts.shards == SHARDS
    for mode in MODES:
        want = one.searcher("cpu", threads=2).search_batch(texts, k=1000, mode=mode)
        assert parts.searcher("cpu", threads=2).search_batch(texts, k=1000, mode=mode) == want
    with pytest.raises(ValueError, match="needs shards=N"):
        warpsearch.Index.build(source, output=tmp_path / "x", part="head")
    with pytest.raises(ValueError, match="not a part"):
        warpsearch.Index.build(source, output=tmp_path / "x", shards=2, part="tail")
