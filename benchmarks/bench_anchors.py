"""The database anchors beside ours: Chroma (local), Milvus Lite and LanceDB as read-only rows
(hybridsearch/bench/adapters/databases.py; `pip install -e ".[anchors]"`), a row whose library
is missing is skipped with a note.

1. Vectors: n SIFT-like 128-d l2 vectors, ours (storage="hnsw") and the anchors built side by
   side in one process with the same m / ef_construct, then recall@10 against the exact top-10
   and single-thread QPS over an ef sweep, and filtered search (`bucket < t`, prefiltered where
   the database offers it) at 1 / 10 / 50 %, timed round-robin after a warm-up on held-out
   queries (hybridsearch.bench.workloads.ann.compare).
2. E-commerce: --eco-n generated products (title + description, category, --dim projection
   embeddings), each row in a fresh child process: ours on memory (the exact reference) and on
   hnsw, and every anchor with the query kinds it has (lexical = its BM25, vector, hybrid = its
   RRF fusion; each with and without the category filter) on 1 client thread: feed docs/s, QPS,
   p50 latency, recall@10 of the vector queries against numpy brute force, and the overlap of
   the top-10 ids with ours on memory (the anchors index title + description as one field and
   fuse by RRF, ours scores the best field and sums: overlap is agreement, not quality).

    python benchmarks/bench_anchors.py --quick                      # 20k vectors / 5k products
    python benchmarks/bench_anchors.py --n 100000 --eco-n 100000 --out DIR
    python benchmarks/bench_anchors.py --anchors lancedb --skip-ecommerce
"""
import sys
import tempfile

from hybridsearch.bench.adapters.anchors import cpu_count
from hybridsearch.bench.adapters.base import GraphConfig
from hybridsearch.bench.adapters.databases import DATABASES, split
from hybridsearch.bench.child import in_child
from hybridsearch.bench.script import parser, sizes, start
from hybridsearch.bench.tables import fmt
from hybridsearch.bench.workloads import ann
from hybridsearch.bench.workloads.ecommerce import add_overlaps, anchor_at_scale, at_scale

QUERIES = [k + f for k in ("lexical", "vector", "hybrid") for f in ("", " + filter")]


def vector_tables(out, res: dict) -> None:
    """Build, the ef sweep and the filtered searches."""
    out.table(["engine", "build s", "RSS growth MB", "note"],
              [[e["label"], fmt(e["build_s"], 1), fmt((e["rss_delta"] or 0) / 2**20), e["note"]]
               for e in res["engines"].values()])
    labels = {n: e["label"] for n, e in res["engines"].items()}
    out.say("\n  recall@10 / single-thread QPS per ef")
    efs = [p["ef"] for p in next(iter(res["sweep"].values()))]
    out.table(["engine"] + [f"ef={ef}" for ef in efs],
              [[labels[n]] + [f"{p['recall']:.3f} / {fmt(p['qps'])}" if "qps" in p else p.get("error", "?")
                              for p in pts] for n, pts in res["sweep"].items()])
    out.say(f"\n  filtered (bucket < t), ef={res['filter_ef']}: recall@10 among the matches / QPS; "
            "short = queries with fewer hits than min(10, matches), bad = non-matching hits")
    head = ["engine"] + [f"{p:g}% ({fmt(f['matches'])})" for p, f in res["filtered"].items()]
    body = []
    for n in res["engines"]:
        cells = []
        for f in res["filtered"].values():
            r = f["results"].get(n, {})
            cells.append(f"{r['recall']:.3f} / {fmt(r['qps'])} (short {r['short']}, bad {r['violations']})"
                         if "qps" in r else r.get("error", "–"))
        body.append([labels[n]] + cells)
    out.table(head, body)


