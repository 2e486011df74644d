"""The harness's PNG plots (matplotlib, headless): recall vs QPS (with the passes' min–max),
latency vs QPS, QPS per core."""
from __future__ import annotations

from pathlib import Path

import numpy as np


def _save(plt, fig, ax, path: Path, title: str, legend_size: int = 7, **legend) -> None:
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=legend_size, **legend)
    ax.set_title(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _recall_vs_qps(plt, ann: list, out: Path) -> None:
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for r in ann:
        pts = sorted((p for p in r["points"] if "recall" in p), key=lambda p: p["recall"])
        qps = [p["qps"] for p in pts]
        # the bars span the passes' min-max: a point whose bar overlaps another's is not ahead of it
        err = [[q - p.get("qps_min", q) for p, q in zip(pts, qps)], [p.get("qps_max", q) - q for p, q in zip(pts, qps)]]
        ax.errorbar([p["recall"] for p in pts], qps, yerr=err, marker="o", capsize=2,
                    label=f"{r['storage']} m={r['m']} efc={r['ef_construct']}")
    ax.set_xlabel("recall@10")
    ax.set_ylabel("QPS (1 thread)")
    ax.set_yscale("log")
    _save(plt, fig, ax, out / "recall_vs_qps.png", "Recall vs QPS")


def _latency_vs_qps(plt, eco: list, out: Path) -> None:
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for r in eco:
        for q in ("lexical", "vector", "hybrid"):
            runs = r["queries"].get(q)
            if isinstance(runs, list) and runs:
                ax.plot([x["qps"] for x in runs], [x["p99_ms"] for x in runs], marker="o", label=f"{r['storage']} {q}")
    ax.set_xlabel("QPS")
    ax.set_ylabel("p99 latency (ms)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    _save(plt, fig, ax, out / "latency_vs_qps.png", "Latency vs throughput (1, 2, 4… client threads)", 6, ncol=2)


def _qps_per_core(plt, eco: list, out: Path) -> None:
    fig, ax = plt.subplots(figsize=(8, 4.5))
    kinds = ["lexical", "vector", "hybrid"]
    width = 0.8 / len(kinds)
    for j, q in enumerate(kinds):
        vals = []
        for r in eco:
            runs = r["queries"].get(q)
            vals.append(runs[0]["qps_per_core"] if isinstance(runs, list) and runs else 0.0)
        ax.bar(np.arange(len(eco)) + j * width, vals, width, label=q)
    ax.set_xticks(np.arange(len(eco)) + width)
    ax.set_xticklabels([r["storage"] for r in eco], rotation=20, fontsize=8)
    ax.set_ylabel("QPS per CPU core (1 client thread)")
    ax.set_yscale("log")
    _save(plt, fig, ax, out / "qps_per_core.png", "Efficiency", 10)


def plots(results: dict, out: Path) -> list:
    """recall_vs_qps.png, latency_vs_qps.png, qps_per_core.png -> the names of the files written."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    written = []
    ann = [r for r in results.get("ann", []) if "points" in r]
    if ann:
        _recall_vs_qps(plt, ann, out)
        written.append("recall_vs_qps.png")
    eco = [r for r in results.get("ecommerce", []) if "queries" in r]
    if eco:
        _latency_vs_qps(plt, eco, out)
        _qps_per_core(plt, eco, out)
        written += ["latency_vs_qps.png", "qps_per_core.png"]
    return written
