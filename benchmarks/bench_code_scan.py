"""The hnsw storage's exact scans side by side: the int8 codes' scan with error-bounded re-scoring
(the graph's `scan`, what a filtered find with few matches and find(exact=True) run on an int8
collection) against the float32 block's scan (what they ran before, and still run on a
quantization=None collection), on the same rows, filter and queries in one process.

Data: the e-commerce catalogue's 384-d projection embeddings (hybridsearch.bench.corpora.products,
cosine) at --n rows, queries from its titles; a random filter keeping --share of the rows, and
the unfiltered scan. Both answers are checked equal (the same ids, scores within float rounding).
One thread, interleaved passes after a warm-up, medians per query.

    python benchmarks/bench_code_scan.py --quick                # 20,000 rows, 50 queries
    python benchmarks/bench_code_scan.py                        # 200,000 rows, 200 queries
    python benchmarks/bench_code_scan.py --n 200000 --share 0.06 --out DIR
"""
import os
import sys
import time

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import numpy as np


def bitset(rows: np.ndarray, n: int) -> np.ndarray:
    """The rows as a uint64 bitset over n slots."""
    bits = np.zeros((n + 63) // 64, dtype=np.uint64)
    np.bitwise_or.at(bits, rows >> 6, np.uint64(1) << (rows & 63).astype(np.uint64))
    return bits


def main(argv=None) -> int:
    from hybridsearch.bench import corpora as C
    from hybridsearch.bench.script import parser, sizes, start
    from hybridsearch.bench.tables import fmt
    from hybridsearch.engine.exact import ExactIndex
    from hybridsearch.engine.graph import HnswGraph

    ap = parser(__doc__, full=(200_000, 200), quick=(20_000, 50), what="rows")
    ap.add_argument("--share", type=float, default=0.06, help="rows the filter keeps (default 0.06)")
    ap.add_argument("--passes", type=int, default=3, help="interleaved passes (default 3)")
    args = ap.parse_args(argv)
    n, nq = sizes(args)
    out, facts = start("code_scan", args)
    prod = C.products(n, nq, dim=384, embedder="projection")
    X = np.ascontiguousarray(prod.embeddings, dtype=np.float32)
    Q = np.ascontiguousarray(prod.query_vectors, dtype=np.float32)
    Q /= np.linalg.norm(Q, axis=1, keepdims=True)
    # links play no part in a scan: a sparse graph is enough to hold the codes
    g = HnswGraph(X.shape[1], "cosine", 4, 8, 1, "int8")
    g.add(X, np.arange(n, dtype=np.int64), 2)
    rng = np.random.default_rng(1)
    filtered = bitset(np.flatnonzero(rng.random(n) < args.share), n)
    every = bitset(np.arange(n), n)
    flat = ExactIndex(X, "cosine")

    def codes(bits):
        return lambda q: g.scan(X, q, 10, bits)

    def floats(bits):
        return lambda q: flat.search(q, 10, bits)

    cases = {"filter": filtered, "no filter": every}
    times = {(c, m): [] for c in cases for m in ("int8 codes", "float32")}
    for c, bits in cases.items():  # warm-up, and the answers checked equal
        for q in Q[:5]:
            (sa, ra), (sb, rb) = codes(bits)(q[None]), floats(bits)(q[None])
            if not (np.array_equal(ra, rb) and np.allclose(sa, sb, rtol=1e-4, atol=1e-5)):
                out.say(f"MISMATCH on {c}: {ra} vs {rb}")
                return 1
    for _ in range(args.passes):
        for c, bits in cases.items():
            for m, fn in (("int8 codes", codes(bits)), ("float32", floats(bits))):
                t = time.perf_counter()
                for q in Q:
                    fn(q[None])
                times[(c, m)].append((time.perf_counter() - t) / len(Q))
    rows, res = [], {}
    for c in cases:
        a, b = float(np.median(times[(c, "int8 codes")])), float(np.median(times[(c, "float32")]))
        rows.append([c, fmt(a * 1e3, 3), fmt(b * 1e3, 3), f"{b / a:.2f}x"])
        res[c] = {"codes_s": a, "float_s": b, "passes": {m: times[(c, m)] for m in ("int8 codes", "float32")}}
    out.say(f"== exact top-10 over {n:,} x 384 (cosine), filter keeping {args.share:.0%}; "
            f"medians of {args.passes} passes, ms per query ==")
    out.table(["rows scanned", "int8 codes + re-scoring", "float32 scan", "float32 / codes"], rows)
    out.say(f"load average after: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    out.save({"machine": facts, "config": vars(args), "results": res})
    return 0


if __name__ == "__main__":
    sys.exit(main())
