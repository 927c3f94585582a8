"""What a researcher expects of the package: indexes built from any iterable of dicts (streamed; an
exception of the iterable raised as it was, nothing written), stored documents, progress through tqdm,
warnings for empty and unknown-term queries, iterables of queries, errors in Python's terms, and
`evaluate` with trec_eval's measures equal to `warpsearch evaluate` (and to ir_measures where it is
installed)."""

import json
import warnings

import pytest
import warpsearch

DOCS = [
    {"docno": "a", "text": "black bear in the woods"},
    {"docno": "b", "text": "a brown bear and a black cat"},
    {"docno": "c", "text": "cats and dogs"},
]


def test_build_from_a_list_a_generator_and_lines(tmp_path):
    from_list = warpsearch.Index.build(DOCS, output=tmp_path / "list", store=True)
    from_gen = warpsearch.Index.build((d for d in DOCS), output=tmp_path / "gen")
    lines = [f"{d['docno']}\t{d['text']}" for d in DOCS]
    from_tsv = warpsearch.Index.build(iter(lines), output=tmp_path / "tsv", store=True)
    path = tmp_path / "docs.jsonl"
    path.write_text("".join(json.dumps({"id": d["docno"], "contents": d["text"]}) + "\n" for d in DOCS))
    from_file = warpsearch.Index.build(path, output=tmp_path / "file")
    want = from_file.searcher("cpu").search_batch(["black bear", "cat"], k=10)
    for index in [from_list, from_gen, from_tsv]:
        assert index.num_docs == 3
        assert index.searcher("cpu").search_batch(["black bear", "cat"], k=10) == want
    # BEIR's fields, and fields named by the caller.
    beir = [{"_id": d["docno"], "title": "", "text": d["text"], "metadata": {}} for d in DOCS]
    index = warpsearch.Index.build(beir, output=tmp_path / "beir")
    assert index.searcher("cpu").search_batch(["black bear", "cat"], k=10) == want
    named = [{"key": d["docno"], "body": d["text"]} for d in DOCS]
    index = warpsearch.Index.build(named, output=tmp_path / "named", id_field="key", fields=["body"])
    assert index.searcher("cpu").search_batch(["black bear", "cat"], k=10) == want


def test_stored_documents_by_id_and_number(tmp_path):
    index = warpsearch.Index.build(DOCS, output=tmp_path / "idx", store=True)
    assert index.stores_docs
    assert json.loads(index.doc("b")) == DOCS[1]
    number = [index.doc_id(n) for n in range(3)].index("c")
    assert json.loads(index.doc(number)) == DOCS[2]
    assert [json.loads(t)["docno"] for t in index.docs(["c", "a", "c"])] == ["c", "a", "c"]
    with pytest.raises(KeyError, match="no document has the id 'zzz'"):
        index.doc("zzz")
    with pytest.raises(IndexError, match="out of range"):
        index.doc(3)
    assert index.doc_id(-1) is None
    plain = warpsearch.Index.build(DOCS, output=tmp_path / "plain")
    assert not plain.stores_docs
    with pytest.raises(ValueError, match=r"stores no documents: build it with Index.build\(..., store=True\)"):
        plain.doc("a")


def test_an_exception_of_the_iterable_is_raised_and_nothing_written(tmp_path):
    class Boom(Exception):
        pass

    def docs():
        yield DOCS[0]
        raise Boom("the source failed")

    with pytest.raises(Boom, match="the source failed"):
        warpsearch.Index.build(docs(), output=tmp_path / "idx")
    assert not (tmp_path / "idx").exists()
    with pytest.raises(TypeError, match=r"document 1 of the iterable is list: each document is a dict"):
        warpsearch.Index.build([DOCS[0], ["x"]], output=tmp_path / "idx")
    assert not (tmp_path / "idx").exists()
    with pytest.raises(ValueError, match=r"documents:2: .*\"text\""):
        warpsearch.Index.build([DOCS[0], {"docno": "x", "body": "y"}], output=tmp_path / "idx")
    with pytest.raises(TypeError, match="input must be a path, or an iterable of documents"):
        warpsearch.Index.build(3, output=tmp_path / "idx")


def test_errors_name_python_keywords_not_command_flags(tmp_path):
    warpsearch.Index.build(DOCS, output=tmp_path / "idx")
    with pytest.raises(ValueError, match="already exists") as e:
        warpsearch.Index.build(DOCS, output=tmp_path / "idx")
    assert "force=True" in str(e.value) and "--force" not in str(e.value)
    with pytest.raises(ValueError) as e:
        warpsearch.Index.build([DOCS[0], {"docno": "x"}], output=tmp_path / "bad")
    assert "skip_bad=True" in str(e.value) and "--skip-bad" not in str(e.value)


def test_progress_shows_through_tqdm(tmp_path, capsys):
    pytest.importorskip("tqdm", reason="skipped: tqdm is not installed (pip install tqdm)")
    warpsearch.Index.build((d for d in DOCS * 1), output=tmp_path / "idx", progress=True)
    err = capsys.readouterr().err
    assert "docs" in err, err


