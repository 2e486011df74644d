"""Embedded storages vs Elasticsearch / OpenSearch on one workload: QPS, p50/p99 latency and QPS per
CPU core, where the engine's CPU time is read from /proc/<pid>/stat of the node process and ours is
this process's CPU time.

    scripts/searchnode.sh start es && scripts/searchnode.sh start os
    python benchmarks/bench_remote.py                 # 50,000 products, 128-d, 300 queries per workload
    python benchmarks/bench_remote.py --n 10000 --threads 1,4

Same documents, same queries, same k (10) and ef / num_candidates (100) everywhere; overlap@10
with the exact `memory` results (a hit tying its 10th score counts) is printed next to every
speed so unequal work shows. Each cell is the median of --repeat timed passes; after a feed the
script waits for the node's background merges to settle so they are not billed to a query.
"""
import argparse
import os
import statistics
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import numpy as np

import hybridsearch as hs
from machine import cpu_model  # benchmarks/machine.py

ROOT = Path(__file__).resolve().parent.parent
DIM = 128
TICK = os.sysconf("SC_CLK_TCK")


class Product(hs.Document):
    title: hs.Text
    description: hs.Text = ""
    category: hs.Keyword
    price: int = 0
    embedding: hs.Vector[DIM]


def corpus(n: int, n_queries: int, seed: int = 3):
    rng = np.random.default_rng(seed)
    vocab = np.array([f"w{i}" for i in range(20000)])
    p = 1.0 / np.arange(1, len(vocab) + 1) ** 1.05
    p /= p.sum()
    titles = rng.choice(vocab, (n, 8), p=p)
    descs = rng.choice(vocab, (n, 30), p=p)
    X = rng.standard_normal((n, DIM)).astype(np.float32)
    docs = [{"id": str(i), "title": " ".join(titles[i]), "description": " ".join(descs[i]),
             "category": f"c{i % 20}", "price": int(i % 1000), "embedding": X[i]} for i in range(n)]
    pick = rng.choice(n, n_queries, replace=False)
    texts = [" ".join(titles[i][:4]) for i in pick]
    Q = (X[pick] + 0.5 * rng.standard_normal((n_queries, DIM))).astype(np.float32)
    return docs, texts, Q


def engine_cpu(pid) -> float:
    """utime + stime of a process in seconds (0 when pid is None)."""
    if pid is None:
        return 0.0
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def settle(pid, quiet: float = 0.05, limit: float = 120.0) -> tuple:
    """Waits until the node uses < `quiet` cores over a second (merges after a feed would
    otherwise be billed to the first workload) -> (its idle cores, seconds waited)."""
    t0 = time.perf_counter()
    while True:
        c = engine_cpu(pid)
        time.sleep(1.0)
        used = engine_cpu(pid) - c
        if used < quiet or time.perf_counter() - t0 > limit:
            return used, time.perf_counter() - t0


def node_pid(kind: str):
    out = subprocess.run(["bash", str(ROOT / "scripts" / "searchnode.sh"), "pid", kind], capture_output=True, text=True)
    return int(out.stdout.strip()) if out.returncode == 0 and out.stdout.strip().isdigit() else None


def overlap(res, ref) -> float:
    """Share of the reference's top-k found, where a hit whose score ties the reference's k-th
    counts as found (engines break score ties by their own internal doc order)."""
    if not len(ref):
        return 1.0
    kth = float(ref.scores[-1])
    tied = sum(1 for i, sc in zip(res.ids, res.scores) if i not in set(ref.ids) and sc >= kth - 1e-5 * max(1.0, abs(kth)))
    return min(1.0, (len(set(res.ids) & set(ref.ids)) + tied) / len(ref))


