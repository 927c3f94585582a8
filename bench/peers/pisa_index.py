#!/usr/bin/env python3
"""PISA's index build (pyterrier-pisa's bundled library) on a JSON-lines collection, timed.

usage: pisa_index.py COLLECTION INDEX_DIR THREADS [--fields title,contents] [--batch N]

COLLECTION is a .jsonl file or a directory of them (read in name order), one object a line with "id"
and the text fields. They are first written as PISA's plaintext input (`docno text` a line, the fields
joined by a space, as pyterrier-pisa's indexer writes its FIFO), on THREADS processes; that conversion
is timed apart and not counted as PISA's build. Then,
timed: the forward index and its inversion on THREADS threads (`_pisathon.index`, porter2 stemming,
what `PisaIndex.index` runs), and the block-max (wand) data and the block_simdbp compression for BM25
k1 0.9, b 0.4 (`_pisathon.prepare_index`, what the first `bm25()` retrieval runs). The result is one
JSON line on stdout. Only the compiled module is loaded (bench/peers/pisa_bench.py says how).
"""
import argparse
import glob
import itertools
import json
import multiprocessing
import os
import shutil
import sys
import time

from pisa_bench import load_pisathon


def inputs(path):
    if os.path.isdir(path):
        return sorted(glob.glob(os.path.join(path, "*.jsonl")))
    return [path]


def plaintext(job):
    """The lines of a batch as PISA's `docno text` lines, or the first line lacking a field."""
    path, first, lines, fields = job
    out = []
    for n, line in enumerate(lines, first):
        d = json.loads(line)
        missing = [x for x in ["id"] + fields if x not in d]
        if missing:
            return f"{path}:{n}: no field {missing[0]!r} (fields asked: {','.join(fields)})"
        text = " ".join(d[x] for x in fields).replace("\n", " ").replace("\r", " ")
        out.append(f"{d['id']} {text}\n")
    return "".join(out)


def batches(paths, fields, size=20_000):
    for path in paths:
        with open(path, encoding="utf-8") as f:
            for i in itertools.count():
                lines = list(itertools.islice(f, size))
                if not lines:
                    break
                yield path, i * size + 1, lines, fields


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("collection")
    ap.add_argument("index_dir")
    ap.add_argument("threads", type=int)
    ap.add_argument("--fields", default="title,contents")
    ap.add_argument("--batch", type=int, default=100_000, help="PISA's batch (pyterrier-pisa's default)")
    a = ap.parse_args()
    fields = a.fields.split(",")
    pisathon = load_pisathon()

    shutil.rmtree(a.index_dir, ignore_errors=True)
    os.makedirs(a.index_dir)
    plain = a.index_dir.rstrip("/") + ".txt"
    t = time.time()
    paths = inputs(a.collection)
    read_bytes = sum(os.path.getsize(p) for p in paths)
    docs = 0
    # Converted on every core, in order.
    with open(plain, "w", encoding="utf-8") as out, multiprocessing.Pool(a.threads) as pool:
        for chunk in pool.imap(plaintext, batches(paths, fields)):
            if not chunk.endswith("\n") and chunk:
                sys.exit(chunk)
            docs += chunk.count("\n")
            out.write(chunk)
    convert = time.time() - t

    t = time.time()
    pisathon.index(plain, a.index_dir, "porter2", a.batch, a.threads)
    forward_invert = time.time() - t
    t = time.time()
    ctx = pisathon.RetrievalContext()
    pisathon.prepare_index(ctx, a.index_dir, "block_simdbp", "bm25", "porter2", bm25_k1=0.9, bm25_b=0.4)
    wand_compress = time.time() - t
    os.remove(plain)
    print(json.dumps({
        "engine": "pisa", "threads": a.threads, "documents": docs, "input_bytes": read_bytes,
        "convert_s": round(convert, 2), "forward_and_invert_s": round(forward_invert, 2),
        "wand_and_compress_s": round(wand_compress, 2),
        "build_s": round(forward_invert + wand_compress, 2),
    }))


if __name__ == "__main__":
    main()
