"""Sparse vectors: our exact top-k (engine SparseIndex, block-max MaxScore) vs scipy.sparse CSR
exhaustive scoring (X @ q, then argpartition), side by side in one run on the same data.

SPLADE-like synthetic data: each document holds 100-200 keys drawn from a 30,000-key vocabulary
with Zipf (s=1) frequencies, weights lognormal and smaller for frequent keys (like an idf);
queries hold 20-40 keys drawn with a flatter Zipf (frequent and rare keys mixed). Every timed
call goes from the query arrays to the top-k slots, one query per call on one thread, after a
warm-up; then our top_k_batch over every core. Recall@k of both is measured against a float64
exhaustive reference (a hit tied with the k-th score counts), and ours must be 1.0.

    python benchmarks/bench_sparse.py --quick     # 50,000 documents, 200 queries
    python benchmarks/bench_sparse.py             # 300,000 documents, 500 queries
    python benchmarks/bench_sparse.py --n 1000000 --queries 300 --out DIR
"""
import os
import sys
import time

import numpy as np

from hybridsearch.bench.script import parser, sizes, start
from hybridsearch.bench.tables import fmt, ratio
from hybridsearch.engine.sparse import SparseIndex

VOCAB = 30_000
WARMUP = 20


def corpus(rng, n: int, vocab: int = VOCAB) -> tuple:
    """(indptr, indices, values) of n SPLADE-like documents, each row's keys ascending."""
    p = 1.0 / np.arange(1, vocab + 1)
    p /= p.sum()
    lengths = rng.integers(100, 201, size=n)
    rows = np.repeat(np.arange(n, dtype=np.int64), lengths)
    keys = rng.choice(vocab, size=len(rows), p=p)
    pairs = np.unique(rows * vocab + keys)  # drops repeated keys of a row, sorts rows and keys
    rows, keys = pairs // vocab, (pairs % vocab).astype(np.int32)
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=n), out=indptr[1:])
    idf = np.log1p(np.arange(1, vocab + 1)) / np.log1p(vocab)  # rank 1 -> small, rare -> ~1
    values = (rng.lognormal(0.0, 0.6, size=len(keys)) * idf[keys]).astype(np.float32)
    return indptr, keys, values


def queries(rng, nq: int, vocab: int = VOCAB) -> list:
    p = 1.0 / np.arange(1, vocab + 1) ** 0.6
    p /= p.sum()
    idf = np.log1p(np.arange(1, vocab + 1)) / np.log1p(vocab)
    out = []
    for _ in range(nq):
        keys = np.sort(rng.choice(vocab, size=int(rng.integers(20, 41)), replace=False, p=p)).astype(np.int32)
        out.append((keys, (rng.lognormal(0.0, 0.6, size=len(keys)) * idf[keys]).astype(np.float32)))
    return out


def recall(got: np.ndarray, exact: np.ndarray, k: int) -> float:
    """|got ∩ true top-k| / k, a slot tied (within float32 rounding) with the k-th score counting."""
    kth = np.partition(exact, -k)[-k]
    ok = exact[got] >= kth - 1e-6 * max(abs(kth), 1e-30)
    return float(ok.sum()) / k


def timed(fn, warm: list, items: list) -> tuple:
    """(median latency s, QPS, results) of fn over items, one call each, after fn over warm."""
    for q in warm:
        fn(q)
    lat, res = [], []
    t0 = time.perf_counter()
    for q in items:
        t = time.perf_counter()
        res.append(fn(q))
        lat.append(time.perf_counter() - t)
    wall = time.perf_counter() - t0
    return float(np.median(lat)), len(items) / wall, res


