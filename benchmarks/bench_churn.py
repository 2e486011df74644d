"""Recall after churn on hnsw: 10% of the documents rewritten with new vectors and 10% deleted, one
write per call, against a fresh build of the same final data (the anchor, same parameters).

Clustered 64-d data (50 gaussian clusters, l2), m 16, ef_construct 100; recall@10 at ef 64 against
the exact top-10 of the final data for --queries queries; also the median time of a rewrite and of
a delete during the churn.

    python benchmarks/bench_churn.py                  # 100,000 documents
    python benchmarks/bench_churn.py --n 1000000 --out DIR
"""
import sys
import time

import numpy as np

import hybridsearch as hs
from hybridsearch.bench.script import parser, start
from hybridsearch.engine.exact import exact_topk


class Item(hs.Document):
    v: hs.Vector[64]


def build(X: np.ndarray, ids: list):
    da = hs.DocumentArray(Item, storage="hnsw", metric="l2", m=16, ef_construct=100)
    da.extend_columns({"id": ids, "v": X})
    return da


def recall(da, X: np.ndarray, ids: np.ndarray, Q: np.ndarray) -> float:
    truth = exact_topk(X, Q, 10, "l2")[1]
    hits = 0
    for q, g in zip(Q, truth):
        got = set(da.find(vector=q, limit=10, ef=64).ids)
        hits += len(got & set(ids[g].tolist()))
    return hits / (10 * len(Q))


def main(argv=None) -> int:
    ap = parser(__doc__)
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--churn", type=float, default=0.1, help="fraction rewritten, and fraction deleted")
    args = ap.parse_args(argv)
    out, _ = start("churn", args)
    rng = np.random.default_rng(0)
    n = args.n
    C = rng.standard_normal((50, 64)).astype(np.float32) * 4
    X = (C[rng.integers(0, 50, n)] + rng.standard_normal((n, 64))).astype(np.float32)
    ids = np.array([f"d{i}" for i in range(n)], dtype=object)
    da = build(X, ids.tolist())
    k = int(n * args.churn)
    order = rng.permutation(n)
    rewrite, delete = order[:k], order[k:2 * k]
    newX = (C[rng.integers(0, 50, k)] + rng.standard_normal((k, 64))).astype(np.float32)
    t_rw, t_del = [], []
    for j, i in enumerate(rewrite):  # interleaved, one write per call
        t = time.perf_counter()
        da[ids[i]] = Item(v=newX[j])
        t_rw.append(time.perf_counter() - t)
        t = time.perf_counter()
        del da[ids[delete[j]]]
        t_del.append(time.perf_counter() - t)
    X[rewrite] = newX
    keep = np.setdiff1d(np.arange(n), delete)
    Xf, idf = X[keep], ids[keep]
    Q = (C[rng.integers(0, 50, args.queries)] + rng.standard_normal((args.queries, 64))).astype(np.float32)
    churned = recall(da, Xf, idf, Q)
    fresh = recall(build(Xf, idf.tolist()), Xf, idf, Q)
    out.say(f"n={n:,}, {args.churn:.0%} rewritten + {args.churn:.0%} deleted one call at a time: "
            f"rewrite median {np.median(t_rw) * 1e3:.3f} ms, delete median {np.median(t_del) * 1e3:.3f} ms")
    out.say(f"recall@10 (ef 64): after churn {churned:.4f}, fresh build {fresh:.4f}, "
            f"difference {fresh - churned:+.4f} (target: within 0.01)")
    out.save({"n": n, "churn": args.churn, "recall_churned": churned, "recall_fresh": fresh,
              "rewrite_median_ms": float(np.median(t_rw) * 1e3), "delete_median_ms": float(np.median(t_del) * 1e3)})
    return 0


if __name__ == "__main__":
    sys.exit(main())
