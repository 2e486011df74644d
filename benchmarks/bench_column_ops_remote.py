"""Operations over the columns on Elasticsearch / OpenSearch: count, facets, a sorted page and
update_many done by the engine, against doing the same by hand through the public API on the same
collection (fetch every matching document, then count, group, sort or update them one by one).

The corpus and the operations are bench_column_ops.py's (n products, 20 categories, buckets of 10,000,
10 %-selective price filters); each figure is the median of --repeats calls after a warm-up (by
hand: of --slow-repeats, they take seconds; 0 skips them). update_many on a node without
_update_by_query (Elasticsearch's integ-test-zip) is the storage's bulk path; by hand it is one
update() per document.

    scripts/searchnode.sh start es && scripts/searchnode.sh start os
    python benchmarks/bench_column_ops_remote.py --n 100000
"""
import statistics
import sys
import time

from collections import Counter

import numpy as np
from bench_column_ops import product_columns, median_ms, product_model

from hybridsearch.bench.adapters import remote
from hybridsearch.bench.script import parser, start


def _once_ms(fn, repeats: int) -> float:
    """Median of `repeats` calls without a warm-up (by hand: seconds each)."""
    times = []
    for i in range(repeats):
        t = time.perf_counter()
        fn(i)
        times.append(time.perf_counter() - t)
    return 1000 * statistics.median(times)


def measure(storage: str, url: str, cols: dict, repeats: int, slow: int) -> dict:
    import hybridsearch as hs
    opts = remote.collection_options(url)
    da = hs.DocumentArray(product_model(), storage=storage, **opts)
    try:
        t = time.perf_counter()
        da.extend_columns(cols)
        load = time.perf_counter() - t
        n = len(cols["id"])
        cheap = int(np.percentile(cols["price"], 10))
        buckets = max(1, n // 10_000)
        native = {
            "count": median_ms(lambda i: da.count(filter={"category": f"cat{i % 20:02d}"}), repeats),
            "facets": median_ms(lambda i: da.facets("category", filter={"price": {"$lt": cheap - i % 3}}), repeats),
            "sort": median_ms(lambda i: da.find(filter={"price": {"$lt": cheap - i % 3}}, sort=[("price", "asc")],
                                                limit=20).ids, repeats),
            "update": median_ms(lambda i: da.update_many({"bucket": i % buckets}, price=i), repeats)}
        by_hand = {} if slow == 0 else {
            "count": _once_ms(lambda i: len(da.find(filter={"category": f"cat{i % 20:02d}"}, limit=None)), slow),
            "facets": _once_ms(lambda i: Counter(d.category for d in da.find(
                filter={"price": {"$lt": cheap - i % 3}}, limit=None).docs).most_common(10), slow),
            "sort": _once_ms(lambda i: sorted(da.find(filter={"price": {"$lt": cheap - i % 3}}, limit=None).docs,
                                              key=lambda d: d.price)[:20], slow),
            "update": _once_ms(lambda i: [da.update(id, price=i) for id in da.find(
                filter={"bucket": i % buckets}, limit=None).ids], 1)}
        assert da.count(filter={"bucket": 0}) == min(n, 10_000)
        assert da.count(filter={"category": "cat03"}) == cols["category"].count("cat03")
        return {"storage": storage, "load_s": load, "native": native, "by_hand": by_hand}
    finally:
        da.close()
        remote.drop_index(url, opts["index"])


def main(argv=None) -> int:
    ap = parser(__doc__)
    ap.add_argument("--n", type=int, default=100_000, help="documents (default 100,000)")
    ap.add_argument("--repeats", type=int, default=11)
    ap.add_argument("--slow-repeats", type=int, default=3,
                    help="calls of each by-hand path (update: one); 0 skips them (at 1M they take hours)")
    ap.add_argument("--storages", default="elasticsearch,opensearch", help="subset of elasticsearch,opensearch")
    ap.add_argument("--es", default=remote.node_url("elasticsearch"))
    ap.add_argument("--os", default=remote.node_url("opensearch"))
    args = ap.parse_args(argv)
    out, facts = start("column_ops_remote", args)
    cols = product_columns(args.n, np.random.default_rng(0))
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
        if r["by_hand"]:
            table.append([r["storage"], "by hand", ""] + [f"{r['by_hand'][k]:.1f}" for k in ops])
    out.table(["storage", "path", "load s", "count ms", "facets ms", "sort page ms", "update_many 10k ms"], table)
    for r in rows:
        if not r["by_hand"]:
            continue
        out.say(f"{r['storage']}: the engine's paths are "
                + ", ".join(f"{k} {r['by_hand'][k] / r['native'][k]:.0f}x faster" for k in ops))
    out.save({"machine": facts, "config": vars(args), "rows": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
