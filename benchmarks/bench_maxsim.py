"""Exhaustive MaxSim top-10, ours vs numpy, and MUVERA FDE candidates + exact rescoring.

Data: hybridsearch.bench.multivectors.colbert_like (clustered unit token vectors, 20..60 per
document, 32 per query, 200 topics, 8 per document, noise 1.0, fixed seed), metric cosine.
- ours: TokenStore.maxsim_top_k, one native call per query (kernels/hs_maxsim.c).
- numpy: the best a user would write: all token rows in one float32 matrix (normalised once,
  ahead, like ours), one matmul per query (tokens x m), np.maximum.reduceat over the
  document boundaries, a sum, argpartition; and the same with 8 queries per matmul.
- FDE: default FdeParams (5,120 dimensions), exact top-C by FDE dot product (numpy matmul)
  then TokenStore.maxsim_of over the C candidates; recall@10 against the exhaustive top-10.
Single thread (OMP / OpenBLAS / MKL set to 1 before numpy loads), medians of 3 rounds.
--reopen: instead, the time to open a closed storage="hnsw" collection (path=) of n documents
with one MultiVector field (cosine), and whether its multi-vector finds answer as before closing.

    python benchmarks/bench_maxsim.py --quick       # 2,000 documents, 30 queries
    python benchmarks/bench_maxsim.py               # 5,000 documents, 100 queries
    python benchmarks/bench_maxsim.py --n 20000 --dim 96 --out DIR
    python benchmarks/bench_maxsim.py --reopen --n 10000 --dim 64   # open time of a saved collection
"""
import os
import sys

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import tempfile
import time

import numpy as np
from threadpoolctl import threadpool_limits

from hybridsearch.bench.multivectors import colbert_like
from hybridsearch.bench.script import parser, sizes, start
from hybridsearch.bench.tables import fmt, ratio
from hybridsearch.engine.multivector import TokenStore
from hybridsearch.engine.muvera import Fde, FdeParams

K_TOP, NUMPY_BATCH, ROUNDS = 10, 8, 3


def median_time(fn, rounds=ROUNDS) -> float:
    times = []
    for _ in range(rounds):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return float(np.median(times))


def numpy_top(rows, starts, Qs) -> list:
    """Top-10 per query from one matmul over all queries given (the batched numpy way)."""
    m = Qs[0].shape[0]
    S = rows @ np.concatenate(Qs).T                            # (tokens, len(Qs) * m)
    per_doc = np.maximum.reduceat(S, starts, axis=0)           # (docs, len(Qs) * m)
    scores = per_doc.reshape(len(starts), len(Qs), m).sum(axis=2)
    out = []
    for j in range(len(Qs)):
        top = np.argpartition(-scores[:, j], K_TOP)[:K_TOP]
        out.append(top[np.argsort(-scores[top, j], kind="stable")])
    return out


