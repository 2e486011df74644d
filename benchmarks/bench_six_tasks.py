"""The harness's six-task row (hybridsearch/bench/workloads/storage_tasks.py) for chosen storages,
remote engines included, with vector search under a filter of given selectivities.

Each storage runs in its own process on the same sift-like data (128-d, l2) as the harness's
six-task table: create by extend (5,000 documents a call), read / update / delete by id, a
filter-only find, find(vector=...) with recall@10 against the exact top-10, and find(vector=...,
filter=) matching --filtered percent of the documents (recall among the matches). Remote engines
are used where one answers (scripts/searchnode.sh, scripts/weaviatenode.sh); a fresh index or
collection is created and dropped.

    scripts/weaviatenode.sh start
    python benchmarks/bench_six_tasks.py --n 100000 --storages weaviate,hnsw
"""
import tempfile

from hybridsearch.bench import vectors as V
from hybridsearch.bench.adapters import remote
from hybridsearch.bench.child import in_child
from hybridsearch.bench.script import parser, sizes, start
from hybridsearch.bench.workloads.storage_tasks import storage_tasks


def main(argv=None) -> int:
    ap = parser(__doc__, full=(100_000, 500), what="documents")
    ap.add_argument("--storages", default="hnsw,weaviate")
    ap.add_argument("--filtered", default="5", help="selectivities in percent, comma-separated")
    args = ap.parse_args(argv)
    n, nq = sizes(args)
    out, _ = start("six_tasks", args)
    X, Q = V.sift_like(n, nq, seed=1)
    cache = V.cache_dir()
    gt, _ = V.ground_truth(X, Q, 10, "l2", cache)
    pcts = [float(p) for p in args.filtered.split(",") if p]
    out.say(f"data: sift-like {n:,} x 128 (l2), {nq} queries; m=16, ef_construct=100, ef=64; filtered {pcts} %")
    out.say("storage        create s  read ms  update ms  cond ms  vector ms  vector QPS  recall@10  delete ms"
            + "".join(f"  {p:g}% QPS  {p:g}% recall" for p in pcts))
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for s in args.storages.split(","):
            opts = {"m": 16, "ef_construct": 100, "ef": 64}
            if s in remote.REMOTE:
                url, _ = remote.find_node(s)
                if url is None:
                    out.say(f"{s}: no node answers (start one with {remote.start_line(s)})")
                    continue
                opts["hosts"] = url
            r = in_child(storage_tasks, s, X, Q, gt, "l2", opts, tmp, selectivities=pcts, cache=cache)
            rows.append(dict(r, storage=s))
            if "error" in r:
                out.say(f"{s}: {r['error']}")
                continue
            out.say(f"{s:14s} {r['create_s']:8.1f}  {r['read']['ms']:7.3f}  {r['update']['ms']:9.3f}  "
                    f"{r['find_by_condition']['ms']:7.3f}  {r['find_by_vector']['ms']:9.3f}  "
                    f"{r['find_by_vector']['qps']:10.0f}  {r['recall_at_10']:9.3f}  {r['delete']['ms']:9.3f}"
                    + "".join(f"  {r['filtered'][p]['qps']:7.0f}  {r['filtered'][p]['recall']:9.3f}" for p in pcts))
    out.save({"rows": rows})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
