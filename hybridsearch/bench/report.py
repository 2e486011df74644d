"""results.json -> Markdown tables and PNG plots (matplotlib, headless)."""
from __future__ import annotations

import json
import os
import platform
from pathlib import Path

import numpy as np

from hybridsearch.bench import metrics as M


def machine_facts() -> dict:
    """CPU model, cores, Python and library versions: recorded with every result."""
    cpu = platform.processor() or "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    import importlib.metadata as md
    versions = {}
    for pkg in ("hybridsearch", "numpy", "hnswlib", "faiss-cpu", "annlite", "bm25s", "tantivy", "elasticsearch",
                "opensearch-py", "pytest-benchmark"):
        try:
            versions[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            pass
    return {"cpu": cpu, "cores": os.cpu_count(), "python": platform.python_version(),
            "platform": platform.platform(), "versions": versions}


def _fmt(v, digits=0):
    if v is None or (isinstance(v, float) and not np.isfinite(v)):
        return "–"
    return f"{v:,.{digits}f}"


def markdown(results: dict) -> str:
    """The report: every table of the run, with the ratio against the anchor where one ran."""
    out = [f"# hybridsearch benchmark ({results['mode']})", ""]
    mf = results["machine"]
    out += [f"Machine: {mf['cpu']}, {mf['cores']} cores, Python {mf['python']}; "
            + ", ".join(f"{k} {v}" for k, v in mf["versions"].items()), ""]
    ann = results.get("ann", [])
    if ann:
        out += ["## Recall@10 vs QPS (one query per call, one thread)", "",
                f"{results['ann_data']}", "", "| storage | m | ef_construct | build s | ef | recall@10 | QPS | p99 ms |",
                "| --- | --- | --- | --- | --- | --- | --- | --- |"]
        for row in ann:
            if "error" in row:
                out.append(f"| {row.get('storage', '?')} | error: {row['error']} | | | | | | |")
                continue
            for p in row["points"]:
                out.append(f"| {row['storage']} | {row['m']} | {row['ef_construct']} | {row['build_s']:.1f} | {p['ef']} | "
                           f"{p['recall']:.3f} | {_fmt(p['qps'])} | {p['p99_ms']:.2f} |")
        out += ["", "![recall vs QPS](recall_vs_qps.png)", ""]
        anchor = next((r for r in ann if r.get("storage") == "hnswlib-raw" and "points" in r), None)
        ours = next((r for r in ann if r.get("storage") == "hnsw" and "points" in r), None)
        if anchor and ours:
            out += ["QPS at equal recall, ours (`hnsw` through the DocumentArray API) / hnswlib (raw index):", ""]
            for target in (0.9, 0.95, 0.99):
                a, b = qps_at_recall(ours["points"], target), qps_at_recall(anchor["points"], target)
                if a and b:
                    out.append(f"- recall {target}: {a:,.0f} / {b:,.0f} = **{a / b:.2f}×**")
            out.append("")
    six = results.get("six_tasks", [])
    if six:
        out += ["## Six tasks (DocArray's one-million benchmark, scaled)", "", results.get("six_tasks_data", ""), "",
                "| storage | create s | read ms | update ms | delete ms | find by condition ms | find by vector ms | recall@10 |",
                "| --- | --- | --- | --- | --- | --- | --- | --- |"]
        for r in six:
            if "error" in r:
                out.append(f"| {r.get('storage', '?')} | error: {r['error']} | | | | | | |")
                continue
            out.append(f"| {r['storage']} | {r['create_s']:.2f} | {r['read']['ms']:.3f} | {r['update']['ms']:.3f} | "
                       f"{r['delete']['ms']:.3f} | {r['find_by_condition']['ms']:.3f} | {r['find_by_vector']['ms']:.3f} | "
                       f"{r['recall_at_10']:.3f} |")
        out += ["", "| storage | read QPS | update QPS | delete QPS | find by condition QPS | find by vector QPS |",
                "| --- | --- | --- | --- | --- | --- |"]
        for r in six:
            if "error" not in r:
                out.append(f"| {r['storage']} | {_fmt(r['read']['qps'])} | {_fmt(r['update']['qps'])} | "
                           f"{_fmt(r['delete']['qps'])} | {_fmt(r['find_by_condition']['qps'])} | "
                           f"{_fmt(r['find_by_vector']['qps'])} |")
        out.append("")
    eco = results.get("ecommerce", [])
    if eco:
        out += ["## E-commerce workload", "", results.get("ecommerce_data", ""), "",
                "| storage | query | threads | QPS | mean ms | p99 ms | cores | QPS/core | overlap@10 vs memory |",
                "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
        for r in eco:
            if "error" in r:
                out.append(f"| {r.get('storage', '?')} | error: {r['error']} | | | | | | | |")
                continue
            for q, runs in r["queries"].items():
                if isinstance(runs, dict):
                    out.append(f"| {r['storage']} | {q} | – | {runs['error']} | | | | | |")
                    continue
                ov = r.get("overlap", {}).get(q)
                for x in runs:
                    out.append(f"| {r['storage']} | {q} | {x['threads']} | {_fmt(x['qps'])} | {x['mean_ms']:.2f} | "
                               f"{x['p99_ms']:.2f} | {x['cores']:.2f} | {_fmt(x['qps_per_core'])} | "
                               f"{'–' if ov is None else f'{ov:.2f}'} |")
        one = {r["storage"]: r["queries"] for r in eco if "queries" in r}
        ratios = []
        for ours in ("memory", "hnsw", "sqlite"):
            for other in ("bm25s", "tantivy", "elasticsearch", "opensearch", "annlite"):
                for q in ("lexical", "vector", "hybrid"):
                    a, b = one.get(ours, {}).get(q), one.get(other, {}).get(q)
                    if isinstance(a, list) and isinstance(b, list) and a and b:
                        ratios.append(f"- {q}: {ours} / {other} = {a[0]['qps'] / b[0]['qps']:.1f}× QPS, "
                                      f"{a[0]['qps_per_core'] / b[0]['qps_per_core']:.1f}× QPS per core")
        if ratios:
            out += ["", "Ratios at one client thread:", ""] + ratios
        out += ["", "Writes:", "", "| storage | phase | docs/s | cores | docs/s per core |", "| --- | --- | --- | --- | --- |"]
        for r in eco:
            for phase, w in r.get("writes", {}).items():
                out.append(f"| {r['storage']} | {phase} | {_fmt(w['qps'])} | {w['cores']:.2f} | {_fmt(w['qps_per_core'])} |")
        out += ["", "![latency vs QPS](latency_vs_qps.png)", "", "![QPS per core](qps_per_core.png)", ""]
    rel = results.get("relevance", [])
    if rel:
        out += ["## Relevance (nave-kjv, lexical)", "", results.get("relevance_data", ""), "",
                "| storage | nDCG@10 | recall@100 | QPS |", "| --- | --- | --- | --- |"]
        for r in rel:
            if "error" in r:
                out.append(f"| {r.get('storage', '?')} | error: {r['error']} | | |")
            else:
                out.append(f"| {r['storage']} | {r['ndcg@10']:.3f} | {r['recall@100']:.3f} | {_fmt(r.get('qps'))} |")
        out.append("")
    if results.get("skipped"):
        out += ["## Not run", ""] + [f"- {s}" for s in results["skipped"]] + [""]
    return "\n".join(out)


def qps_at_recall(points: list, target: float):
    """QPS at a recall level, interpolated between the sweep's points (None if never reached)."""
    pts = sorted((p["recall"], p["qps"]) for p in points)
    for (r0, q0), (r1, q1) in zip(pts, pts[1:]):
        if r0 <= target <= r1:
            return q0 if r1 == r0 else q0 + (q1 - q0) * (target - r0) / (r1 - r0)
    return pts[0][1] if pts and pts[0][0] >= target else None


def plots(results: dict, out: Path) -> list:
    """recall_vs_qps.png, latency_vs_qps.png, qps_per_core.png -> the files written."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    written = []
    ann = [r for r in results.get("ann", []) if "points" in r]
    if ann:
        fig, ax = plt.subplots(figsize=(7, 4.5))
        for r in ann:
            pts = sorted(r["points"], key=lambda p: p["recall"])
            ax.plot([p["recall"] for p in pts], [p["qps"] for p in pts], marker="o",
                    label=f"{r['storage']} m={r['m']} efc={r['ef_construct']}")
        ax.set_xlabel("recall@10")
        ax.set_ylabel("QPS (1 thread)")
        ax.set_yscale("log")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
        ax.set_title("Recall vs QPS")
        fig.tight_layout()
        fig.savefig(out / "recall_vs_qps.png", dpi=110)
        plt.close(fig)
        written.append("recall_vs_qps.png")
    eco = [r for r in results.get("ecommerce", []) if "queries" in r]
    if eco:
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
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=6, ncol=2)
        ax.set_title("Latency vs throughput (1, 2, 4… client threads)")
        fig.tight_layout()
        fig.savefig(out / "latency_vs_qps.png", dpi=110)
        plt.close(fig)
        written.append("latency_vs_qps.png")
        fig, ax = plt.subplots(figsize=(8, 4.5))
        names = [r["storage"] for r in eco]
        kinds = ["lexical", "vector", "hybrid"]
        width = 0.8 / len(kinds)
        for j, q in enumerate(kinds):
            vals = []
            for r in eco:
                runs = r["queries"].get(q)
                vals.append(runs[0]["qps_per_core"] if isinstance(runs, list) and runs else 0.0)
            ax.bar(np.arange(len(names)) + j * width, vals, width, label=q)
        ax.set_xticks(np.arange(len(names)) + width)
        ax.set_xticklabels(names, rotation=20, fontsize=8)
        ax.set_ylabel("QPS per CPU core (1 client thread)")
        ax.set_yscale("log")
        ax.legend()
        ax.set_title("Efficiency")
        fig.tight_layout()
        fig.savefig(out / "qps_per_core.png", dpi=110)
        plt.close(fig)
        written.append("qps_per_core.png")
    return written


def add_overlaps(eco: list) -> None:
    """overlap@10 of every storage's results with memory's (the exact reference) per query kind."""
    ref = next((r for r in eco if r.get("storage") == "memory" and "ids" in r), None)
    if ref is None:
        return
    for r in eco:
        if "ids" not in r:
            continue
        r["overlap"] = {q: float(np.mean([M.overlap_at_k(a, b, 10) for a, b in zip(ids, ref["ids"][q])]))
                        for q, ids in r["ids"].items() if q in ref["ids"]}


def write(results: dict, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    slim = json.loads(json.dumps(results, default=float))
    for r in slim.get("ecommerce", []):
        r.pop("ids", None)  # per-query result lists: large, and only needed for the overlaps
    (out / "results.json").write_text(json.dumps(slim, indent=1))
    results["plots"] = plots(results, out)
    (out / "report.md").write_text(markdown(results))
