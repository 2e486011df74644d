"""The Python cost of one find() around its kernel: find(vector=q, limit=10) on storage="hnsw"
beside the raw graph walk it makes (called from Python one query at a time, and all queries in
one call: the kernel with ~0 Python per query) and hnswlib's knn_query, same vectors (2,000 x 128 Gaussian,
cosine), same m / ef_construct / ef, one query per call on one thread.

Timed round-robin (find, raw walk, hnswlib, find, ...) over --passes passes after a warm-up, so
load from elsewhere falls on all three; medians in microseconds per call. "overhead" is find minus
the raw walk: what the API adds (checks, lock, plan, hits). With --instructions the same three
loops also run under valgrind's callgrind (instructions per call, repeatable on a loaded machine:
the difference of a run with --calls queries and one with none).

    python benchmarks/bench_find_overhead.py
    python benchmarks/bench_find_overhead.py --instructions
"""
import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

N, DIM, M, EF_CONSTRUCT, EF, K = 2000, 128, 16, 100, 64, 10


def setup(which: str, seed: int = 0):
    """(call, queries) for one of "find", "raw", "hnswlib"."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((N, DIM)).astype(np.float32)
    Q = rng.standard_normal((500, DIM)).astype(np.float32)
    if which == "hnswlib":
        import hnswlib
        index = hnswlib.Index(space="cosine", dim=DIM)
        index.init_index(N, M=M, ef_construction=EF_CONSTRUCT)
        index.set_num_threads(1)
        index.add_items(X)
        index.set_ef(EF)
        return (lambda q: index.knn_query(q, k=K)), Q
    import hybridsearch as hs

    class Vec(hs.Document):
        embedding: hs.Vector[DIM]

    da = hs.DocumentArray(Vec, storage="hnsw", m=M, ef_construct=EF_CONSTRUCT, ef=EF, threads=1)
    da.extend_columns({"id": [f"d{i}" for i in range(N)], "embedding": X})
    if which == "find":
        return (lambda q: da.find(vector=q, limit=K)), Q
    # the walk find() makes, called as bare as Python allows: the same native graph built with the
    # storage's parameters and seed over the same vectors (a cosine graph keeps them raw, as the store does), searched one query at a time
    from hybridsearch.engine import graph as G
    graph = G.HnswGraph(DIM, "cosine", M, EF_CONSTRUCT, 0x5EED, "int8")  # the storage's seed and (default) int8 walk
    graph.add(X, np.arange(N, dtype=np.int64), 1)
    walk_ids = graph.search(X, np.ascontiguousarray(Q[:50] / np.linalg.norm(Q[:50], axis=1, keepdims=True)),
                            K, EF, None, G.PLAIN)[1]
    api_ids = [[int(h.id[1:]) for h in da.find(vector=q, limit=K)] for q in Q[:50]]
    same = np.mean([len(set(a) & set(b)) / K for a, b in zip(walk_ids.tolist(), api_ids)])
    if same < 0.98:  # the query's norm is rounded differently, so a tie at the cut may differ; no more
        raise SystemExit(f"the raw walk and find() share {same:.3f} of their hits: the anchor is not find()'s walk")
    if which == "kernel":  # the walks alone: every query in one call, so Python is ~0 per query
        unit = np.ascontiguousarray(Q / np.linalg.norm(Q, axis=1, keepdims=True))
        return (lambda block: graph.search(X, block, K, EF, None, G.PLAIN)), unit
    return (lambda q: graph.search(X, (q / np.linalg.norm(q)).reshape(1, -1), K, EF, None, G.PLAIN)), Q


NAMES = ("find", "raw", "kernel", "hnswlib")


def run(name: str, fn, Q) -> None:
    """Every query of Q once: one call per query, the kernel anchor one call for the block."""
    if name == "kernel":
        fn(Q)
    else:
        for q in Q:
            fn(q)

def timed(args) -> None:
    calls = {name: setup(name) for name in NAMES}
    for name, (fn, Q) in calls.items():  # warm-up: lazy imports, caches
        run(name, fn, Q[:100])
    per: dict = {name: [] for name in calls}
    for _ in range(args.passes):
        for name, (fn, Q) in calls.items():
            t0 = time.perf_counter()
            run(name, fn, Q)
            per[name].append((time.perf_counter() - t0) / len(Q) * 1e6)
    med = {k: statistics.median(v) for k, v in per.items()}
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, load "
          f"{os.getloadavg()[0]:.2f}; {N:,} x {DIM} cosine, m={M} ef_construct={EF_CONSTRUCT} ef={EF} k={K}, "
          f"{args.passes} passes of 500 queries")
    for name, label in (("find", "find() on hnsw"), ("raw", "raw graph walk"), ("kernel", "walk, 500 per call"),
                        ("hnswlib", "hnswlib knn_query")):
        print(f"  {label:20s} {med[name]:7.2f} us/call  (passes {min(per[name]):.2f}-{max(per[name]):.2f})")
    print(f"  overhead of find() over its walk: {med['find'] - med['raw']:.2f} us, over the kernel alone: "
          f"{med['find'] - med['kernel']:.2f} us; find() QPS / hnswlib QPS = {med['hnswlib'] / med['find']:.2f}x")


def instructions(args) -> None:
    py = sys.executable
    out = {}
    for name in NAMES:
        counts = []
        for calls in (0, args.calls):
            with tempfile.NamedTemporaryFile(suffix=".cg") as f:
                proc = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={f.name}", py,
                                       __file__, "--child", name, str(calls)], capture_output=True, text=True,
                                      env=dict(os.environ, PYTHONHASHSEED="0"))
                line = [ln for ln in proc.stderr.splitlines() if "Collected" in ln]
                if not line:
                    raise SystemExit(proc.stderr[-2000:])
                counts.append(int(line[-1].split(":")[-1]))
        out[name] = (counts[1] - counts[0]) / args.calls
    print(f"instructions per call (callgrind, {args.calls} calls): find {out['find']:,.0f}, raw walk "
          f"{out['raw']:,.0f}, walk in one batch {out['kernel']:,.0f}, hnswlib {out['hnswlib']:,.0f}; "
          f"find - walk = {out['find'] - out['raw']:,.0f}, find - batched walk = {out['find'] - out['kernel']:,.0f}")


def child(which: str, calls: int) -> None:
    fn, Q = setup(which)
    run(which, fn, Q[:20])
    if calls:
        run(which, fn, Q[:calls])


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--passes", type=int, default=7)
    ap.add_argument("--instructions", action="store_true", help="also count instructions under callgrind")
    ap.add_argument("--calls", type=int, default=300)
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        child(a.child[0], int(a.child[1]))
    else:
        timed(a)
        if a.instructions:
            instructions(a)
