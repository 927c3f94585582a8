"""Python returns exactly the CLI's results: for the same index, queries and options, the TREC run that
Python's hits make is byte for byte the one `warpsearch search` prints (AND, OR and and-or, k 10 and
1000, CACM's topics and 2,000 TREC 2005 web queries), JSON scores are the same f32 bits, and
`Index.build` writes the same index files as `warpsearch index`."""

import contextlib
import json
import re
import warnings
import struct

import pytest
import warpsearch


def trec_run(queries, results, tag="warpsearch"):
    """Python's hits as the TREC run `warpsearch search` writes (`{:.6}` of the f32 score: Python's
    `%.6f` of the same value, held exactly in a float, rounds the same)."""
    lines = []
    for (qid, _), hits in zip(queries, results):
        for rank, (docid, score) in enumerate(hits, 1):
            lines.append(f"{qid} Q0 {docid} {rank} {score:.6f} {tag}\n")
    return "".join(lines).encode()


def f32(x):
    """`x` rounded to f32 (a shortest-form f32 printed by the CLI parses back to its exact value)."""
    return struct.unpack("<f", struct.pack("<f", x))[0]


@pytest.mark.parametrize("queries", ["topics", "trec05"])
@pytest.mark.parametrize("k", [10, 1000])
@pytest.mark.parametrize("mode", ["and", "or", "and-or"])
def test_search_batch_equals_cli_byte_for_byte(cli, cacm_cli_index, query_files, queries, k, mode):
    path = query_files[queries]
    expected = cli(
        "search", "--index", cacm_cli_index, "--queries", path, "--mode", mode, "--k", k
    ).stdout
    qs = warpsearch.read_queries(path)
    searcher = warpsearch.Index.open(cacm_cli_index).searcher()
    got = trec_run(qs, searcher.search_batch([t for _, t in qs], k=k, mode=mode))
    assert len(expected) > 0
    assert got == expected


@pytest.mark.parametrize("backend", ["cpu", "hybrid"])
def test_json_scores_are_the_cli_f32_bits(cli, cacm_cli_index, query_files, backend):
    path = query_files["topics"]
    out = cli("search", "--index", cacm_cli_index, "--queries", path, "--k", 1000, "--format", "json",
              "--backend", backend).stdout
    expected = [json.loads(line) for line in out.decode().splitlines()]
    qs = warpsearch.read_queries(path)
    results = warpsearch.Index.open(cacm_cli_index).searcher(backend).search_batch(
        [t for _, t in qs], k=1000
    )
    assert [e["id"] for e in expected] == [q for q, _ in qs]
    for e, hits in zip(expected, results):
        assert [h["docid"] for h in e["hits"]] == [d for d, _ in hits]
        assert [h["rank"] for h in e["hits"]] == list(range(1, len(hits) + 1))
        # The CLI prints the f32 in its shortest form; Python holds it exactly as a float.
        assert [f32(h["score"]) for h in e["hits"]] == [s for _, s in hits]
        assert all(f32(s) == s for _, s in hits)


@pytest.mark.parametrize("mode", ["and", "or"])
def test_batches_answered_in_chunks_equal_cli(cli, cacm_cli_index, query_files, mode):
    """10,000 queries: the CPU engine answers them 4,096 at a time while Python makes the objects of
    the chunk before; the run is still the CLI's, and the DataFrame holds the same rows."""
    path = query_files["trec05-10k"]
    expected = cli("search", "--index", cacm_cli_index, "--queries", path, "--mode", mode, "--k", 100).stdout
    qs = warpsearch.read_queries(path)
    texts = [t for _, t in qs]
    searcher = warpsearch.Index.open(cacm_cli_index).searcher("cpu")
    results = searcher.search_batch(texts, k=100, mode=mode)
    assert trec_run(qs, results) == expected
    pandas = pytest.importorskip("pandas")
    frame = searcher.search_batch(texts, k=100, mode=mode, qids=[q for q, _ in qs], as_frame=True)
    rows = [(q, d, r, s) for (q, _), hits in zip(qs, results) for r, (d, s) in enumerate(hits, 1)]
    assert isinstance(frame, pandas.DataFrame)
    assert [tuple(r) for r in frame.itertuples(index=False)] == rows