def main(argv=None) -> int:
    ap = parser(__doc__, full=(5000, 100), quick=(2000, 30), what="documents")
    ap.add_argument("--dim", type=int, default=128, help="token dimension (default 128)")
    ap.add_argument("--candidates", type=int, nargs="+", default=[100, 200], help="FDE candidates C")
    ap.add_argument("--reopen", action="store_true", help="time the reopen of a saved hnsw collection instead")
    args = ap.parse_args(argv)
    n, nq = sizes(args)
    if args.reopen:
        return reopen(args, n, nq)
    out, facts = start("maxsim", args)
    docs, queries = colbert_like(n, nq, dim=args.dim, topics=200, per_doc=8, noise=1.0, seed=1)
    store = TokenStore(args.dim)
    store.set_many(range(n), docs)
    rows = np.concatenate(docs)
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    starts = np.concatenate(([0], np.cumsum([len(b) for b in docs])[:-1]))
    Qn = [q / np.linalg.norm(q, axis=1, keepdims=True) for q in queries]
    out.say(f"\n== {n:,} documents, {len(rows):,} token rows x {args.dim} d "
            f"({rows.nbytes / 2**20:.0f} MiB), {nq} queries x 32 tokens, cosine, top-{K_TOP}, 1 thread ==")
    res = {}
    with threadpool_limits(limits=1):
        ours = [store.maxsim_top_k(q, K_TOP, "cosine")[1] for q in queries]
        ref = [t for i in range(0, nq, NUMPY_BATCH) for t in numpy_top(rows, starts, Qn[i:i + NUMPY_BATCH])]
        agree = np.mean([len(set(a.tolist()) & set(b.tolist())) / K_TOP for a, b in zip(ours, ref)])
        t_ours = median_time(lambda: [store.maxsim_top_k(q, K_TOP, "cosine") for q in queries]) / nq
        t_np1 = median_time(lambda: [numpy_top(rows, starts, [q]) for q in Qn]) / nq
        t_npb = median_time(lambda: [numpy_top(rows, starts, Qn[i:i + NUMPY_BATCH])
                                     for i in range(0, nq, NUMPY_BATCH)]) / nq
        fmacs = len(rows) * args.dim * 32
        out.table(["method", "ms / query", "QPS", "GFMA/s", "speedup of ours"],
                  [["ours (maxsim_top_k)", fmt(t_ours * 1e3, 3), fmt(1 / t_ours, 1), fmt(fmacs / t_ours / 1e9, 2), "1.00x"],
                   ["numpy, 1 query / matmul", fmt(t_np1 * 1e3, 3), fmt(1 / t_np1, 1), fmt(fmacs / t_np1 / 1e9, 2),
                    ratio(t_np1, t_ours)],
                   [f"numpy, {NUMPY_BATCH} queries / matmul", fmt(t_npb * 1e3, 3), fmt(1 / t_npb, 1),
                    fmt(fmacs / t_npb / 1e9, 2), ratio(t_npb, t_ours)]])
        out.say(f"  top-10 overlap ours vs numpy: {agree:.4f}")
        res["exhaustive"] = {"ours_s": t_ours, "numpy_single_s": t_np1, "numpy_batched_s": t_npb, "overlap": agree}

        params = FdeParams(args.dim)
        fde = Fde(params)
        t = time.perf_counter()
        D = fde.documents(docs)
        t_enc = time.perf_counter() - t
        Qf = fde.queries(queries)
        out.say(f"\n== FDE: k_sim={params.k_sim}, d_proj={params.d_proj}, reps={params.reps} -> {params.out_dim} "
                f"dims; encoding {n:,} documents took {t_enc:.2f} s ({D.nbytes / 2**20:.0f} MiB) ==")
        rows_out = []
        for C in args.candidates:
            def fde_top(i, C=C):
                s = D @ Qf[i]
                cand = np.argpartition(-s, C)[:C]
                sc = store.maxsim_of(cand, queries[i], "cosine")
                return cand[np.argsort(-sc, kind="stable")[:K_TOP]]
            recall = np.mean([len(set(fde_top(i).tolist()) & set(ours[i].tolist())) / K_TOP for i in range(nq)])
            t_fde = median_time(lambda: [fde_top(i) for i in range(nq)]) / nq
            rows_out.append([str(C), fmt(recall, 4), fmt(t_fde * 1e3, 3), fmt(1 / t_fde, 1), ratio(t_ours, t_fde)])
            res[f"fde_C{C}"] = {"recall_at_10": recall, "s_per_query": t_fde}
        out.table(["C", "recall@10", "ms / query", "QPS", "vs exhaustive ours"], rows_out)
        res["fde_encode_s"] = t_enc
    out.save({"machine": facts, "config": vars(args), "results": res})
    return 0 if agree >= 0.99 else 1


def reopen(args, n: int, nq: int) -> int:
    """Build, close, reopen: the open's wall time and the finds before closing vs after."""
    import hybridsearch as hs

    out, facts = start("maxsim_reopen", args)
    docs, queries = colbert_like(n, nq, dim=args.dim, topics=200, per_doc=8, noise=1.0, seed=1)

    class Doc(hs.Document):
        mv: hs.MultiVector[args.dim]

    def finds(da):
        return [(r.ids, [float(s) for s in r.scores]) for r in (da.find(vector={"mv": q}, limit=K_TOP) for q in queries)]

    res = {}
    with tempfile.TemporaryDirectory() as tmp:
        t = time.perf_counter()
        da = hs.DocumentArray(Doc, storage="hnsw", path=tmp, metric="cosine")
        for i in range(0, n, 1000):
            da.extend([{"id": str(j), "mv": docs[j]} for j in range(i, min(n, i + 1000))])
        res["build_s"] = time.perf_counter() - t
        before = finds(da)
        t = time.perf_counter()
        da.close()
        res["close_s"] = time.perf_counter() - t
        res["files_bytes"] = sum(os.path.getsize(os.path.join(tmp, f)) for f in os.listdir(tmp))
        t = time.perf_counter()
        da = hs.DocumentArray(Doc, storage="hnsw", path=tmp, metric="cosine")
        res["reopen_s"] = time.perf_counter() - t
        after = finds(da)
        st = da.stats()
        da.close()
    res["same_answers"] = before == after
    out.say(f"\n== storage hnsw, {n:,} documents of 20-60 {args.dim}-d tokens, cosine, {nq} queries ==")
    out.table(["build (extend)", "close (snapshot)", "reopen", "files", "finds equal after reopen", "FDE graph nodes"],
              [[fmt(res["build_s"], 2) + " s", fmt(res["close_s"], 2) + " s", fmt(res["reopen_s"], 3) + " s",
                f"{res['files_bytes'] / 2**20:.0f} MiB", str(res["same_answers"]), str(st["fde_graph_nodes"])]])
    out.say(f"  bytes: {st['bytes']}")
    out.save({"machine": facts, "config": vars(args), "results": res})
    return 0 if res["same_answers"] else 1


if __name__ == "__main__":
    sys.exit(main())
