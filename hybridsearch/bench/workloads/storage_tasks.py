"""The tasks of DocArray's one-million-document benchmark on one storage through the public API:
create N, read, update, delete by id, find by condition, find by vector (with recall@10), and,
when asked, vector search under filters of given selectivities (recall among the matches)."""
from __future__ import annotations

import numpy as np

from hybridsearch.bench import vectors as V
from hybridsearch.bench.adapters.ours import (
    close_collection,
    extend_in_batches,
    int_ids,
    open_collection,
    vector_docs,
    vector_model,
)
from hybridsearch.bench.metrics import mean_recall
from hybridsearch.bench.timing import CpuClock, timed


def _per_call(r: dict) -> dict:
    return {"qps": r["qps"], "ms": r["p50_ms"]}


def storage_tasks(storage: str, X: np.ndarray, Q: np.ndarray, gt: np.ndarray, metric: str, options: dict,
                  tmp: str, n_ops: int = 500, selectivities=(), cache=None) -> dict:
    """One storage's row: create_s, then {"qps", "ms" (median per call)} of read, update,
    find_by_condition, find_by_vector and delete over `n_ops` random ids (one call each, after a
    warm-up), recall_at_10 of find(vector=...), and filtered[pct] = {"recall", "qps"} for
    `bucket < t` filters matching pct percent of the documents."""
    rng = np.random.default_rng(0)
    n = len(X)
    bucket = V.buckets(n)
    da = open_collection(storage, vector_model(X.shape[1]), dict(options, metric=metric), tmp)
    docs = vector_docs(X, bucket)
    out = {"storage": storage, "n": n}
    with CpuClock() as c:
        extend_in_batches(da, docs, 5000)
    out["create_s"] = c.wall
    ids = [str(i) for i in rng.choice(n, min(n_ops, n), replace=False)]
    out["read"] = _per_call(timed(lambda i: da[i], ids, passes=1))
    counter = iter(range(10 ** 9))
    out["update"] = _per_call(timed(lambda i: da.update(i, price=next(counter) % 1000), ids, passes=1))
    flts = [{"bucket": int(g), "price": {"$lt": 500}} for g in rng.integers(0, V.N_BUCKETS, 50)]
    out["find_by_condition"] = _per_call(timed(lambda f: da.find(filter=f, limit=10), flts, passes=1))
    found = [int_ids(da.find(vector=q, limit=10)) for q in Q]
    out["recall_at_10"] = mean_recall(X, Q, found, gt, metric)[0]
    out["find_by_vector"] = _per_call(timed(lambda q: da.find(vector=q, limit=10), list(Q), passes=1))
    out["filtered"] = {}
    for pct in selectivities:
        query, sel = V.below(bucket, pct)
        fgt, _ = V.ground_truth(X, Q, 10, metric, cache, bits=sel.bits)
        found = [int_ids(da.find(vector=q, filter=query, limit=10)) for q in Q]
        r = timed(lambda q, f=query: da.find(vector=q, filter=f, limit=10), list(Q))
        out["filtered"][pct] = {"recall": mean_recall(X, Q, found, fgt, metric, allowed=sel.mask)[0], "qps": r["qps"]}
    dels = [[i] for i in ids]
    fifth = len(dels) // 5  # the warm-up deletes the first fifth
    out["delete"] = _per_call(timed(lambda i: da.delete(i), dels[fifth:], passes=1, warmup=dels[:fifth]))
    close_collection(da)
    return out
