"""warpsearch: exact top-k BM25 search over a compressed inverted index, on CPUs and GPUs."""

import os
import pathlib
from typing import Any, Dict, Iterable, List, Literal, Mapping, Optional, Sequence, Tuple, Union, overload

__version__: str
MAX_K: int

class NoSearchableTermsWarning(UserWarning):
    """Queries without a searchable term (empty, or only stopwords or punctuation): they find nothing."""

class UnknownTermsWarning(UserWarning):
    """Queries with terms the index does not have, which are ignored (one warning a call)."""
"""Largest k a query may ask for."""

_Path = Union[str, "os.PathLike[str]"]
_Mode = Literal["and", "or", "and-or"]

class Index:
    """An open index: its statistics, its analyzer, and searchers over it."""

    @staticmethod
    def open(path: _Path) -> "Index":
        """Opens the index directory `path` (FileNotFoundError if it holds nothing)."""

    @staticmethod
    def build(
        input: Union[_Path, Iterable[Union[Mapping[str, Any], str]], None] = None,
        *,
        output: _Path,
        ciff: Optional[_Path] = None,
        force: bool = False,
        codec: Literal["pfor", "ef", "rice", "simdbp"] = "simdbp",
        analyzer: Optional[Literal["english", "whitespace"]] = None,
        stemmer: Literal["porter", "porter2", "none"] = "porter",
        keep_stopwords: bool = False,
        title: bool = False,
        k1: float = 0.9,
        b: float = 0.4,
        static_scores: Optional[_Path] = None,
        doc_order: Literal["input", "global-score"] = "input",
        alpha: float = 0.5,
        memory_mb: int = 2048,
        skip_bad: bool = False,
        progress: bool = False,
        id_field: Optional[str] = None,
        fields: Optional[Sequence[str]] = None,
        store: bool = False,
        shards: Optional[int] = None,
        part: Union[Literal["head", "all"], int, None] = None,
        build_on: Literal["cpu", "gpu", "auto"] = "cpu",
        gpu_memory_mb: Optional[int] = None,
    ) -> Optional["Index"]:
        """Builds an index at `output` (as `warpsearch index`) from a collection file or directory, any
        iterable of document dicts (streamed), or a CIFF file, and opens it. With `shards=N`, `part`
        builds one part of the sharded index (`"head"` first, then each shard `i`, by other processes or
        hosts, from the same input and options) and returns None. `build_on="gpu"` inverts the postings
        on the first GPU (within `gpu_memory_mb` of it, in passes where they need more), the same index
        byte for byte; without a usable GPU the CPU does, with a warning saying why."""

    def searcher(
        self,
        backend: Literal["auto", "cpu", "gpu", "hybrid"] = "auto",
        *,
        ranking: Literal["bm25", "bm25-static"] = "bm25",
        alpha: Optional[float] = None,
        k1: Optional[float] = None,
        b: Optional[float] = None,
        algorithm: Literal["auto", "exhaustive", "daat", "maxscore", "bmw", "early"] = "auto",
        max_k: int = 1000,
        threads: Optional[int] = None,
        max_query_terms: int = 1024,
        shards: Optional[Sequence[int]] = None,
        gpus: str = "auto",
        gpu_feeders: int = 1,
    ) -> "Searcher":
        """A searcher over this index, with the engine options of `warpsearch search`; `shards`, of a
        sharded index, the shards it answers for (collection document numbers and scores); `gpus`, the
        GPUs to run on ("auto", a count, or device numbers "0,2"), as `--gpus`; `gpu_feeders`, threads
        feeding each GPU, each with a copy of the index, as `--gpu-feeders`."""

    def analyze(self, text: str) -> List[str]:
        """The terms the index's analyzer makes of `text`."""

    def doc_id(self, number: int) -> Optional[str]:
        """The id of the document numbered `number` (0 to num_docs - 1); None for -1."""

    def doc(self, id: Union[str, int]) -> str:
        """The stored line of document `id` (its id, or its number); needs an index built with store=True."""

    def docs(self, ids: Iterable[Union[str, int]]) -> List[str]:
        """The stored lines of `ids`, in order."""

    @property
    def stores_docs(self) -> bool: ...

    def doc_ids(self, numbers: Sequence[int]) -> List[Optional[str]]:
        """The ids of the documents `numbers` names, in order; None for -1."""

    @property
    def path(self) -> "pathlib.Path": ...
    @property
    def num_docs(self) -> int: ...
    @property
    def num_terms(self) -> int: ...
    @property
    def num_postings(self) -> int: ...
    @property
    def shards(self) -> Optional[int]:
        """Number of shards of a sharded index; None for one index."""
    @property
    def avg_doc_len(self) -> float: ...
    @property
    def codec(self) -> str: ...
    @property
    def analyzer(self) -> str: ...
    @property
    def bm25(self) -> Tuple[float, float]: ...

class Searcher:
    """Answers queries on one index with fixed options."""

    def search(self, text: str, k: int = 10, mode: _Mode = "or") -> List[Tuple[str, float]]:
        """The top `k` documents for `text`, best first, as (docid, score)."""

    @overload
    def search_batch(
        self,
        texts: Iterable[str],
        k: int = 10,
        mode: _Mode = "or",
        *,
        qids: Optional[Iterable[Union[str, int]]] = None,
        as_frame: Literal[False] = False,
        as_arrays: Literal[False] = False,
    ) -> List[List[Tuple[str, float]]]: ...
    @overload
    def search_batch(
        self,
        texts: Iterable[str],
        k: int = 10,
        mode: _Mode = "or",
        *,
        qids: Optional[Iterable[Union[str, int]]] = None,
        as_frame: Literal[True],
    ) -> "pandas.DataFrame":  # type: ignore[name-defined]  # noqa: F821
        ...
    @overload
    def search_batch(
        self,
        texts: Iterable[str],
        k: int = 10,
        mode: _Mode = "or",
        *,
        as_arrays: Literal[True],
    ) -> Tuple["numpy.ndarray", "numpy.ndarray"]:  # type: ignore[name-defined]  # noqa: F821
        """The top `k` of every query, with the GIL released while the engine runs; with
        `as_frame=True` a DataFrame with columns qid, docid (pandas categoricals of str), rank (int64)
        and score (float32); with `as_arrays=True` `(docs, scores)`, arrays of len(texts) rows and k
        columns: document numbers (int64, -1 past the last hit; `Index.doc_ids` names them) and scores
        (float32, NaN past the last hit)."""

    @property
    def backend(self) -> Literal["cpu", "gpu", "hybrid"]: ...
    @property
    def choice(self) -> Optional[str]: ...

def read_queries(path: _Path) -> List[Tuple[str, str]]:
    """A query file as `warpsearch search --queries` reads it: (qid, text) pairs."""

def evaluate(
    qrels: Union[_Path, Mapping[str, Mapping[str, int]]],
    run: Union[_Path, Mapping[str, Mapping[str, float]]],
    measures: Optional[Sequence[str]] = None,
    *,
    per_query: bool = False,
    all_queries: bool = False,
) -> Union[Dict[str, float], Tuple[Dict[str, float], Dict[str, Dict[str, float]]]]:
    """A run scored against qrels with trec_eval's measures, as `warpsearch evaluate -m` scores it."""
