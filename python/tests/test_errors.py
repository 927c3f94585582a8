"""Bad input raises a Python exception of the right class carrying the engine's message: unknown mode,
backend, ranking or algorithm, k out of range, a missing or damaged index, a bad collection line, an
existing output, options the index cannot serve, an index file changed under an open searcher."""

import pytest
import warpsearch


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """A three-document index built by Python (no shared data needed)."""
    dir = tmp_path_factory.mktemp("small")
    docs = dir / "docs.jsonl"
    docs.write_text(
        '{"id": "a", "contents": "black bear in the woods"}\n'
        '{"id": "b", "contents": "a brown bear and a black cat"}\n'
        '{"id": "c", "contents": "cats and dogs"}\n'
    )
    return warpsearch.Index.build(input=docs, output=dir / "idx")


def test_small_index_answers(small):
    s = small.searcher("cpu")
    assert [d for d, _ in s.search("black bear", mode="and")] == ["a", "b"]
    assert [d for d, _ in s.search("cat", k=10)] == ["c", "b"]
    assert s.search("the and of") == []  # only stopwords: nothing
    assert s.search_batch([]) == []


@pytest.mark.parametrize("mode", ["AND", "xor", ""])
def test_unknown_mode(small, mode):
    s = small.searcher("cpu")
    with pytest.raises(ValueError, match=f"unknown mode '{mode}': expected and, or or and-or"):
        s.search("bear", mode=mode)
    with pytest.raises(ValueError, match="unknown mode"):
        s.search_batch(["bear"], mode=mode)


@pytest.mark.parametrize("k", [0, -1, warpsearch.MAX_K + 1])
def test_k_out_of_range(small, k):
    s = small.searcher("cpu")
    with pytest.raises(ValueError, match=rf"k = {k} is out of range: use 1 to {warpsearch.MAX_K}"):
        s.search("bear", k=k)
    with pytest.raises(ValueError, match="out of range"):
        s.search_batch(["bear"], k=k)


def test_k_must_be_an_int(small):
    with pytest.raises(TypeError):
        small.searcher("cpu").search("bear", k="10")


def test_texts_must_be_a_list_of_str(small):
    s = small.searcher("cpu")
    with pytest.raises(TypeError):
        s.search_batch("bear")
    with pytest.raises(TypeError):
        s.search_batch(["bear", 3])


def test_missing_index(tmp_path):
    with pytest.raises(FileNotFoundError, match="is not a warpsearch index"):
        warpsearch.Index.open(tmp_path / "nowhere")


def test_directory_that_is_not_an_index(tmp_path):
    with pytest.raises(ValueError, match="is not a warpsearch index"):
        warpsearch.Index.open(tmp_path)


def test_damaged_index(small, tmp_path):
    import shutil

    copy = tmp_path / "idx"
    shutil.copytree(small.path, copy)
    data = bytearray((copy / "postings.bin").read_bytes())
    data[40] ^= 0xFF
    # Index files are read-only: replace the file (as an editor would), never write into it.
    (copy / "postings.bin").unlink()
    (copy / "postings.bin").write_bytes(bytes(data))
    with pytest.raises(ValueError, match="postings.bin"):
        warpsearch.Index.open(copy)


def test_an_index_changed_on_disk_under_a_searcher_is_an_error(small, tmp_path):
    """A postings file rewritten in place under an open index gave wrong hits (or SIGBUS, truncated).
    Now the call that may have read it raises, naming the file."""
    import os
    import shutil
    import time

    copy = tmp_path / "idx"
    shutil.copytree(small.path, copy)
    s = warpsearch.Index.open(copy).searcher("cpu")
    assert [d for d, _ in s.search("black bear", mode="and")] == ["a", "b"]
    # Past the file system's timestamp granularity, so that the write shows in the modification time.
    time.sleep(0.05)
    postings = copy / "postings.bin"
    same = postings.read_bytes()
    os.chmod(postings, 0o644)
    with open(postings, "r+b") as f:
        f.write(same)
    with pytest.raises(ValueError, match="postings.bin.*changed on disk"):
        s.search("black bear", mode="and")
    with pytest.raises(ValueError, match="changed on disk"):
        s.search_batch(["black bear", "cat"])


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"backend": "tpu"}, "unknown backend 'tpu': expected auto, cpu, gpu or hybrid"),
        ({"ranking": "tfidf"}, "unknown ranking 'tfidf': expected bm25 or bm25-static"),
        ({"algorithm": "wand"}, "unknown algorithm 'wand'"),
        ({"ranking": "bm25-static"}, "static"),
        ({"k1": -1.0}, "BM25 needs"),
        ({"max_k": 0}, "out of range"),
        # The GPU list cache's arguments, checked before a GPU is looked for (with the CLI's rules).
        ({"gpu_cache": "lru", "gpu_memory": 1 << 30}, "gpu_cache 'lru' is not a policy"),
        ({"gpu_cache": "vfb"}, "gpu_cache needs gpu_memory"),
        ({"gpu_cache": "vfb", "gpu_memory": 1 << 30}, "gpu_cache vfb needs a training log: gpu_cache_train"),
        ({"gpu_cache_train": ["bear"]}, "gpu_cache_train needs gpu_cache"),
        (
            {"gpu_cache": "dynamic", "gpu_memory": 1 << 20, "gpu_cache_buffer": 1 << 20},
            r"gpu_cache_buffer \(1048576 bytes\) must be below gpu_memory",
        ),
        ({"gpu_cache": "dynamic", "gpu_memory": 1 << 30, "gpu_cache_ratio": 0.0}, "gpu_cache_ratio must be above 0"),
        ({"gpu_cache": "dynamic", "gpu_memory": 1 << 30, "gpu_cache_complete": "gpu"}, "gpu_cache_complete 'gpu'"),
        ({"gpu_cache": "dynamic", "gpu_memory": 1 << 30, "gpu_cache_mode": "xor"}, "unknown gpu_cache_mode 'xor'"),
        ({"gpu_cache": "dynamic", "gpu_memory": 1 << 30, "gpu_cache_k": 0}, "gpu_cache_k = 0 is out of range"),
    ],
)
def test_bad_searcher_options(small, kwargs, message):
    with pytest.raises(ValueError, match=message):
        small.searcher(**kwargs)


