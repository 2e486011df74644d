"""Operations over the columns at scale: count, facets, a sorted page and update_many, against
SQLite's own SQL.

n documents (default 1,000,000) with a keyword `category` (20 values), an int `bucket` (n / 10,000
values: one bucket is 10,000 documents), an int `price`, a bool `in_stock` and an 8-word hs.Text
title, written with extend_columns. Each operation is timed as the median of --repeats calls after
a warm-up, on each storage, and the same operation as plain SQL on an SQLite file holding the
same rows with an index on every filtered column (the anchor, measured in the same run):

    count     da.count(filter={"category": c})                 SELECT COUNT(*) WHERE category = ?
    facets    da.facets("category", filter={"price": < p10})    ... GROUP BY category (10 % selective)
    sort      find(filter=10 %, sort=[("price", "asc")], 20)    ... ORDER BY price, seq LIMIT 20
    update    da.update_many({"bucket": b}, price=...)         UPDATE ... WHERE bucket = ? (10,000 rows)

Targets at 1M: count <= 2 ms, facets <= 10 ms, sort page <= 20 ms, update_many of
10,000 <= 50 ms on memory and hnsw. hnsw here has no vector field (its columns are what is
measured; the graph is untouched by these operations).

    python benchmarks/bench_column_ops.py --n 100000
    python benchmarks/bench_column_ops.py --n 1000000 --storages memory,hnsw,hnsw-path --out DIR
"""
import os
import sqlite3
import statistics
import sys
import tempfile
import time

import numpy as np

from hybridsearch.bench.corpora import SHOP_WORDS
from hybridsearch.bench.script import parser, start


def median_ms(fn, repeats: int) -> float:
    for _ in range(2):
        fn(0)
    times = []
    for i in range(repeats):
        t = time.perf_counter()
        fn(i)
        times.append(time.perf_counter() - t)
    return 1000 * statistics.median(times)


def product_columns(n: int, rng) -> dict:
    return {"id": [f"p{i:07d}" for i in range(n)],
            "title": [" ".join(SHOP_WORDS[rng.integers(0, len(SHOP_WORDS), 8)]) for _ in range(n)],
            "category": [f"cat{int(c):02d}" for c in rng.integers(0, 20, n)],
            "bucket": np.arange(n) // 10_000, "price": rng.integers(0, 10_000, n),
            "in_stock": rng.random(n) < 0.8}


def product_model():
    import hybridsearch as hs

    class Product(hs.Document):
        title: hs.Text
        category: hs.Keyword
        bucket: int
        price: int
        in_stock: bool
    return Product


def ours(storage: str, cols: dict, repeats: int) -> dict:
    import hybridsearch as hs
    opts = {}
    if storage.endswith("-path") or storage == "sqlite":
        opts["path"] = os.path.join(tempfile.mkdtemp(), "col.db" if storage == "sqlite" else "col")
    da = hs.DocumentArray(product_model(), storage=storage.split("-")[0], **opts)
    t = time.perf_counter()
    da.extend_columns(cols)
    load = time.perf_counter() - t
    n = len(cols["id"])
    cheap = int(np.percentile(cols["price"], 10))
    buckets = max(1, n // 10_000)
    out = {"storage": storage, "load_s": load,
           "count": median_ms(lambda i: da.count(filter={"category": f"cat{i % 20:02d}"}), repeats),
           "facets": median_ms(lambda i: da.facets("category", filter={"price": {"$lt": cheap - i % 3}}), repeats),
           "sort": median_ms(lambda i: da.find(filter={"price": {"$lt": cheap - i % 3}},
                                                sort=[("price", "asc")], limit=20), repeats),
           "update": median_ms(lambda i: da.update_many({"bucket": i % buckets}, price=i), repeats)}
    assert da.count(filter={"bucket": 0}) == min(n, 10_000)
    da.close()
    return out


def sqlite_sql(cols: dict, repeats: int) -> dict:
    path = os.path.join(tempfile.mkdtemp(), "anchor.db")
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    db.execute("CREATE TABLE p (id TEXT PRIMARY KEY, seq INTEGER, title TEXT, category TEXT, bucket INTEGER, "
               "price INTEGER, in_stock INTEGER)")
    n = len(cols["id"])
    t = time.perf_counter()
    db.execute("BEGIN")
    db.executemany("INSERT INTO p VALUES (?, ?, ?, ?, ?, ?, ?)",
                   zip(cols["id"], range(n), cols["title"], cols["category"], cols["bucket"].tolist(),
                       cols["price"].tolist(), cols["in_stock"].astype(int).tolist()))
    for c in ("category", "bucket", "price"):
        db.execute(f"CREATE INDEX p_{c} ON p ({c})")
    db.execute("COMMIT")
    load = time.perf_counter() - t
    cheap = int(np.percentile(cols["price"], 10))
    buckets = max(1, n // 10_000)

    def update(i):
        db.execute("BEGIN")
        db.execute("UPDATE p SET price = ? WHERE bucket = ?", (i, i % buckets))
        db.execute("COMMIT")

    out = {"storage": "sqlite SQL (anchor)", "load_s": load,
           "count": median_ms(lambda i: db.execute("SELECT COUNT(*) FROM p WHERE category = ?",
                                                    (f"cat{i % 20:02d}",)).fetchall(), repeats),
           "facets": median_ms(lambda i: db.execute(
               "SELECT category, COUNT(*) AS c FROM p WHERE price < ? GROUP BY category ORDER BY c DESC, category "
               "LIMIT 10", (cheap - i % 3,)).fetchall(), repeats),
           "sort": median_ms(lambda i: db.execute("SELECT id FROM p WHERE price < ? ORDER BY price, seq LIMIT 20",
                                                   (cheap - i % 3,)).fetchall(), repeats),
           "update": median_ms(update, repeats)}
    db.close()
    return out


def main(argv=None) -> int:
    ap = parser(__doc__)
    ap.add_argument("--n", type=int, default=100_000, help="documents (default 100,000; the targets are for 1,000,000)")
    ap.add_argument("--storages", default="memory,hnsw", help="memory, hnsw, hnsw-path, memory-path, sqlite")
    ap.add_argument("--repeats", type=int, default=21)
    args = ap.parse_args(argv)
    out, facts = start("column_ops", args)
    cols = product_columns(args.n, np.random.default_rng(0))
    rows = [sqlite_sql(cols, args.repeats)] + [ours(s, cols, args.repeats) for s in args.storages.split(",")]
    target = {"count": 2.0, "facets": 10.0, "sort": 20.0, "update": 50.0}
    out.table(["storage", "load s", "count ms", "facets ms", "sort page ms", "update_many 10k ms"],
              [[r["storage"], f"{r['load_s']:.1f}"] + [f"{r[k]:.3f}" for k in target] for r in rows])
    anchor = rows[0]
    for r in rows[1:]:
        out.say(f"{r['storage']}: " + ", ".join(f"{k} {r[k] / anchor[k]:.2f}x SQLite SQL, "
                                               f"{r[k] / target[k]:.2f}x the target" for k in target))
    out.save({"machine": facts, "config": vars(args), "rows": rows, "targets_ms": target})
    return 0


if __name__ == "__main__":
    sys.exit(main())
