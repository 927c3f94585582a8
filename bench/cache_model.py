#!/usr/bin/env python3
"""The GPU list cache's throughput model (docs/references.md#pruned-list-caching section 4.2.1, eq. 7) against measurement.

TP = 1 / (c(n) + t * dq(S_c)): c(n) seconds per query at batch volume n (queries per kernel batch),
t seconds per byte carried host to device, dq(S_c) bytes carried per query with a cache of S_c bytes.
From `warpsearch bench --json` reports of one budget at several cache/buffer splits (S_c + S_b fixed):
  - t   = seconds per byte carried, fitted with c (below) from three runs on; with fewer, the
          host-to-device time over bytes (CUDA events), pooled over the runs;
  - dq  = linear in S_c, least squares over the runs' carried bytes per query;
  - n   = a * S_b / dq(S_c): a batch fills its staging space (a fits how much queries share), least
          squares through the origin over the runs' queries per batch;
  - c   = a + b / n: 1/TP = a + b / n + t * dq by least squares over the runs.
Each run is also predicted by a model fitted to the other runs (leave one out): that error is the
model's. Prints a table, the split the model chooses, and writes an SVG of model vs measured.
usage: bench/cache_model.py OUT.svg REPORT.json...   (pure Python: no numpy on the device)
"""
import json
import sys


def ols(xs, ys):
    """y = p + q x by least squares."""
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    q = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx if sxx else 0.0
    return my - q * mx, q


def load(path):
    r = json.load(open(path))
    c = r["closed_loop"]
    g, k = c["gpu"], c["cache"]
    n = r["num_queries"]
    stage = float(path.rsplit("-", 1)[1][: -len(".json")])  # the buffer's share of the budget
    return {
        "path": path, "share_b": stage, "qps": c["qps"], "queries": n,
        # Queries (not tasks) per batch: AND queries are cut into more tasks the fewer a batch holds.
        "n": n / max(g["batches"], 1), "dq": k["staged_bytes_per_query"],
        "t": (g["h2d_ms"] / 1e3, g["h2d_bytes"]),
    }


def solve3(rows, ys):
    """(p, q, r) minimising sum (p x0 + q x1 + r x2 - y)^2: the normal equations, by elimination."""
    m = [[sum(a[i] * a[j] for a in rows) for j in range(3)] + [sum(a[i] * y for a, y in zip(rows, ys))]
         for i in range(3)]
    for i in range(3):
        piv = max(range(i, 3), key=lambda k: abs(m[k][i]))
        m[i], m[piv] = m[piv], m[i]
        for k in range(3):
            if k != i and m[i][i]:
                f = m[k][i] / m[i][i]
                m[k] = [x - f * y for x, y in zip(m[k], m[i])]
    return [m[i][3] / m[i][i] if m[i][i] else 0.0 for i in range(3)]


def event_t(runs):
    """Seconds per byte carried, as the CUDA events time the copies (pooled over the runs)."""
    return sum(r["t"][0] for r in runs) / sum(r["t"][1] for r in runs)


def fit(runs):
    dq = ols([1 - r["share_b"] for r in runs], [r["dq"] for r in runs])
    xs = [r["share_b"] / (dq[0] + dq[1] * (1 - r["share_b"])) for r in runs]
    a = sum(x * r["n"] for x, r in zip(xs, runs)) / sum(x * x for x in xs)
    nb = (a, dq)
    if len(runs) >= 3:
        # t fitted with c: since the pipeline has four slots, a batch's copies
        # queue behind other slots' copies and run beside kernels, so the events time the queueing too
        # (20 GB/s where the link gives about 50) and the copies hidden behind kernels cost nothing;
        # t is then the marginal cost of a byte carried, fitted as c is.
        c0, c1, t = solve3([(1.0, 1 / r["n"], r["dq"]) for r in runs], [1 / r["qps"] for r in runs])
        c = (c0, c1)
    else:
        t = event_t(runs)
        c = ols([1 / r["n"] for r in runs], [1 / r["qps"] - t * r["dq"] for r in runs])
    return t, dq, nb, c


