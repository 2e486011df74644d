"""sqlite storage: extend of N documents (vs the memory storage on the same documents) and reopening.

    python benchmarks/bench_sqlite.py            # 100,000 documents, reopen at 200,000
    python benchmarks/bench_sqlite.py --n 20000
"""
import argparse
import os
import tempfile
import time

import numpy as np

import hybridsearch as hs
from machine import cpu_model  # benchmarks/machine.py


class Product(hs.Document):
    title: hs.Text
    category: hs.Keyword
    price: int = 0
    embedding: hs.Vector[128]


def make_docs(rng, a: int, b: int) -> list:
    words = [f"w{i}" for i in range(5000)]
    return [{"id": str(i), "title": " ".join(rng.choice(words, 10)), "category": f"c{i % 20}", "price": i,
             "embedding": rng.standard_normal(128)} for i in range(a, b)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=100000)
    n = ap.parse_args().n
    print(f"machine: {cpu_model()}, {os.cpu_count()} cores")
    rng = np.random.default_rng(0)
    docs = make_docs(rng, 0, n)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "bench.db")
        da = hs.DocumentArray(Product, storage="sqlite", path=path)
        t = time.perf_counter()
        da.extend(docs)
        sq = time.perf_counter() - t
        mem = hs.DocumentArray(Product, storage="memory")
        t = time.perf_counter()
        mem.extend(docs)
        me = time.perf_counter() - t
        print(f"extend {n:,} documents: sqlite {sq:.1f} s, memory {me:.1f} s (sqlite/memory {sq / me:.2f}x)")
        da.extend(make_docs(rng, n, 2 * n))
        da.close()
        t = time.perf_counter()
        again = hs.DocumentArray(Product, storage="sqlite", path=path)
        print(f"reopen {len(again):,} documents (rows -> columns, vectors, inverted index): "
              f"{time.perf_counter() - t:.1f} s; file {os.path.getsize(path) / 2**20:.0f} MiB")
        again.close()


if __name__ == "__main__":
    main()
