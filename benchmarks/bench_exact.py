"""Exact top-10 on one thread: our kernel (hybridsearch.engine.exact.ExactIndex) vs numpy vs
faiss IndexFlat.

Per dataset (standard-normal float32, fixed seed; an "n" after the size normalises the rows):
metric ip (the comparison: a single query, median over 30; a batch of 1,000 queries, median of
3 runs), l2 and cosine for information; the machine's single-thread read bandwidth and the time
it allows for one scan; DocumentArray.find's cost over the kernel (up to 200,000 documents);
our ids against numpy's in the same run (the exit status is 1 if they differ). Everything runs
on one thread (OMP / OpenBLAS / MKL set to 1 before numpy loads, threadpool_limits(1)), methods
timed round-robin after a warm-up. Our matrix is prepared once (norms computed ahead), as the
storages keep it, and as numpy's and faiss's need no norms for ip.

    python benchmarks/bench_exact.py --quick          # 100k x 128 and 50k x 384n
    python benchmarks/bench_exact.py                  # 1M x 128 and 200k x 384n
    python benchmarks/bench_exact.py --sizes 500000x128 100000x384n --out DIR
"""
import os
import sys

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

from threadpoolctl import threadpool_limits

from hybridsearch.bench.script import parser, start
from hybridsearch.bench.tables import fmt, ratio, verdict
from hybridsearch.bench.workloads import exact

FULL, QUICK = ["1000000x128", "200000x384n"], ["100000x128", "50000x384n"]
TARGETS = {"numpy": 2.0, "faiss": 1.0}  # ours at least this many times faster


def report(out, r: dict) -> list:
    """Prints one dataset; returns its target rows."""
    ip, bw = r["metrics"]["ip"], r["bandwidth"]
    out.say(f"\n== {r['n']:,} x {r['d']} float32 ({r['size']}), {r['bytes'] / 2 ** 20:.0f} MiB, exact top-10, "
            "1 thread ==")
    rows = [[f"{m} {w}"] + [fmt(t[x] * 1e3 / div if x in t else None, 3) for x in ("ours", "numpy", "faiss")]
            + [ratio(t.get(x), t["ours"]) for x in ("numpy", "faiss")]
            for m in ("ip", "l2", "cosine") for w, div in (("single", 1), ("batch", 1), ("batch/query", exact.BATCH))
            for t in [r["metrics"][m][w.split("/")[0]]]]
    out.table(["metric workload", "ours ms", "numpy ms", "faiss ms", "numpy/ours", "faiss/ours"], rows)
    out.say(f"  bandwidth {bw['gbps']:.2f} GB/s -> {bw['bound_s'] * 1e3:.3f} ms per scan; ours single / bound = "
            f"{ip['single']['ours'] / bw['bound_s']:.2f}x; ids vs numpy: {r['overlap_vs_numpy']}; "
            f"vs faiss (batch): {r.get('overlap_vs_faiss', {})}")
    if "api" in r:
        a = r["api"]
        out.say(f"  DocumentArray.find {a['single_s'] * 1e3:.3f} ms vs kernel {a['kernel_single_s'] * 1e3:.3f} ms = "
                f"{a['overhead_ratio']:.2f}x (ids equal {a['ids_equal']:.3f})")
    targets = [[r["size"], w, f"ours >= {need:g}x {other}", ratio(ip[w][other], ip[w]["ours"]),
                verdict(ip[w][other] / ip[w]["ours"], lambda v, need=need: v >= need)]
               for w in ("single", "batch") for other, need in TARGETS.items() if other in ip[w]]
    ok = min(r["overlap_vs_numpy"].values()) >= 0.999
    return targets + [[r["size"], "both", "ids vs numpy >= 0.999", fmt(min(r["overlap_vs_numpy"].values()), 4),
                       "PASS" if ok else "MISS"]]


def main(argv=None) -> int:
    ap = parser(__doc__)
    ap.add_argument("--quick", action="store_true", help=f"small sizes {' '.join(QUICK)}")
    ap.add_argument("--sizes", nargs="+", metavar="NxD[n]", help="datasets, e.g. 1000000x128 200000x384n")
    ap.add_argument("--no-api", action="store_true", help="skip the DocumentArray timing")
    args = ap.parse_args(argv)
    out, facts = start("exact", args)
    results, targets = [], []
    with threadpool_limits(limits=1):
        for text in args.sizes or (QUICK if args.quick else FULL):
            results.append(exact.run(exact.Size.parse(text), with_api=not args.no_api))
            targets += report(out, results[-1])
    out.say("\n== TARGETS ==")
    out.table(["size", "workload", "target", "value", "verdict"], targets)
    out.save({"machine": facts, "config": vars(args), "datasets": results})
    return 0 if all(t[-1] == "PASS" for t in targets if t[2].startswith("ids")) else 1


if __name__ == "__main__":
    sys.exit(main())
