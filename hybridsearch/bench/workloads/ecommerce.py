"""The e-commerce workload on a generated product catalogue: lexical, vector and hybrid queries,
each with and without a category filter, over a sweep of client threads (QPS, latency, CPU cores
used and QPS per core, the search node's CPU for a remote storage), then writes: the feed, a
re-feed of a quarter, partial updates of the price. bm25s and tantivy run the lexical queries as
anchors. Agreement with `memory` (exact) is measured next to every speed; at_scale() runs one
storage at one size (1M products and more, where `memory` is too slow to be the reference) with
recall@10 of the vector queries against a numpy brute-force top-10 instead."""
from __future__ import annotations

import os
import resource
import time

import numpy as np

from hybridsearch.bench import corpora as C
from hybridsearch.bench.adapters.anchors import cpu_count
from hybridsearch.bench.adapters.lexical import Bm25s, Tantivy
from hybridsearch.bench.adapters.ours import (
    close_collection,
    extend_columns_in_batches,
    extend_in_batches,
    open_collection,
    product_model,
)
from hybridsearch.bench.adapters.remote import segments
from hybridsearch.bench.concurrency import concurrent
from hybridsearch.bench.metrics import mean_recall, median, numpy_topk, qps_per_core, recall_at_k
from hybridsearch.bench.timing import CpuClock, rss_bytes, settle

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


def _feed(da, prod, part: slice, feed: str, batch: int, pid: int | None) -> dict:
    """Writes prod.docs[part] with extend (documents, `batch` per call) or extend_columns (the
    columns built before the clock, `batch` rows per call) -> qps_per_core + seconds, client_cores."""
    docs = prod.docs[part]
    cols = prod.columns(part) if feed == "columns" else None
    with CpuClock(pid) as c:
        if cols is None:
            extend_in_batches(da, docs, batch)
        else:
            extend_columns_in_batches(da, cols, batch)
    return dict(qps_per_core(len(docs), c.wall, c.used), seconds=c.wall, client_cores=c.cpu / max(c.wall, 1e-9))


def ecommerce(storage: str, prod, threads: list, options: dict, tmp: str, pid: int | None = None,
              kinds=KINDS, repeat: int = 1, feed: str = "extend", batch: int = 2000, refeed: float = 0.25,
              updates: int = 500) -> dict:
    """One storage's row: writes (feed, re-feed of a `refeed` share, `updates` partial updates of
    the price: qps, cores, qps_per_core, seconds), queries[name] = one concurrent() result per
    thread count (or {"error"} when the storage cannot run that query), and hits[name] = per
    query (ids, scores) for the agreement. `feed`: "extend" (documents, as the harness's tables)
    or "columns" (extend_columns); `batch` rows per call; rss_feed_bytes = this process's RSS
    growth over the feed."""
    da = open_collection(storage, product_model(prod.query_vectors.shape[1]), options, tmp)
    docs = prod.docs
    out = {"storage": storage, "feed_mode": feed, "batch": batch, "writes": {}, "queries": {}, "hits": {}}
    rss0 = rss_bytes()
    out["writes"]["feed"] = _feed(da, prod, slice(None), feed, batch, pid)
    out["rss_feed_bytes"] = rss_bytes() - rss0
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
    if refeed > 0:
        out["writes"]["re-feed"] = _feed(da, prod, slice(0, max(1, int(len(docs) * refeed))), feed, batch, pid)
    ids = [d["id"] for d in docs[: min(updates, len(docs))]]
    with CpuClock(pid) as c:
        for n, i in enumerate(ids):
            da.update(i, price=n)
    out["writes"]["partial update price"] = dict(qps_per_core(len(ids), c.wall, c.used), seconds=c.wall)
    close_collection(da)
    return out


