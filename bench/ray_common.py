"""What the Ray benchmarks (`ray_kill.py`, `ray_overhead.py`, `ray_throughput.py`) share: a query file's
lines cut into requests, and latency percentiles."""

import numpy as np


def requests_of(path, batch):
    """The non-empty lines of `path` in requests of `batch` (a short last one left out); exits with a
    clear message where the file holds fewer queries than one request."""
    lines = [line.strip() for line in open(path, encoding="utf-8") if line.strip()]
    chunks = [lines[i : i + batch] for i in range(0, len(lines) - batch + 1, batch)]
    if not chunks:
        raise SystemExit(f"{path}: {len(lines)} queries, fewer than a request of --batch {batch}")
    return chunks


def percentiles(ms):
    """p50 and p99 of the latencies `ms` and their count; None for each where there is none."""
    some = len(ms) > 0
    return {
        "p50": float(np.percentile(ms, 50)) if some else None,
        "p99": float(np.percentile(ms, 99)) if some else None,
        "n": len(ms),
    }
