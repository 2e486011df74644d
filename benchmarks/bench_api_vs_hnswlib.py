"""Ours through the DocumentArray API (`find()` on storage="hnsw") against the raw hnswlib
index — the per-query cost of our API included, hnswlib's Python binding included.

    python benchmarks/bench_api_vs_hnswlib.py            # 200,000 x 128 sift-like, 500 queries
    python benchmarks/bench_api_vs_hnswlib.py --n 20000

Same data and parameters (l2, m=16, ef_construct=100), both built on all cores, searched one
query per call on one thread; ours and hnswlib alternate pass by pass (round-robin) so load
from elsewhere on a shared machine falls on both; median of --passes; recall@10 against the
exact top-10 of our exact kernel.
"""
import argparse
from importlib import metadata
import os
import platform
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from machine import cpu_model  # noqa: E402  (benchmarks/machine.py)

import hnswlib  # noqa: E402

import hybridsearch as hs  # noqa: E402
from hybridsearch.bench import datasets  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=200_000)
    ap.add_argument("--queries", type=int, default=500)
    ap.add_argument("--passes", type=int, default=3)
    ap.add_argument("--ef", default="20,40,80,160")
    ap.add_argument("--quantization", default="auto", choices=["auto", "none", "int8"],
                    help="ours: auto (the default: int8 codes for the walk, re-scored on float32) or none")
    args = ap.parse_args()
    X, Q = datasets.sift_like(args.n, args.queries)[:2]
    gt, _ = datasets.ground_truth(X, Q, 10, "l2")
    print(f"machine: {cpu_model()}, {os.cpu_count()} cores; Python {platform.python_version()}; "
          f"hnswlib {metadata.version('hnswlib')}; {args.n:,} x {X.shape[1]} sift-like, l2, "
          f"m=16 ef_construct=100, {len(Q)} queries, median of {args.passes} round-robin passes; "
          f"ours quantization={args.quantization}")

    class Vec(hs.Document):
        v: hs.Vector[X.shape[1]]

    t = time.perf_counter()
    da = hs.DocumentArray(Vec, storage="hnsw", m=16, ef_construct=100, metric="l2",
                          quantization=None if args.quantization == "none" else args.quantization)
    da.extend([{"id": str(i), "v": X[i]} for i in range(len(X))])
    print(f"build: ours {time.perf_counter() - t:.1f} s (through extend: documents + graph)", end="; ")
    t = time.perf_counter()
    idx = hnswlib.Index("l2", X.shape[1])
    idx.init_index(len(X), 16, 100)
    idx.set_num_threads(os.cpu_count() or 1)
    idx.add_items(X)
    idx.set_num_threads(1)
    print(f"hnswlib {time.perf_counter() - t:.1f} s")

    def recall(found) -> float:
        return float(np.mean([len(set(map(int, f)) & set(g.tolist())) / 10 for f, g in zip(found, gt)]))

    for q in Q[:50]:  # warm-up
        da.find(q, limit=10)
        idx.knn_query(q, k=10)
    print(f"{'ef':>4} {'ours recall':>12} {'ours QPS':>10} {'hnswlib recall':>15} {'hnswlib QPS':>12} {'ratio':>6}")
    for ef in map(int, args.ef.split(",")):
        idx.set_ef(ef)
        ours, theirs = [], []
        for _ in range(args.passes):
            t = time.perf_counter()
            f_ours = [da.find(q, limit=10, ef=ef).ids for q in Q]
            ours.append(time.perf_counter() - t)
            t = time.perf_counter()
            f_theirs = [idx.knn_query(q, k=10)[0][0] for q in Q]
            theirs.append(time.perf_counter() - t)
        qo, qh = len(Q) / float(np.median(ours)), len(Q) / float(np.median(theirs))
        print(f"{ef:>4} {recall(f_ours):>12.3f} {qo:>10,.0f} {recall(f_theirs):>15.3f} {qh:>12,.0f} {qo / qh:>5.2f}x")


if __name__ == "__main__":
    main()