def run(fn, args: list, threads: int, pid) -> dict:
    """Runs fn over args on `threads` client threads -> QPS, latencies, CPU cores used."""
    for a in args[: max(1, len(args) // 10)]:  # warm-up
        fn(a)
    lat, lock = [], threading.Lock()
    parts = [args[i::threads] for i in range(threads)]

    def worker(part):
        mine = []
        for a in part:
            t = time.perf_counter()
            fn(a)
            mine.append(time.perf_counter() - t)
        with lock:
            lat.extend(mine)

    c0, e0, w0 = time.process_time(), engine_cpu(pid), time.perf_counter()
    ts = [threading.Thread(target=worker, args=(p,)) for p in parts]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    wall = time.perf_counter() - w0
    client_cpu, eng = time.process_time() - c0, engine_cpu(pid) - e0
    # the search work: ours is this process; a server's is its node process (its client's CPU apart)
    cores = (eng if pid is not None else client_cpu) / wall
    qps = len(args) / wall
    return {"qps": qps, "p50_ms": 1000 * statistics.median(lat), "p99_ms": 1000 * float(np.quantile(lat, 0.99)),
            "cores": cores, "qps_per_core": qps / cores if cores > 0 else float("nan"),
            "client_cores": client_cpu / wall}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=50000)
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--threads", default="1,4")
    ap.add_argument("--repeat", type=int, default=3, help="timed passes per cell; the median of each figure is kept")
    ap.add_argument("--es", default=os.environ.get("HS_ES_URL", "http://127.0.0.1:9260"))
    ap.add_argument("--os", default=os.environ.get("HS_OS_URL", "http://127.0.0.1:9250"))
    args = ap.parse_args()
    print(f"machine: {cpu_model()}, {os.cpu_count()} cores; Python {sys.version.split()[0]}; "
          f"{args.n:,} products, {DIM}-d, k=10, ef/num_candidates=100; median of {args.repeat} passes per cell; "
          f"load average before: {os.getloadavg()[0]:.2f}")
    docs, texts, Q = corpus(args.n, args.queries)
    flt = {"category": "c3"}
    storages = [("memory", {}, None), ("hnsw", {"ef": 100}, None)]
    for name, url, kind in (("elasticsearch", args.es, "es"), ("opensearch", args.os, "os")):
        storages.append((name, {"hosts": url, "index": f"hs-bench-{uuid.uuid4().hex}", "ef": 100,
                                "refresh": True, "chunk_size": 2000}, kind))
    opened, ref = [], None
    workloads = [("vector", lambda da, i: da.find(vector=Q[i], limit=10)),
                 ("vector + 5% filter", lambda da, i: da.find(vector=Q[i], filter=flt, limit=10)),
                 ("lexical", lambda da, i: da.find(text=texts[i], limit=10)),
                 ("hybrid sum", lambda da, i: da.find(text=texts[i], vector=Q[i], limit=10))]
    rows = []
    try:
        for name, opts, kind in storages:
            try:
                da = hs.DocumentArray(Product, storage=name, **opts)
            except hs.HybridSearchError as e:
                print(f"{name}: skipped ({e})")
                continue
            opened.append(da)
            pid = node_pid(kind) if kind else None
            c0, e0, t0 = time.process_time(), engine_cpu(pid), time.perf_counter()
            for a in range(0, len(docs), 5000):
                da.extend(docs[a:a + 5000])
            wall = time.perf_counter() - t0
            feed_cpu = (engine_cpu(pid) - e0) if pid else (time.process_time() - c0)
            print(f"{name}: feed {len(docs):,} docs in {wall:.1f} s = {len(docs) / wall:,.0f} docs/s, "
                  f"{len(docs) / max(feed_cpu, 1e-9):,.0f} docs per {'engine ' if pid else ''}CPU-second")
            if pid:
                idle, waited = settle(pid)
                segments = len(da._backend.client.cat.segments(index=da._backend.index, format="json"))
                print(f"{name}: background work (merges) settled after {waited:.0f} s more "
                      f"(node idle at {idle:.3f} cores); {segments} segments")
            results = {w: [fn(da, i) for i in range(len(Q))] for w, fn in workloads}
            if ref is None:
                ref = results
            for w, fn in workloads:
                ov = np.mean([overlap(a, b) for a, b in zip(results[w], ref[w])])
                for th in [int(t) for t in args.threads.split(",")]:
                    passes = [run(lambda i: fn(da, i), list(range(len(Q))), th, pid) for _ in range(args.repeat)]
                    r = {key: statistics.median(p[key] for p in passes) for key in passes[0]}
                    rows.append((name, w, th, r, ov))
        print(f"\n{'storage':14s} {'workload':20s} {'thr':>3s} {'QPS':>8s} {'p50 ms':>7s} {'p99 ms':>7s} "
              f"{'cores':>5s} {'QPS/core':>9s} {'overlap@10':>10s}")
        for name, w, th, r, ov in rows:
            print(f"{name:14s} {w:20s} {th:3d} {r['qps']:8.0f} {r['p50_ms']:7.2f} {r['p99_ms']:7.2f} "
                  f"{r['cores']:5.2f} {r['qps_per_core']:9.0f} {ov:10.2f}")
        by = {(n, w, t): r for n, w, t, r, _ in rows}
        print("\nQPS per core, embedded vs engine (1 client thread):")
        for w, _ in workloads:
            for ours in ("memory", "hnsw"):
                for eng in ("elasticsearch", "opensearch"):
                    a, b = by.get((ours, w, 1)), by.get((eng, w, 1))
                    if a and b:
                        print(f"  {w:20s} {ours:6s} / {eng:13s}: {a['qps_per_core'] / b['qps_per_core']:6.1f}x "
                              f"(QPS {a['qps'] / b['qps']:.1f}x)")
    finally:
        for da in opened:
            b = da._backend
            if hasattr(b, "client"):
                b.client.indices.delete(index=b.index, ignore_unavailable=True)
            da.close()


if __name__ == "__main__":
    main()
