"""Ours through the DocumentArray API (find() on storage="hnsw") against the raw hnswlib index:
the per-query cost of our API included, hnswlib's Python binding included.

Same data and parameters (m=16, ef_construct=100), both built on all cores, searched one query
per call on one thread, round-robin pass by pass so that load from elsewhere on a shared machine
falls on both; median of --passes; recall@10 against exact ground truth. --data sift: sift-like
clustered 128-d vectors with l2; --data emb: 384-d embedding-like unit vectors with ip (cosine
on them). Prints the ratio at every ef of the sweep and at recall 0.95 (interpolated on the
median curves, with the spread of the passes).

    python benchmarks/bench_api_vs_hnswlib.py                          # 200,000 x 128 sift-like, 500 queries
    python benchmarks/bench_api_vs_hnswlib.py --n 100000 --data sift,emb
"""
import sys

from hybridsearch.bench import vectors as V
from hybridsearch.bench.adapters.anchors import cpu_count
from hybridsearch.bench.adapters.base import GraphConfig
from hybridsearch.bench.script import parser, sizes, start
from hybridsearch.bench.stability import compare_at_recall, headline
from hybridsearch.bench.tables import fmt, ratio
from hybridsearch.bench.workloads.ann import build_all, sweep


def main(argv=None) -> int:
    ap = parser(__doc__, full=(200_000, 500))
    ap.add_argument("--passes", type=int, default=3)
    ap.add_argument("--ef", default="10,20,30,40,60,80,120,160")
    ap.add_argument("--data", default="sift", help="comma-separated: sift (128-d, l2), emb (384-d, ip)")
    ap.add_argument("--quantization", default="auto", choices=["auto", "none", "int8", "rabitq1", "rabitq4"],
                    help="ours: auto (the default: int8 codes for the walk, re-scored on float32), none, or "
                         "RaBitQ codes (rabitq4 / rabitq1: the walk on the codes, candidates rescored on float32)")
    args = ap.parse_args(argv)
    n, nq = sizes(args)
    out, facts = start("api_vs_hnswlib", args)
    saved = {}
    for data in args.data.split(","):
        generator, metric = V.GENERATORS[data]
        saved[data] = one_set(out, generator, metric, data, n, nq, args)
        if saved[data] is None:
            return 1
    out.save({"machine": facts, "config": vars(args), "sets": saved})
    return 0


def one_set(out, generator, metric: str, data: str, n: int, nq: int, args):
    """Builds both indexes on one data set, sweeps ef, prints the table and the ratio at recall
    0.95 -> {"sweep", "at_0.95"} (None when an index could not be built)."""
    X, Q = generator(n, nq)
    gt, _ = V.ground_truth(X, Q, 10, metric)
    quantization = None if args.quantization == "none" else args.quantization
    built, failed = build_all(["hnsw", "hnswlib-raw"], X, None, metric, GraphConfig(16, 100, cpu_count()),
                              quantization=quantization)
    if failed:
        out.say(f"not measured: {failed}")
        return None
    out.say(f"\n{n:,} x {X.shape[1]} {data} ({metric}), m=16 ef_construct=100, {nq} queries, ours quantization="
            f"{args.quantization}; build: ours {built[0].build_s:.1f} s (extend: documents + graph), "
            f"hnswlib {built[1].build_s:.1f} s")
    curves = sweep(built, X, Q, gt, metric, [int(e) for e in args.ef.split(",")], passes=args.passes)
    ours, theirs = curves["hnsw"], curves["hnswlib-raw"]
    out.table(["ef", "ours recall", "ours QPS", "hnswlib recall", "hnswlib QPS", "ours / hnswlib"],
              [[a["ef"], fmt(a.get("recall"), 3), fmt(a.get("qps")), fmt(b.get("recall"), 3), fmt(b.get("qps")),
                ratio(a.get("qps"), b.get("qps"))] for a, b in zip(ours, theirs)])
    at = compare_at_recall(ours, theirs, 0.95)
    out.say(headline(at, "find() on hnsw vs hnswlib knn_query"))
    return {"sweep": curves, "at_0.95": at}


if __name__ == "__main__":
    sys.exit(main())
