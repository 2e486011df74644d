"""The harness's PNG plots (matplotlib, headless): recall vs QPS (with the passes' min–max),
latency vs QPS, QPS per core.

Every series of a plot has its own colour AND its own marker (style()), so lines stay apart in
greyscale print and for colour-blind readers; a storage keeps one style across the panels of a
figure. Legends sit beside the axes, at a readable size.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

# Kelly's colours of maximum contrast (without white and near-white): 20 that tell apart
COLOURS = ("#222222", "#F3C300", "#875692", "#F38400", "#A1CAF1", "#BE0032", "#C2B280", "#848482",
           "#008856", "#E68FAC", "#0067A5", "#F99379", "#604E97", "#F6A600", "#B3446C", "#DCD300",
           "#882D17", "#8DB600", "#654522", "#E25822")
# filled markers that differ in outline, not only in size
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "<", ">", "p", "h", "8", "d", "H")
LABEL_SIZE = 9
LEGEND_SIZE = 8


def style(i: int) -> dict:
    """Colour and marker of the i-th series: both distinct for the first len(MARKERS) series, the
    colour for the first len(COLOURS), the pair for len(COLOURS) * len(MARKERS) / gcd."""
    return {"color": COLOURS[i % len(COLOURS)], "marker": MARKERS[i % len(MARKERS)]}


def _save(plt, fig, ax, path: Path, title: str, **legend) -> None:
    ax.grid(True, alpha=0.3)
    ax.tick_params(labelsize=LABEL_SIZE)
    # beside the axes: a legend inside hides the points it names
    ax.legend(fontsize=LEGEND_SIZE, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0, **legend)
    ax.set_title(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)


def _recall_vs_qps(plt, ann: list, out: Path) -> None:
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for i, r in enumerate(ann):
        pts = sorted((p for p in r["points"] if "recall" in p), key=lambda p: p["recall"])
        qps = [p["qps"] for p in pts]
        # the bars span the passes' min-max: a point whose bar overlaps another's is not ahead of it
        err = [[q - p.get("qps_min", q) for p, q in zip(pts, qps)], [p.get("qps_max", q) - q for p, q in zip(pts, qps)]]
        ax.errorbar([p["recall"] for p in pts], qps, yerr=err, capsize=2, **style(i),
                    label=f"{r['storage']} m={r['m']} efc={r['ef_construct']}")
    ax.set_xlabel("recall@10", fontsize=LABEL_SIZE + 1)
    ax.set_ylabel("QPS (1 thread)", fontsize=LABEL_SIZE + 1)
    ax.set_yscale("log")
    _save(plt, fig, ax, out / "recall_vs_qps.png", "Recall vs QPS")


def _latency_vs_qps(plt, eco: list, out: Path) -> None:
    # one panel per query kind: a series is a storage, with the same colour and marker in every panel
    kinds = [q for q in ("lexical", "vector", "hybrid")
             if any(isinstance(r["queries"].get(q), list) and r["queries"][q] for r in eco)] or ["lexical"]
    fig, axes = plt.subplots(1, len(kinds), figsize=(4.2 * len(kinds) + 2, 4.5), sharey=True, squeeze=False)
    for ax, q in zip(axes[0], kinds):
        for i, r in enumerate(eco):
            runs = r["queries"].get(q)
            if isinstance(runs, list) and runs:
                ax.plot([x["qps"] for x in runs], [x["p99_ms"] for x in runs], label=r["storage"], **style(i))
        ax.set_title(q, fontsize=LABEL_SIZE + 1)
        ax.set_xlabel("QPS", fontsize=LABEL_SIZE + 1)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.grid(True, alpha=0.3)
        ax.tick_params(labelsize=LABEL_SIZE)
    axes[0][0].set_ylabel("p99 latency (ms)", fontsize=LABEL_SIZE + 1)
    # one legend for the figure: every storage once, whichever panels it has points in
    named = {}
    for ax in axes[0]:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            named.setdefault(label, handle)
    order = [r["storage"] for r in eco if r["storage"] in named]
    fig.legend([named[s] for s in order], order, fontsize=LEGEND_SIZE, loc="center left", bbox_to_anchor=(1.0, 0.5))
    fig.suptitle("Latency vs throughput (1, 2, 4… client threads)")
    fig.tight_layout()
    fig.savefig(out / "latency_vs_qps.png", dpi=110, bbox_inches="tight")
    plt.close(fig)


def _qps_per_core(plt, eco: list, out: Path) -> None:
    fig, ax = plt.subplots(figsize=(8, 4.5))
    kinds = ["lexical", "vector", "hybrid"]
    width = 0.8 / len(kinds)
    for j, q in enumerate(kinds):
        vals = []
        for r in eco:
            runs = r["queries"].get(q)
            vals.append(runs[0]["qps_per_core"] if isinstance(runs, list) and runs else 0.0)
        # bars tell kinds apart by colour and hatch (a marker's counterpart for bars)
        ax.bar(np.arange(len(eco)) + j * width, vals, width, label=q, color=COLOURS[j + 8],
               hatch=("", "//", "..")[j % 3], edgecolor="black", linewidth=0.5)
    ax.set_xticks(np.arange(len(eco)) + width)
    ax.set_xticklabels([r["storage"] for r in eco], rotation=30, ha="right", fontsize=LABEL_SIZE)
    ax.set_ylabel("QPS per CPU core (1 client thread)", fontsize=LABEL_SIZE + 1)
    ax.set_yscale("log")
    _save(plt, fig, ax, out / "qps_per_core.png", "Efficiency")


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


def growth(rows: list, path: Path) -> None:
    """One PNG of how a storage grows with its size (rows of benchmarks/bench_disk_vectors.py:
    n, mode, build_s, sweep of {ef, qps, p99_ms, recall}, float32_bytes, after_queries): build
    seconds, QPS and p99 latency at each ef (its recall in the label), and resident memory (anon)
    over the float32 bytes."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 4, figsize=(20, 4.2))
    modes = sorted({r["mode"] for r in rows})
    for i, mode in enumerate(modes):
        mine = sorted((r for r in rows if r["mode"] == mode), key=lambda r: r["n"])
        ns = [r["n"] for r in mine]
        axes[0].plot(ns, [r["build_s"] for r in mine], label=mode, **style(i))
        axes[3].plot(ns, [r["after_queries"]["RssAnon"] / r["float32_bytes"] for r in mine], label=mode, **style(i))
        for j, ef in enumerate(p["ef"] for p in mine[0]["sweep"]):
            points = [next(p for p in r["sweep"] if p["ef"] == ef) for r in mine]
            recalls = ", ".join(f"{p['recall']:.2f}" for p in points)
            axes[1].plot(ns, [p["qps"] for p in points], label=f"{mode} ef {ef} (recall {recalls})",
                         **style(i * 5 + j))
            axes[2].plot(ns, [p["p99_ms"] for p in points], label=f"{mode} ef {ef}", **style(i * 5 + j))
    for ax, title, ylabel in ((axes[0], "Build", "seconds"), (axes[1], "Queries (1 thread)", "QPS"),
                              (axes[2], "Latency (1 thread)", "p99 ms"), (axes[3], "Resident memory", "RssAnon / float32 bytes")):
        ax.set_xscale("log")
        ax.set_xlabel("vectors", fontsize=LABEL_SIZE + 1)
        ax.set_ylabel(ylabel, fontsize=LABEL_SIZE + 1)
        ax.set_title(title)
        ax.grid(True, alpha=0.3)
        ax.tick_params(labelsize=LABEL_SIZE)
        ax.legend(fontsize=LEGEND_SIZE - 1, loc="best")
    fig.tight_layout()
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
