"""HNSW build speed: ours (DocumentArray(storage="hnsw").extend_columns, and the raw graph) vs
hnswlib at equal m / ef_construct / threads, side by side in one run, plus the re-feed rate.

Data: sift_like (clustered 128-d float32, l2; hybridsearch.bench.vectors). Every index is built on
1 and on 2 threads (--threads); printed: build seconds, ours / hnswlib, recall@10 against numpy
brute force at a few ef, and the re-feed rate: extend_columns (raw: add) of the same ids with
slightly perturbed vectors, then with another document's vector each (moved far), against the first feed's
rate (docs/s), with recall@10 after each re-feed.

    python benchmarks/bench_build.py --n 200000                 # development size
    python benchmarks/bench_build.py                            # 1,000,000 x 128 (minutes)
    python benchmarks/bench_build.py --n 100000 --threads 2 --only raw hnswlib
"""
import sys
import time

import numpy as np

import hybridsearch as hs
from hybridsearch.bench.script import parser, start
from hybridsearch.bench.tables import fmt, ratio
from hybridsearch.bench.vectors import sift_like
from hybridsearch.engine import graph as G
from hybridsearch.engine.exact import exact_topk

K = 10
KINDS = ("api", "raw", "hnswlib")


def recall(found: np.ndarray, truth: np.ndarray) -> float:
    return float(np.mean([len(set(f.tolist()) & set(t.tolist())) / K for f, t in zip(found, truth)]))


class Raw:
    """The graph alone (int8 codes, as storage="hnsw" keeps them by default)."""

    def __init__(self, X, m, efc, threads):
        self.X, self.threads = X, threads
        self.g = G.HnswGraph(X.shape[1], "l2", m, efc, 0x5EED, "int8")
        self.g.reserve(len(X))

    def feed(self, X):
        self.X = X
        self.g.add(X, np.arange(len(X), dtype=np.int64), self.threads)

    def search(self, Q, ef):
        return self.g.search(self.X, Q, K, ef)[1]


class Api:
    """DocumentArray(storage="hnsw"), fed with one extend_columns call; walk codes from --quantization."""

    quantization = "int8"

    def __init__(self, X, m, efc, threads):
        class Item(hs.Document):
            v: hs.Vector[X.shape[1]]

        self.ids = [str(i) for i in range(len(X))]
        self.da = hs.DocumentArray(Item, storage="hnsw", metric="l2", m=m, ef_construct=efc, threads=threads,
                                     quantization=self.quantization)

    def feed(self, X):
        self.da.extend_columns({"id": self.ids, "v": X})

    def search(self, Q, ef):
        return np.array([[int(i) for i in self.da.find(vector=q, limit=K, ef=ef).ids] for q in Q])


class Hnswlib:
    def __init__(self, X, m, efc, threads):
        import hnswlib
        self.threads = threads
        self.index = hnswlib.Index(space="l2", dim=X.shape[1])
        self.index.init_index(max_elements=len(X), M=m, ef_construction=efc, random_seed=100)

    def feed(self, X):
        self.index.add_items(X, np.arange(len(X)), num_threads=self.threads, replace_deleted=False)

    def search(self, Q, ef):
        self.index.set_ef(max(ef, K))
        return self.index.knn_query(Q, k=K, num_threads=1)[0].astype(np.int64)


def timed_feed(index, X) -> float:
    t = time.perf_counter()
    index.feed(X)
    return time.perf_counter() - t


def main(argv=None) -> int:
    ap = parser(__doc__, full=(1_000_000, 200))
    ap.add_argument("--m", type=int, default=16)
    ap.add_argument("--ef-construct", type=int, default=100)
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--ef", type=int, nargs="+", default=[10, 20, 40, 80, 160])
    ap.add_argument("--only", nargs="+", choices=KINDS, default=list(KINDS))
    ap.add_argument("--no-refeed", action="store_true", help="skip the re-feeds")
    ap.add_argument("--quantization", default="int8", choices=("int8", "rabitq4", "rabitq1", "none"),
                    help="the api index's walk codes (default int8, as storage='hnsw' defaults)")
    args = ap.parse_args(argv)
    n, nq = args.n or 1_000_000, args.queries or 200
    out, facts = start("build", args)
    X, Q = sift_like(n, nq, 128)
    scale = float(np.std(X))
    rng = np.random.default_rng(1)
    near = X + rng.standard_normal(X.shape, dtype=np.float32) * np.float32(0.02 * scale)
    fresh = np.ascontiguousarray(X[rng.permutation(n)])  # every id another document's vector: moved far
    truths = {name: exact_topk(Y, Q, K, "l2")[1] for name, Y in (("first", X), ("near", near), ("fresh", fresh))}
    out.say(f"data: sift_like {n:,} x 128 l2, {nq} queries; m={args.m} ef_construct={args.ef_construct}; "
            f"re-feeds: the same ids with vectors + N(0, (0.02 std)^2) ('near'), then each another id's vector ('fresh')")
    Api.quantization = None if args.quantization == "none" else args.quantization
    classes = {"api": Api, "raw": Raw, "hnswlib": Hnswlib}
    rows, rec_rows, results = [], [], []
    for t in args.threads:
        base = {}
        for kind in args.only:
            idx = classes[kind](X, args.m, args.ef_construct, t)
            secs = timed_feed(idx, X)
            recs = [recall(idx.search(Q, ef), truths["first"]) for ef in args.ef]
            r = {"kind": kind, "threads": t, "build_s": secs, "rate": n / secs, "recall": recs}
            if not args.no_refeed:  # hnswlib's add_items of existing labels updates them too
                for name, Y in (("near", near), ("fresh", fresh)):
                    r[name + "_s"] = timed_feed(idx, Y)
                    r[name + "_recall"] = [recall(idx.search(Q, ef), truths[name]) for ef in args.ef]
            base[kind] = r
            results.append(r)
            out.say(f"  {kind} threads={t}: build {secs:.2f} s ({n / secs:,.0f}/s)"
                    + "".join(f", {x} re-feed {r[x + '_s']:.2f} s" for x in ("near", "fresh") if x + "_s" in r))
            del idx
        hl = base.get("hnswlib", {}).get("build_s")
        for kind, r in base.items():
            rows.append([kind, t, fmt(r["build_s"], 2), ratio(r["build_s"], hl), fmt(r["rate"]),
                         *(f"{fmt(n / r[x + '_s'])} ({r['build_s'] / r[x + '_s']:.2f}x)" if x + "_s" in r else "-"
                           for x in ("near", "fresh"))])
            for stage in ("", "near_", "fresh_"):
                if stage + "recall" in r:
                    rec_rows.append([kind, t, stage.rstrip("_") or "first"] + [f"{v:.4f}" for v in r[stage + "recall"]])
    out.say("\n  build (docs/s) and re-feed of every id (docs/s, x the first feed's rate):")
    out.table(["index", "threads", "build s", "/hnswlib", "first docs/s", "near re-feed", "fresh re-feed"], rows)
    out.say("\n  recall@10 vs numpy brute force:")
    out.table(["index", "threads", "after"] + [f"ef {e}" for e in args.ef], rec_rows)
    out.save({"machine": facts, "config": vars(args), "results": results})
    return 0


if __name__ == "__main__":
    sys.exit(main())
