"""`hybridsearch bench` (also `python -m hybridsearch bench`): the benchmark runner.

    hybridsearch bench --quick --out bench-out           # a few minutes on 2 cores
    hybridsearch bench --out bench-out                   # the full run (larger data, 8 client threads)
    hybridsearch bench sweep-report BENCH.json --out DIR # pytest-benchmark JSON -> recall-vs-QPS table + PNG
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from hybridsearch.bench import datasets as D
from hybridsearch.bench import report as R
from hybridsearch.bench import workloads as W

ROOT = Path(__file__).resolve().parent.parent.parent
SIZES = {
    "quick": dict(ann_n=20000, ann_q=200, efs=[10, 20, 40, 80, 160], m=[16], efc=[100], six_n=10000, six_q=100,
                  eco_n=5000, eco_q=100, threads=[1, 2, 4], rel_q=300),
    "tiny": dict(ann_n=2000, ann_q=30, efs=[16, 64], m=[16], efc=[64], six_n=1500, six_q=20,
                 eco_n=600, eco_q=20, threads=[1, 2], rel_q=30),
    "full": dict(ann_n=200000, ann_q=1000, efs=[10, 16, 32, 64, 128, 256, 512], m=[16, 32], efc=[64, 128, 256],
                 six_n=100000, six_q=500, eco_n=50000, eco_q=500, threads=[1, 2, 4, 8], rel_q=1000),
}
ALL = ["memory", "hnsw", "sqlite", "hnswlib", "annlite", "elasticsearch", "opensearch"]
CLIENTS = {"elasticsearch": "elasticsearch", "opensearch": "opensearchpy"}  # storage -> client module


def _engine(kind: str):
    """(url, pid) of a search node answering on loopback, or (None, None)."""
    url = os.environ.get({"es": "HS_ES_URL", "os": "HS_OS_URL"}[kind],
                         {"es": "http://127.0.0.1:9260", "os": "http://127.0.0.1:9250"}[kind])
    try:
        with urllib.request.urlopen(f"{url}/_cluster/health", timeout=3) as r:
            if r.status != 200:
                return None, None
    except OSError:
        return None, None
    pid = None
    script = ROOT / "scripts" / "searchnode.sh"
    if script.exists():
        p = subprocess.run(["bash", str(script), "pid", kind], capture_output=True, text=True)
        pid = int(p.stdout.strip()) if p.returncode == 0 and p.stdout.strip().isdigit() else None
    return url, pid


def _installed(module: str) -> bool:
    import importlib.util
    return importlib.util.find_spec(module) is not None


def select_storages(storages: list, engines: dict, installed) -> tuple:
    """(storages that can run, one reason per storage that cannot). `engines`: storage ->
    (url or None, pid) of a search node; `installed(module)`: whether a module imports."""
    usable, skipped = [], []
    for s in storages:
        if s in engines and engines[s][0] is None:
            skipped.append(f"{s}: no node answers (start one with scripts/searchnode.sh start "
                           f"{'es' if s == 'elasticsearch' else 'os'})")
        elif s in ("hnswlib", "annlite") and not installed(s):
            skipped.append(f"{s}: not installed")
        elif s in engines and not installed(CLIENTS[s]):
            skipped.append(f"{s}: a node answers but its Python client ({CLIENTS[s]}) is not installed: "
                           f'pip install -e ".[{s}]"')
        else:
            usable.append(s)
    return usable, skipped


def run(args) -> dict:
    from rich.console import Console
    from rich.progress import Progress
    console = Console()
    mode = args.size or ("quick" if args.quick else "full")
    size = SIZES[mode]
    storages = args.storages.split(",") if args.storages else list(ALL)
    results = {"mode": mode, "machine": R.machine_facts(), "skipped": [],
               "started": time.strftime("%Y-%m-%d %H:%M:%S")}
    engines = {"elasticsearch": _engine("es"), "opensearch": _engine("os")}
    usable, skipped = select_storages(storages, engines, _installed)
    results["skipped"] += skipped
    remote_opts = {s: {"hosts": engines[s][0]} for s in engines if engines[s][0]}
    tmp = tempfile.mkdtemp(prefix="hs-bench-")
    cache = D.cache_dir(args.cache)
    with Progress(console=console) as progress:
        # recall vs QPS
        X, Q = D.sift_like(size["ann_n"], size["ann_q"])
        gt_ids, gt_scores = D.ground_truth(X, Q, 10, "l2", cache)
        results["ann_data"] = (f"sift-like: {len(X):,} clustered 128-d vectors, {len(Q)} queries, l2, exact ground "
                               "truth by our exact kernel (ties counted as found)")
        ann_rows = [s for s in ("hnsw", "hnswlib", "annlite") if s in usable]
        anchors = [a for a, mod in (("hnswlib-raw", "hnswlib"), ("faiss-raw", "faiss")) if _installed(mod)]
        results["skipped"] += [f"{a}: not installed" for a, mod in (("hnswlib-raw", "hnswlib"), ("faiss-raw", "faiss"))
                               if not _installed(mod)]
        # ours and the anchors in one process, timed round-robin; annlite (which cannot share a
        # process with hnswlib) in its own
        together = [s for s in ann_rows if s != "annlite"] + anchors
        combos = [(m, efc) for m in size["m"] for efc in size["efc"]]
        task = progress.add_task("recall vs QPS", total=len(combos) + ("annlite" in ann_rows))
        results["ann"] = []
        for m, efc in combos:
            rows = W.in_child(W.ann_group, together, X, Q, gt_ids, gt_scores, m, efc, size["efs"], "l2", tmp)
            results["ann"] += rows if isinstance(rows, list) else [dict(rows, storage="+".join(together))]
            progress.advance(task)
        if "annlite" in ann_rows:
            m, efc = combos[0]
            rows = W.in_child(W.ann_group, ["annlite"], X, Q, gt_ids, gt_scores, m, efc, size["efs"], "l2", tmp)
            results["ann"] += rows if isinstance(rows, list) else [dict(rows, storage="annlite")]
            progress.advance(task)
        fashion = D.fashion_mnist() if mode == "full" else None
        if fashion is not None:  # a real ANN set: 60,000 train images as the base, 1,000 test images as queries
            FX, FQ = fashion[0], fashion[1][:1000]
            fgi, fgs = D.ground_truth(FX, FQ, 10, "l2", cache)
            results["ann_data"] += "; Fashion-MNIST rows: 60,000 x 784 (l2), 1,000 test queries"
            rows = W.in_child(W.ann_group, [x for x in ("hnsw", "hnswlib") if x in usable] + anchors,
                              FX, FQ, fgi, fgs, 16, 100, size["efs"], "l2", tmp)
            for row in (rows if isinstance(rows, list) else [rows]):
                row["storage"] = f"{row.get('storage', 'ann')} (fashion-mnist)"
                results["ann"].append(row)
        elif mode == "full":
            results["skipped"].append("Fashion-MNIST: apt-get install dataset-fashion-mnist")
        # six tasks
        X6, Q6 = D.sift_like(size["six_n"], size["six_q"], seed=1)
        g6i, g6s = D.ground_truth(X6, Q6, 10, "l2", cache)
        results["six_tasks_data"] = (f"{len(X6):,} documents (128-d vector, two int columns), l2, m=16, "
                                     "ef_construct=100, ef=64; 500 reads / updates / deletes by id, 50 filters, "
                                     f"{len(Q6)} vector queries; median per-call latency")
        task = progress.add_task("six tasks", total=len(usable))
        results["six_tasks"] = []
        for s in usable:
            opts = {"m": 16, "ef_construct": 100, "ef": 64, **remote_opts.get(s, {})}
            row = W.in_child(W.six_tasks, s, X6, Q6, g6i, g6s, opts, tmp)
            row.setdefault("storage", s)
            results["six_tasks"].append(row)
            progress.advance(task)
        # e-commerce
        prod = D.products(size["eco_n"], size["eco_q"])
        results["ecommerce_data"] = (f"{len(prod.docs):,} products (title 11 words, description 40, 20 categories, "
                                     f"Zipfian 30k-word vocabulary), {prod.query_vectors.shape[1]}-d embeddings "
                                     f"({prod.embedder}), {len(prod.queries)} queries = first 8 words of sampled "
                                     f"titles; filter: one category; k=10; threads {size['threads']}. The bm25s and "
                                     "tantivy anchors index title + description as one field (their usual setup), "
                                     "so their overlap with our best-field BM25 is low by design")
        eco_rows = [s for s in usable if s != "hnswlib"]
        lex_anchors = [a for a in ("bm25s", "tantivy") if _installed(a)]
        task = progress.add_task("e-commerce", total=len(eco_rows) + len(lex_anchors))
        results["ecommerce"] = []
        for s in eco_rows:
            opts = {"m": 16, "ef_construct": 100, "ef": 100, **remote_opts.get(s, {})}
            pid = engines[s][1] if s in engines else None
            row = W.in_child(W.ecommerce, s, prod, size["threads"], opts, tmp, pid)
            row.setdefault("storage", s)
            results["ecommerce"].append(row)
            progress.advance(task)
        for a in lex_anchors:
            row = W.in_child(W.lexical_anchor, a, prod, size["threads"])
            row.setdefault("storage", a)
            results["ecommerce"].append(row)
            progress.advance(task)
        R.add_overlaps(results["ecommerce"])
        # relevance
        rel = D.nave_kjv(size["rel_q"], args.data)
        if rel is None:
            results["skipped"].append("relevance: nave-kjv not found (benchmarks/data/nave-kjv or --data)")
        else:
            results["relevance_data"] = (f"nave-kjv: {len(rel.corpus):,} KJV verses, {len(rel.queries)} sampled "
                                         "Nave's topics with qrels; lexical search, top 100")
            rel_rows = [s for s in usable if s in ("memory", "sqlite", "elasticsearch", "opensearch")]
            task = progress.add_task("relevance", total=len(rel_rows) + 1)
            results["relevance"] = []
            for s in rel_rows:
                row = W.in_child(W.relevance, s, rel, remote_opts.get(s, {}), tmp)
                row.setdefault("storage", s)
                results["relevance"].append(row)
                progress.advance(task)
            if _installed("bm25s"):
                results["relevance"].append(W.in_child(W.relevance_bm25s, rel))
            progress.advance(task)
    results["finished"] = time.strftime("%Y-%m-%d %H:%M:%S")
    return results


def print_key_tables(results: dict) -> None:
    """The run's headline tables on the terminal."""
    md = R.markdown(results)
    print(md)


