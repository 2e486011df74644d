"""The e-commerce workload on a generated product catalogue: lexical, vector and hybrid queries,
each with and without a category filter, over a sweep of client threads (QPS, latency, CPU cores
used and QPS per core, the search node's CPU for a remote storage), then writes: the feed, a
re-feed of a quarter, partial updates of the price. bm25s and tantivy run the lexical queries as
anchors. Agreement with `memory` (exact) is measured next to every speed."""
from __future__ import annotations

import numpy as np

from hybridsearch.bench.adapters.anchors import cpu_count
from hybridsearch.bench.adapters.lexical import Bm25s, Tantivy
from hybridsearch.bench.adapters.ours import (
    close_collection,
    extend_in_batches,
    open_collection,
    product_model,
)
from hybridsearch.bench.adapters.remote import segments
from hybridsearch.bench.concurrency import concurrent
from hybridsearch.bench.metrics import median, qps_per_core, recall_at_k
from hybridsearch.bench.timing import CpuClock, settle

KINDS = ("lexical", "vector", "hybrid")


def _queries(da, prod, kinds) -> dict:
    """query name ("vector", "vector + filter", ...) -> fn(i) running query i."""
    qs, qv, flt = prod.queries, prod.query_vectors, prod.filter
    make = {"lexical": lambda f: (lambda i: da.find(text=qs[i], filter=f, limit=10)),
            "vector": lambda f: (lambda i: da.find(vector=qv[i], filter=f, limit=10)),
            "hybrid": lambda f: (lambda i: da.find(text=qs[i], vector=qv[i], filter=f, limit=10))}
    return {name + label: make[name](f) for name in kinds for label, f in (("", None), (" + filter", flt))}


def sweep_threads(fn, items: list, threads: list, pid: int | None, repeat: int = 1) -> list:
    """concurrent() at every thread count; with repeat > 1 each figure is the median of the passes."""
    out = []
    for t in threads:
        passes = [concurrent(fn, items, t, pid) for _ in range(repeat)]
        out.append({key: t if key == "threads" else median([p[key] for p in passes]) for key in passes[0]})
    return out


def ecommerce(storage: str, prod, threads: list, options: dict, tmp: str, pid: int | None = None,
              kinds=KINDS, repeat: int = 1) -> dict:
    """One storage's row: writes (feed, re-feed, partial update price: qps, cores, qps_per_core),
    queries[name] = one concurrent() result per thread count (or {"error"} when the storage
    cannot run that query), and hits[name] = per query (ids, scores) for the agreement."""
    da = open_collection(storage, product_model(prod.query_vectors.shape[1]), options, tmp)
    docs = prod.docs
    out = {"storage": storage, "writes": {}, "queries": {}, "hits": {}}
    with CpuClock(pid) as c:
        extend_in_batches(da, docs, 2000)
    out["writes"]["feed"] = qps_per_core(len(docs), c.wall, c.used)
    if pid is not None:  # the node's merges after the feed must not be billed to the queries
        out["idle_cores"], out["settle_s"] = settle(pid)
        out["segments"] = segments(options["hosts"], da.stats().get("index", "")) if "hosts" in options else None
    items = list(range(len(prod.queries)))
    for name, fn in _queries(da, prod, kinds).items():
        try:
            out["hits"][name] = [(r.ids, list(map(float, r.scores))) for r in map(fn, items)]
            out["queries"][name] = sweep_threads(fn, items, threads, pid, repeat)
        except Exception as e:  # noqa: BLE001 -- e.g. annlite has no text search: the row says why
            out["queries"][name] = {"error": f"{type(e).__name__}: {e}"}
    sub = docs[: max(1, len(docs) // 4)]
    with CpuClock(pid) as c:
        extend_in_batches(da, sub, 2000)
    out["writes"]["re-feed"] = qps_per_core(len(sub), c.wall, c.used)
    ids = [d["id"] for d in docs[: min(500, len(docs))]]
    with CpuClock(pid) as c:
        for n, i in enumerate(ids):
            da.update(i, price=n)
    out["writes"]["partial update price"] = qps_per_core(len(ids), c.wall, c.used)
    close_collection(da)
    return out


def lexical_anchor(name: str, prod, threads: list) -> dict:
    """bm25s or tantivy on the products' title + description as one field (their usual setup),
    the same lexical queries over the same thread sweep."""
    a = Bm25s() if name == "bm25s" else Tantivy(cpu_count())
    texts = prod.texts()
    with CpuClock() as c:
        a.build([d["id"] for d in prod.docs], {"text": texts})
    fn = a.searchers(prod.queries, 10)[name]
    items = list(range(len(prod.queries)))
    return {"storage": name, "writes": {"feed": qps_per_core(len(texts), c.wall, c.cpu)},
            "queries": {"lexical": sweep_threads(fn, items, threads, None)},
            "hits": {"lexical": [(fn(i), None) for i in items]}}


def add_overlaps(rows: list, k: int = 10) -> None:
    """overlap[name] on every row: the share of memory's top-k (the exact reference) each query
    found, a hit tying memory's k-th score counting as found (engines break ties their own way)."""
    ref = next((r for r in rows if r.get("storage") == "memory" and "hits" in r), None)
    if ref is None:
        return
    for r in rows:
        common = [q for q in r.get("hits", {}) if q in ref["hits"]]
        r["overlap"] = {q: float(np.mean([recall_at_k(ids, rid, rs, k, s)
                                          for (ids, s), (rid, rs) in zip(r["hits"][q], ref["hits"][q])]))
                        for q in common}
