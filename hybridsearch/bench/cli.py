"""`hybridsearch bench` (also `python -m hybridsearch bench`): the benchmark runner.

    hybridsearch bench --quick --out bench-out           # a few minutes on 2 cores
    hybridsearch bench --out bench-out                   # the full run (larger data, 8 client threads)
    hybridsearch bench sweep-report BENCH.json --out DIR # pytest-benchmark JSON -> recall-vs-QPS table + PNG
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from hybridsearch.bench import corpora as C
from hybridsearch.bench import report as R
from hybridsearch.bench import vectors as V
from hybridsearch.bench.adapters import remote
from hybridsearch.bench.adapters.anchors import installed
from hybridsearch.bench.adapters.databases import DATABASES, split
from hybridsearch.bench.child import in_child
from hybridsearch.bench.machine import machine_facts
from hybridsearch.bench.plots import plots
from hybridsearch.bench.tables import markdown_table
from hybridsearch.errors import missing_extra
from hybridsearch.bench.workloads.ann import RAW_MODULES, group
from hybridsearch.bench.workloads.ecommerce import (
    add_overlaps,
    database_anchor,
    ecommerce,
    lexical_anchor,
)
from hybridsearch.bench.workloads.relevance import relevance
from hybridsearch.bench.workloads.storage_tasks import storage_tasks

# passes: interleaved passes of the recall-vs-QPS sweeps; min_s: the shortest timed segment
# (one engine at one ef in one pass), so that one scheduler tick cannot decide a point
SIZES = {
    "quick": dict(ann_n=20000, ann_q=200, efs=[10, 20, 40, 80, 160], m=[16], efc=[100], passes=3, min_s=0.1,
                  six_n=10000, six_q=100, eco_n=5000, eco_q=100, threads=[1, 2, 4], rel_q=300),
    "tiny": dict(ann_n=2000, ann_q=30, efs=[16, 64], m=[16], efc=[64], passes=2, min_s=0.0, six_n=1500, six_q=20,
                 eco_n=600, eco_q=20, threads=[1, 2], rel_q=30),
    "full": dict(ann_n=200000, ann_q=1000, efs=[10, 16, 32, 64, 128, 256, 512], m=[16, 32], efc=[64, 128, 256],
                 passes=5, min_s=0.25, six_n=100000, six_q=500, eco_n=50000, eco_q=500, threads=[1, 2, 4, 8],
                 rel_q=1000),
}
ALL = ["memory", "hnsw", "sqlite", "hnswlib", "annlite", "elasticsearch", "opensearch", "weaviate"]


def select_storages(storages: list, engines: dict, installed) -> tuple:
    """(storages that can run, one reason per storage that cannot). `engines`: storage ->
    (url or None, pid) of a search node; `installed(module)`: whether a module imports."""
    usable, skipped = [], []
    for s in storages:
        if s in engines and engines[s][0] is None:
            skipped.append(f"{s}: no node answers (start one with {remote.start_line(s)})")
        elif s in ("hnswlib", "annlite") and not installed(s):
            skipped.append(f"{s}: not installed")
        elif s in engines and not installed(remote.CLIENT[s]):
            skipped.append(f"{s}: a node answers but its Python client ({remote.CLIENT[s]}) is not installed: "
                           f'pip install -e ".[{s}]"')
        else:
            usable.append(s)
    return usable, skipped


def select_anchors(spec: str | None) -> tuple:
    """(database rows to run, skip notes) from --anchors: "all" (the default: every one
    installed, a note naming the `[anchors]` extra for each missing), "none", or a comma list."""
    if spec == "none":
        return [], []
    names = list(DATABASES) if spec in (None, "all") else [a for a in spec.split(",") if a]
    unknown = [a for a in names if a not in DATABASES]
    if unknown:
        raise SystemExit(f"hybridsearch bench: --anchors: unknown {','.join(unknown)} (one of {','.join(DATABASES)})")
    return split(names)


def _rows(result, name: str) -> list:
    """A child's rows (a list), or its error as one row."""
    return result if isinstance(result, list) else [dict(result, storage=name)]