def test_search_equals_search_batch_and_cli_query(cli, cacm_cli_index, query_files):
    qs = warpsearch.read_queries(query_files["topics"])
    searcher = warpsearch.Index.open(cacm_cli_index).searcher("cpu")
    texts = [t for _, t in qs]
    batch = searcher.search_batch(texts, k=20, mode="or")
    assert [searcher.search(t, k=20, mode="or") for t in texts] == batch
    # One query from the command line (qid 1) is the same query as Python's `search`.
    out = cli("search", "--index", cacm_cli_index, "--query", texts[0], "--k", 20).stdout
    assert trec_run([("1", texts[0])], [searcher.search(texts[0], k=20)]) == out


def test_options_equal_the_cli_options(cli, cacm_cli_index, query_files):
    """k1/b other than the index's, an explicit algorithm and one thread give the CLI's results."""
    path = query_files["trec05"]
    qs = warpsearch.read_queries(path)
    texts = [t for _, t in qs]
    index = warpsearch.Index.open(cacm_cli_index)
    for args, kwargs in [
        (["--k1", "1.2", "--b", "0.75"], {"k1": 1.2, "b": 0.75}),
        (["--algorithm", "bmw"], {"algorithm": "bmw"}),
        (["--algorithm", "exhaustive", "--threads", "1"], {"algorithm": "exhaustive", "threads": 1}),
    ]:
        expected = cli("search", "--index", cacm_cli_index, "--queries", path, "--k", 100, *args).stdout
        with pytest.warns(UserWarning, match="differ from the index") if "k1" in kwargs else contextlib.nullcontext():
            searcher = index.searcher("cpu", **kwargs)
        assert trec_run(qs, searcher.search_batch(texts, k=100)) == expected, args


def without_build_id(data):
    """An index file's bytes with its build identities zeroed in place (`testdata::without_build_id`):
    a binary file's header identity and footer checksum, meta.json's build_id, set and checksum; two
    builds of the same input compare equal."""
    data = bytearray(data)
    n = len(data)
    if data.startswith(b"WARPSRCH"):
        if n >= 32 + 24:
            data[20:28] = bytes(8)
            data[n - 16 : n - 12] = bytes(4)
        return bytes(data)
    zero = lambda m: m.group(1) + b"0" * len(m.group(2))
    return re.sub(rb'("(?:build_id|set|checksum)": ")([0-9a-f]+)', zero, bytes(data))


def assert_same_index(a, b):
    """The index directories `a` and `b` hold the same files, byte for byte, build identities aside."""
    names = sorted(p.name for p in a.iterdir())
    assert sorted(p.name for p in b.iterdir()) == names
    for name in names:
        assert without_build_id((b / name).read_bytes()) == without_build_id((a / name).read_bytes()), name


@pytest.mark.parametrize(
    "args, kwargs",
    [
        ([], {}),
        (
            ["--codec", "ef", "--title", "--stemmer", "porter2", "--keep-stopwords", "--k1", "1.2", "--b", "0.75"],
            {"codec": "ef", "title": True, "stemmer": "porter2", "keep_stopwords": True, "k1": 1.2, "b": 0.75},
        ),
        (["--codec", "rice", "--analyzer", "whitespace"], {"codec": "rice", "analyzer": "whitespace"}),
    ],
)
def test_build_writes_the_cli_index(cli, cacm, tmp_path, args, kwargs):
    cli("index", "--input", cacm / "docs.jsonl", "-o", tmp_path / "cli", *args)
    index = warpsearch.Index.build(input=cacm / "docs.jsonl", output=tmp_path / "py", **kwargs)
    assert index.num_docs == 3204
    assert_same_index(tmp_path / "cli", tmp_path / "py")


def test_build_on_the_gpu_writes_the_cpu_index(cli, cacm, tmp_path):
    cli("index", "--input", cacm / "docs.jsonl", "-o", tmp_path / "cli")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warpsearch.Index.build(input=cacm / "docs.jsonl", output=tmp_path / "gpu", build_on="gpu")
    notes = [str(w.message) for w in caught]
    fell_back = [n for n in notes if "inverted on the CPU" in n]
    if any("no GPU to build on" in n for n in notes):
        print("no GPU here: the CPU inverted, as the warning says")
    else:
        # A GPU inverted CACM's postings, in one pass: nothing stood in for it.
        assert not fell_back, notes
    assert_same_index(tmp_path / "cli", tmp_path / "gpu")


def test_analyze_equals_cli_analyze(cli, cacm_cli_index, query_files):
    path = query_files["topics"]
    out = cli("analyze", "--index", cacm_cli_index, "--queries", path).stdout.decode()
    index = warpsearch.Index.open(cacm_cli_index)
    got = "".join(f"{q}\t{' '.join(index.analyze(t))}\n" for q, t in warpsearch.read_queries(path))
    assert got == out
