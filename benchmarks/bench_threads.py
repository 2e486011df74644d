"""Threads: how find_batched, concurrent find() calls and extend scale with cores, at 1, 2, ... and
every core. The one-thread figure of each row is its anchor.

- find_batched(Q, threads=t): one call, the queries split over t threads inside the library
  (the GIL is released around each native search); on memory (exact scan) and hnsw (ef 64).
- find() from t client threads, one query per call (what a web server does): the Python part of
  each call holds the GIL, so this shows how much of a query is native.
- extend_columns into a new hnsw collection with threads=t (graph inserts in parallel), and into
  memory (no threads option: the column and text index build, for reference).

Medians of --repeats passes after a warm-up; QPS, speed-up over one thread, and the CPU cores the
process used (CPU seconds / wall seconds). Data: gaussian 128-d vectors (cosine), an 8-word title.

    python benchmarks/bench_threads.py                       # 200,000 vectors, 2,000 queries
    python benchmarks/bench_threads.py --n 50000 --queries 500 --out DIR
"""
import os
import sys
import threading
import time

import numpy as np

import hybridsearch as hs
from hybridsearch.bench.metrics import median
from hybridsearch.bench.script import parser, sizes, start

D = 128
WORDS = [f"w{i}" for i in range(5000)]


class Item(hs.Document):
    title: hs.Text
    v: hs.Vector[D]


def columns(n: int, rng) -> dict:
    """n documents as columns: ids, 8-word titles, gaussian vectors."""
    words = rng.integers(0, len(WORDS), (n, 8))
    return {"id": [f"d{i}" for i in range(n)], "title": [" ".join(WORDS[w] for w in row) for row in words],
            "v": rng.standard_normal((n, D)).astype(np.float32)}


def timed(fn) -> tuple:
    """(wall seconds, CPU cores used) of fn()."""
    c0, t0 = time.process_time(), time.perf_counter()
    fn()
    wall = time.perf_counter() - t0
    return wall, (time.process_time() - c0) / wall


def client_threads(da, Q: np.ndarray, t: int) -> None:
    """Every query of Q through find(), one per call, from t threads sharing the list."""
    nxt = iter(range(len(Q)))
    lock = threading.Lock()

    def work():
        while True:
            with lock:
                i = next(nxt, None)
            if i is None:
                return
            da.find(vector=Q[i], limit=10)

    pool = [threading.Thread(target=work) for _ in range(t)]
    for p in pool:
        p.start()
    for p in pool:
        p.join()


def row(out, what: str, counts: list, run, per_second: float, repeats: int) -> dict:
    """Times run(t) for every thread count; prints and returns rate / speed-up / cores."""
    res = {}
    for t in counts:
        passes = [timed(lambda: run(t)) for _ in range(repeats)]
        wall = median([p[0] for p in passes])
        res[t] = {"rate": per_second / wall, "cores": median([p[1] for p in passes])}
    base = res[counts[0]]["rate"]
    out.say(f"  {what:44s} " + "  ".join(f"{t} thr: {r['rate']:9,.0f}/s {r['rate'] / base:4.2f}x "
                                          f"({r['cores']:.2f} cores)" for t, r in res.items()))
    return {str(t): r for t, r in res.items()}


def main(argv=None) -> int:
    ap = parser(__doc__, full=(200_000, 2000), quick=(20_000, 500))
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args(argv)
    n, nq = sizes(args)
    out, facts = start("threads", args)
    cores = os.cpu_count() or 1
    counts = sorted({1, 2, cores})
    out.say(f"{n:,} x {D} cosine, {nq:,} queries, threads {counts}; load average before: "
            f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    rng = np.random.default_rng(0)
    cols = columns(n, rng)
    Q = rng.standard_normal((nq, D)).astype(np.float32)
    results = {}
    out.say("writes (documents/s):")
    results["extend hnsw"] = row(out, f"extend_columns, hnsw (ef_construct 64, {n:,})", counts,
                                 lambda t: hs.DocumentArray(Item, storage="hnsw", ef_construct=64,
                                                            threads=t).extend_columns(cols), n, 1)
    results["extend memory"] = row(out, "extend_columns, memory (no threads option)", [1],
                                   lambda t: hs.DocumentArray(Item).extend_columns(cols), n, 1)
    out.say("queries (QPS):")
    for storage, opts in (("memory", {}), ("hnsw", {"ef_construct": 64, "ef": 64})):
        da = hs.DocumentArray(Item, storage=storage, **opts)
        da.extend_columns(cols)
        da.find_batched(Q[:50], limit=10)
        client_threads(da, Q[:50], 1)  # warm-up
        results[f"find_batched {storage}"] = row(out, f"find_batched, {storage}", counts,
                                                 lambda t: da.find_batched(Q, limit=10, threads=t), nq, args.repeats)
        results[f"find clients {storage}"] = row(out, f"find() from client threads, {storage}", counts + [8],
                                                 lambda t: client_threads(da, Q, t), nq, args.repeats)
        da.close()
    out.say(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    out.save({"machine": facts, "n": n, "queries": nq, "results": results})
    return 0


if __name__ == "__main__":
    sys.exit(main())