def _ann(results: dict, size: dict, usable: list, mode: str, cache, tmp: str, progress) -> None:
    X, Q = V.sift_like(size["ann_n"], size["ann_q"])
    gt, _ = V.ground_truth(X, Q, 10, "l2", cache)
    passes, min_s = size["passes"], size["min_s"]
    results["ann_data"] = (f"sift-like: {len(X):,} clustered 128-d vectors, {len(Q)} queries, l2, exact ground "
                           "truth by our exact kernel (ties counted as found); QPS: median of "
                           f"{passes} passes interleaved engine by engine (each engine's whole ef sweep in "
                           f"turn, each point at least {min_s:g} s after a warm-up), min–max over the passes")
    results["ann_passes"] = passes
    anchors = ["ours-raw"] + [a for a, mod in RAW_MODULES.items() if installed(mod)] + results["anchors"]
    results["skipped"] += [f"{a}: not installed" for a, mod in RAW_MODULES.items() if not installed(mod)]
    # ours and the anchors in one process, their sweeps interleaved; annlite (which cannot
    # share a process with hnswlib) in its own
    together = [s for s in ("hnsw", "hnswlib") if s in usable] + anchors
    combos = [(m, efc) for m in size["m"] for efc in size["efc"]]
    task = progress.add_task("recall vs QPS", total=len(combos) + ("annlite" in usable))
    results["ann"] = []
    for m, efc in combos:
        results["ann"] += _rows(in_child(group, together, X, Q, gt, m, efc, size["efs"], "l2", tmp, passes, min_s),
                                "+".join(together))
        progress.advance(task)
    if "annlite" in usable:
        m, efc = combos[0]
        results["ann"] += _rows(in_child(group, ["annlite"], X, Q, gt, m, efc, size["efs"], "l2", tmp, passes,
                                         min_s), "annlite")
        progress.advance(task)
    fashion = V.fashion_mnist() if mode == "full" else None
    if fashion is not None:  # a real ANN set: 60,000 train images as the base, 1,000 test images as queries
        FX, FQ = fashion[0], fashion[1][:1000]
        fgt, _ = V.ground_truth(FX, FQ, 10, "l2", cache)
        results["ann_data"] += "; Fashion-MNIST rows: 60,000 x 784 (l2), 1,000 test queries"
        names = [x for x in ("hnsw", "hnswlib") if x in usable] + anchors
        for row in _rows(in_child(group, names, FX, FQ, fgt, 16, 100, size["efs"], "l2", tmp, passes, min_s), "ann"):
            results["ann"].append(dict(row, storage=f"{row['storage']} (fashion-mnist)", dataset="fashion-mnist"))
    elif mode == "full":
        results["skipped"].append("Fashion-MNIST: apt-get install dataset-fashion-mnist")


def _six_tasks(results: dict, size: dict, usable: list, remote_opts: dict, cache, tmp: str, progress) -> None:
    X, Q = V.sift_like(size["six_n"], size["six_q"], seed=1)
    gt, _ = V.ground_truth(X, Q, 10, "l2", cache)
    results["six_tasks_data"] = (f"{len(X):,} documents (128-d vector, two int columns), l2, m=16, "
                                 "ef_construct=100, ef=64; 500 reads / updates / deletes by id, 50 filters, "
                                 f"{len(Q)} vector queries; median per-call latency")
    task = progress.add_task("six tasks", total=len(usable))
    results["six_tasks"] = []
    for s in usable:
        opts = {"m": 16, "ef_construct": 100, "ef": 64, **remote_opts.get(s, {})}
        results["six_tasks"].append(dict(in_child(storage_tasks, s, X, Q, gt, "l2", opts, tmp), storage=s))
        progress.advance(task)


