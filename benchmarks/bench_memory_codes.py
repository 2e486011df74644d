"""storage="memory" find() with quantization=None / "rabitq4" / "rabitq1": the same exact answers,
read through RaBitQ codes (engine/codescan.py) or from every float32 vector.

Data: --n clustered float32 vectors (1,000 gaussian centres, spread 0.35, as
benchmarks/bench_rabitq_scan.py) of --dim dimensions, queries fresh points around the same
centres. Per query, one thread, find(vector=q, limit=10) (unfiltered) and with a filter keeping
about half the rows; medians of --passes interleaved passes after a warm-up. Every answer is
checked equal (ids and scores) to the float scan's. Prints the load average: the figures are
only comparable on an idle machine.

    python benchmarks/bench_memory_codes.py                 # 200,000 x 128, l2, 50 queries
    python benchmarks/bench_memory_codes.py --n 1000000 --metric cosine
"""
import argparse
import os
import sys
import time

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from benchmarks.bench_rabitq_scan import clustered  # noqa: E402


def main(argv=None) -> int:
    import hybridsearch as hs

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=200_000)
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--queries", type=int, default=50)
    ap.add_argument("--passes", type=int, default=3)
    ap.add_argument("--metric", default="l2", choices=("l2", "ip", "cosine"))
    args = ap.parse_args(argv)

    class Doc(hs.Document):
        v: hs.Vector[args.dim]
        half: int = 0

    rng = np.random.default_rng(0)
    X, C = clustered(args.n, args.dim, rng)
    Q, _ = clustered(args.queries, args.dim, rng, C=C)
    cols = {"id": [f"d{i}" for i in range(args.n)], "v": X, "half": (np.arange(args.n) % 2).tolist()}
    quants = (None, "rabitq4", "rabitq1")
    das = {}
    for q in quants:
        t = time.perf_counter()
        das[q] = hs.DocumentArray(Doc, metric=args.metric, quantization=q)
        das[q].extend_columns(cols)
        print(f"quantization={q!s:8} extend_columns {time.perf_counter() - t:6.2f} s  bytes: "
              f"vectors {das[q].stats()['bytes']['vectors'] / 2**20:.1f} MiB, "
              f"codes {das[q].stats()['bytes'].get('codes', 0) / 2**20:.1f} MiB", flush=True)
    flt = {"half": {"$eq": 1}}
    for label, kw in (("unfiltered", {}), ("filter 50%", {"filter": flt})):
        base = [das[None].find(vector=q, limit=10, **kw) for q in Q]
        times = {q: [] for q in quants}
        for q in quants:  # warm-up and the check
            for i, v in enumerate(Q):
                r = das[q].find(vector=v, limit=10, **kw)
                assert r.ids == base[i].ids and np.array_equal(r.scores, base[i].scores), (q, i)
        for _ in range(args.passes):
            for q in quants:
                t = time.perf_counter()
                for v in Q:
                    das[q].find(vector=v, limit=10, **kw)
                times[q].append((time.perf_counter() - t) / len(Q))
        ref = np.median(times[None])
        for q in quants:
            m = float(np.median(times[q]))
            print(f"{label:11} quantization={q!s:8} {m * 1e3:8.3f} ms/query  x{ref / m:5.2f} vs float32", flush=True)
    from hybridsearch.engine.exact import simd_level

    print(f"load average {os.getloadavg()}, cores {os.cpu_count()}, simd {simd_level()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
