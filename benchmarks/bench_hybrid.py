"""What a hybrid query costs beside the two searches it runs: find(text=t, limit=10),
find(vector=q, limit=10) and find(text=t, vector=q, fusion=...) for sum, rrf and linear, on the
same documents and queries, timed round-robin (medians of 3 passes after a warm-up), beside the
two searches a hybrid find runs (each for its `candidates`, 100 hits). Target: hybrid
<= 1.2x (lexical + vector search it runs) per query.

Documents: an 8-word hs.Text title (Zipf 1.07 over 20,000 pseudo-words, so common words match a
large share of the collection, as in product titles) and a 128-d float32 vector (low-rank, so
the graph's search is realistic), cosine; queries: two words from a title and its vector plus
noise. Storages "memory" (exact vector search) and "hnsw" (m 16, ef_construct 100, ef 64).

    python benchmarks/bench_hybrid.py                      # 200,000 documents, 300 queries
    python benchmarks/bench_hybrid.py --n 1000000 --out DIR
"""
import sys

import numpy as np

import hybridsearch as hs
from hybridsearch.bench import vectors as V
from hybridsearch.bench.corpora import zipf_titles
from hybridsearch.bench.script import parser, sizes, start
from hybridsearch.bench.tables import fmt
from hybridsearch.bench.timing import round_robin

TARGET = 1.2
CANDIDATES = 100  # find's default candidates: the hits each search of a hybrid find takes


class Item(hs.Document):
    """One product: a title and its embedding."""
    title: hs.Text
    embedding: hs.Vector[128]


def collection(storage: str, T: list, X: np.ndarray):
    """A filled collection on `storage`."""
    opts = {"m": 16, "ef_construct": 100, "ef": 64} if storage == "hnsw" else {}
    da = hs.DocumentArray(Item, storage=storage, metric="cosine", **opts)
    for i in range(0, len(T), 100_000):
        da.extend_columns({"id": [str(j) for j in range(i, min(i + 100_000, len(T)))], "title": T[i:i + 100_000],
                           "embedding": X[i:i + 100_000]})
    return da


def measure(da, texts: list, Q: np.ndarray) -> dict:
    """Seconds per query of each kind (median pass)."""
    items = list(zip(texts, Q))
    fns = {"text": lambda a: da.find(text=a[0], limit=10),
           "vector": lambda a: da.find(vector=a[1], limit=10),
           # what a hybrid find runs: each search for its `candidates` (100) hits
           "text100": lambda a: da.find(text=a[0], limit=CANDIDATES),
           "vector100": lambda a: da.find(vector=a[1], limit=CANDIDATES)}
    for fusion in ("sum", "rrf", "linear"):
        fns[fusion] = lambda a, f=fusion: da.find(text=a[0], vector=a[1], fusion=f, limit=10)
    r = round_robin(fns, items, items[:30], passes=3)
    return {name: 1 / v["qps"] for name, v in r.items()}


def main(argv=None) -> int:
    ap = parser(__doc__, full=(200_000, 300), quick=(20_000, 100), what="documents")
    ap.add_argument("--storages", default="memory,hnsw")
    args = ap.parse_args(argv)
    n, nq = sizes(args)
    out, facts = start("hybrid", args)
    rng = np.random.default_rng(18)
    T = zipf_titles(n, rng)
    X, _ = V.sift_like(n, 1, 128, seed=18)
    X = X.astype(np.float32)
    pick = rng.integers(0, n, nq)
    texts = [" ".join(T[i].split()[:2]) for i in pick]
    Q = X[pick] + 0.1 * rng.standard_normal((nq, 128)).astype(np.float32) * np.abs(X[pick]).mean()
    rows, figures = [], {}
    for storage in args.storages.split(","):
        da = collection(storage, T, X)
        t = measure(da, texts, Q)
        figures[storage] = t
        base = t["text100"] + t["vector100"]
        for fusion in ("sum", "rrf", "linear"):
            rows.append([storage, fusion, fmt(t["text"] * 1e3, 3), fmt(t["vector"] * 1e3, 3), fmt(t["text100"] * 1e3, 3),
                         fmt(t["vector100"] * 1e3, 3), fmt(t[fusion] * 1e3, 3), fmt(t[fusion] / base, 2),
                         "PASS" if t[fusion] / base <= TARGET else "MISS"])
        da.close()
    out.say(f"\n== {n:,} documents, {nq} queries, ms per query (medians) ==")
    out.table(["storage", "fusion", "text@10", "vector@10", "text@100", "vector@100", "hybrid@10",
               "hybrid / (text@100 + vector@100)", f"<= {TARGET}x"], rows)
    out.save({"machine": facts, "n": n, "queries": nq, "seconds": figures})
    return 0


if __name__ == "__main__":
    sys.exit(main())
