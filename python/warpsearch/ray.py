"""warpsearch on Ray: a sharded index served by many hosts, and large query sets answered by actors.

- `app(path, ...)`: a Ray Serve application of one deployment per shard (`shard-0`, `shard-1`, …, each
  with its replicas, CPUs and GPUs) and a root deployment (`root`) that sends every batch of queries to
  every shard and merges their answers exactly. Each shard's replicas answer for that shard only
  (`Index.searcher(shards=[i])`), with the collection's statistics, its document numbers and scores, so
  the merge (score descending, ties to the smaller document number: the engine's order) is the whole
  index's answer, bit for bit. `build_app(args)` makes it from a Serve config file's `args`.
- `Client(app)`: the root's fan-out and merge in the caller's process, over a running application's
  shard deployments: one hop fewer than through the root.
- `batch_search(path, texts, ...)`: a large query set split into chunks answered by Ray actors, returned
  as the frame `Searcher.search_batch(..., as_frame=True)` returns.
- `build(input, output, shards)`: a sharded index built by Ray tasks, the head first (the collection's
  statistics), then every shard by a task of its own, at once: the files one build writes.

What Ray gives and what this module adds: Serve's controller restarts a replica that dies (its actor
exits or fails its health check) and its router stops sending requests to it. A request that was running
on a replica when it died fails with Ray's actor error; the root retries that shard's call (a search
changes nothing, so a retry is safe) on another replica, or on the restarted one. A shard whose call
fails for another reason, or that no replica answers within `timeout_s` (none alive, none restarted in
time), fails the whole request with `ShardUnavailable`, naming the shard: never an answer without that
shard's documents. docs/ray.md has the rest.

Needs Ray Serve (`pip install "ray[serve]"`) and numpy."""

try:
    import ray
    from ray import serve
    from ray.exceptions import RayActorError
except ImportError as e:  # pragma: no cover - the message is the point
    raise ImportError(
        f"warpsearch.ray needs Ray Serve, which is not installed ({e}): pip install \"ray[serve]\""
    ) from e

import asyncio
import json
import re
import threading

import numpy as np

import warpsearch
from warpsearch.shards import merge, short_rows

__all__ = ["app", "build_app", "Client", "batch_search", "ShardSearcher", "Root", "ShardUnavailable"]


# The largest answer, in hits (queries × k), that a shard sends the root by value over gRPC: at 16,384
# hits it is under gRPC's 4 MiB cap for document ids of up to some 200 bytes.
BY_VALUE_HITS = 16_384


def _by_value(handle):
    """`handle` over Serve's gRPC channel (`_by_reference=False`, a private option of Ray 2.60), or
    `handle` itself where this Ray's handles have no such option."""
    try:
        return handle.options(_by_reference=False)
    except TypeError:
        return handle


def _too_large(error):
    """Whether `error` is gRPC's refusal of a message over its cap."""
    code = getattr(error, "code", None)
    return callable(code) and getattr(code(), "name", None) == "RESOURCE_EXHAUSTED"


class ShardUnavailable(RuntimeError):
    """A shard gave no answer (no live replica in time, or an error): the request fails whole."""


def _shard_count(path):
    """The shards of the index at `path`, None for one index."""
    return warpsearch.Index.open(path).shards


def _hits(index, docs):
    """The ids of the document numbers `docs` (an array), None for -1, in its shape."""
    ids = index.doc_ids(docs.ravel().tolist())
    out = np.empty(len(ids), dtype=object)
    out[:] = ids
    return out.reshape(docs.shape)


def _check(k, mode):
    if mode not in ("and", "or", "and-or"):
        raise ValueError(f"unknown mode '{mode}': expected and, or or and-or")
    if not 1 <= k <= warpsearch.MAX_K:
        raise ValueError(f"k {k} is out of range: give 1 to {warpsearch.MAX_K}")


