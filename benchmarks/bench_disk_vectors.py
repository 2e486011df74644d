"""Resident memory of storage="hnsw" with its float32 vectors in RAM and on disk (vectors_on_disk).

Each mode runs in a fresh child process that builds the collection with extend_columns (batches of
--batch rows read from a memory-mapped .npy, whose pages are dropped before measuring), then runs
--queries finds. Printed per mode: build seconds, QPS and recall@10 (against numpy brute force),
and the process's memory after the build and after the queries, split as Linux counts it:
RssAnon (memory only this process holds: columns, ids, graph, codes) and RssFile (pages of files
it has mapped: clean or written back, so the kernel can reclaim them under pressure), each as the
growth over the process before the collection opened (Python and the imports) and as a fraction of
the float32 bytes (n x d x 4).

A mode is where the block lives, ram or disk, and optionally the walk's codes after a dash:
disk-rabitq1, disk-rabitq4, ram-int8 (no dash: int8, the default).

    python benchmarks/bench_disk_vectors.py --n 1000000 --dim 128
    python benchmarks/bench_disk_vectors.py --n 1000000 --modes disk,disk-rabitq4,disk-rabitq1
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def memory() -> dict:
    out = {}
    with open("/proc/self/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "RssAnon", "RssFile"):
                out[key] = int(value.split()[0]) * 1024
    return out


def clustered(n: int, dim: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centers = rng.standard_normal((max(16, n // 2000), dim)).astype(np.float32) * 3
    out = np.empty((n, dim), dtype=np.float32)
    for lo in range(0, n, 100_000):
        hi = min(n, lo + 100_000)
        out[lo:hi] = centers[rng.integers(0, len(centers), hi - lo)] + rng.standard_normal((hi - lo, dim), dtype=np.float32)
    return out


def truth(X: np.ndarray, Q: np.ndarray, k: int) -> np.ndarray:
    best = np.empty((len(Q), k), dtype=np.int64)
    qq = (Q.astype(np.float64) ** 2).sum(1)
    for i in range(0, len(Q), 100):
        d = -2.0 * Q[i:i + 100].astype(np.float64) @ X.T.astype(np.float64)
        d += (X.astype(np.float64) ** 2).sum(1)[None, :] + qq[i:i + 100, None]
        part = np.argpartition(d, k, axis=1)[:, :k]
        best[i:i + 100] = np.take_along_axis(part, np.argsort(np.take_along_axis(d, part, 1), 1), 1)
    return best


def child(args) -> None:
    import hybridsearch as hs
    X = np.load(args.data, mmap_mode="r")
    Q = np.load(args.queries)
    n, dim = X.shape

    class Doc(hs.Document):
        v: hs.Vector[dim]

    start = memory()
    started = time.perf_counter()
    place, _, quant = args.mode.partition("-")
    da = hs.DocumentArray(Doc, storage="hnsw", path=args.path, metric="l2", m=args.m, ef_construct=args.ef_construct,
                          vectors_on_disk=place == "disk", quantization=quant or "int8")
    for lo in range(0, n, args.batch):
        hi = min(n, lo + args.batch)
        da.extend_columns({"id": [f"d{i}" for i in range(lo, hi)], "v": np.ascontiguousarray(X[lo:hi])})
    build = time.perf_counter() - started
    del X  # the input's mapping goes (the collection holds copies): its pages are not the collection's
    gc.collect()
    after_build = memory()
    for q in Q[:50]:  # warm-up
        da.find(vector=q, limit=10, ef=args.ef)
    ids, started = [], time.perf_counter()
    for q in Q:
        ids.append(da.find(vector=q, limit=10, ef=args.ef).ids)
    qps = len(Q) / (time.perf_counter() - started)
    print(json.dumps({"start": start, "build_s": build, "qps": qps, "after_build": after_build, "after_queries": memory(),
                      "ids": [[int(i[1:]) for i in row] for row in ids], "stats_bytes": da.stats()["bytes"]}))
    da.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--queries", type=int, default=1000)
    ap.add_argument("--batch", type=int, default=50_000)
    ap.add_argument("--m", type=int, default=16)
    ap.add_argument("--ef-construct", type=int, default=100)
    ap.add_argument("--ef", type=int, default=64)
    ap.add_argument("--modes", default="ram,disk")
    ap.add_argument("--dir", default=None, help="where the data and collections go (default: a temporary dir)")
    ap.add_argument("--child", nargs=4, metavar=("MODE", "DATA", "QUERIES", "PATH"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    for mode in args.modes.split(","):
        place, _, quant = mode.partition("-")
        if place not in ("ram", "disk") or quant not in ("", "int8", "rabitq1", "rabitq4"):
            ap.error(f"mode {mode!r}: ram or disk, optionally -int8, -rabitq4 or -rabitq1")
    if args.child:
        args.mode, args.data, args.queries, args.path = args.child
        return child(args)
    work = Path(args.dir or tempfile.mkdtemp(prefix="bench-disk-"))
    work.mkdir(parents=True, exist_ok=True)
    X = clustered(args.n, args.dim, 7)
    rng = np.random.default_rng(8)
    Q = X[rng.integers(0, args.n, args.queries)] + rng.standard_normal((args.queries, args.dim), dtype=np.float32) * 0.5
    np.save(work / "data.npy", X)
    np.save(work / "queries.npy", Q)
    gt = truth(X, Q, 10)
    del X
    raw = args.n * args.dim * 4
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")), "?")
    print(f"# {args.n:,} x {args.dim} clustered float32 ({raw / 1e9:.2f} GB), m {args.m}, ef_construct "
          f"{args.ef_construct}, ef {args.ef}, {args.queries} queries; {cpu}, {os.cpu_count()} cores, "
          f"Python {platform.python_version()}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
          f"load average {os.getloadavg()[0]:.1f}")
    print("| mode | build s | QPS | recall@10 | after build: RSS / anon / file (x float32) | after queries: RSS / anon / file (x float32) |")
    print("| --- | ---: | ---: | ---: | --- | --- |")
    for mode in args.modes.split(","):
        path = work / f"col-{mode}"
        shutil.rmtree(path, ignore_errors=True)
        out = subprocess.run([sys.executable, __file__, "--child", mode, str(work / "data.npy"), str(work / "queries.npy"),
                              str(path), "--m", str(args.m), "--ef-construct", str(args.ef_construct),
                              "--ef", str(args.ef), "--batch", str(args.batch)], capture_output=True, text=True)
        if out.returncode:
            sys.exit(out.stderr[-3000:])
        r = json.loads(out.stdout.strip().splitlines()[-1])
        recall = np.mean([len(set(got) & set(want)) / 10 for got, want in zip(r["ids"], gt.tolist())])

        def mem(m: dict) -> str:
            grown = {k: m[k] - r["start"][k] for k in m}
            return " / ".join(f"{grown[k] / 1e6:,.0f} MB ({grown[k] / raw:.2f})" for k in ("VmRSS", "RssAnon", "RssFile"))
        print(f"| {mode} | {r['build_s']:.1f} | {r['qps']:,.0f} | {recall:.3f} | {mem(r['after_build'])} | "
              f"{mem(r['after_queries'])} |")
        shutil.rmtree(path, ignore_errors=True)
    if not args.dir:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
