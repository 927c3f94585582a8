"""A searcher whose GPU holds only part of the index (`gpu_cache`) returns exactly the CPU's answers:
every policy, a budget of a quarter of the index and of one block's worth, AND, OR and and-or at k 10
and 1000, on CACM with 2,000 TREC 2005 queries. Needs a usable GPU: a skip (saying why) without one."""

import pytest
import warpsearch


def index_bytes(path):
    """What the GPU holds of the index at `path` (its postings and skip data)."""
    return sum((path / name).stat().st_size for name in ("postings.bin", "blocks.bin"))


@pytest.fixture(scope="module")
def gpu_case(cacm_cli_index, query_files):
    index = warpsearch.Index.open(cacm_cli_index)
    try:
        index.searcher("gpu")
    except RuntimeError as e:
        pytest.skip(f"skipped: no usable GPU ({e})")
    texts = [t for _, t in warpsearch.read_queries(query_files["trec05"])]
    return index, texts


@pytest.mark.parametrize("policy", ["vfb", "qtf", "qtfdf", "dynamic"])
@pytest.mark.parametrize("share", [0.25, 0.0])
def test_a_cached_gpu_searcher_equals_the_cpu(cacm_cli_index, gpu_case, policy, share):
    index, texts = gpu_case
    stage = 64 << 20
    # share 0: a cache of a few kilobytes, where nearly every query's blocks travel or the CPU completes.
    cache = max(int(index_bytes(cacm_cli_index) * share), 4096)
    searcher = index.searcher(
        "gpu", gpu_memory=cache + stage, gpu_cache=policy, gpu_cache_train=texts[:1000],
        gpu_cache_buffer=stage,
    )
    assert searcher.backend == "gpu"
    assert "list cache" in repr(searcher), repr(searcher)
    cpu = index.searcher("cpu")
    for mode in ["and", "or", "and-or"]:
        for k in [10, 1000]:
            # Twice: the dynamic policy may replan in between.
            for _ in range(2):
                assert searcher.search_batch(texts, k=k, mode=mode) == cpu.search_batch(texts, k=k, mode=mode)
