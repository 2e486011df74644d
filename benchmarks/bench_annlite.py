"""annlite vs our storages on one workload: extend, find by vector (recall@10, QPS), filtered
find at 10% / 1%, read / update / delete by id; each storage in its own child process (annlite
cannot share a process with hnswlib), same sift-like data (cosine), same HNSW parameters.

    python benchmarks/bench_annlite.py                # 50,000 x 128
    python benchmarks/bench_annlite.py --n 200000
    python benchmarks/bench_annlite.py --n 100000 --storages qdrant,hnsw --selectivities 5
"""
import sys
import tempfile

from hybridsearch.bench import vectors as V
from hybridsearch.bench.child import in_child
from hybridsearch.bench.script import parser, sizes, start
from hybridsearch.bench.tables import fmt, ratio
from hybridsearch.bench.workloads.storage_tasks import storage_tasks

STORAGES = ["annlite", "hnsw", "hnswlib", "sqlite", "memory"]
SELECTIVITIES = (10, 1)


def main(argv=None) -> int:
    ap = parser(__doc__, full=(50_000, 200))
    ap.add_argument("--storages", default=",".join(STORAGES))
    ap.add_argument("--selectivities", default=",".join(map(str, SELECTIVITIES)),
                    help="percents of the documents the filtered finds match")
    args = ap.parse_args(argv)
    selectivities = tuple(int(p) for p in args.selectivities.split(","))
    n, nq = sizes(args)
    out, facts = start("annlite", args)
    X, Q = V.sift_like(n, nq)
    gt, _ = V.ground_truth(X, Q, 10, "cosine")
    opts = {"m": 16, "ef_construct": 200, "ef": 64}
    out.say(f"{n:,} x {X.shape[1]} sift-like, cosine, m=16 ef_construct=200 ef=64, 1 query per call on 1 thread")
    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        for s in args.storages.split(","):
            rows[s] = in_child(storage_tasks, s, X, Q, gt, "cosine", opts, tmp, selectivities=selectivities)
    ok = {s: r for s, r in rows.items() if "error" not in r}
    for s, r in rows.items():
        if "error" in r:
            out.say(f"{s}: failed ({r['error']})")
    out.table(["storage", "extend s", "recall", "QPS"] + [f"{h} {p}%" for p in selectivities for h in ("recall", "QPS")]
              + ["updates/s", "reads/s"],
              [[s, fmt(r["create_s"], 1), fmt(r["recall_at_10"], 3), fmt(r["find_by_vector"]["qps"])]
               + [fmt(r["filtered"][p][h], 3 if h == "recall" else 0) for p in selectivities for h in ("recall", "qps")]
               + [fmt(r["update"]["qps"]), fmt(r["read"]["qps"])] for s, r in ok.items()])
    if "annlite" in ok:
        a = ok["annlite"]
        for s, o in ok.items():
            if s != "annlite":
                out.say(f"{s} / annlite: QPS {ratio(o['find_by_vector']['qps'], a['find_by_vector']['qps'], 1)}, "
                        + ", ".join(f"{p}% {ratio(o['filtered'][p]['qps'], a['filtered'][p]['qps'], 1)}"
                                    for p in selectivities)
                        + f", extend {ratio(a['create_s'], o['create_s'], 1)} faster, "
                          f"updates {ratio(o['update']['qps'], a['update']['qps'], 1)}")
    out.save({"machine": facts, "config": vars(args), "rows": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
