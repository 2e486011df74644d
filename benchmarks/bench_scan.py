"""Exact scan at the bandwidth limit, every SIMD level side by side in one run: one query's exact
top-10 over a 1M x 128 block, ours vs numpy vs faiss, float32 (ip, l2) and int8 codes, as ms,
GB/s and a fraction of the machine's single-thread read bandwidth (a streaming C loop).

Each level runs in its own child process with every library held to it (ours: force_simd;
faiss: FAISS_SIMD_LEVEL / FAISS_OPT_LEVEL; numpy's OpenBLAS: OPENBLAS_CORETYPE); levels this CPU
lacks are listed as such. One thread everywhere, round-robin timing after a warm-up, medians.
Targets: ours >= 85 % of the bandwidth at 1M x 128 for float32 and int8, and
>= 1.0x faiss and numpy at every level.

    python benchmarks/bench_scan.py                    # 1M x 128, every level
    python benchmarks/bench_scan.py --n 200000 --levels avx2 scalar --out DIR
"""
import json
import os
import subprocess
import sys

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

LEVELS = ("avx512", "avx2", "neon", "scalar")
TARGET_BANDWIDTH = 0.85


def child(level: str, n: int, d: int, queries: int) -> int:
    """Measures one level in this process and prints its figures as one JSON line."""
    from threadpoolctl import threadpool_limits

    from hybridsearch.bench.workloads import scan
    with threadpool_limits(limits=1):
        print(json.dumps(scan.run(level, n, d, queries)))
    return 0


def measure(level: str, args) -> dict | None:
    """Runs `child` for one level with the libraries' level variables set; None if it failed."""
    from hybridsearch.bench.workloads.scan import LEVEL_ENV
    env = dict(os.environ, **LEVEL_ENV[level])
    cmd = [sys.executable, __file__, "--child", level, "--n", str(args.n), "--d", str(args.d),
           "--queries", str(args.queries)]
    p = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if p.returncode != 0:
        print(p.stderr[-2000:], file=sys.stderr)
        return None
    return json.loads(p.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    from hybridsearch.bench.script import parser, start
    from hybridsearch.bench.tables import fmt, ratio, verdict
    from hybridsearch.engine.exact import simd_levels

    ap = parser(__doc__)
    ap.add_argument("--n", type=int, default=1_000_000, help="rows (default 1,000,000)")
    ap.add_argument("--d", type=int, default=128, help="dimension (default 128)")
    ap.add_argument("--queries", type=int, default=30, help="timed queries per pass (default 30)")
    ap.add_argument("--levels", nargs="+", choices=LEVELS, default=list(LEVELS))
    ap.add_argument("--child", choices=LEVELS, help=argparse_suppress())
    args = ap.parse_args(argv)
    if args.child:
        return child(args.child, args.n, args.d, args.queries)
    out, facts = start("scan", args)
    have = simd_levels()
    results, targets = [], []
    for level in args.levels:
        if level not in have:
            out.say(f"\n== {level}: not on this CPU (it runs {', '.join(have)}); not measured ==")
            continue
        r = measure(level, args)
        if r is None:
            out.say(f"\n== {level}: the child process failed (stderr above) ==")
            continue
        results.append(r)
        bw = r["bandwidth"]
        out.say(f"\n== level {r['level']} (faiss: {r['faiss_level'] or '?'}, numpy BLAS: {r['numpy_level'] or '?'}); "
                f"{r['n']:,} x {r['d']}; read bandwidth {bw['gbps']:.1f} GB/s (C stream, {bw['probe_level']}), "
                f"numpy add.reduce {bw['numpy_reduce_gbps']:.1f} GB/s ==")
        rows = []
        for name, w in r["workloads"].items():
            for m in ("ours", "numpy", "faiss"):
                if m in w:
                    rows.append([name, m, fmt(w[m]["ms"], 2), fmt(w[m]["gbps"], 1), fmt(w[m]["of_bandwidth"], 2),
                                 ratio(w[m]["ms"], w["ours"]["ms"]) if m != "ours" else ""])
            frac = w["ours"]["of_bandwidth"]
            targets.append([r["level"], name, f"ours >= {TARGET_BANDWIDTH:.0%} of bandwidth", fmt(frac, 2),
                            verdict(frac, lambda v: v >= TARGET_BANDWIDTH)])
            for m in ("numpy", "faiss"):
                if m in w:
                    q = w[m]["ms"] / w["ours"]["ms"]
                    targets.append([r["level"], name, f"ours >= 1.0x {m}", fmt(q, 2), verdict(q, lambda v: v >= 1.0)])
            if "overlap_vs_numpy" in w:
                targets.append([r["level"], name, "ids vs numpy >= 0.99", fmt(w["overlap_vs_numpy"], 3),
                                verdict(w["overlap_vs_numpy"], lambda v: v >= 0.99)])
        out.table(["workload", "method", "ms", "GB/s", "of bandwidth", "x slower than ours"], rows)
    out.say("\n== TARGETS ==")
    out.table(["level", "workload", "target", "value", "verdict"], targets)
    out.save({"machine": facts, "config": {k: v for k, v in vars(args).items() if k != "full"}, "levels": results})
    return 0


def argparse_suppress():
    """Hides --child from --help (it is how the script calls itself per level)."""
    import argparse
    return argparse.SUPPRESS


if __name__ == "__main__":
    sys.exit(main())