def ecommerce_tables(out, rows: list) -> None:
    """Feed, then per query kind: recall@10 (vector) or overlap with ours on memory, QPS, p50."""
    ok = [r for r in rows if "error" not in r]
    for r in rows:
        if "error" in r:
            out.say(f"  {r['storage']}: {r['error']}")
    # no peak RSS column: a child's peak is the generated catalogue's, the same in every row
    out.table(["row", "feed s", "docs/s", "cores"],
              [[r["storage"], fmt(r["writes"]["feed"].get("seconds"), 1), fmt(r["writes"]["feed"]["qps"]),
                fmt(r["writes"]["feed"]["cores"], 2)] for r in ok])
    body, why = [], set()
    for q in QUERIES:
        for r in ok:
            runs = r["queries"].get(q)
            if runs is None:
                continue
            if not isinstance(runs, list):
                body.append([q, r["storage"], "n/a", "n/a", "not available (below)", ""])
                why.add(f"  {r['storage']}: {runs.get('error', '?')}")
                continue
            rec = r.get("recall", {}).get(q, {}).get("recall")
            body.append([q, r["storage"], fmt(rec, 3) if rec is not None else "–",
                         fmt(r.get("overlap", {}).get(q), 2), f"{fmt(runs[0]['qps'])} ({fmt(runs[0]['cores'], 2)} cores)",
                         fmt(runs[0]["p50_ms"], 2)])
    out.say("")
    out.table(["query", "row", "recall@10", "overlap with memory", "QPS, 1 client thread", "p50 ms"], body)
    for line in sorted(why):
        out.say(line)


def main(argv=None) -> int:
    ap = parser(__doc__, full=(100_000, 500), quick=(20_000, 200))
    ap.add_argument("--anchors", default=",".join(DATABASES), help=f"subset of {','.join(DATABASES)}")
    ap.add_argument("--ours", default="hnsw", help="our storages in the vector tables (default hnsw)")
    ap.add_argument("--m", type=int, default=16)
    ap.add_argument("--ef-construct", type=int, default=100)
    ap.add_argument("--efs", type=int, nargs="+", default=[16, 32, 64, 128, 256])
    ap.add_argument("--filter-ef", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=3, help="timed passes (median)")
    ap.add_argument("--eco-n", type=int, help="products (default 100,000; --quick 5,000)")
    ap.add_argument("--eco-queries", type=int, default=300)
    ap.add_argument("--dim", type=int, default=128, help="product embedding dimensions (projection)")
    ap.add_argument("--skip-vectors", action="store_true")
    ap.add_argument("--skip-ecommerce", action="store_true")
    args = ap.parse_args(argv)
    n, nq = sizes(args)
    eco_n = args.eco_n or (5_000 if args.quick else 100_000)
    unknown = set(args.anchors.split(",")) - set(DATABASES) - {""}
    if unknown:
        ap.error(f"--anchors: unknown {','.join(sorted(unknown))} (one of {','.join(DATABASES)})")
    anchors, notes = split([a for a in args.anchors.split(",") if a])
    out, facts = start("anchors", args)
    for note in notes:
        out.say(note)
    saved = {"machine": facts, "config": vars(args), "skipped": notes}
    if not args.skip_vectors:
        cfg = GraphConfig(args.m, args.ef_construct, cpu_count())
        out.say(f"\n== vectors: {n:,} x 128 SIFT-like, l2, m={cfg.m} ef_construct={cfg.ef_construct}, build on "
                f"{cfg.threads} threads, {nq} queries on 1 thread, {args.repeats} passes ==")
        with tempfile.TemporaryDirectory() as tmp:
            res = ann.compare("sift", n, nq, args.ours.split(",") + anchors, cfg, args.efs, args.filter_ef,
                              passes=args.repeats, tmp=tmp, log=out.say)
        for name, why in res["failed"].items():
            out.say(f"  {name}: {why}")
        vector_tables(out, res)
        saved["vectors"] = res
    if not args.skip_ecommerce:
        out.say(f"\n== e-commerce: {eco_n:,} products, {args.dim}-d projection embeddings, {args.eco_queries} "
                "queries per kind, 1 client thread ==")
        rows = []
        with tempfile.TemporaryDirectory() as tmp:
            for s in ("memory", "hnsw"):
                opts = {"m": args.m, "ef_construct": args.ef_construct, "ef": 100}
                r = in_child(at_scale, s, eco_n, args.eco_queries, args.dim, [1], opts, tmp, None, "columns",
                             10_000, 1, 0.0, 1)
                rows.append(dict(r, storage=s))
                out.say(f"  {s}: done")
        for a in anchors:
            rows.append(dict(in_child(anchor_at_scale, a, eco_n, args.eco_queries, args.dim, [1]), storage=a))
            out.say(f"  {a}: done")
        add_overlaps(rows)
        ecommerce_tables(out, rows)
        saved["ecommerce"] = [{k: v for k, v in r.items() if k != "hits"} for r in rows]
    out.save(saved)
    return 0


if __name__ == "__main__":
    sys.exit(main())
