"""Bulk ingest: extend_columns against extend of the same data as documents (the anchor, same run).

Storage "memory", --n rows, two schemas: DocArray-like (a 128-d vector, a keyword, an int) and
product-like (adds an 8-word hs.Text title and a float, so BM25 indexing is part of both times).
extend gets validated hs.Document objects built beforehand (as an application holds them); each
time is the median of --repeats fresh collections.

    python benchmarks/bench_ingest.py
    python benchmarks/bench_ingest.py --n 1000000 --repeats 1 --out DIR
"""
import sys
import time

import numpy as np

import hybridsearch as hs
from hybridsearch.bench.script import parser, start

WORDS = np.array("red blue green small large cotton wool leather shoe shirt coat bag".split())


class Plain(hs.Document):
    v: hs.Vector[128]
    tag: hs.Keyword
    n: int


class Product(hs.Document):
    v: hs.Vector[128]
    tag: hs.Keyword
    n: int
    title: hs.Text
    price: float


def timed(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return float(np.median(times))


def main(argv=None) -> int:
    ap = parser(__doc__)
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args(argv)
    out, _ = start("ingest", args)
    rng = np.random.default_rng(0)
    n = args.n
    base = {"id": [f"d{i}" for i in range(n)], "v": rng.standard_normal((n, 128)).astype(np.float32),
            "tag": [f"t{i % 1000}" for i in range(n)], "n": rng.integers(0, 1000, n)}
    extra = {"title": [" ".join(WORDS[rng.integers(0, len(WORDS), 8)]) for _ in range(n)],
             "price": rng.random(n) * 100}
    rows = []
    for schema, cols in ((Plain, base), (Product, {**base, **extra})):
        names = list(cols)
        docs = [schema(**{k: (cols[k][i] if k != "n" else int(cols[k][i])) for k in names}) for i in range(n)]
        t_docs = timed(lambda: hs.DocumentArray(schema).extend(docs), args.repeats)
        t_cols = timed(lambda: hs.DocumentArray(schema).extend_columns(cols), args.repeats)
        rows.append({"schema": schema.__name__, "n": n, "extend_s": t_docs, "extend_columns_s": t_cols})
        out.say(f"{schema.__name__:8s} n={n:,}: extend {t_docs:.2f} s, extend_columns {t_cols:.2f} s "
                f"({t_docs / t_cols:.1f}x faster)")
    out.save({"rows": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
