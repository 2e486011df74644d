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
    python benchmarks/bench_maxsim.py --queries 30 --scale-n 30000 --out DIR   # + the scale sections

The scale sections (--scale-n N > 0; functions add_scale_options / scale_sections): N documents of
exactly --scale-tokens tokens (default 32; 30,000 x 32 x 128-d = 960k token rows):
- bandwidth: one thread's read bandwidth over a buffer the size of the token block (numpy sum,
  and a copy), beside the GB/s of the exact MaxSim scan (TokenStore.maxsim_top_k) over the block;
  target: the scan at >= 70% of the bandwidth's time.
- hnsw: the same documents in hs.DocumentArray(storage="hnsw") through extend_columns; find()
  (the FDE graph + exact rescoring, default settings) against find(exact=True), interleaved
  passes; recall@10 of find() against exact; target: >= 10x the exact QPS at recall >= 0.95.
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


def add_scale_options(ap) -> None:
    """Options of the scale sections (bandwidth and the hnsw storage at scale)."""
    ap.add_argument("--scale-n", type=int, default=0, help="documents of the bandwidth and hnsw sections "
                                                            "(default 0: skipped; the documented run: 30000)")
    ap.add_argument("--scale-tokens", type=int, default=32, help="tokens per document there (default 32)")
    ap.add_argument("--passes", type=int, default=3, help="interleaved passes of the hnsw section (default 3)")
    ap.add_argument("--scale-sections", default="bandwidth,hnsw", help="which of them (default both)")


