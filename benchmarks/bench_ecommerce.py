"""The e-commerce workload at scale: 1M products with 384-d vectors on hnsw, Elasticsearch beside it.

Per storage and size: feed time and docs/s (extend_columns, --batch rows per call; the documents'
columns are built before the clock), QPS, QPS per core and p50/p99 latency of lexical, vector and
hybrid queries, each with and without the category filter (~6% of the products), at every
--threads count (client threads sharing the queries), a re-feed of a quarter, partial updates of
the price, recall@10 of the vector queries against a numpy brute-force top-10, peak RSS. The
workload is hybridsearch.bench.workloads.ecommerce (the harness's e-commerce table); each row runs
in a fresh child process (at_scale there), which generates the catalogue (embeddings cached).

hnsw runs at --n, elasticsearch at --es-n (default 1M: on the 2-core VM of docs/benchmarks.md
Elasticsearch fed ~630 docs/s flat from 10,000 to 200,000 products, so 1M feeds in well under
45 minutes); with a smaller --es-n, hnsw also runs at --es-n (side by side at one size;
--no-hnsw-at-es-n skips it). Elasticsearch must be up first (scripts/searchnode.sh start es; its
CPU is read from /proc/<pid>/stat of the node), on 127.0.0.1 only.

    python benchmarks/bench_ecommerce.py --n 20000 --es-n 20000 --out DIR          # smoke, ~10 min
    python benchmarks/bench_ecommerce.py --n 1000000 --storages hnsw --out DIR     # hnsw alone, ~45 min
    HEAP=4g scripts/searchnode.sh start es
    python benchmarks/bench_ecommerce.py --n 1000000 --es-n 1000000 --out DIR      # both, hours
    scripts/searchnode.sh stop es
"""
import argparse
import sys
import tempfile
from pathlib import Path

from hybridsearch.bench.adapters import remote
from hybridsearch.bench.child import in_child
from hybridsearch.bench.metrics import mean_overlap
from hybridsearch.bench.script import parser, start
from hybridsearch.bench.tables import fmt, markdown_table
from hybridsearch.bench.workloads.ecommerce import KINDS, at_scale

STORAGES = ("hnsw", "elasticsearch")
QUERIES = [k + f for k in KINDS for f in ("", " + filter")]
MB = 1 << 20


def plan(storages: list, n: int, es_n: int, side_by_side: bool) -> list:
    """(storage, size) of every row, in the order they run: hnsw at n, then (with elasticsearch)
    hnsw at es_n beside it, then elasticsearch at es_n."""
    rows = [(s, n) for s in storages if s != "elasticsearch"]
    if "elasticsearch" in storages:
        if side_by_side and "hnsw" in storages and es_n != n:
            rows.append(("hnsw", es_n))
        rows.append(("elasticsearch", es_n))
    return rows


def add_agreement(rows: list) -> None:
    """overlap[name] on an elasticsearch row: mean overlap@10 of its ids with hnsw's at the same
    size for every query kind (ids only: the two engines analyse text differently, so lexical and
    hybrid agreement is not a recall)."""
    for r in rows:
        ref = next((h for h in rows if h.get("storage") == "hnsw" and h.get("n") == r.get("n") and "hits" in h), None)
        if r.get("storage") == "hnsw" or ref is None or "hits" not in r:
            continue
        r["overlap_with_hnsw"] = {q: mean_overlap([ids for ids, _ in r["hits"][q]], [ids for ids, _ in ref["hits"][q]])
                                  for q in r["hits"] if q in ref["hits"]}


def _size(b) -> str:
    return "–" if not b else f"{b / MB:,.0f} MB"


def write_tables(rows: list) -> list:
    """Markdown lines: writes per row, then per query kind the figures at every thread count."""
    ok = [r for r in rows if "error" not in r]
    lines = ["### Writes", ""]
    head = ["storage", "n", "feed", "feed s", "docs/s", "cores", "docs/s per core", "re-feed docs/s",
            "price updates/s", "updates/s per core", "peak RSS (client)", "RSS growth over the feed", "node RSS"]
    body = []
    for r in ok:
        w = r["writes"]
        feed, refeed, upd = w["feed"], w.get("re-feed", {}), w["partial update price"]
        node = r.get("node_memory") or {}
        body.append([r["storage"], fmt(r["n"]), f"extend_columns, {r['batch']:,} per call" if r["feed_mode"] == "columns"
                     else f"extend, {r['batch']:,} per call", fmt(feed["seconds"], 1), fmt(feed["qps"]),
                     fmt(feed["cores"], 2), fmt(feed["qps_per_core"]), fmt(refeed.get("qps")), fmt(upd["qps"]),
                     fmt(upd["qps_per_core"]), _size(r["peak_rss_bytes"]), _size(r["rss_feed_bytes"]),
                     f"{_size(node.get('VmRSS'))} (peak {_size(node.get('VmHWM'))})" if node else "–"])
    lines += markdown_table(head, body) + ["", "### Queries", ""]
    threads = sorted({x["threads"] for r in ok for runs in r["queries"].values() if isinstance(runs, list) for x in runs})
    head = ["storage", "n", "query", "recall@10", "QPS/core (1 thread)", "p50 / p99 ms (1 thread)"] + \
        [f"QPS {t} thr" for t in threads] + [f"p50 / p99 ms ({threads[-1]} thr)" if threads else ""]
    body = []
    for r in ok:
        for q in QUERIES:
            runs = r["queries"].get(q)
            if runs is None:
                continue
            if not isinstance(runs, list):
                body.append([r["storage"], fmt(r["n"]), q, runs.get("error", "?")] + [""] * (len(head) - 4))
                continue
            agree = r["recall"].get(q, {}).get("recall")
            agree = fmt(agree, 3) if agree is not None else (
                f"overlap {fmt(r['overlap_with_hnsw'][q], 2)} with hnsw" if q in r.get("overlap_with_hnsw", {})
                else "exact BM25" if q.startswith("lexical") and r["storage"] == "hnsw" else "–")
            by = {x["threads"]: x for x in runs}
            one, last = runs[0], runs[-1]
            body.append([r["storage"], fmt(r["n"]), q, agree, fmt(one["qps_per_core"]),
                         f"{fmt(one['p50_ms'], 2)} / {fmt(one['p99_ms'], 2)}"]
                        + [fmt(by[t]["qps"]) if t in by else "–" for t in threads]
                        + [f"{fmt(last['p50_ms'], 2)} / {fmt(last['p99_ms'], 2)}"])
    lines += markdown_table(head, body) + ["", "### Every thread count", ""]
    head = ["storage", "n", "query", "threads", "QPS", "cores", "QPS/core", "p50 ms", "p99 ms"]
    body = [[r["storage"], fmt(r["n"]), q, x["threads"], fmt(x["qps"]), fmt(x["cores"], 2), fmt(x["qps_per_core"]),
             fmt(x["p50_ms"], 2), fmt(x["p99_ms"], 2)]
            for r in ok for q in QUERIES if isinstance(r["queries"].get(q), list) for x in r["queries"][q]]
    return lines + markdown_table(head, body)


