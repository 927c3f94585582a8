"""Requests for the Ray benchmarks (`ray_kill.py`, `ray_throughput.py`): a query file's lines cut into
requests of a batch of consecutive queries."""


def requests_of(path, batch):
    """The non-empty lines of `path` in requests of `batch` (a short last one left out); exits with a
    clear message where the file holds fewer queries than one request."""
    lines = [line.strip() for line in open(path, encoding="utf-8") if line.strip()]
    chunks = [lines[i : i + batch] for i in range(0, len(lines) - batch + 1, batch)]
    if not chunks:
        raise SystemExit(f"{path}: {len(lines)} queries, fewer than a request of --batch {batch}")
    return chunks
