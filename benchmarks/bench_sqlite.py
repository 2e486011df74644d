"""sqlite storage: extend, vector search vs sqlite-vec's brute force, and whether to persist the
inverted index or rebuild it on open.

    python benchmarks/bench_sqlite.py                 # 100,000 documents (200,000 for reopen / text index)
    python benchmarks/bench_sqlite.py --n 20000       # quicker
    pip install "sqlite-vec>=0.1.6" pysqlite3-binary  # for the sqlite-vec rows (this Python's sqlite3
                                                      # cannot load extensions; pysqlite3-binary can)

Every comparison runs both sides in this one process on the same data; QPS is the median of
3 round-robin passes after a warm-up pass, one query per call on one thread.
"""
import argparse
import os
import statistics
import sys
import tempfile
import time

import numpy as np

import hybridsearch as hs
from hybridsearch._native import _kernels as K
from machine import cpu_model  # benchmarks/machine.py

DIM = 128


class Product(hs.Document):
    title: hs.Text
    category: hs.Keyword
    price: int = 0
    embedding: hs.Vector[DIM]


def make_docs(rng, a: int, b: int) -> list:
    words = [f"w{i}" for i in range(5000)]
    return [{"id": str(i), "title": " ".join(rng.choice(words, 10)), "category": f"c{i % 20}", "price": i,
             "embedding": rng.standard_normal(DIM)} for i in range(a, b)]