def node_memory(pid: int | None) -> dict:
    """VmRSS and VmHWM (peak) of process `pid` in bytes, from /proc/<pid>/status ({} if unreadable)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            return {k: int(v.split()[0]) * 1024 for k, v in (ln.split(":", 1) for ln in f)
                    if k in ("VmRSS", "VmHWM")}
    except (OSError, TypeError, ValueError):
        return {}


def vector_recall(prod, hits: dict, k: int = 10) -> dict:
    """recall@k of every vector query kind in `hits` ("vector", "vector + filter") against the
    exact top-k by numpy brute force over prod.embeddings (cosine; tie-aware, as mean_recall);
    with the filter, only the category's rows count and a hit outside it is a violation."""
    X, Q = prod.embeddings, prod.query_vectors
    allowed = np.array([d["category"] == prod.filter["category"] for d in prod.docs])
    out = {}
    for name in ("vector", "vector + filter"):
        if name not in hits:
            continue
        mask = allowed if name.endswith("filter") else None
        gt = numpy_topk(X, Q, k, "cosine", mask)
        found = [[int(i) for i in ids] for ids, _ in hits[name]]
        recall, violations = mean_recall(X, Q, found, gt, "cosine", k, mask)
        out[name] = {"recall": recall, "violations": violations}
    return out


def at_scale(storage: str, n: int, n_queries: int, dim: int, threads: list, options: dict, tmp: str,
             pid: int | None = None, feed: str = "columns", batch: int = 10000, repeat: int = 1,
             refeed: float = 0.25, updates: int = 500, kinds=KINDS) -> dict:
    """One storage at one size, for a child process of benchmarks/bench_ecommerce.py: n products
    with `dim`-d projection embeddings (never wordllama: the dimension is the point), the
    ecommerce() row, recall@10 of the vector queries (vector_recall), this process's peak RSS
    (which includes the generated catalogue), the node's RSS for a remote storage, the load
    average before and after, and the seconds each stage took."""
    load0, t0 = os.getloadavg(), time.perf_counter()
    prod = C.products(n, n_queries, dim=dim, embedder="projection")
    gen_s = time.perf_counter() - t0
    row = ecommerce(storage, prod, threads, options, tmp, pid, kinds, repeat, feed, batch, refeed, updates)
    t1 = time.perf_counter()
    row["recall"] = vector_recall(prod, row["hits"])
    row.update(n=n, dim=dim, queries_n=len(prod.queries), embedder=prod.embedder, generate_s=gen_s,
               reference_s=time.perf_counter() - t1, run_s=time.perf_counter() - t0,
               options={k: v for k, v in options.items() if k != "hosts"},
               peak_rss_bytes=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
               node_memory=node_memory(pid) if pid is not None else None,
               load_before=list(load0), load_after=list(os.getloadavg()))
    return row


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


def database_anchor(name: str, prod, threads: list, k: int = 10) -> dict:
    """Chroma, Milvus Lite or LanceDB (adapters/databases.py) on the same catalogue: the load
    (feed) timed, then every query kind it has over the thread sweep, in the row shape of
    ecommerce() (queries it lacks carry {"error": why}), plus recall@10 of its vector queries."""
    from hybridsearch.bench.adapters.databases import product_adapter
    a = product_adapter(name)
    try:
        with CpuClock() as c:
            a.load(prod)
        out = {"storage": name, "label": a.label, "note": a.note, "queries": {}, "hits": {},
               "writes": {"feed": dict(qps_per_core(len(prod.docs), c.wall, c.cpu), seconds=c.wall)}}
        items = list(range(len(prod.queries)))
        for q, fn in a.searchers(prod, k).items():
            # ids only: their scores (distances, their BM25) are not on memory's scale
            out["hits"][q] = [(fn(i)[0], None) for i in items]
            out["queries"][q] = sweep_threads(fn, items, threads, None)
        out["queries"].update({q: {"error": why} for q, why in a.unsupported.items()})
    finally:
        a.close()
    out["recall"] = vector_recall(prod, out["hits"], k)
    return out


def anchor_at_scale(name: str, n: int, n_queries: int, dim: int, threads: list) -> dict:
    """database_anchor on n generated products with `dim`-d projection embeddings (the catalogue
    of at_scale with the same arguments), for a child process; peak RSS and seconds added."""
    t0 = time.perf_counter()
    prod = C.products(n, n_queries, dim=dim, embedder="projection")
    row = database_anchor(name, prod, threads)
    row.update(n=n, dim=dim, queries_n=len(prod.queries), run_s=time.perf_counter() - t0,
               peak_rss_bytes=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
    return row


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
