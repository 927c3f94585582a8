"""What the Python package's tests share: the repository's `warpsearch` binary (the CLI whose results
Python must equal), ../shared/data (a skip where it is absent, a failure under
WARPSEARCH_REQUIRE_DATA=1, as .ci/run sets), and small indexes built both ways."""

import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def shared_data(rel):
    """`../shared/data/REL` (beside the repository); a skip where it is absent, a failure when
    WARPSEARCH_REQUIRE_DATA=1: where CI runs, a missing data set is a failure, not a skip."""
    path = REPO.parent / "shared" / "data" / rel
    if path.exists():
        return path
    if os.environ.get("WARPSEARCH_REQUIRE_DATA") == "1":
        pytest.fail(f"{path} is absent and WARPSEARCH_REQUIRE_DATA=1: this test must run here")
    pytest.skip(f"skipped: {path} is absent")


@pytest.fixture(scope="session")
def cli():
    """The `warpsearch` binary: $WARPSEARCH_BIN, else target/release/warpsearch of this repository
    (`cargo build --release`; `cargo test --release` builds it too)."""
    path = Path(os.environ.get("WARPSEARCH_BIN", REPO / "target" / "release" / "warpsearch"))
    if not path.is_file():
        pytest.fail(
            f"{path} is absent: build the CLI with `cargo build --release` (or set WARPSEARCH_BIN) "
            "so that Python's results can be compared with it"
        )

    def run(*args, check=True):
        out = subprocess.run([str(path), *map(str, args)], capture_output=True)
        if check and out.returncode != 0:
            raise AssertionError(f"warpsearch {' '.join(map(str, args))}: {out.stderr.decode()}")
        return out

    return run


@pytest.fixture(scope="session")
def cacm():
    """../shared/data/cacm: docs.jsonl, topics.tsv, qrels.txt."""
    return shared_data("cacm")


@pytest.fixture(scope="session")
def cacm_cli_index(cli, cacm, tmp_path_factory):
    """The CACM documents indexed by `warpsearch index` with its defaults."""
    out = tmp_path_factory.mktemp("cli") / "idx"
    cli("index", "--input", cacm / "docs.jsonl", "-o", out)
    return out


@pytest.fixture(scope="session")
def query_files(cacm, tmp_path_factory):
    """CACM's 64 topics (`qid<TAB>text`) and the first 2,000 TREC 2005 efficiency queries (one per line,
    qid = line number; many with terms CACM lacks, and a few with none)."""
    trec = shared_data("queries/trec05-efficiency.txt")
    dir = tmp_path_factory.mktemp("queries")
    files = {"topics": cacm / "topics.tsv"}
    for name, n in [("trec05", 2000), ("trec05-10k", 10000)]:
        files[name] = dir / f"{name}.txt"
        with open(trec, "rb") as f:
            files[name].write_bytes(b"".join(f.readline() for _ in range(n)))
    return files