def main(argv=None) -> int:
    ap = parser(__doc__, full=(300_000, 500), quick=(50_000, 200), what="documents")
    ap.add_argument("--k", type=int, default=10, help="hits per query (default 10)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    n, nq = sizes(args)
    k = args.k
    out, facts = start("sparse", args)
    import scipy
    import scipy.sparse as sp

    rng = np.random.default_rng(args.seed)
    t = time.perf_counter()
    indptr, keys, values = corpus(rng, n)
    qs = queries(rng, nq + WARMUP)
    out.say(f"data: {n:,} documents, {len(keys):,} non-zeros ({len(keys) / n:.0f} per document), vocabulary "
            f"{VOCAB:,}; {nq:,} queries of {np.mean([len(q[0]) for q in qs]):.0f} keys, k={k} "
            f"(made in {time.perf_counter() - t:.1f} s); scipy {scipy.__version__}")

    index = SparseIndex()
    t = time.perf_counter()
    step = 50_000
    for a in range(0, n, step):
        b = min(n, a + step)
        index.add(np.arange(a, b, dtype=np.int64), indptr[a:b + 1] - indptr[a], keys[indptr[a]:indptr[b]],
                  values[indptr[a]:indptr[b]])
    t_ours = time.perf_counter() - t
    t = time.perf_counter()
    X = sp.csr_matrix((values, keys, indptr), shape=(n, VOCAB))
    t_scipy = time.perf_counter() - t
    st = index.stats()
    out.say(f"index: ours {t_ours:.2f} s ({n / t_ours:,.0f} docs/s, batches of {step:,}, "
            f"{st['nbytes'] / 2**20:,.0f} MiB), scipy CSR {t_scipy:.2f} s "
            f"({(X.data.nbytes + X.indices.nbytes + X.indptr.nbytes) / 2**20:,.0f} MiB)")

    def ours(q):
        return index.top_k(q[0], q[1], k)[1]

    def ours_exhaustive(q):  # same kernel, pruning off: every posting of the query's keys
        return index.top_k(q[0], q[1], k, prune=False)[1]

    def scipy_top(q):
        dense = np.zeros(VOCAB, dtype=np.float32)
        dense[q[0]] = q[1]
        scores = X @ dense
        top = np.argpartition(-scores, k)[:k]
        return top[np.argsort(-scores[top], kind="stable")]

    rows = []
    results = {}
    for name, fn in (("ours (block-max MaxScore)", ours), ("ours, pruning off", ours_exhaustive),
                     ("scipy CSR X @ q + argpartition", scipy_top)):
        results[name] = timed(fn, qs[:WARMUP], qs[WARMUP:])
    X64 = X.astype(np.float64)
    rec = {name: [] for name in results}
    for i, q in enumerate(qs[WARMUP:]):
        dense = np.zeros(VOCAB)
        dense[q[0]] = q[1].astype(np.float64)
        exact = X64 @ dense
        for name, (_, _, res) in results.items():
            rec[name].append(recall(np.asarray(res[i]), exact, k))
    work = [index.work(q[0], q[1], k) / max(1, index.work(q[0], q[1], k, prune=False)) for q in qs[WARMUP:WARMUP + 50]]
    base = results["scipy CSR X @ q + argpartition"]
    for name, (med, qps, _) in results.items():
        rows.append([name, f"{med * 1e3:.3f}", fmt(qps), f"{np.mean(rec[name]):.4f}", f"{min(rec[name]):.2f}",
                     ratio(base[0], med)])
    out.table(["method (1 thread, 1 query per call)", "median ms", "QPS", "recall@k", "min recall", "speedup vs scipy"],
              rows)
    out.say(f"postings read by ours / by the exhaustive evaluation: median {np.median(work):.3f} "
            f"(mean {np.mean(work):.3f}) over 50 queries")

    threads = os.cpu_count() or 1
    batch = qs[WARMUP:]
    index.top_k_batch(batch[:WARMUP], k, threads=threads)
    t = time.perf_counter()
    _, bslots = index.top_k_batch(batch, k, threads=threads)
    tb = time.perf_counter() - t
    same = all(np.array_equal(bslots[i], results["ours (block-max MaxScore)"][2][i]) for i in range(len(batch)))
    out.say(f"ours top_k_batch, {threads} threads: {len(batch) / tb:,.0f} QPS ({'same hits as one by one' if same else 'DIFFERENT hits from one by one'})")
    ok = min(rec["ours (block-max MaxScore)"]) == 1.0 and same
    out.say(f"recall of ours is {'1.0 on every query' if ok else 'BELOW 1.0 (a bug)'}; speedup over scipy "
            f"{ratio(base[0], results['ours (block-max MaxScore)'][0])} (median latency)")
    out.save({"n": n, "queries": nq, "k": k, "machine": facts,
              "rows": {name: {"median_s": r[0], "qps": r[1], "recall": float(np.mean(rec[name]))}
                       for name, r in results.items()},
              "batch_qps": len(batch) / tb, "work_ratio_median": float(np.median(work))})
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