def read_bandwidth(nbytes: int, rounds: int = 5) -> dict:
    """One thread's read bandwidth (GB/s) over a fresh buffer of nbytes: the best of `rounds`
    numpy float32 sums (reads once) and of copies into a second buffer (read + write, counted as
    bytes read, the lower bound of the two)."""
    a = np.ones(nbytes // 4, dtype=np.float32)
    b = np.empty_like(a)
    best = {"numpy sum": 0.0, "copy (bytes read / time)": 0.0}
    for _ in range(rounds):
        t = time.perf_counter()
        a.sum()
        best["numpy sum"] = max(best["numpy sum"], nbytes / (time.perf_counter() - t) / 1e9)
        t = time.perf_counter()
        np.copyto(b, a)
        best["copy (bytes read / time)"] = max(best["copy (bytes read / time)"], nbytes / (time.perf_counter() - t) / 1e9)
    return best


def bandwidth_section(out, store, rows_total: int, dim: int, queries: list, res: dict) -> bool:
    """MaxSim scan GB/s over the token block against the machine's read bandwidth (1 thread)."""
    nbytes = rows_total * dim * 4
    bw = read_bandwidth(nbytes)
    t_scan = median_time(lambda: [store.maxsim_top_k(q, K_TOP, "cosine") for q in queries], rounds=2) / len(queries)
    scan_gbs = nbytes / t_scan / 1e9
    peak = max(bw.values())
    frac = scan_gbs / peak
    out.say(f"\n== bandwidth: token block {rows_total:,} rows x {dim} d = {nbytes / 2**20:,.0f} MiB, 1 thread ==")
    out.table(["pass over the block", "GB/s", "ms per pass"],
              [[name, fmt(g, 2), fmt(nbytes / g / 1e6, 1)] for name, g in bw.items()]
              + [[f"exact MaxSim scan, {queries[0].shape[0]}-token query (maxsim_top_k)", fmt(scan_gbs, 2),
                  fmt(t_scan * 1e3, 1)]])
    fmas = rows_total * dim * queries[0].shape[0]
    out.say(f"  the scan: {fmas / t_scan / 1e9:.1f} GFMA/s; its time is {frac:.1%} of the way to the "
            f"bandwidth time (bandwidth time / scan time, target >= 70%): {'MET' if frac >= 0.7 else 'MISSED'}")
    res["bandwidth"] = {"bytes": nbytes, "read_gbs": bw, "scan_s": t_scan, "scan_gbs": scan_gbs,
                        "fraction": frac, "gfma_s": fmas / t_scan / 1e9}
    return True


def hnsw_section(out, docs: list, queries: list, dim: int, passes: int, res: dict) -> bool:
    """find() on storage "hnsw" (FDE graph + exact rescoring) against find(exact=True)."""
    import hybridsearch as hs

    class Doc(hs.Document):
        colbert: hs.MultiVector[dim]

    n = len(docs)
    da = hs.DocumentArray(Doc, storage="hnsw")
    t = time.perf_counter()
    for a in range(0, n, 5000):
        da.extend_columns({"id": [str(i) for i in range(a, min(n, a + 5000))], "colbert": docs[a:a + 5000]})
    t_build = time.perf_counter() - t
    st = da.stats()
    out.say(f"\n== hnsw storage: {n:,} documents x {docs[0].shape[0]} tokens x {dim} d "
            f"({sum(len(b) for b in docs):,} token vectors), cosine, defaults (ef {st['ef']}, exact_max "
            f"{st['exact_max']:,}); extend_columns took {t_build:.1f} s ({n / t_build:,.0f} documents/s) ==")

    def ids(r):
        return [d.id for d in r]
    methods = {"find() (FDE graph + exact MaxSim rescoring)": lambda q: ids(da.find(vector={"colbert": q}, limit=K_TOP)),
               "find(exact=True) (exhaustive MaxSim)": lambda q: ids(da.find(vector={"colbert": q}, limit=K_TOP,
                                                                             exact=True))}
    for fn in methods.values():
        fn(queries[0])
    times = {m: [] for m in methods}
    hits = {}
    for _ in range(passes):
        for m, fn in methods.items():
            t = time.perf_counter()
            hits[m] = [fn(q) for q in queries]
            times[m].append((time.perf_counter() - t) / len(queries))
    approx, exact = hits.values()
    recs = [len(set(a) & set(e)) / K_TOP for a, e in zip(approx, exact)]
    t_a, t_e = (float(np.median(times[m])) for m in methods)
    out.table(["method", "ms / query", "QPS", "recall@10", "min recall"],
              [[m, fmt(tm * 1e3, 2), fmt(1 / tm, 1), fmt(float(np.mean(r)), 4), fmt(float(min(r)), 2)]
               for m, tm, r in ((list(methods)[0], t_a, recs), (list(methods)[1], t_e, [1.0]))])
    speed = t_e / t_a
    rec = float(np.mean(recs))
    out.say(f"  find() / find(exact=True) QPS: {speed:.1f}x at recall@10 {rec:.4f} (target >= 10x at >= 0.95): "
            f"{'MET' if speed >= 10 and rec >= 0.95 else 'MISSED'}")
    res["hnsw"] = {"n": n, "build_s": t_build, "find_s": t_a, "exact_s": t_e, "speedup": speed, "recall_at_10": rec,
                   "min_recall": float(min(recs))}
    return True


def scale_sections(args, out, res: dict, nq: int) -> bool:
    """The scale sections at --scale-n documents (nothing when it is 0)."""
    if not args.scale_n:
        return True
    import os as _os
    out.say(f"\nload average: {' '.join(f'{x:.2f}' for x in _os.getloadavg())}")
    docs, queries = colbert_like(args.scale_n, nq, dim=args.dim, tokens=(args.scale_tokens, args.scale_tokens),
                                 topics=200, per_doc=8, noise=1.0, seed=2)
    store = TokenStore(args.dim)
    store.set_many(range(len(docs)), docs)
    sections = args.scale_sections.split(",")
    if "bandwidth" in sections:
        with threadpool_limits(limits=1):
            bandwidth_section(out, store, sum(len(b) for b in docs), args.dim, queries, res)
    del store
    if "hnsw" in sections:
        hnsw_section(out, docs, queries, args.dim, args.passes, res)
    out.say(f"load average: {' '.join(f'{x:.2f}' for x in _os.getloadavg())}")
    return True


def main(argv=None) -> int:
    ap = parser(__doc__, full=(5000, 100), quick=(2000, 30), what="documents")
    ap.add_argument("--dim", type=int, default=128, help="token dimension (default 128)")
    ap.add_argument("--candidates", type=int, nargs="+", default=[100, 200], help="FDE candidates C")
    ap.add_argument("--reopen", action="store_true", help="time the reopen of a saved hnsw collection instead")
    add_scale_options(ap)
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
    scale_ok = scale_sections(args, out, res, nq)
    out.save({"machine": facts, "config": vars(args), "results": res})
    return 0 if agree >= 0.99 and scale_ok else 1


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
