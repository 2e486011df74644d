"""RaBitQ code scans (hybridsearch/engine/rabitq.py) beside the float32 exact scan and the memory
bandwidth: how close the 1-bit and 4-bit code passes come to the time of just reading their bytes.

Data: --n clustered float32 vectors (1,000 gaussian centres, spread 0.35) of --dim dimensions
(l2), queries fresh points around the same centres. Per query, one thread, medians of --passes
interleaved passes after a warm-up:
  estimates only   RabitqCodes.scan_estimates: the code pass alone (top-10 by the estimate)
  prob / hard      RabitqCodes.scan: the code pass, then the rows in doubt rescored on float32
  float32 exact    ExactIndex.search (hs_exact_search), the scan the codes replace
  bandwidth        hs_stream_sum over as many bytes as the code pass reads: the codes and their
                   four float32 factors per vector (RabitqCodes.nbytes)
"bandwidth / estimates" is the share of the memory bandwidth the code pass reaches (1.0 = it
costs no more than reading its bytes). The hard scan's answer is checked equal to float32's.

    python benchmarks/bench_rabitq_scan.py --quick            # 100,000 x 128, 10 queries
    python benchmarks/bench_rabitq_scan.py                    # 1,000,000 x 128, 20 queries
    python benchmarks/bench_rabitq_scan.py --dim 384 --out DIR
"""
import os
import sys
import time

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import numpy as np


def clustered(n: int, d: int, rng, centres: int = 1000, spread: float = 0.35, C=None):
    """n float32 points around gaussian centres (C, or fresh ones), built in blocks."""
    C = rng.standard_normal((centres, d)).astype(np.float32) if C is None else C
    X = np.empty((n, d), dtype=np.float32)
    for a in range(0, n, 100_000):
        b = min(n, a + 100_000)
        X[a:b] = C[rng.integers(0, len(C), b - a)] + spread * rng.standard_normal((b - a, d)).astype(np.float32)
    return X, C


def per_query(fn, Q, passes: int) -> float:
    """Median over passes of the mean time per query of fn(q[None]) (after one warm-up query)."""
    fn(Q[:1])
    times = []
    for _ in range(passes):
        t = time.perf_counter()
        for q in Q:
            fn(q[None])
        times.append((time.perf_counter() - t) / len(Q))
    return float(np.median(times))


def main(argv=None) -> int:
    from hybridsearch.bench.script import parser, sizes, start
    from hybridsearch.bench.tables import fmt
    from hybridsearch.engine.exact import ExactIndex, simd_level, stream_sum
    from hybridsearch.engine.rabitq import RabitqCodes

    ap = parser(__doc__, full=(1_000_000, 20), quick=(100_000, 10))
    ap.add_argument("--dim", type=int, default=128, help="dimensions (default 128)")
    ap.add_argument("--passes", type=int, default=3, help="timed passes (default 3)")
    args = ap.parse_args(argv)
    n, nq = sizes(args)
    out, facts = start("rabitq_scan", args)
    out.say(f"SIMD level in use: {simd_level()}; load average before: {os.getloadavg()[0]:.2f} "
            f"on {os.cpu_count()} cores (a shared machine: other jobs run beside this one)")
    rng = np.random.default_rng(7)
    X, C = clustered(n, args.dim, rng)
    Q, _ = clustered(nq, args.dim, rng, C=C)
    flat = ExactIndex(X, "l2")
    ref_s, ref_i = flat.search(Q, 10)
    t_f32 = per_query(lambda q: flat.search(q, 10), Q, args.passes)
    rows, res = [], {}
    for bits in (1, 4):
        rq = RabitqCodes(args.dim, "l2", bits, seed=1)
        rq.train(X[rng.choice(n, min(n, 100_000), replace=False)])
        t = time.perf_counter()
        rq.encode(X, np.arange(n))
        t_enc = time.perf_counter() - t
        code_bytes = rq.nbytes  # codes + factors: what the code pass reads
        block = np.ones(code_bytes // 4, dtype=np.float32)
        t_bw = per_query(lambda q: stream_sum(block), Q, args.passes)
        t_est = per_query(lambda q: rq.scan_estimates(q, 10), Q, args.passes)
        got = {}
        for bound in ("prob", "hard"):
            s, i, r = rq.scan(X, Q, 10, bound=bound)
            got[bound] = (i, r)
        if not np.array_equal(got["hard"][0], ref_i):
            out.say(f"MISMATCH: the {bits}-bit hard scan differs from the float32 exact top-10")
            return 1
        t_prob = per_query(lambda q: rq.scan(X, q, 10, bound="prob"), Q, args.passes)
        t_hard = per_query(lambda q: rq.scan(X, q, 10, bound="hard"), Q, args.passes)
        recall = float(np.mean([len(set(a) & set(b)) / 10 for a, b in zip(got["prob"][0], ref_i)]))
        for name, tt, resc in (("estimates only", t_est, 0), ("prob scan", t_prob, got["prob"][1].mean()),
                               ("hard scan", t_hard, got["hard"][1].mean())):
            rows.append([f"{bits}-bit {name}", fmt(tt * 1e3, 3), f"{t_bw / tt:.2f}", f"{t_f32 / tt:.2f}x",
                         fmt(resc), f"{recall:.4f}" if name == "prob scan" else ("1 (checked)" if name == "hard scan" else "-")])
        res[f"{bits}bit"] = {"code_bytes": code_bytes, "bandwidth_s": t_bw, "estimates_s": t_est,
                             "prob_s": t_prob, "hard_s": t_hard, "encode_s": t_enc, "recall_prob": recall,
                             "rescored_prob": float(got["prob"][1].mean()),
                             "rescored_hard": float(got["hard"][1].mean())}
        out.say(f"{bits}-bit: {code_bytes / 1e6:.1f} MB of codes and factors ({rq.code_bytes} + 16 B/vector), encoded in "
                f"{t_enc:.1f} s; reading them (hs_stream_sum): {t_bw * 1e3:.3f} ms")
        del block
    rows.append(["float32 exact (hs_exact)", fmt(t_f32 * 1e3, 3), "-", "1.00x", fmt(n), "1"])
    out.say(f"== top-10 of {nq} queries over {n:,} x {args.dim} clustered vectors (l2), one thread, "
            f"ms per query (medians of {args.passes} passes) ==")
    out.table(["scan", "ms/query", "bandwidth / scan", "float32 / scan", "rescored rows/query",
               "recall@10 vs exact"], rows)
    out.say(f"load average after: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    out.save({"machine": facts, "config": vars(args), "float32_s": t_f32, "results": res})
    return 0


if __name__ == "__main__":
    sys.exit(main())