def predict(model, share_b):
    t, dq, nb, c = model
    n = max(nb[0] * share_b / (dq[0] + dq[1] * (1 - share_b)), 1.0)
    return 1 / (c[0] + c[1] / n + t * (dq[0] + dq[1] * (1 - share_b)))


def main():
    out, paths = sys.argv[1], sys.argv[2:]
    runs = sorted((load(p) for p in paths), key=lambda r: r["share_b"])
    model = fit(runs)
    t, dq, nb, c = model
    te = event_t(runs)
    print(f"t as the events time the copies: {te * 1e12:.1f} ps/B ({1 / te / 1e9:.1f} GB/s)")
    print(f"t = {t * 1e12:.1f} ps/B ({1 / t / 1e9:.1f} GB/s); dq(S_c) = {dq[0]:.0f} + {dq[1]:.0f} * S_c/M B; "
          f"n(S_b) = {nb[0]:.3g} * (S_b/M) / dq; c(n) = {c[0] * 1e6:.1f} us + {c[1] * 1e3:.2f} ms / n")
    print(f"{'S_b/M':>6} {'S_c/M':>6} {'measured':>9} {'model':>8} {'err':>7} {'loo model':>10} {'loo err':>8}")
    rows = []
    for i, r in enumerate(runs):
        m = predict(model, r["share_b"])
        loo = predict(fit(runs[:i] + runs[i + 1:]), r["share_b"]) if len(runs) > 3 else float("nan")
        rows.append((r["share_b"], r["qps"], m, loo))
        print(f"{r['share_b']:>6.3f} {1 - r['share_b']:>6.3f} {r['qps']:>9.0f} {m:>8.0f} {100 * (m / r['qps'] - 1):>6.1f}% "
              f"{loo:>10.0f} {100 * (loo / r['qps'] - 1):>7.1f}%")
    grid = [i / 200 for i in range(4, 121)]
    curve = [(s, predict(model, s)) for s in grid]
    best = max(curve, key=lambda p: p[1])
    print(f"model's best split: S_b = {best[0]:.3f} M (S_c = {1 - best[0]:.3f} M), {best[1]:.0f} q/s predicted; "
          f"measured best: S_b = {max(runs, key=lambda r: r['qps'])['share_b']:.3f} M")
    svg(out, curve, rows)


def svg(out, curve, rows):
    w, h, pad = 640, 400, 60
    xmax = max(s for s, _ in curve)
    ymax = max(max(q for _, q in curve), max(r[1] for r in rows)) * 1.1
    X = lambda s: pad + (w - 2 * pad) * s / xmax
    Y = lambda q: h - pad - (h - 2 * pad) * q / ymax
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">',
             f'<rect width="{w}" height="{h}" fill="white"/>',
             f'<line x1="{pad}" y1="{h - pad}" x2="{w - pad}" y2="{h - pad}" stroke="black"/>',
             f'<line x1="{pad}" y1="{pad}" x2="{pad}" y2="{h - pad}" stroke="black"/>',
             f'<text x="{w / 2}" y="{h - 15}" text-anchor="middle">staging buffers S_b / GPU memory budget M (cache S_c = M - S_b)</text>',
             f'<text x="15" y="{h / 2}" transform="rotate(-90 15 {h / 2})" text-anchor="middle">queries/s</text>',
             f'<text x="{w / 2}" y="25" text-anchor="middle">GPU list cache at M = 25% of the index: model (line) vs measured (dots)</text>']
    for i in range(6):
        q = ymax * i / 5
        parts.append(f'<text x="{pad - 5}" y="{Y(q) + 4}" text-anchor="end">{q:.0f}</text>')
    for i in range(7):
        s = xmax * i / 6
        parts.append(f'<text x="{X(s)}" y="{h - pad + 16}" text-anchor="middle">{s:.2f}</text>')
    pts = " ".join(f"{X(s):.1f},{Y(q):.1f}" for s, q in curve)
    parts.append(f'<polyline points="{pts}" fill="none" stroke="#1f77b4" stroke-width="2"/>')
    for s, q, _, _ in rows:
        parts.append(f'<circle cx="{X(s):.1f}" cy="{Y(q):.1f}" r="4" fill="#d62728"/>')
    parts.append("</svg>")
    open(out, "w").write("\n".join(parts) + "\n")


if __name__ == "__main__":
    main()
