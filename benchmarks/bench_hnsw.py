"""HNSW: ours (through the DocumentArray API, the main row, and the raw HnswGraph, float32 and
int8) vs hnswlib vs faiss IndexHNSWFlat, side by side in one process.

Same data and m / ef_construct for every index, built on all cores; then one query per call on
one thread over an ef sweep, recall@10 against exact ground truth next to every QPS (median of
round-robin passes after a warm-up on held-out queries), and filtered search at 1% / 10% / 50%
(`bucket < t`). Data: sift (SIFT-like 128-d, l2) and emb (embedding-like 384-d, ip) from
hybridsearch.bench.vectors. Ratios are against hnswlib measured in the same run.

    python benchmarks/bench_hnsw.py --quick                  # 20k vectors, 200 queries
    python benchmarks/bench_hnsw.py                          # 200k vectors, 1,000 queries
    python benchmarks/bench_hnsw.py --dataset sift --n 100000 --ef 16 64 256 --out DIR
"""
import sys

from hybridsearch.bench.adapters.anchors import cpu_count, installed
from hybridsearch.bench.adapters.base import GraphConfig
from hybridsearch.bench.metrics import qps_at_recall
from hybridsearch.bench.script import parser, sizes, start
from hybridsearch.bench.tables import fmt, quotient, ratio, verdict
from hybridsearch.bench.workloads.ann import RAW_MODULES, compare

TARGET_RECALL, FILTER_PCT = 0.95, 1
TARGETS = (("QPS at recall >= 0.95: ours >= 1.3x hnswlib", lambda v: v >= 1.3),
           ("build time: ours <= hnswlib", lambda v: v <= 1.0),
           ("1% filter: ours recall@10 >= 0.95", lambda v: v >= TARGET_RECALL),
           ("1% filter: ours QPS >= 10x hnswlib", lambda v: v >= 10.0))


def cell(p: dict) -> str:
    return "error" if "error" in p else f"{p['recall']:.3f} / {fmt(p['qps'])}"


def report(out, r: dict) -> list:
    """Prints one dataset's tables; returns its target values (ours = the API row vs hnswlib)."""
    e, names = r["engines"], list(r["engines"])
    hl = e.get("hnswlib-raw", {})
    out.say(f"\n== {r['dataset']}: {r['n']:,} x {r['d']}, metric {r['metric']}, {r['queries']:,} queries ==")
    for name, why in r["failed"].items():
        out.say(f"  {name}: {why}")
    out.table(["build", "seconds", "/hnswlib", "RSS delta MiB", "graph MiB", "note"],
              [[x["label"], fmt(x["build_s"], 2), ratio(x["build_s"], hl.get("build_s")),
                fmt(x["rss_delta"] and x["rss_delta"] / 2 ** 20, 1), fmt(x["graph_bytes"] and x["graph_bytes"] / 2 ** 20, 1),
                x["note"]] for x in e.values()])
    out.say("\n  recall@10 / single-thread QPS per ef:")
    efs = [p["ef"] for p in r["sweep"][names[0]]] if names else []
    out.table(["ef"] + names, [[ef] + [cell(r["sweep"][n][i]) for n in names] for i, ef in enumerate(efs)])
    at = {n: qps_at_recall(r["sweep"][n], TARGET_RECALL) for n in names}
    out.say(f"\n  QPS at recall@10 >= {TARGET_RECALL}:")
    out.table(["index", "QPS", "/hnswlib", "how"],
              [[n, fmt(q), ratio(q, at.get("hnswlib-raw", (None,))[0]), how] for n, (q, how) in at.items()])
    out.say(f"\n  filtered (bucket < t), ef={r['filter_ef']}: recall@10 among the matches / QPS:")
    variants = list(next(iter(r["filtered"].values()))["results"]) if r["filtered"] else []
    out.table(["selectivity", "matches"] + variants,
              [[f"{pct}%", f["matches"]] + [cell(f["results"][v]) for v in variants] for pct, f in r["filtered"].items()])
    plans = {pct: f["results"].get("hnsw", {}).get("plan") for pct, f in r["filtered"].items()}
    out.say("  planner chose (da.stats()['last_plan']): " + ", ".join(f"{p}% {c}" for p, c in plans.items()))
    flt = r["filtered"].get(FILTER_PCT, {}).get("results", {})
    ours_f, hl_f = flt.get("hnsw", {}), flt.get("hnswlib-raw", {})
    return [quotient(at.get("hnsw", (None,))[0], at.get("hnswlib-raw", (None,))[0]),
            quotient(e.get("hnsw", {}).get("build_s"), hl.get("build_s")),
            ours_f.get("recall"), quotient(ours_f.get("qps"), hl_f.get("qps"))]


def main(argv=None) -> int:
    ap = parser(__doc__, full=(200_000, 1000), quick=(20_000, 200))
    ap.add_argument("--dataset", choices=("sift", "emb", "both"), default="both")
    ap.add_argument("--m", type=int, default=16)
    ap.add_argument("--ef-construct", type=int, default=200)
    ap.add_argument("--ef", type=int, nargs="+", default=[10, 16, 32, 64, 128, 256, 512], help="search ef sweep")
    ap.add_argument("--filter-ef", type=int, default=64, help="ef of the filtered searches")
    ap.add_argument("--threads", type=int, default=cpu_count(), help="build threads (every index)")
    ap.add_argument("--repeats", type=int, default=3, help="timed passes per setting (median)")
    args = ap.parse_args(argv)
    n, nq = sizes(args)
    out, facts = start("hnsw", args)
    names = ["hnsw", "ours-raw", "ours-raw-int8"] + [a for a, mod in RAW_MODULES.items() if installed(mod)]
    cfg = GraphConfig(args.m, args.ef_construct, args.threads)
    out.say(f"indexes: {', '.join(names)} (hnsw = ours through the DocumentArray API); m={cfg.m} "
            f"ef_construct={cfg.ef_construct}, build on {cfg.threads} threads, search on 1")
    results, rows = [], []
    for ds in (("sift", "emb") if args.dataset == "both" else (args.dataset,)):
        results.append(compare(ds, n, nq, names, cfg, sorted(set(args.ef)), args.filter_ef, passes=args.repeats,
                               log=out.say))
        rows += [[ds, t, fmt(v, 2), verdict(v, ok)] for (t, ok), v in zip(TARGETS, report(out, results[-1]))]
    out.say("\n== TARGETS (ours through the API vs hnswlib, measured in this run) ==")
    out.table(["dataset", "target", "value", "verdict"], rows)
    out.save({"machine": facts, "config": vars(args), "datasets": results})
    return 0


if __name__ == "__main__":
    sys.exit(main())