def sweep_report(path: str, out: Path) -> None:
    """pytest-benchmark JSON (with recall@10 in extra_info) -> sweep.md + recall_vs_qps.png."""
    data = json.loads(Path(path).read_text())
    rows: dict = {}
    for b in data.get("benchmarks", []):
        info = b.get("extra_info", {})
        if "recall" not in info:
            continue
        key = (info.get("storage", b["group"] or b["name"]), info.get("m"), info.get("ef_construct"))
        qps = info.get("queries", 1) / b["stats"]["median"]
        rows.setdefault(key, []).append({"ef": info.get("ef"), "recall": info["recall"], "qps": qps,
                                         "p99_ms": float("nan")})
    ann = [{"storage": k[0], "m": k[1], "ef_construct": k[2], "build_s": float("nan"),
            "points": sorted(v, key=lambda p: p["ef"])} for k, v in sorted(rows.items(), key=str)]
    out.mkdir(parents=True, exist_ok=True)
    results = {"mode": "pytest-benchmark sweep", "machine": data.get("machine_info") and {
        "cpu": data["machine_info"].get("cpu", {}).get("brand_raw", "?"), "cores": data["machine_info"].get("cpu", {}).get("count"),
        "python": data["machine_info"].get("python_version"), "versions": {}} or R.machine_facts(),
        "ann": ann, "ann_data": f"from {path}"}
    R.plots(results, out)
    lines = ["| storage | m | ef_construct | ef | recall@10 | QPS |", "| --- | --- | --- | --- | --- | --- |"]
    for r in ann:
        for p in r["points"]:
            lines.append(f"| {r['storage']} | {r['m']} | {r['ef_construct']} | {p['ef']} | {p['recall']:.3f} | {p['qps']:,.0f} |")
    (out / "sweep.md").write_text("\n".join(lines) + "\n\n![recall vs QPS](recall_vs_qps.png)\n")
    print("\n".join(lines))


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] != "bench":
        print("usage: hybridsearch bench [--quick] --out DIR | hybridsearch bench sweep-report BENCH.json --out DIR",
              file=sys.stderr)
        return 2
    argv = argv[1:]
    if argv and argv[0] == "sweep-report":
        ap = argparse.ArgumentParser(prog="hybridsearch bench sweep-report")
        ap.add_argument("json")
        ap.add_argument("--out", default="bench-sweep")
        a = ap.parse_args(argv[1:])
        sweep_report(a.json, Path(a.out))
        return 0
    ap = argparse.ArgumentParser(prog="hybridsearch bench", description="hybridsearch benchmark runner")
    ap.add_argument("--quick", action="store_true", help="small sizes: a few minutes on 2 cores")
    ap.add_argument("--out", default="bench-out", help="folder for results.json, report.md and the PNG plots")
    ap.add_argument("--size", choices=sorted(SIZES), default=None, help="explicit size (tiny is for tests)")
    ap.add_argument("--storages", default=None, help=f"comma-separated subset of {','.join(ALL)}")
    ap.add_argument("--cache", default=None, help="cache folder for generated data and ground truth")
    ap.add_argument("--data", default=None, help="a BEIR-style folder for the relevance table (default: nave-kjv)")
    a = ap.parse_args(argv)
    out = Path(a.out)
    results = run(a)
    R.write(results, out)
    print_key_tables(results)
    print(f"\nwrote {out / 'results.json'}, {out / 'report.md'} and {', '.join(results.get('plots', []))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
