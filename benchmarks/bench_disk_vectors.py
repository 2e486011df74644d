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

Growth: --n takes several sizes (the first rows of one data set, so each size holds the smaller
ones) and --ef several beam widths; each (size, mode) is built once and searched at every ef, one
query per call, giving recall@10, QPS and the p50 / p99 of the calls' latencies. With --out DIR
the rows go to DIR/disk_vectors.json and the growth to DIR/growth.png (build time, QPS at each ef,
resident memory against the size).

    python benchmarks/bench_disk_vectors.py --n 1000000 --dim 128
    python benchmarks/bench_disk_vectors.py --n 1000000 --modes disk,disk-rabitq4,disk-rabitq1
    python benchmarks/bench_disk_vectors.py --n 1000000,2000000,5000000 --dim 384 --modes disk-rabitq4 \
        --ef 64,128,256 --out /tmp/growth
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

from hybridsearch.bench.metrics import percentile


def memory() -> dict:
    """VmRSS, RssAnon and RssFile in bytes, and "files": the four file mappings holding the most
    resident pages, as (name, bytes) - which file RssFile counts."""
    out = {}
    with open("/proc/self/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "RssAnon", "RssFile"):
                out[key] = int(value.split()[0]) * 1024
    files, name = {}, None
    with open("/proc/self/smaps") as f:
        for line in f:
            head = line.split(maxsplit=5)
            if len(head) >= 5 and "-" in head[0] and not line.startswith(("Rss", "Size")):
                name = head[5].strip() if len(head) == 6 and head[5].startswith("/") else None
            elif line.startswith("Rss:") and name:
                files[name] = files.get(name, 0) + int(line.split()[1]) * 1024
    out["files"] = sorted(((os.path.basename(k), v) for k, v in files.items()), key=lambda kv: -kv[1])[:4]
    return out


def clustered(n: int, dim: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centers = rng.standard_normal((max(16, n // 2000), dim)).astype(np.float32) * 3
    out = np.empty((n, dim), dtype=np.float32)
    for lo in range(0, n, 100_000):
        hi = min(n, lo + 100_000)
        out[lo:hi] = centers[rng.integers(0, len(centers), hi - lo)] + rng.standard_normal((hi - lo, dim), dtype=np.float32)
    return out


def truth(X: np.ndarray, Q: np.ndarray, k: int, block: int = 100_000) -> np.ndarray:
    """The exact l2 top-k rows of X for each query, in float64, over blocks of X's rows (so that
    millions of rows never need a float64 copy of the whole block)."""
    Qd = Q.astype(np.float64)
    qq = (Qd ** 2).sum(1)[:, None]
    best_d = np.full((len(Q), k), np.inf)
    best_i = np.zeros((len(Q), k), dtype=np.int64)
    for lo in range(0, len(X), block):
        B = np.asarray(X[lo:lo + block], dtype=np.float64)
        d = qq - 2.0 * Qd @ B.T + (B ** 2).sum(1)[None, :]
        kk = min(k, d.shape[1])
        part = np.argpartition(d, kk - 1, axis=1)[:, :kk]
        cand_d = np.concatenate([best_d, np.take_along_axis(d, part, 1)], 1)
        cand_i = np.concatenate([best_i, part + lo], 1)
        order = np.argsort(cand_d, axis=1, kind="stable")[:, :k]
        best_d, best_i = np.take_along_axis(cand_d, order, 1), np.take_along_axis(cand_i, order, 1)
    return best_i


def doc_class(dim: int):
    """The documents' schema, made in a frame of its own: a Document class keeps a snapshot of the
    locals of the frame that defines it (pydantic's parent namespace, Python 3.11's f_locals), and
    in child() that snapshot held the input's mapping after `del X` - its pages showed as RssFile."""
    import hybridsearch as hs

    class Doc(hs.Document):
        v: hs.Vector[dim]
    return Doc


def child(args) -> None:
    import hybridsearch as hs
    X = np.load(args.data, mmap_mode="r")[:args.rows]
    Q = np.load(args.queries)
    n, dim = X.shape
    Doc = doc_class(dim)
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
    sweep = []
    for ef in [int(e) for e in str(args.ef).split(",")]:
        for q in Q[:50]:  # warm-up
            da.find(vector=q, limit=10, ef=ef)
        ids, took = [], []
        for q in Q:
            started = time.perf_counter()
            found = da.find(vector=q, limit=10, ef=ef)
            took.append(time.perf_counter() - started)
            ids.append([int(i[1:]) for i in found.ids])
        sweep.append({"ef": ef, "qps": len(Q) / sum(took), "p50_ms": 1e3 * percentile(took, 50),
                      "p99_ms": 1e3 * percentile(took, 99), "ids": ids})
    print(json.dumps({"start": start, "build_s": build, "sweep": sweep, "after_build": after_build,
                      "after_queries": memory(), "stats_bytes": da.stats()["bytes"]}))
    da.close()


def sizes(text: str) -> list:
    """--n: one size or several, comma-separated, smallest first."""
    return sorted({int(v) for v in text.split(",")})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", default="1000000", help="rows; several sizes comma-separated (default 1,000,000)")
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--queries", type=int, default=1000)
    ap.add_argument("--batch", type=int, default=50_000)
    ap.add_argument("--m", type=int, default=16)
    ap.add_argument("--ef-construct", type=int, default=100)
    ap.add_argument("--ef", default="64", help="the walk's beam; several comma-separated (default 64)")
    ap.add_argument("--modes", default="ram,disk")
    ap.add_argument("--dir", default=None, help="where the data and collections go (default: a temporary dir)")
    ap.add_argument("--out", default=None, help="write disk_vectors.json and growth.png into this folder")
    ap.add_argument("--child", nargs=4, metavar=("MODE", "DATA", "QUERIES", "PATH"), help=argparse.SUPPRESS)
    ap.add_argument("--rows", type=int, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    for mode in args.modes.split(","):
        place, _, quant = mode.partition("-")
        if place not in ("ram", "disk") or quant not in ("", "int8", "rabitq1", "rabitq4"):
            ap.error(f"mode {mode!r}: ram or disk, optionally -int8, -rabitq4 or -rabitq1")
    if args.child:
        args.mode, args.data, args.queries, args.path = args.child
        return child(args)
    ns = sizes(args.n)
    work = Path(args.dir or tempfile.mkdtemp(prefix="bench-disk-"))
    work.mkdir(parents=True, exist_ok=True)
    X = clustered(ns[-1], args.dim, 7)
    rng = np.random.default_rng(8)  # queries near rows that every size holds
    Q = X[rng.integers(0, ns[0], args.queries)] + rng.standard_normal((args.queries, args.dim), dtype=np.float32) * 0.5
    np.save(work / "data.npy", X)
    np.save(work / "queries.npy", Q)
    del X
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")), "?")
    print(f"# {', '.join(f'{n:,}' for n in ns)} x {args.dim} clustered float32, m {args.m}, ef_construct "
          f"{args.ef_construct}, ef {args.ef}, {args.queries} queries; {cpu}, {os.cpu_count()} cores, "
          f"Python {platform.python_version()}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
          f"load average {os.getloadavg()[0]:.1f}")
    print("| n | mode | build s | ef | recall@10 | QPS | p50 / p99 ms | after build: RSS / anon / file (x float32) "
          "| after queries: RSS / anon / file (x float32) |")
    print("| ---: | --- | ---: | ---: | ---: | ---: | --- | --- | --- |")
    rows = []
    for n in ns:
        gt = truth(np.load(work / "data.npy", mmap_mode="r")[:n], Q, 10).tolist()
        raw = n * args.dim * 4
        for mode in args.modes.split(","):
            path = work / f"col-{mode}"
            shutil.rmtree(path, ignore_errors=True)
            out = subprocess.run([sys.executable, __file__, "--child", mode, str(work / "data.npy"), str(work / "queries.npy"),
                                  str(path), "--rows", str(n), "--m", str(args.m), "--ef-construct", str(args.ef_construct),
                                  "--ef", str(args.ef), "--batch", str(args.batch)], capture_output=True, text=True)
            if out.returncode:
                sys.exit(out.stderr[-3000:])
            r = json.loads(out.stdout.strip().splitlines()[-1])

            def grown(m: dict) -> dict:
                return {k: m[k] if k == "files" else m[k] - r["start"][k] for k in m}

            def mem(m: dict) -> str:
                g = grown(m)
                return " / ".join(f"{g[k] / 1e6:,.0f} MB ({g[k] / raw:.2f})" for k in ("VmRSS", "RssAnon", "RssFile"))
            for point in r["sweep"]:
                point["recall"] = float(np.mean([len(set(got) & set(want)) / 10 for got, want in zip(point.pop("ids"), gt)]))
                print(f"| {n:,} | {mode} | {r['build_s']:.1f} | {point['ef']} | {point['recall']:.3f} | {point['qps']:,.0f} | "
                      f"{point['p50_ms']:.2f} / {point['p99_ms']:.2f} | {mem(r['after_build'])} | {mem(r['after_queries'])} |",
                      flush=True)
            for when in ("after_build", "after_queries"):
                print(f"#   {n:,} {mode}, file pages {when.replace('_', ' ')}: " +
                      (", ".join(f"{name} {size / 1e6:,.0f} MB" for name, size in r[when]["files"]) or "none"))
            rows.append({"n": n, "dim": args.dim, "mode": mode, "build_s": r["build_s"], "sweep": r["sweep"],
                         "float32_bytes": raw, "after_build": grown(r["after_build"]),
                         "after_queries": grown(r["after_queries"]), "stats_bytes": r["stats_bytes"]})
            shutil.rmtree(path, ignore_errors=True)
    if args.out:
        out_dir = Path(args.out)
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / "disk_vectors.json").write_text(json.dumps({"config": vars(args), "cpu": cpu, "rows": rows}, indent=1))
        from hybridsearch.bench.plots import growth
        growth(rows, out_dir / "growth.png")
        print(f"wrote {out_dir / 'disk_vectors.json'} and {out_dir / 'growth.png'}")
    if not args.dir:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
