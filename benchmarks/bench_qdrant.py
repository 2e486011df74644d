"""storage="qdrant" (embedded qdrant-edge) beside the memory storage on text and hybrid finds:
BM25 QPS and its top-10 against ours (overlap, largest score difference), hybrid "sum" and "rrf"
QPS, and the time to reopen the shard. Zipfian titles of 3 to 12 words, sift-like 128-d vectors (cosine),
queries of 2 words from the titles; k=10, one query per call on one thread.

    python benchmarks/bench_qdrant.py --n 100000 --out DIR
"""
import sys
import tempfile
import time

import numpy as np

import hybridsearch as hs
from hybridsearch.bench import vectors as V
from hybridsearch.bench.corpora import zipf_titles
from hybridsearch.bench.script import parser, sizes, start
from hybridsearch.bench.tables import fmt
from hybridsearch.bench.timing import timed


def main(argv=None) -> int:
    ap = parser(__doc__, full=(100_000, 200))
    args = ap.parse_args(argv)
    n, nq = sizes(args)
    out, facts = start("qdrant", args)
    rng = np.random.default_rng(0)
    # 3 to 12 words a title: equal lengths would make every one-term match tie on BM25, and Qdrant
    # is then asked for every tied match (the storage breaks ties by insertion order)
    titles = [" ".join(t.split()[:k]) for t, k in zip(zipf_titles(n, rng, 12), rng.integers(3, 13, n))]
    X, Q = V.sift_like(n, nq)
    texts = [" ".join(rng.choice(titles[int(i)].split(), 2, replace=False)) for i in rng.integers(0, n, nq)]
    Doc = type("Doc", (hs.Document,), {"__annotations__": {"title": hs.Text, "v": hs.Vector[128]},
                                       "__module__": __name__})
    cols = {"id": [f"d{i}" for i in range(n)], "title": titles, "v": X}
    path = tempfile.mkdtemp()
    rows, results = {}, {}
    for name, opts in (("memory", {}), ("qdrant", {"path": path, "m": 16, "ef_construct": 100, "ef": 64})):
        da = hs.DocumentArray(Doc, storage=name, **opts)
        t = time.perf_counter()
        for a in range(0, n, 10000):
            da.extend_columns({k: c[a:a + 10000] for k, c in cols.items()})
        da.find(vector=Q[0], limit=1)  # qdrant: its optimizer (HNSW build) runs here
        load = time.perf_counter() - t
        results[name] = [da.find(text=s, limit=10) for s in texts]
        rows[name] = {"load_s": load,
                      "text": timed(lambda s: da.find(text=s, limit=10), texts, passes=1)["qps"],
                      "sum": timed(lambda i: da.find(text=texts[i], vector=Q[i], limit=10), range(nq), passes=1)["qps"],
                      "rrf": timed(lambda i: da.find(text=texts[i], vector=Q[i], fusion="rrf", limit=10), range(nq),
                                   passes=1)["qps"]}
        da.close()
    t = time.perf_counter()
    again = hs.DocumentArray(Doc, storage="qdrant", path=path, optimize_after=None)
    assert len(again) == n
    rows["qdrant"]["reopen_s"] = time.perf_counter() - t
    again.close()
    overlap = np.mean([len(set(a.ids) & set(b.ids)) / max(len(b.ids), 1)
                       for a, b in zip(results["qdrant"], results["memory"])])
    diff = max((float(np.max(np.abs(a.scores - b.scores))) for a, b in zip(results["qdrant"], results["memory"])
                if len(a) == len(b) and len(a)), default=0.0)
    out.say(f"{n:,} Zipfian titles (3-12 words), 128-d sift-like vectors, cosine; {nq} two-word queries, k=10")
    out.table(["storage", "load s", "text QPS", "hybrid sum QPS", "hybrid rrf QPS", "reopen s"],
              [[s, fmt(r["load_s"], 1), fmt(r["text"]), fmt(r["sum"]), fmt(r["rrf"]), fmt(r.get("reopen_s"), 2)]
               for s, r in rows.items()])
    out.say(f"BM25 top-10, qdrant against memory: overlap {overlap:.3f}, largest score difference {diff:.2e}")
    out.save({"machine": facts, "config": vars(args), "rows": rows, "overlap": overlap, "max_score_diff": diff})
    return 0


if __name__ == "__main__":
    sys.exit(main())