def main(argv=None) -> int:
    ap = parser(__doc__)
    ap.add_argument("--n", type=int, default=1_000_000, help="products on hnsw (default 1,000,000)")
    ap.add_argument("--es-n", type=int, default=1_000_000, help="products on elasticsearch (default 1,000,000)")
    ap.add_argument("--dim", type=int, default=384, help="embedding dimensions (a projection, default 384)")
    ap.add_argument("--queries", type=int, default=500, help="queries per kind (default 500)")
    ap.add_argument("--threads", default="1,2,4,8", help="client thread counts (default 1,2,4,8)")
    ap.add_argument("--storages", default="hnsw,elasticsearch", help=f"subset of {','.join(STORAGES)}")
    ap.add_argument("--m", type=int, default=16)
    ap.add_argument("--ef-construct", type=int, default=100)
    ap.add_argument("--ef", type=int, default=100, help="ef of a query (num_candidates on elasticsearch)")
    ap.add_argument("--batch", type=int, default=10_000, help="rows per extend_columns call (default 10,000)")
    ap.add_argument("--refeed", type=float, default=0.25, help="share of the products written again (default 0.25)")
    ap.add_argument("--updates", type=int, default=2000, help="partial updates of the price (default 2,000)")
    ap.add_argument("--repeat", type=int, default=1, help="timed passes per cell; the median is kept")
    ap.add_argument("--es", default=remote.node_url("elasticsearch"), help="Elasticsearch URL (127.0.0.1 only)")
    ap.add_argument("--no-hnsw-at-es-n", dest="side_by_side", action="store_false",
                    help="with elasticsearch, do not also run hnsw at --es-n")
    args = ap.parse_args(argv)
    storages = args.storages.split(",")
    if set(storages) - set(STORAGES):
        ap.error(f"--storages: one of {','.join(STORAGES)}")
    if not args.es.startswith(("http://127.0.0.1", "http://localhost")):
        ap.error("--es must be a loopback address")
    threads = [int(t) for t in args.threads.split(",")]
    out, facts = start("ecommerce", args)
    opts = {"m": args.m, "ef_construct": args.ef_construct, "ef": args.ef}
    node = remote.find_node("elasticsearch", args.es) if "elasticsearch" in storages else (None, None)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for storage, n in plan(storages, args.n, args.es_n, args.side_by_side):
            extra, pid = {}, None
            if storage == "elasticsearch":
                if node[0] is None:
                    out.say(f"elasticsearch: skipped, no node answers at {args.es} (scripts/searchnode.sh start es)")
                    continue
                extra, pid = {"hosts": node[0]}, node[1]
            out.say(f"{storage} at {n:,} products ...")
            r = in_child(at_scale, storage, n, args.queries, args.dim, threads, {**opts, **extra}, tmp, pid,
                         "columns", args.batch, args.repeat, args.refeed, args.updates)
            rows.append(dict(r, storage=storage, n=n))
            if "error" in r:
                out.say(f"  {storage} at {n:,}: {r['error']}")
                continue
            f = r["writes"]["feed"]
            out.say(f"  generated in {r['generate_s']:.0f} s; fed in {f['seconds']:.1f} s ({f['qps']:,.0f} docs/s); "
                    f"run {r['run_s']:.0f} s; load {r['load_before'][0]:.2f} -> {r['load_after'][0]:.2f}"
                    + (f"; {r.get('segments')} segments, merges settled in {r['settle_s']:.0f} s" if pid else ""))
    add_agreement(rows)
    lines = write_tables(rows)
    for line in lines:
        out.say(line)
    if args.out:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        (Path(args.out) / "ecommerce.md").write_text("\n".join(lines) + "\n")
    out.save({"machine": facts, "config": vars(args), "rows": [{k: v for k, v in r.items() if k != "hits"} for r in rows]})
    return 0


if __name__ == "__main__":
    sys.exit(main())