def test_algorithm_that_cannot_run_the_mode(small):
    s = small.searcher("cpu", algorithm="daat")
    assert s.search("bear", mode="and")
    with pytest.raises(ValueError, match="daat evaluates AND queries"):
        s.search("bear", mode="or")


def test_gpu_backend_without_a_gpu(small):
    try:
        s = small.searcher("gpu")
    except RuntimeError as e:
        assert "--backend gpu" in str(e)
    else:  # a machine with a usable GPU
        assert s.backend == "gpu"


def test_bad_build_input(tmp_path):
    docs = tmp_path / "docs.jsonl"
    docs.write_text('{"id": "a", "contents": "fine"}\n{"id": "b", "contents": \n')
    with pytest.raises(ValueError, match=r"docs.jsonl:2: "):
        warpsearch.Index.build(input=docs, output=tmp_path / "idx")
    assert not (tmp_path / "idx").exists()
    with pytest.warns(UserWarning, match="skipped 1 bad lines"):
        index = warpsearch.Index.build(input=docs, output=tmp_path / "idx", skip_bad=True)
    assert index.num_docs == 1


def test_build_refuses_an_existing_output_without_force(small, tmp_path):
    docs = tmp_path / "docs.jsonl"
    docs.write_text('{"id": "x", "contents": "zebra"}\n')
    with pytest.raises(ValueError, match="already exists"):
        warpsearch.Index.build(input=docs, output=small.path)
    replaced = warpsearch.Index.build(input=docs, output=tmp_path / "new")
    assert replaced.num_docs == 1
    again = warpsearch.Index.build(input=docs, output=tmp_path / "new", force=True)
    assert again.num_docs == 1


@pytest.mark.parametrize(
    "kwargs, exc, message",
    [
        ({"codec": "zip"}, ValueError, "unknown codec 'zip'"),
        ({"analyzer": "french"}, ValueError, "unknown analyzer 'french'"),
        ({"stemmer": "lovins"}, ValueError, "unknown stemmer 'lovins'"),
        ({"k1": 0.0}, ValueError, "BM25 needs k1 > 0"),
        ({"b": 2.0}, ValueError, "BM25 needs k1 > 0"),
        ({"doc_order": "random"}, ValueError, "unknown doc_order 'random'"),
        ({"doc_order": "global-score", "alpha": 1.5}, ValueError, r"must lie in \[0, 1\]"),
        ({"build_on": "tpu"}, ValueError, "unknown build target 'tpu': expected cpu, gpu or auto"),
        ({"gpu_memory_mb": 512}, ValueError, "gpu_memory_mb bounds the GPU build"),
    ],
)
def test_bad_build_options(tmp_path, kwargs, exc, message):
    docs = tmp_path / "docs.jsonl"
    docs.write_text('{"id": "a", "contents": "bear"}\n')
    with pytest.raises(exc, match=message):
        warpsearch.Index.build(input=docs, output=tmp_path / "idx", **kwargs)


def test_build_needs_one_input(tmp_path):
    with pytest.raises(ValueError, match="give exactly one of input"):
        warpsearch.Index.build(output=tmp_path / "idx")
    with pytest.raises(TypeError):
        warpsearch.Index.build(tmp_path / "docs.jsonl")  # output is required
    with pytest.raises(FileNotFoundError):
        warpsearch.Index.build(input=tmp_path / "absent.jsonl", output=tmp_path / "idx")


def test_qids_must_match_the_queries(small):
    with pytest.raises(ValueError, match="qids has 1 entries for 2 queries"):
        small.searcher("cpu").search_batch(["a", "b"], qids=["1"], as_frame=True)


def test_read_queries_of_a_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError):
        warpsearch.read_queries(tmp_path / "absent.tsv")