class ShardSearcher:
    """A replica of one shard (`shard`, or the whole index where it is None): a searcher over it with
    the options `searcher` (keywords of `Index.searcher`). Answers AND or OR for its documents only, as
    (docs, scores, ids) arrays of one row per query: collection document numbers (-1 past the last
    hit), float32 scores (NaN past it) and the documents' ids (None past it)."""

    def __init__(self, path, shard=None, searcher=None):
        self.index = warpsearch.Index.open(path)
        self.shard = shard
        keep = {} if shard is None else {"shards": [shard]}
        self.searcher = self.index.searcher(**{**(searcher or {}), **keep})

    def search(self, texts, k, mode):
        if mode not in ("and", "or"):
            raise ValueError(f"a shard answers and or or, not {mode}: the root runs and-or's two steps")
        docs, scores = self.searcher.search_batch(texts, k=k, mode=mode, as_arrays=True)
        return docs, scores, _hits(self.index, docs)

    def replica(self):
        """This replica's actor (tests kill it) and process id."""
        import os

        return ray.get_runtime_context().current_actor, os.getpid()


class Root:
    """The application's front: sends each request to every shard deployment (`shards`, their handles in
    shard order), merges their answers exactly, and names the shard that could not answer. A shard's
    call that fails because its replica died is retried (`retries` times) within `timeout_s`. Answers
    of up to `by_value_hits` hits (queries × k) come over Serve's gRPC channel, larger ones through
    Ray's object store."""

    def __init__(self, *shards, timeout_s=30.0, retries=3, by_value_hits=BY_VALUE_HITS):
        self.shards = list(shards)
        # The same deployments over Serve's gRPC channel: answers come by value, without the object
        # store's round trips (the shorter way on a busy host), but capped at 4 MiB.
        self.by_value = [_by_value(s) for s in self.shards]
        self.timeout_s = float(timeout_s)
        self.retries = int(retries)
        self.by_value_hits = int(by_value_hits)
        self.retried = 0
        self.too_large = 0

    def stats(self):
        """{"retried": shard calls asked again after their replica died, "too_large": answers asked
        again by reference, over gRPC's cap} of this root replica."""
        return {"retried": self.retried, "too_large": self.too_large}

    async def _ask(self, i, texts, k, step, timeout_s):
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        errors = []
        # Small answers come by value and large ones by reference, which has no cap; an answer refused
        # over the cap (ids longer than BY_VALUE_HITS allows for) is asked again by reference.
        by_value = len(texts) * k <= self.by_value_hits
        attempts = 0
        while attempts <= self.retries:
            left = deadline - loop.time()
            if left <= 0:
                break
            attempts += 1
            shard = self.by_value[i] if by_value else self.shards[i]
            try:
                return await asyncio.wait_for(shard.search.remote(texts, k, step), left)
            except RayActorError as e:
                # The replica died under the request: the router no longer picks it; ask again.
                errors.append(type(e).__name__)
                self.retried += 1
            except asyncio.TimeoutError:
                break
            except Exception as e:
                if by_value and _too_large(e):
                    by_value, attempts = False, attempts - 1
                    self.too_large += 1
                    continue
                raise ShardUnavailable(
                    f"shard {i} of {len(self.shards)} failed the request, so it fails whole: {e}"
                ) from e
        died = f" after replicas died ({', '.join(errors)})" if errors else ""
        raise ShardUnavailable(
            f"shard {i} of {len(self.shards)} gave no answer within {timeout_s:g} s{died}: no live "
            f"replica of deployment shard-{i} answered, and the request fails rather than answer "
            "without that shard's documents; see `serve status` for why its replicas are down"
        )

    async def _all(self, texts, k, step, timeout_s):
        asks = (self._ask(i, texts, k, step, timeout_s) for i in range(len(self.shards)))
        return merge(list(await asyncio.gather(*asks)), k)

    async def search_arrays(self, texts, k=10, mode="or", timeout_s=None):
        """(docs, scores, ids) of one row per query, as `Searcher.search_batch(..., as_arrays=True)`
        gives docs and scores, with each hit's id beside them. `timeout_s`: each shard's time to
        answer (default: the application's)."""
        texts = list(texts)
        _check(k, mode)
        timeout_s = self.timeout_s if timeout_s is None else float(timeout_s)
        if not texts:
            return (np.empty((0, k), np.int64), np.empty((0, k), np.float32), np.empty((0, k), object))
        if mode != "and-or":
            return await self._all(texts, k, mode, timeout_s)
        # and-or as the engine runs it on the whole collection: OR where the merged AND falls short.
        docs, scores, ids = await self._all(texts, k, "and", timeout_s)
        rows = short_rows(docs, k)
        if len(rows):
            docs[rows], scores[rows], ids[rows] = await self._all([texts[r] for r in rows], k, "or", timeout_s)
        return docs, scores, ids

    async def search(self, texts, k=10, mode="or", timeout_s=None):
        """A list per query of (docid, score), best first, as `Searcher.search_batch` returns."""
        docs, scores, ids = await self.search_arrays(texts, k, mode, timeout_s)
        return [
            [(i, float(s)) for i, s in zip(row_ids[row_docs >= 0], row_scores[row_docs >= 0])]
            for row_docs, row_scores, row_ids in zip(docs, scores, ids)
        ]

    async def __call__(self, request):
        """HTTP: POST {"queries": [{"id", "text"}, …], "k": 10, "mode": "or"}, as `warpsearch serve`'s
        /search, answered {"results": [{"id", "hits": [{"docid", "score", "rank"}]}]}."""
        from starlette.responses import JSONResponse

        try:
            body = await request.json()
            queries = body["queries"]
            texts = [q["text"] if isinstance(q, dict) else q for q in queries]
            qids = [q.get("id", str(n + 1)) if isinstance(q, dict) else str(n + 1) for n, q in enumerate(queries)]
            k, mode = int(body.get("k", 10)), body.get("mode", "or")
            _check(k, mode)
        except (ValueError, KeyError, TypeError) as e:
            return JSONResponse({"error": f"bad request: {e}"}, status_code=400)
        try:
            hits = await self.search(texts, k, mode)
        except ShardUnavailable as e:
            return JSONResponse({"error": str(e)}, status_code=503)
        results = [
            {
                "id": qid,
                # The f32 score's shortest decimal, as the server writes it.
                "hits": [
                    {"docid": d, "score": json.loads(str(np.float32(s))), "rank": r}
                    for r, (d, s) in enumerate(h, 1)
                ],
            }
            for qid, h in zip(qids, hits)
        ]
        return JSONResponse({"results": results})