def _ecommerce(results: dict, size: dict, usable: list, engines: dict, remote_opts: dict, tmp: str, progress):
    prod = C.products(size["eco_n"], size["eco_q"])
    results["ecommerce_data"] = (f"{len(prod.docs):,} products (title 11 words, description 40, 20 categories, "
                                 f"Zipfian 30k-word vocabulary), {prod.query_vectors.shape[1]}-d embeddings "
                                 f"({prod.embedder}), {len(prod.queries)} queries = 8 consecutive words of sampled "
                                 f"titles; filter: one category; k=10; threads {size['threads']}. The bm25s and "
                                 "tantivy anchors index title + description as one field (their usual setup), "
                                 "so their overlap with our best-field BM25 is low by design")
    rows = [s for s in usable if s != "hnswlib"]
    anchors = [a for a in ("bm25s", "tantivy") if installed(a)]
    task = progress.add_task("e-commerce", total=len(rows) + len(anchors) + len(results["anchors"]))
    results["ecommerce"] = []
    for s in rows:
        opts = {"m": 16, "ef_construct": 100, "ef": 100, **remote_opts.get(s, {})}
        pid = engines[s][1] if s in engines else None
        results["ecommerce"].append(dict(in_child(ecommerce, s, prod, size["threads"], opts, tmp, pid), storage=s))
        progress.advance(task)
    for a in anchors:
        results["ecommerce"].append(dict(in_child(lexical_anchor, a, prod, size["threads"]), storage=a))
        progress.advance(task)
    for a in results["anchors"]:  # Chroma / Milvus Lite / LanceDB: the query kinds each has
        results["ecommerce"].append(dict(in_child(database_anchor, a, prod, size["threads"]), storage=a))
        progress.advance(task)
    add_overlaps(results["ecommerce"])


def _relevance(results: dict, size: dict, usable: list, remote_opts: dict, data, tmp: str, progress) -> None:
    rel = C.nave_kjv(size["rel_q"], data)
    if rel is None:
        results["skipped"].append("relevance: nave-kjv not found (benchmarks/data/nave-kjv or --data)")
        return
    results["relevance_data"] = (f"nave-kjv: {len(rel.corpus):,} KJV verses, {len(rel.queries)} sampled "
                                 "Nave's topics with qrels; lexical search, top 100")
    rows = [s for s in usable if s in ("memory", "sqlite", "elasticsearch", "opensearch")]
    rows += ["bm25s"] if installed("bm25s") else []
    task = progress.add_task("relevance", total=len(rows))
    results["relevance"] = []
    for s in rows:
        results["relevance"].append(dict(in_child(relevance, s, rel, remote_opts.get(s, {}), tmp), storage=s))
        progress.advance(task)


