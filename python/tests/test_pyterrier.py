"""The PyTerrier integration: the retriever returns PyTerrier's result frame (qid, docno, score, rank
from 0, the topics' columns) with the CLI's hits, its MAP equals `warpsearch evaluate`'s, and, where
python-terrier is installed, `pt.Experiment` over it gives that MAP too."""

import pytest
import warpsearch

pd = pytest.importorskip("pandas", reason="skipped: pandas is not installed (the retriever returns frames)")
from warpsearch.pyterrier import HAVE_PYTERRIER, WarpsearchIndexer, WarpsearchRetriever  # noqa: E402


@pytest.fixture(scope="module")
def cacm_pt(cli, cacm, tmp_path_factory):
    """The CACM topics as a PyTerrier topics frame, qrels as its qrels frame, and the CLI's run and MAP."""
    dir = tmp_path_factory.mktemp("pt")
    cli("index", "--input", cacm / "docs.jsonl", "-o", dir / "idx")
    cli("search", "--index", dir / "idx", "--queries", cacm / "topics.tsv", "-o", dir / "run")
    out = cli("evaluate", "--qrels", cacm / "qrels.txt", "--run", dir / "run", "-m", "map").stdout.decode()
    cli_map = float([l for l in out.splitlines() if l.startswith("map\t")][0].split("\t")[2])
    topics = pd.DataFrame(warpsearch.read_queries(cacm / "topics.tsv"), columns=["qid", "query"])
    qrels = pd.read_csv(cacm / "qrels.txt", sep=r"\s+", names=["qid", "iter", "docno", "label"], dtype={"qid": str})
    return dir, topics, qrels, cli_map


def test_retriever_returns_the_cli_run_as_a_pyterrier_frame(cacm_pt):
    dir, topics, qrels, cli_map = cacm_pt
    result = WarpsearchRetriever(dir / "idx", k=1000, backend="cpu").transform(topics)
    assert list(result.columns)[:4] == ["qid", "docno", "score", "rank"] and "query" in result.columns
    first = result[result["qid"] == "1"]
    assert list(first["rank"][:3]) == [0, 1, 2]
    run = [line.split() for line in open(dir / "run")]
    assert len(result) == len(run)
    assert [(r[0], r[2]) for r in run] == list(zip(result["qid"], result["docno"]))
    means = warpsearch.evaluate(qrels, result, ["map"])
    assert round(means["map"], 4) == cli_map


def test_indexer_takes_docno_text_dicts(tmp_path):
    docs = [{"docno": "d1", "text": "black bear"}, {"docno": "d2", "text": "brown bear cubs"}]
    index = WarpsearchIndexer(tmp_path / "idx", store=True).index(iter(docs))
    topics = pd.DataFrame({"qid": ["q1"], "query": ["cubs"]})
    result = WarpsearchRetriever(index, text=True).transform(topics)
    assert list(result["docno"]) == ["d2"] and "brown bear cubs" in result["text"][0]
    with pytest.raises(ValueError, match="the topics frame lacks query"):
        WarpsearchRetriever(index).transform(pd.DataFrame({"qid": ["1"]}))


def test_pt_experiment_map_equals_warpsearch_evaluate(cacm_pt):
    if not HAVE_PYTERRIER:
        pytest.skip("skipped: python-terrier is not installed (pip install python-terrier)")
    import pyterrier as pt

    dir, topics, qrels, cli_map = cacm_pt
    retriever = WarpsearchRetriever(dir / "idx", k=1000, backend="cpu")
    assert isinstance(retriever, pt.Transformer)
    table = pt.Experiment([retriever], topics, qrels, eval_metrics=["map"])
    assert round(float(table["map"][0]), 4) == cli_map