def app(
    path,
    *,
    shards=None,
    replicas=1,
    num_cpus=1,
    num_gpus=0,
    searcher=None,
    timeout_s=30.0,
    retries=3,
    root_replicas=1,
    root_cpus=0.5,
    shard_options=None,
    by_value_hits=BY_VALUE_HITS,
):
    """The Serve application of the index at `path`: a deployment `shard-i` per shard (`shards`: their
    number; default: the index's, read here, so `path` must be readable where this runs; one index is
    one shard), each of `replicas` replicas with `num_cpus` and `num_gpus` (Ray's resources, per
    replica) and the searcher options `searcher` (keywords of `Index.searcher`, such as `threads`), and
    the deployment `root` (`root_replicas`, `root_cpus`; it needs no index). `shard_options`: more of
    `serve.deployment`'s options for the shards (`health_check_period_s`, `max_ongoing_requests`, …).
    `by_value_hits`: the largest shard answer (queries × k) sent to the root over Serve's gRPC channel
    rather than through the object store (0: none).
    `serve.run(app(path))` runs it; the handle's `search(texts, k, mode)` answers as
    `Searcher.search_batch`, and HTTP POST takes the server's /search body."""
    count = _shard_count(path) if shards is None else shards
    deployments = []
    for i in range(count or 1):
        options = {
            "name": f"shard-{i}",
            "num_replicas": replicas,
            "ray_actor_options": {"num_cpus": num_cpus, "num_gpus": num_gpus},
            **(shard_options or {}),
        }
        shard = serve.deployment(ShardSearcher).options(**options)
        deployments.append(shard.bind(str(path), None if not count else i, searcher))
    root = serve.deployment(Root).options(
        name="root", num_replicas=root_replicas, ray_actor_options={"num_cpus": root_cpus}
    )
    return root.bind(*deployments, timeout_s=timeout_s, retries=retries, by_value_hits=by_value_hits)