def run(args) -> dict:
    """Every workload of the harness at the chosen size -> the results dict report.write takes."""
    from rich.console import Console
    from rich.progress import Progress
    mode = args.size or ("quick" if args.quick else "full")
    size = SIZES[mode]
    storages = args.storages.split(",") if args.storages else list(ALL)
    results = {"mode": mode, "machine": machine_facts(), "skipped": [], "started": time.strftime("%Y-%m-%d %H:%M:%S")}
    engines = {s: remote.find_node(s) for s in remote.REMOTE}
    usable, skipped = select_storages(storages, engines, installed)
    results["skipped"] += skipped
    results["anchors"], notes = select_anchors(getattr(args, "anchors", None))
    results["skipped"] += notes
    remote_opts = {s: {"hosts": engines[s][0]} for s in engines if engines[s][0]}
    tmp = tempfile.mkdtemp(prefix="hs-bench-")
    cache = V.cache_dir(args.cache)
    results["phase_s"] = {}
    with Progress(console=Console()) as progress:
        for name, phase in (("recall vs QPS", lambda: _ann(results, size, usable, mode, cache, tmp, progress)),
                            ("six tasks", lambda: _six_tasks(results, size, usable, remote_opts, cache, tmp, progress)),
                            ("e-commerce", lambda: _ecommerce(results, size, usable, engines, remote_opts, tmp,
                                                              progress)),
                            ("relevance", lambda: _relevance(results, size, usable, remote_opts, args.data, tmp,
                                                             progress))):
            t0 = time.perf_counter()
            phase()
            results["phase_s"][name] = round(time.perf_counter() - t0, 1)
    results["finished"] = time.strftime("%Y-%m-%d %H:%M:%S")
    return results


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
        rows.setdefault(key, []).append({"ef": info.get("ef"), "recall": info["recall"], "qps": qps})
    ann = [{"storage": k[0], "m": k[1], "ef_construct": k[2], "points": sorted(v, key=lambda p: p["ef"])}
           for k, v in sorted(rows.items(), key=lambda kv: (str(kv[0][0]), kv[0][1] or 0, kv[0][2] or 0))]
    out.mkdir(parents=True, exist_ok=True)
    plots({"ann": ann}, out)
    lines = markdown_table(["storage", "m", "ef_construct", "ef", "recall@10", "QPS"],
                           [[r["storage"], r["m"], r["ef_construct"], p["ef"], f"{p['recall']:.3f}", f"{p['qps']:,.0f}"]
                            for r in ann for p in r["points"]])
    (out / "sweep.md").write_text("\n".join(lines) + "\n\n![recall vs QPS](recall_vs_qps.png)\n")
    print("\n".join(lines))


# what the harness itself imports (the compared libraries are optional: rows for those missing
# are skipped, saying so)
BENCH_NEEDS = ("rich", "matplotlib", "threadpoolctl")


# the commands `hybridsearch --help` lists: (usage, what it does)
COMMANDS = (
    ("bench [--quick] [--out DIR] [--storages A,B] [--anchors ...]",
     "run the benchmark harness: results.json, report.md and PNG plots in DIR (--quick: a few minutes on 2 cores)"),
    ("bench sweep-report BENCH.json [--out DIR]",
     "turn a pytest-benchmark JSON of the HNSW sweep into a recall-vs-QPS table and plot"),
)


def usage() -> str:
    """The top-level help: every command with one line on what it does."""
    lines = ["usage: hybridsearch COMMAND [options]   (also: python -m hybridsearch COMMAND)", "", "commands:"]
    for u, what in COMMANDS:
        lines += [f"  hybridsearch {u}", f"      {what}"]
    lines += ["", "`hybridsearch bench --help` lists the options of a command."]
    return "\n".join(lines)


def main(argv=None) -> int:
    """The command line: `bench [options]` or `bench sweep-report JSON --out DIR`; --help lists them."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] in (["-h"], ["--help"], ["help"]):
        print(usage())
        return 0
    if not argv or argv[0] != "bench":
        if argv:
            print(f"hybridsearch: unknown command {argv[0]!r}", file=sys.stderr)
        print(usage(), file=sys.stderr)
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
    ap.add_argument("--anchors", default="all",
                    help=f"database rows: all (those installed), none, or a subset of {','.join(DATABASES)}")
    ap.add_argument("--cache", default=None, help="cache folder for generated data and ground truth")
    ap.add_argument("--data", default=None, help="a BEIR-style folder for the relevance table (default: nave-kjv)")
    a = ap.parse_args(argv)
    missing = [m for m in BENCH_NEEDS if not installed(m)]
    if missing:
        print(f"hybridsearch bench: {str(missing_extra('the benchmark harness', ', '.join(missing), 'bench'))}",
              file=sys.stderr)
        return 2
    out = Path(a.out)
    results = run(a)
    R.write(results, out)
    print(R.markdown(results))
    for w in results.get("warnings", []):  # again at the end, where the eye lands after a long report
        print(f"WARNING: {w}", file=sys.stderr)
    print(f"\nwrote {out / 'results.json'}, {out / 'report.md'} and {', '.join(results.get('plots', []))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
