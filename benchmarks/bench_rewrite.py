"""Rewriting one document with a new vector on hnsw (`da.extend([doc])` with an existing id, as
DocArray's benchmark rewrites `da[id] = doc`): median and p99 ms over --repeats rewrites after 20
warm-ups, and recall@10 (ef=64) against the exact top-10 after rewriting 20% of --recall-n clustered
documents. Public API only; run it under two builds (PYTHONPATH=<checkout>) to compare them.

    python benchmarks/bench_rewrite.py                    # 100,000 x 128
    python benchmarks/bench_rewrite.py --n 1000000 --out DIR
"""
import sys
import time

import numpy as np

import hybridsearch as hs
from hybridsearch.bench.script import parser, start
from hybridsearch.engine.exact import exact_topk


def rewrite_ms(n: int, repeats: int, rng) -> tuple:
    class Item(hs.Document):
        v: hs.Vector[128]

    X = rng.standard_normal((n, 128)).astype(np.float32)
    da = hs.DocumentArray(Item, storage="hnsw", metric="l2")
    for a in range(0, n, 20000):
        da.extend([Item(id=f"d{i}", v=X[i]) for i in range(a, min(n, a + 20000))])
    times = []
    for _ in range(repeats + 20):
        doc = Item(id=f"d{int(rng.integers(n))}", v=rng.standard_normal(128).astype(np.float32))
        t = time.perf_counter()
        da.extend([doc])
        times.append(time.perf_counter() - t)
    times = np.array(times[20:]) * 1e3
    return float(np.median(times)), float(np.percentile(times, 99))


def recall_after_rewrites(n: int, rng) -> float:
    class Item(hs.Document):
        v: hs.Vector[64]

    C = rng.standard_normal((50, 64)).astype(np.float32) * 4
    X = (C[rng.integers(0, 50, n)] + rng.standard_normal((n, 64))).astype(np.float32)
    da = hs.DocumentArray(Item, storage="hnsw", metric="l2")
    da.extend([Item(id=str(i), v=X[i]) for i in range(n)])
    for i in rng.choice(n, n // 5, replace=False):
        X[i] = C[rng.integers(0, 50)] + rng.standard_normal(64)
        da.extend([Item(id=str(i), v=X[i])])
    Q = (C[rng.integers(0, 50, 200)] + rng.standard_normal((200, 64))).astype(np.float32)
    gt = exact_topk(X, Q, 10, "l2")[1]
    found = [set(map(int, da.find(vector=q, limit=10, ef=64).ids)) for q in Q]
    return float(np.mean([len(f & set(g.tolist())) / 10 for f, g in zip(found, gt)]))


def main(argv=None) -> int:
    ap = parser(__doc__)
    ap.add_argument("--n", type=int, default=100_000, help="documents for the rewrite timing")
    ap.add_argument("--repeats", type=int, default=200, help="timed rewrites")
    ap.add_argument("--recall-n", type=int, default=20_000, help="documents for the recall check")
    args = ap.parse_args(argv)
    out, _ = start("rewrite", args)
    rng = np.random.default_rng(0)
    med, p99 = rewrite_ms(args.n, args.repeats, rng)
    out.say(f"hnsw rewrite of one document at {args.n:,} x 128: median {med:.3f} ms, p99 {p99:.3f} ms")
    rec = recall_after_rewrites(args.recall_n, rng)
    out.say(f"recall@10 (ef=64) after rewriting 20% of {args.recall_n:,} x 64: {rec:.4f}")
    out.save({"n": args.n, "rewrite_median_ms": med, "rewrite_p99_ms": p99, "recall_n": args.recall_n,
              "recall_after_rewrites": rec})
    return 0


if __name__ == "__main__":
    sys.exit(main())