class Client:
    """The root's fan-out and merge run in the caller's process, over the shard deployments of the
    running application `app` (the name given to `serve.run` or in the Serve config): a request goes
    straight to the shards, one hop fewer than through the root deployment, with the same answers,
    retries and errors (`Root`'s keywords: `timeout_s`, `retries`, `by_value_hits`). `search` and
    `search_arrays` answer as the root's handle methods, blocking; from a running event loop, await
    `root.search(...)` and `root.search_arrays(...)` instead. Needs a connected Ray (`ray.init`)."""

    def __init__(self, app="default", **root):
        running = serve.status().applications
        names = running[app].deployments if app in running else {}
        count = len([n for n in names if re.fullmatch(r"shard-\d+", n)])
        if not count:
            raise ValueError(
                f"Serve runs no application '{app}' with deployments shard-0, shard-1, … (it runs "
                f"{sorted(running) or 'none'}): give the name that serve.run or the Serve config gave app's"
            )
        self.root = Root(*(serve.get_deployment_handle(f"shard-{i}", app) for i in range(count)), **root)
        # An event loop a calling thread: one loop runs in one thread only.
        self._loops = threading.local()

    def _run(self, call):
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:
            call.close()
            raise RuntimeError("Client's search blocks: in a running event loop, await client.root.search(...)")
        loop = getattr(self._loops, "loop", None)
        if loop is None:
            loop = self._loops.loop = asyncio.new_event_loop()
        return loop.run_until_complete(call)

    def search(self, texts, k=10, mode="or", timeout_s=None):
        """A list per query of (docid, score), best first, as `Searcher.search_batch` returns."""
        return self._run(self.root.search(texts, k, mode, timeout_s))

    def search_arrays(self, texts, k=10, mode="or", timeout_s=None):
        """(docs, scores, ids) of one row per query, as the root's `search_arrays`."""
        return self._run(self.root.search_arrays(texts, k, mode, timeout_s))

    def stats(self):
        return self.root.stats()


def build_app(args):
    """`app` from a Serve config file's `args` (`import_path: warpsearch.ray:build_app`): `path`, and the
    keywords of `app` by name."""
    args = dict(args)
    return app(args.pop("path"), **args)


class _BatchWorker:
    """A Ray actor holding a searcher over the index at `path` (its shard `shard`, or all of it)."""

    def __init__(self, path, shard, searcher):
        self.shard = ShardSearcher(path, shard, searcher)

    def search(self, texts, k, mode):
        if mode in ("and", "or"):
            return self.shard.search(texts, k, mode)
        if self.shard.shard is not None:
            raise ValueError("a shard's worker answers and or or; batch_search runs and-or's steps")
        docs, scores = self.shard.searcher.search_batch(texts, k=k, mode=mode, as_arrays=True)
        return docs, scores, _hits(self.shard.index, docs)


def _frame(qids, docs, scores, ids):
    """The frame of `Searcher.search_batch(..., as_frame=True)` from one row per query: qid and docid
    categoricals (the qids in query order, the documents hit in document-number order), rank from 1,
    float32 score."""
    import pandas as pd

    hit = docs >= 0
    counts = hit.sum(axis=1)
    names, qid_codes = [], {}
    for q in qids:
        if q not in qid_codes:
            qid_codes[q] = len(names)
            names.append(q)
    codes = np.repeat(np.array([qid_codes[q] for q in qids], dtype=np.int32), counts)
    hit_docs, hit_ids = docs[hit], ids[hit]
    distinct, first = np.unique(hit_docs, return_index=True)
    return pd.DataFrame(
        {
            "qid": pd.Categorical.from_codes(codes, names),
            "docid": pd.Categorical.from_codes(
                np.searchsorted(distinct, hit_docs).astype(np.int32), list(hit_ids[first])
            ),
            "rank": (np.cumsum(hit, axis=1)[hit]).astype(np.int64),
            "score": scores[hit].astype(np.float32),
        }
    )


