"""annlite vs our storages on one workload: extend, find by vector (recall@10, QPS), filtered
find at 1% / 10%, partial update, each storage in its own child process (annlite cannot share
a process with hnswlib), same data, same HNSW parameters.

    python benchmarks/bench_annlite.py                # 50,000 x 128
    python benchmarks/bench_annlite.py --n 200000
"""
import argparse
import json
import multiprocessing as mp
import os
import statistics
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from machine import cpu_model  # noqa: E402  (benchmarks/machine.py)

DIM = 128
STORAGES = ["annlite", "hnsw", "hnswlib", "sqlite", "memory"]


def data(n: int, n_queries: int):
    """Clustered vectors (so HNSW has work to do), a category with 1% and 10% values, queries."""
    rng = np.random.default_rng(7)
    centers = rng.standard_normal((64, DIM)).astype(np.float32) * 3
    X = centers[rng.integers(0, 64, n)] + rng.standard_normal((n, DIM)).astype(np.float32)
    Q = centers[rng.integers(0, 64, n_queries)] + rng.standard_normal((n_queries, DIM)).astype(np.float32)
    rare = np.where(np.arange(n) % 100 == 0, "rare", np.where(np.arange(n) % 10 == 1, "tenth", "common"))
    return X, Q, rare


def truth(X, Q, mask, k=10):
    """Exact top-k ids (cosine) among the rows where mask holds."""
    Xn = X / np.linalg.norm(X, axis=1, keepdims=True)
    rows = np.flatnonzero(mask)
    S = (Q / np.linalg.norm(Q, axis=1, keepdims=True)) @ Xn[rows].T
    return [set(rows[np.argsort(-s)[:k]].tolist()) for s in S]


def timed_qps(fn, Q) -> float:
    for q in Q[: max(1, len(Q) // 5)]:
        fn(q)
    rates = []
    for _ in range(3):
        t = time.perf_counter()
        for q in Q:
            fn(q)
        rates.append(len(Q) / (time.perf_counter() - t))
    return statistics.median(rates)


def run(storage: str, n: int, n_queries: int, out) -> None:
    import hybridsearch as hs

    class Item(hs.Document):
        category: hs.Keyword
        price: int = 0
        v: hs.Vector[DIM]

    X, Q, cat = data(n, n_queries)
    opts = {} if storage in ("memory", "sqlite") else {"m": 16, "ef_construct": 200, "ef": 64}
    with tempfile.TemporaryDirectory() as tmp:
        if storage in ("annlite", "sqlite"):
            opts["path"] = os.path.join(tmp, "c")
        da = hs.DocumentArray(Item, storage=storage, **opts)
        docs = [{"id": str(i), "category": c, "price": i, "v": x} for i, (x, c) in enumerate(zip(X, cat))]
        t = time.perf_counter()
        for a in range(0, n, 10000):
            da.extend(docs[a:a + 10000])
        extend_s = time.perf_counter() - t
        row = {"storage": storage, "extend_s": extend_s}
        for label, flt, mask in (("all", None, np.ones(n, bool)), ("10%", {"category": "tenth"}, cat == "tenth"),
                                 ("1%", {"category": "rare"}, cat == "rare")):
            ref = truth(X, Q, mask)
            got = [set(int(i) for i in da.find(vector=q, filter=flt, limit=10).ids) for q in Q]
            row[f"recall_{label}"] = float(np.mean([len(g & r) / 10 for g, r in zip(got, ref)]))
            row[f"qps_{label}"] = timed_qps(lambda q: da.find(vector=q, filter=flt, limit=10), Q)
        ids = [str(i) for i in range(0, n, max(1, n // 500))]
        t = time.perf_counter()
        for i in ids:
            da.update(i, price=-1)
        row["updates_per_s"] = len(ids) / (time.perf_counter() - t)
        da.close()
    out.put(row)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=50000)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--storages", default=",".join(STORAGES))
    ap.add_argument("--json", default=None, help="also write the rows to this file")
    args = ap.parse_args()
    print(f"machine: {cpu_model()}, {os.cpu_count()} cores; {args.n:,} x {DIM} clustered, cosine, "
          f"m=16 ef_construct=200 ef=64, extend in batches of 10,000, 1 query per call on 1 thread")
    ctx = mp.get_context("spawn")
    rows = []
    for storage in args.storages.split(","):
        q = ctx.Queue()
        p = ctx.Process(target=run, args=(storage, args.n, args.queries, q))
        p.start()
        p.join()
        if p.exitcode != 0 or q.empty():
            print(f"{storage}: failed (exit code {p.exitcode})")
            continue
        rows.append(q.get())
    head = (f"{'storage':9s} {'extend s':>9s} {'recall':>7s} {'QPS':>8s} {'rec 10%':>8s} {'QPS 10%':>8s} "
            f"{'rec 1%':>7s} {'QPS 1%':>8s} {'updates/s':>10s}")
    print(head)
    for r in rows:
        print(f"{r['storage']:9s} {r['extend_s']:9.1f} {r['recall_all']:7.3f} {r['qps_all']:8.0f} "
              f"{r['recall_10%']:8.3f} {r['qps_10%']:8.0f} {r['recall_1%']:7.3f} {r['qps_1%']:8.0f} "
              f"{r['updates_per_s']:10.0f}")
    by = {r["storage"]: r for r in rows}
    if "annlite" in by:
        for other in ("hnsw", "hnswlib", "sqlite"):
            if other in by:
                a, o = by["annlite"], by[other]
                print(f"{other} / annlite: QPS {o['qps_all'] / a['qps_all']:.1f}x, 10% {o['qps_10%'] / a['qps_10%']:.1f}x, "
                      f"1% {o['qps_1%'] / a['qps_1%']:.1f}x, extend {a['extend_s'] / o['extend_s']:.1f}x faster, "
                      f"updates {o['updates_per_s'] / a['updates_per_s']:.1f}x")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"machine": cpu_model(), "n": args.n, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
