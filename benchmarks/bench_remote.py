"""Embedded storages vs Elasticsearch / OpenSearch on the e-commerce workload: QPS, p50/p99
latency and QPS per CPU core, the engine's CPU read from /proc/<pid>/stat of its node and ours
from this process; each storage in its own child process.

    scripts/searchnode.sh start es && scripts/searchnode.sh start os
    python benchmarks/bench_remote.py                 # 50,000 products, 128-d, 300 queries per workload
    python benchmarks/bench_remote.py --n 10000 --threads 1,4

Same products, queries, k (10) and ef / num_candidates (100) everywhere; overlap@10 with the
exact `memory` results (a hit tying the 10th score counts) next to every speed, so unequal work
shows. Each cell is the median of --repeat passes; after a feed the workload waits for the
node's background merges to settle so that they are not billed to a query.
"""
import sys
import tempfile

from hybridsearch.bench import corpora as C
from hybridsearch.bench.adapters import remote
from hybridsearch.bench.child import in_child
from hybridsearch.bench.script import parser, sizes, start
from hybridsearch.bench.tables import fmt, ratio
from hybridsearch.bench.workloads.ecommerce import add_overlaps, ecommerce

EMBEDDED = ("memory", "hnsw")


def main(argv=None) -> int:
    ap = parser(__doc__, full=(50_000, 300), what="products")
    ap.add_argument("--threads", default="1,4")
    ap.add_argument("--repeat", type=int, default=3, help="timed passes per cell; the median of each figure is kept")
    ap.add_argument("--es", default=remote.node_url("elasticsearch"))
    ap.add_argument("--os", default=remote.node_url("opensearch"))
    args = ap.parse_args(argv)
    n, nq = sizes(args)
    out, facts = start("remote", args)
    prod = C.products(n, nq, dim=128, embedder="projection")
    threads = [int(t) for t in args.threads.split(",")]
    nodes = {s: remote.find_node(s, url) for s, url in (("elasticsearch", args.es), ("opensearch", args.os))}
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for s in EMBEDDED + remote.REMOTE:
            url, pid = nodes.get(s, ("", None))
            if url is None:
                out.say(f"{s}: skipped (no node answers)")
                continue
            opts = {"m": 16, "ef_construct": 100, "ef": 100, **({"hosts": url} if url else {})}
            rows.append(dict(in_child(ecommerce, s, prod, threads, opts, tmp, pid, ("vector", "lexical", "hybrid"),
                                      args.repeat), storage=s))
            r = rows[-1]
            if "settle_s" in r:
                out.say(f"{s}: merges settled {r['settle_s']:.0f} s after the feed; {r.get('segments')} segments")
    add_overlaps(rows)
    table = []
    for r in rows:
        if "error" in r:
            out.say(f"{r['storage']}: {r['error']}")
            continue
        table += [[r["storage"], "feed", "", fmt(w["qps"]), "", "", fmt(w["cores"], 2), fmt(w["qps_per_core"]), ""]
                  for w in [r["writes"]["feed"]]]
        table += [[r["storage"], q, x["threads"], fmt(x["qps"]), fmt(x["p50_ms"], 2), fmt(x["p99_ms"], 2),
                   fmt(x["cores"], 2), fmt(x["qps_per_core"]), fmt(r["overlap"].get(q), 2)]
                  for q, runs in r["queries"].items() if isinstance(runs, list) for x in runs]
    out.table(["storage", "workload", "threads", "QPS", "p50 ms", "p99 ms", "cores", "QPS/core", "overlap@10"], table)
    out.say("\nQPS per core, embedded / engine (1 client thread):")
    one = {r["storage"]: r["queries"] for r in rows if "queries" in r}
    for q in one.get("memory", {}):
        for ours in EMBEDDED:
            for eng in remote.REMOTE:
                a, b = one.get(ours, {}).get(q), one.get(eng, {}).get(q)
                if isinstance(a, list) and isinstance(b, list):
                    out.say(f"  {q:20s} {ours:6s} / {eng:13s}: {ratio(a[0]['qps_per_core'], b[0]['qps_per_core'], 1)} "
                            f"(QPS {ratio(a[0]['qps'], b[0]['qps'], 1)})")
    out.save({"machine": facts, "config": vars(args), "rows": [{k: v for k, v in r.items() if k != "hits"} for r in rows]})
    return 0


if __name__ == "__main__":
    sys.exit(main())