def batch_search(
    path,
    texts,
    k=1000,
    mode="or",
    *,
    qids=None,
    actors=2,
    per_shard=False,
    chunk=10_000,
    num_cpus=1,
    num_gpus=0,
    searcher=None,
):
    """Answers `texts` (any iterable of query texts) on the index at `path` with Ray actors (`ray.init`
    first, or Ray starts a local cluster), returning the frame `Searcher.search_batch(texts, k, mode,
    qids=qids, as_frame=True)` returns: columns qid, docid, rank, score. The queries go in chunks of
    `chunk` to `actors` actors, each with `num_cpus` and `num_gpus` and a searcher over the whole index
    (`searcher`: `Index.searcher`'s keywords); with `per_shard=True`, to an actor per shard of a
    sharded index instead, every chunk to every shard and their answers merged exactly (for an index
    that no one host holds)."""
    from ray.util import ActorPool

    _check(k, mode)
    texts = list(texts)
    qids = [str(n + 1) for n in range(len(texts))] if qids is None else [str(q) for q in qids]
    if len(qids) != len(texts):
        raise ValueError(f"qids has {len(qids)} entries for {len(texts)} queries: give one per query")
    if chunk < 1 or actors < 1:
        raise ValueError("chunk and actors must be at least 1")
    worker = ray.remote(_BatchWorker).options(num_cpus=num_cpus, num_gpus=num_gpus)
    chunks = [texts[i : i + chunk] for i in range(0, len(texts), chunk)]
    if per_shard:
        count = _shard_count(path)
        if count is None:
            raise ValueError(f"{path} is one index: per_shard=True needs a sharded index (shards=N)")
        workers = [worker.remote(str(path), i, searcher) for i in range(count)]

        def ask(batch, step):
            return merge(ray.get([w.search.remote(batch, k, step) for w in workers]), k)

        rows = []
        for batch in chunks:
            if mode != "and-or":
                rows.append(ask(batch, mode))
                continue
            docs, scores, ids = ask(batch, "and")
            short = short_rows(docs, k)
            if len(short):
                docs[short], scores[short], ids[short] = ask([batch[r] for r in short], "or")
            rows.append((docs, scores, ids))
    else:
        pool = ActorPool([worker.remote(str(path), None, searcher) for _ in range(actors)])
        rows = list(pool.map(lambda w, batch: w.search.remote(batch, k, mode), chunks))
    if not rows:
        rows = [(np.empty((0, k), np.int64), np.empty((0, k), np.float32), np.empty((0, k), object))]
    docs, scores, ids = (np.concatenate(c) for c in zip(*rows))
    return _frame(qids, docs, scores, ids)


def _build_part(input, output, shards, part, options):
    warpsearch.Index.build(input, output=output, shards=shards, part=part, **options)


def build(input, output, shards, *, num_cpus=1, **options):
    """Builds the sharded index of `shards` shards at `output` from the collection at `input` with Ray
    tasks (`ray.init` first, or Ray starts a local cluster), and opens it: one task writes the head (one
    pass over the collection for its statistics, dictionary and documents: `part="head"`), then a task
    a shard, all at once, each analysing its own documents only (`part=i`). Each task has `num_cpus`
    CPUs and `Index.build`'s `options` (analyzer, codec, store, ...). `input` and `output` must be paths
    every node reads and writes (a shared filesystem); the files are those one `Index.build(...,
    shards=shards)` writes, build identities aside."""
    if shards < 1:
        raise ValueError(f"shards={shards}: a sharded index has at least one shard")
    task = ray.remote(_build_part).options(num_cpus=num_cpus)
    input, output = str(input), str(output)
    ray.get(task.remote(input, output, shards, "head", options))
    ray.get([task.remote(input, output, shards, i, options) for i in range(shards)])
    return warpsearch.Index.open(output)
