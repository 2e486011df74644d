"""Ours through the DocumentArray API (find() on storage="hnsw") against the raw hnswlib index:
the per-query cost of our API included, hnswlib's Python binding included.

Same sift-like data and parameters (l2, m=16, ef_construct=100), both built on all cores,
searched one query per call on one thread, round-robin pass by pass so that load from elsewhere
on a shared machine falls on both; median of --passes; recall@10 against exact ground truth.

    python benchmarks/bench_api_vs_hnswlib.py            # 200,000 x 128 sift-like, 500 queries
    python benchmarks/bench_api_vs_hnswlib.py --n 20000
"""
import sys

from hybridsearch.bench import vectors as V
from hybridsearch.bench.adapters.anchors import cpu_count
from hybridsearch.bench.adapters.base import GraphConfig
from hybridsearch.bench.script import parser, sizes, start
from hybridsearch.bench.tables import fmt, ratio
from hybridsearch.bench.workloads.ann import build_all, sweep


def main(argv=None) -> int:
    ap = parser(__doc__, full=(200_000, 500))
    ap.add_argument("--passes", type=int, default=3)
    ap.add_argument("--ef", default="20,40,80,160")
    ap.add_argument("--quantization", default="auto", choices=["auto", "none", "int8"],
                    help="ours: auto (the default: int8 codes for the walk, re-scored on float32) or none")
    args = ap.parse_args(argv)
    n, nq = sizes(args)
    out, facts = start("api_vs_hnswlib", args)
    X, Q = V.sift_like(n, nq)
    gt, _ = V.ground_truth(X, Q, 10, "l2")
    quantization = None if args.quantization == "none" else args.quantization
    built, failed = build_all(["hnsw", "hnswlib-raw"], X, None, "l2", GraphConfig(16, 100, cpu_count()),
                              quantization=quantization)
    if failed:
        out.say(f"not measured: {failed}")
        return 1
    out.say(f"{n:,} x {X.shape[1]} sift-like, l2, m=16 ef_construct=100, {nq} queries, ours quantization="
            f"{args.quantization}; build: ours {built[0].build_s:.1f} s (extend: documents + graph), "
            f"hnswlib {built[1].build_s:.1f} s")
    curves = sweep(built, X, Q, gt, "l2", [int(e) for e in args.ef.split(",")], passes=args.passes)
    ours, theirs = curves["hnsw"], curves["hnswlib-raw"]
    out.table(["ef", "ours recall", "ours QPS", "hnswlib recall", "hnswlib QPS", "ours / hnswlib"],
              [[a["ef"], fmt(a.get("recall"), 3), fmt(a.get("qps")), fmt(b.get("recall"), 3), fmt(b.get("qps")),
                ratio(a.get("qps"), b.get("qps"))] for a, b in zip(ours, theirs)])
    out.save({"machine": facts, "config": vars(args), "sweep": curves})
    return 0


if __name__ == "__main__":
    sys.exit(main())
