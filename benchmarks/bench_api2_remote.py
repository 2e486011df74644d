"""API 2 on Elasticsearch / OpenSearch: count, facets, a sorted page and update_many done by the
engine, against the generic paths of storages/base.py on the same collection (what these
storages did before: fetch the matching documents and count, group or sort them here).

The corpus and the operations are bench_api2.py's (n products, 20 categories, buckets of 10,000,
10 %-selective price filters); each figure is the median of --repeats calls after a warm-up (the
generic paths: of --slow-repeats, they take seconds). The generic paths are the base-class
methods called on the storage itself (a private handle: this is a measurement of the storage,
not a use of the API). update_many on a node without _update_by_query (Elasticsearch's
integ-test-zip) is the storage's bulk path; the generic update is one request per document.

    scripts/searchnode.sh start es && scripts/searchnode.sh start os
    python benchmarks/bench_api2_remote.py --n 100000
"""
import statistics
import sys
import time

import numpy as np
from bench_api2 import _columns, _median_ms, _model

from hybridsearch.bench.adapters import remote
from hybridsearch.bench.script import parser, start
from hybridsearch.query.filters import parse_filter
from hybridsearch.storages.base import Storage


def _once_ms(fn, repeats: int) -> float:
    """Median of `repeats` calls without a warm-up (for the generic paths, seconds each)."""
    times = []
    for i in range(repeats):
        t = time.perf_counter()
        fn(i)
        times.append(time.perf_counter() - t)
    return 1000 * statistics.median(times)


def measure(storage: str, url: str, cols: dict, repeats: int, slow: int) -> dict:
    import hybridsearch as hs
    opts = remote.collection_options(url)
    da = hs.DocumentArray(_model(), storage=storage, **opts)
    try:
        t = time.perf_counter()
        da.extend_columns(cols)
        load = time.perf_counter() - t
        st, schema = da._storage, da._schema  # the generic paths are measured on the same storage
        n = len(cols["id"])
        cheap = int(np.percentile(cols["price"], 10))
        buckets = max(1, n // 10_000)
        by_cat = [parse_filter({"category": f"cat{c:02d}"}, schema) for c in range(20)]
        by_price = [parse_filter({"price": {"$lt": cheap - j}}, schema) for j in range(3)]
        native = {
            "count": _median_ms(lambda i: da.count(filter={"category": f"cat{i % 20:02d}"}), repeats),
            "facets": _median_ms(lambda i: da.facets("category", filter={"price": {"$lt": cheap - i % 3}}), repeats),
            "sort": _median_ms(lambda i: da.find(filter={"price": {"$lt": cheap - i % 3}}, sort=[("price", "asc")],
                                                 limit=20).ids, repeats),
            "update": _median_ms(lambda i: da.update_many({"bucket": i % buckets}, price=i), repeats)}
        generic = {} if slow == 0 else {
            "count": _once_ms(lambda i: Storage.count_matches(st, by_cat[i % 20], None), slow),
            "facets": _once_ms(lambda i: Storage.facets(st, "category", by_price[i % 3], None, 10, None), slow),
            "sort": _once_ms(lambda i: Storage.search_sorted(st, by_price[i % 3], None, [("price", "asc")], 20),
                             slow),
            "update": _once_ms(lambda i: Storage.update_where(st, parse_filter({"bucket": i % buckets}, schema),
                                                              {"price": i}), 1)}
        assert da.count(filter={"bucket": 0}) == min(n, 10_000)
        assert da.count(filter={"category": "cat03"}) == cols["category"].count("cat03")
        path = "update_by_query" if st._by_query else "bulk (no _update_by_query)"
        return {"storage": storage, "load_s": load, "native": native, "generic": generic, "update_path": path}
    finally:
        da.close()
        remote.drop_index(url, opts["index"])


def main(argv=None) -> int:
    ap = parser(__doc__)
    ap.add_argument("--n", type=int, default=100_000, help="documents (default 100,000)")
    ap.add_argument("--repeats", type=int, default=11)
    ap.add_argument("--slow-repeats", type=int, default=3,
                    help="calls of each generic path (update: one); 0 skips them (at 1M they take hours)")
    ap.add_argument("--storages", default="elasticsearch,opensearch", help="subset of elasticsearch,opensearch")
    ap.add_argument("--es", default=remote.node_url("elasticsearch"))
    ap.add_argument("--os", default=remote.node_url("opensearch"))
    args = ap.parse_args(argv)
    out, facts = start("api2_remote", args)
    cols = _columns(args.n, np.random.default_rng(0))
    rows = []
    for storage, url in (("elasticsearch", args.es), ("opensearch", args.os)):
        if storage not in args.storages.split(","):
            continue
        url, _ = remote.find_node(storage, url)
        if url is None:
            out.say(f"{storage}: skipped (no node answers)")
            continue
        rows.append(measure(storage, url, cols, args.repeats, args.slow_repeats))
    ops = ["count", "facets", "sort", "update"]
    table = []
    for r in rows:
        table.append([r["storage"], "engine", f"{r['load_s']:.1f}"] + [f"{r['native'][k]:.1f}" for k in ops])
        if r["generic"]:
            table.append([r["storage"], "generic", ""] + [f"{r['generic'][k]:.1f}" for k in ops])
    out.table(["storage", "path", "load s", "count ms", "facets ms", "sort page ms", "update_many 10k ms"], table)
    for r in rows:
        if not r["generic"]:
            out.say(f"{r['storage']}: update_many went through {r['update_path']}")
            continue
        out.say(f"{r['storage']}: update_many went through {r['update_path']}; the engine's path is "
                + ", ".join(f"{k} {r['generic'][k] / r['native'][k]:.0f}x faster" for k in ops))
    out.save({"machine": facts, "config": vars(args), "rows": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