def test_queries_without_searchable_or_known_terms_warn(tmp_path):
    s = warpsearch.Index.build(DOCS, output=tmp_path / "idx").searcher("cpu")
    with pytest.warns(UserWarning, match=r"1 queries have no searchable terms .* texts\[1\] 'the and'"):
        s.search_batch(["bear", "the and", "bear"])
    with pytest.warns(UserWarning, match=r"2 queries contain terms the index does not have .* texts\[0\] 'zebra bear' \(zebra\)"):
        s.search_batch(["zebra bear", "bear", "okapi"])
    with pytest.warns(UserWarning, match="no searchable terms"):
        s.search("")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        s.search_batch(["bear", "black cat"])
    # Each kind is a class of its own: unknown terms, common in ad hoc retrieval, silenced alone.
    with pytest.warns(warpsearch.UnknownTermsWarning, match="2 queries contain terms"):
        s.search_batch(["zebra bear", "okapi"])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warnings.simplefilter("ignore", warpsearch.UnknownTermsWarning)
        s.search_batch(["zebra bear", "okapi"])
        with pytest.warns(warpsearch.NoSearchableTermsWarning):
            s.search_batch(["zebra", "the"])


def test_query_iterables_and_qids(tmp_path):
    s = warpsearch.Index.build(DOCS, output=tmp_path / "idx").searcher("cpu")
    want = s.search_batch(["bear", "cat"], k=2)
    assert s.search_batch((t for t in ["bear", "cat"]), k=2) == want
    assert s.search_batch(("bear", "cat"), k=2) == want
    with pytest.raises(TypeError, match=r"texts is one string: give a list"):
        s.search_batch("bear")
    with pytest.raises(TypeError, match=r"texts\[1\] is int, not a str"):
        s.search_batch(["bear", 3])
    with pytest.raises(ValueError, match=r"qids= names the rows of as_frame=True's table"):
        s.search_batch(["bear"], qids=["q1"])
    pd = pytest.importorskip("pandas", reason="skipped: pandas is not installed")
    frame = s.search_batch(pd.Series(["bear", "cat"]), k=2, qids=(q for q in [101, "x"]), as_frame=True)
    assert list(frame["qid"].astype(str).unique()) == ["101", "x"]


@pytest.fixture(scope="module")
def cacm_run(cli, cacm, tmp_path_factory):
    """A CLI run of the CACM topics (1,000 hits, its default) and `warpsearch evaluate`'s report of it."""
    dir = tmp_path_factory.mktemp("eval")
    cli("index", "--input", cacm / "docs.jsonl", "-o", dir / "idx")
    cli("search", "--index", dir / "idx", "--queries", cacm / "topics.tsv", "-o", dir / "run")
    measures = ["map", "ndcg_cut.10", "P.10", "recall.100", "recip_rank", "RR@10"]
    args = [a for m in measures for a in ("-m", m)]
    out = cli("evaluate", "--qrels", cacm / "qrels.txt", "--run", dir / "run", *args).stdout.decode()
    report = {line.split("\t")[0]: float(line.split("\t")[2]) for line in out.splitlines()}
    return dir, measures, report


def test_evaluate_equals_the_cli(cacm, cacm_run):
    dir, measures, report = cacm_run
    means = warpsearch.evaluate(cacm / "qrels.txt", dir / "run", measures)
    assert list(means) == ["map", "ndcg_cut_10", "P_10", "recall_100", "recip_rank", "RR@10"]
    for name, value in means.items():
        assert round(value, 4) == report[name], name
    # The same from dicts, and per query.
    qrels = {}
    for line in open(cacm / "qrels.txt"):
        q, _, d, r = line.split()
        qrels.setdefault(q, {})[d] = int(r)
    run = {}
    for line in open(dir / "run"):
        q, _, d, _, score, _ = line.split()
        run.setdefault(q, {})[d] = float(score)
    means2, each = warpsearch.evaluate(qrels, run, measures, per_query=True)
    assert means2 == means
    assert len(each) == 52 and set(each["1"]) == set(means)
    with pytest.raises(ValueError, match="unknown measure 'bpref'"):
        warpsearch.evaluate(qrels, run, ["bpref"])


def test_evaluate_equals_ir_measures(cacm, cacm_run):
    ir_measures = pytest.importorskip("ir_measures", reason="skipped: ir_measures is not installed")
    dir, _, _ = cacm_run
    qrels = list(ir_measures.read_trec_qrels(str(cacm / "qrels.txt")))
    run = list(ir_measures.read_trec_run(str(dir / "run")))
    theirs = ir_measures.calc_aggregate(
        [ir_measures.AP, ir_measures.nDCG @ 10, ir_measures.P @ 10, ir_measures.R @ 100, ir_measures.RR @ 10],
        qrels,
        run,
    )
    ours = warpsearch.evaluate(cacm / "qrels.txt", dir / "run", ["AP", "nDCG@10", "P@10", "R@100", "RR@10"])
    names = {"AP": "map", "nDCG@10": "ndcg_cut_10", "P@10": "P_10", "R@100": "recall_100", "RR@10": "RR@10"}
    for measure, value in theirs.items():
        assert ours[names[str(measure)]] == pytest.approx(value, abs=1e-9), str(measure)