def qps(fn, queries, passes: int = 3) -> float:
    """Median queries per second over `passes` passes, after one warm-up pass."""
    for q in queries[: max(1, len(queries) // 5)]:
        fn(q)
    rates = []
    for _ in range(passes):
        t = time.perf_counter()
        for q in queries:
            fn(q)
        rates.append(len(queries) / (time.perf_counter() - t))
    return statistics.median(rates)


def sqlite_vec_db(docs: list):
    """An in-memory sqlite-vec vec0 table (cosine, category as a metadata column) -> connection."""
    import pysqlite3
    import sqlite_vec
    db = pysqlite3.connect(":memory:")
    db.enable_load_extension(True)
    sqlite_vec.load(db)
    db.enable_load_extension(False)
    db.execute(f"CREATE VIRTUAL TABLE v USING vec0(embedding float[{DIM}] distance_metric=cosine, category text)")
    with db:
        db.executemany("INSERT INTO v(rowid, embedding, category) VALUES (?, ?, ?)",
                       [(int(d["id"]), np.asarray(d["embedding"], dtype=np.float32).tobytes(), d["category"])
                        for d in docs])
    return db, sqlite_vec.__version__ if hasattr(sqlite_vec, "__version__") else db.execute(
        "select vec_version()").fetchone()[0]


def vector_rows(da, docs, rng, n_queries: int) -> None:
    try:
        vec, version = sqlite_vec_db(docs)
    except ImportError as e:
        print(f"sqlite-vec rows skipped: {e} (pip install 'sqlite-vec>=0.1.6' pysqlite3-binary)")
        vec = None
    Q = rng.standard_normal((n_queries, DIM)).astype(np.float32)
    flt = {"category": "c3"}  # 5% of the documents
    knn = "SELECT rowid FROM v WHERE embedding MATCH ? AND k = 10 ORDER BY distance"
    knn_f = "SELECT rowid FROM v WHERE embedding MATCH ? AND k = 10 AND category = ? ORDER BY distance"
    sql_da = hs.DocumentArray(Product, storage="sqlite", path=da._backend.path + "-sqlpre", prefilter="sql")
    sql_da.extend(docs)
    rows = [
        ("ours sqlite, unfiltered", lambda q: da.find(vector=q, limit=10).ids),
        ("ours sqlite, 5% filter (columns bitset)", lambda q: da.find(vector=q, filter=flt, limit=10).ids),
        ("ours sqlite, 5% filter (ids from SQL)", lambda q: sql_da.find(vector=q, filter=flt, limit=10).ids),
    ]
    if vec is not None:
        rows += [
            (f"sqlite-vec {version} vec0, unfiltered",
             lambda q: [str(r[0]) for r in vec.execute(knn, (q.tobytes(),))]),
            (f"sqlite-vec {version} vec0, 5% filter",
             lambda q: [str(r[0]) for r in vec.execute(knn_f, (q.tobytes(), "c3"))]),
        ]
    results = {}
    for name, fn in rows:
        results[name] = (qps(fn, Q), [fn(q) for q in Q[:50]])
    print(f"\nvector search, {len(docs):,} x {DIM} cosine, top-10, exact on both sides "
          f"({n_queries} queries, 1 thread)")
    base = results["ours sqlite, unfiltered"]
    for name, (rate, ids) in results.items():
        ref = base[1] if "unfiltered" in name else results["ours sqlite, 5% filter (columns bitset)"][1]
        overlap = np.mean([len(set(a) & set(b)) / 10 for a, b in zip(ids, ref)])
        print(f"  {name:48s} {rate:9.1f} QPS   overlap@10 with ours {overlap:.2f}")
    if vec is not None:
        for kind, ours, theirs in (("unfiltered", "ours sqlite, unfiltered", f"sqlite-vec {version} vec0, unfiltered"),
                                   ("5% filter", "ours sqlite, 5% filter (columns bitset)",
                                    f"sqlite-vec {version} vec0, 5% filter")):
            print(f"  ratio ours / sqlite-vec, {kind}: {results[ours][0] / results[theirs][0]:.1f}x")
    sql_da.close()


def text_index_rows(path: str, da) -> None:
    """Rebuild the inverted index from the stored texts vs load persisted token ids from the file."""
    backend = da._backend
    st = backend.store
    rows = st.live_rows()
    docs = [st.docs[s] for s in rows.tolist()]
    field = backend.text.fields[0]
    # rebuild: what opening does today (analyzer + stemmer + index insert)
    fresh = type(backend.text)(backend.schema)
    t = time.perf_counter()
    fresh.add(rows, docs)
    rebuild = time.perf_counter() - t
    # persisted: per-document term ids as int32 BLOBs plus the vocabulary, in the same file
    import sqlite3
    analyzer = field.analyzer
    tid_of = field.tid_of
    blobs = [np.fromiter((tid_of[w] for w in ws), dtype=np.int32).tobytes()
             for ws in analyzer.words_batch([d.title for d in docs])]
    con = sqlite3.connect(path)
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    size_before = os.path.getsize(path)
    t = time.perf_counter()
    with con:
        con.execute("CREATE TABLE IF NOT EXISTS bench_terms (slot INTEGER PRIMARY KEY, tids BLOB)")
        con.execute("CREATE TABLE IF NOT EXISTS bench_vocab (term TEXT, tid INTEGER)")
        con.executemany("INSERT INTO bench_terms VALUES (?, ?)", zip(rows.tolist(), blobs))
        con.executemany("INSERT INTO bench_vocab VALUES (?, ?)", list(field.vocab.items()))
    write = time.perf_counter() - t
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()
    con = sqlite3.connect(path)
    t = time.perf_counter()
    vocab = dict(con.execute("SELECT term, tid FROM bench_vocab"))
    slots, parts = [], []
    for slot, b in con.execute("SELECT slot, tids FROM bench_terms ORDER BY slot"):
        slots.append(slot)
        parts.append(b)
    lens = np.fromiter((len(b) // 4 for b in parts), dtype=np.int64, count=len(parts))
    tids = np.frombuffer(b"".join(parts), dtype=np.int32)
    offs = np.zeros(len(parts) + 1, dtype=np.int64)
    np.cumsum(lens, out=offs[1:])
    index = K.InvertedIndex()
    index.add(np.asarray(slots, dtype=np.int64), tids, offs)
    load = time.perf_counter() - t
    con.close()
    assert len(vocab) == len(field.vocab) and index.docs == field.index.docs
    assert index.total_len == field.index.total_len
    extra = (os.path.getsize(path) - size_before) / 2**20  # measured after the checkpoint above
    print(f"\ninverted index of {len(rows):,} documents (one hs.Text field, 10 words each):")
    print(f"  rebuilt from the stored texts (analyzer + index):       {rebuild:.2f} s")
    print(f"  loaded from persisted term ids in the file (+ index):   {load:.2f} s "
          f"(writing them cost {write:.2f} s once; the file grows ~{extra:.0f} MiB)")
    print(f"  -> {'persisting' if load < rebuild else 'rebuilding'} is faster on open by "
          f"{max(rebuild, load) / min(rebuild, load):.1f}x")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=100000)
    ap.add_argument("--queries", type=int, default=200)
    n = ap.parse_args().n
    n_queries = ap.parse_args().queries
    print(f"machine: {cpu_model()}, {os.cpu_count()} cores; Python {sys.version.split()[0]}")
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
        del mem
        print(f"extend {n:,} documents in one call: sqlite {sq:.1f} s, memory {me:.1f} s "
              f"(sqlite/memory {sq / me:.2f}x; DocArray v1's SQLite store took ~98 s for 100,000 "
              f"before its batch fix)")
        vector_rows(da, docs, rng, n_queries)
        da.extend(make_docs(rng, n, 2 * n))
        da.close()
        t = time.perf_counter()
        again = hs.DocumentArray(Product, storage="sqlite", path=path)
        print(f"\nreopen {len(again):,} documents (rows -> columns, vectors, inverted index): "
              f"{time.perf_counter() - t:.1f} s; file {os.path.getsize(path) / 2**20:.0f} MiB")
        text_index_rows(path, again)
        again.close()


if __name__ == "__main__":
    main()
