"""Filtered ANN at every selectivity: ours (DocumentArray storage="hnsw", find(vector=q,
filter=..., limit=10), its planner choosing per query) vs hnswlib (knn_query with its filter
callable), same m / ef_construct / ef, one query per call on one thread.

SIFT-like 128-d l2 data (hybridsearch.bench.vectors.sift_like); an int column `bucket` uniform
in [0, 10,000) and filters `bucket < t` matching 0.1 % ... 90 %; recall@10 against the exact
top-10 among the matching rows; QPS of the median of round-robin passes after a warm-up on
held-out queries. Prints per selectivity both recalls and QPS, the ratio, the plan ours chose
(and, where ours walked a beam other than ef, hnswlib at that beam: the same work), and PASS/MISS for the targets at 10 / 20 / 50 %; --out DIR also writes the
text, the figures as JSON and filtered.png (QPS and recall against selectivity).

    python benchmarks/bench_filtered.py --quick             # 20k vectors, 100 queries
    python benchmarks/bench_filtered.py --out DIR           # 200k vectors, 300 queries
    python benchmarks/bench_filtered.py --filter-ef 0.33    # ours with a narrower filtered beam
    python benchmarks/bench_filtered.py --anchors chroma,milvus-lite,lancedb   # the database rows too
"""
import sys
from pathlib import Path

from hybridsearch.bench.adapters.anchors import cpu_count
from hybridsearch.bench.adapters.base import GraphConfig
from hybridsearch.bench.adapters.databases import DATABASES, split
from hybridsearch.bench.script import parser, sizes, start
from hybridsearch.bench.tables import fmt, verdict
from hybridsearch.bench.workloads import filtered as F

TARGET_PCTS, MIN_RECALL, MIN_RATIO = (10, 20, 50), 0.95, 5.0


def cell(r: dict) -> str:
    return r.get("error", "–") if "qps" not in r else f"{r['recall']:.3f} / {fmt(r['qps'])}"


def times(q) -> str:
    return "–" if q is None else f"{q:.2f}x"


def table(out, result: dict) -> None:
    """The per-selectivity table."""
    out.table(["selectivity", "matches", "ours recall / QPS", "hnswlib recall / QPS", "ours/hnswlib",
               "ours plan", "short / bad", "hnswlib at ours' beam", "ratio there"],
              [[f"{r['pct']:g}%", fmt(r["matches"]), cell(r["ours"]), cell(r["hnswlib"]), times(r["ratio"]),
                r["plan"] or "–", f"{r['ours'].get('short', '–')} / {r['ours'].get('violations', '–')}",
                cell(r["beam"]) if r["beam"] else "–", times(r["beam_ratio"])]
               for r in result["rows"]])


def others_table(out, result: dict) -> None:
    """recall / QPS of every other index (the database anchors) per selectivity."""
    names = sorted({n for r in result["rows"] for n in r["others"]})
    if names:
        out.say("\n  the database anchors (recall@10 / QPS, short / bad)")
        out.table(["selectivity"] + names,
                  [[f"{r['pct']:g}%"] + [f"{cell(r['others'][n])} ({r['others'][n].get('short', '–')} / "
                                         f"{r['others'][n].get('violations', '–')})" if n in r["others"] else "–"
                                         for n in names] for r in result["rows"]])


def targets(out, result: dict) -> None:
    """PASS / MISS of recall >= 0.95 and >= 5x hnswlib's QPS at 10, 20 and 50 %."""
    by_pct = {r["pct"]: r for r in result["rows"]}
    rows = []
    for pct in TARGET_PCTS:
        r = by_pct.get(pct)
        if r is None:
            continue
        rec, q = r["ours"].get("recall"), r["ratio"]
        rows.append([f"{pct}%", fmt(rec, 3), verdict(rec, lambda v: v >= MIN_RECALL),
                     "n/a" if q is None else f"{q:.2f}x", verdict(q, lambda v: v >= MIN_RATIO)])
    out.say(f"\n== TARGETS: recall@10 >= {MIN_RECALL} and QPS >= {MIN_RATIO:g}x hnswlib ==")
    out.table(["selectivity", "recall", "verdict", "QPS ratio", "verdict"], rows)


def main(argv=None) -> int:
    ap = parser(__doc__, full=(200_000, 300), quick=(20_000, 100))
    ap.add_argument("--m", type=int, default=16)
    ap.add_argument("--ef-construct", type=int, default=200)
    ap.add_argument("--ef", type=int, default=64, help="search ef of both (ours' planner may widen it)")
    ap.add_argument("--pcts", type=float, nargs="+", default=list(F.PCTS), help="selectivities in %%")
    ap.add_argument("--threads", type=int, default=cpu_count(), help="build threads (both indexes)")
    ap.add_argument("--filter-ef", type=float, help="ours' planner option filter_ef (default: the storage's)")
    ap.add_argument("--repeats", type=int, default=3, help="timed passes per selectivity (median)")
    ap.add_argument("--anchors", default="", help=f"database rows too: a subset of {','.join(DATABASES)} "
                                                  '(pip install -e ".[anchors]")')
    args = ap.parse_args(argv)
    n, nq = sizes(args)
    out, facts = start("filtered", args)
    anchors, notes = split([a for a in args.anchors.split(",") if a])
    if set(anchors) - set(DATABASES):
        ap.error(f"--anchors: a subset of {','.join(DATABASES)}")
    for note in notes:
        out.say(note)
    cfg = GraphConfig(args.m, args.ef_construct, args.threads)
    out.say(f"{n:,} x 128 SIFT-like, l2; m={cfg.m} ef_construct={cfg.ef_construct} ef={args.ef}; build on "
            f"{cfg.threads} threads, {nq} queries on 1 thread, {args.repeats} passes")
    result = F.run(n, nq, cfg, args.ef, [p if p % 1 else int(p) for p in args.pcts], passes=args.repeats,
                   log=out.say, names=(F.OURS, F.ANCHOR, *anchors),
                   **({} if args.filter_ef is None else {"filter_ef": args.filter_ef}))
    for name, why in result["failed"].items():
        out.say(f"  {name}: {why}")
    out.say("\n  recall@10 among the matches / single-thread QPS; short = queries with fewer than "
            "min(10, matches) hits, bad = non-matching hits")
    table(out, result)
    others_table(out, result)
    targets(out, result)
    out.save({"machine": facts, "config": vars(args), "result": result})
    if args.out:
        F.plot(result, Path(args.out) / "filtered.png")
        out.say(f"wrote {Path(args.out) / 'filtered.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
