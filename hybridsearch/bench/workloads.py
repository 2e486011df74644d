"""The benchmark workloads. Every storage row runs in its own child process (spawned: annlite and
hnswlib cannot share one, and a fresh process keeps one row's memory and caches from the next's),
on the same data and parameters, with a warm-up before every timed phase."""
from __future__ import annotations

import multiprocessing as mp
import os
import threading
import time
import traceback
import uuid
from concurrent.futures import ProcessPoolExecutor
from typing import Optional

import numpy as np

from hybridsearch.bench import metrics as M

REMOTE = ("elasticsearch", "opensearch")


def in_child(fn, *args, **kwargs):
    """fn(*args, **kwargs) in a fresh spawned process -> its result, or {"error": ...}."""
    with ProcessPoolExecutor(max_workers=1, mp_context=mp.get_context("spawn")) as pool:
        try:
            return pool.submit(fn, *args, **kwargs).result()
        except Exception as e:  # a crashed row is reported, not fatal to the run
            return {"error": f"{type(e).__name__}: {e}"}


def _schema(dim: int, text: bool):
    import hybridsearch as hs
    if text:
        class Product(hs.Document):
            title: hs.Text
            description: hs.Text = ""
            category: hs.Keyword
            price: int = 0
            average_rating: float = 0.0
            embedding: hs.Vector[dim]
        return Product

    class Item(hs.Document):
        group: int = 0
        price: int = 0
        v: hs.Vector[dim]
    return Item


def open_storage(storage: str, schema, options: dict, tmp: str):
    """A fresh DocumentArray on `storage` (a temporary path / index where it needs one)."""
    import hybridsearch as hs
    options = dict(options)
    if storage in ("sqlite", "annlite"):
        options.setdefault("path", os.path.join(tmp, f"{storage}-{uuid.uuid4().hex[:8]}" + (".db" if storage == "sqlite" else "")))
    if storage in REMOTE:
        options.setdefault("index", f"hs-bench-{uuid.uuid4().hex}")
        options.setdefault("refresh", True)
        options.setdefault("chunk_size", 2000)
    for key in ("m", "ef_construct", "ef"):
        if storage in ("memory", "sqlite"):
            options.pop(key, None)
    return hs.DocumentArray(schema, storage=storage, **options)


def _drop(da) -> None:
    b = da._backend
    if hasattr(b, "client") and hasattr(b, "index"):
        try:
            b.client.indices.delete(index=b.index, ignore_unavailable=True)
        except Exception:
            pass
    da.close()


def timed_qps(fn, items: list, passes: int = 3) -> tuple:
    """(median QPS over passes, per-call latencies of the last pass) after a warm-up pass."""
    for a in items[: max(1, len(items) // 5)]:
        fn(a)
    rates, lat = [], []
    for _ in range(passes):
        lat = []
        t0 = time.perf_counter()
        for a in items:
            t = time.perf_counter()
            fn(a)
            lat.append(time.perf_counter() - t)
        rates.append(len(items) / (time.perf_counter() - t0))
    return M.median(rates), lat


# ------------------------------------------------------------------ ANN sweep
def _ann_index(storage: str, X, m: int, efc: int, efs: list, metric: str, tmp: str, k: int = 10) -> tuple:
    """Builds one index (our storage through the API, or a raw anchor library) -> (search(q, ef), build s, closer)."""
    t = time.perf_counter()
    if storage == "hnswlib-raw":
        import hnswlib
        index = hnswlib.Index(space={"l2": "l2", "cosine": "cosine", "ip": "ip"}[metric], dim=X.shape[1])
        index.init_index(max_elements=len(X), M=m, ef_construction=efc)
        index.add_items(X, np.arange(len(X)))
        build = time.perf_counter() - t
        index.set_num_threads(1)

        def search(q, ef):
            index.set_ef(max(ef, k))
            return index.knn_query(q[None, :], k=k)[0][0]
        return search, build, lambda: None
    if storage == "faiss-raw":
        import faiss
        faiss.omp_set_num_threads(os.cpu_count() or 1)
        index = faiss.IndexHNSWFlat(X.shape[1], m)
        index.hnsw.efConstruction = efc
        index.add(X)
        build = time.perf_counter() - t
        faiss.omp_set_num_threads(1)

        def search(q, ef):
            index.hnsw.efSearch = max(ef, k)
            return index.search(q[None, :], k)[1][0]
        return search, build, lambda: None
    schema = _schema(X.shape[1], text=False)
    da = open_storage(storage, schema, {"metric": metric, "m": m, "ef_construct": efc, "ef": max(efs)}, tmp)
    t = time.perf_counter()
    for a in range(0, len(X), 10000):
        da.extend([{"id": str(i), "v": X[i]} for i in range(a, min(len(X), a + 10000))])
    build = time.perf_counter() - t

    def search(q, ef):
        return [int(i) for i in da.find(vector=q, limit=k, ef=ef).ids]
    return search, build, lambda: _drop(da)


def ann_group(storages: list, X, Q, gt_ids, gt_scores, m: int, efc: int, efs: list, metric: str, tmp: str,
              passes: int = 3) -> list:
    """Recall@10 and QPS over the ef sweep for several indexes built in this one process, timed
    round-robin (pass 1 of every index, then pass 2, ...) so that load from elsewhere on a shared
    machine falls on all of them alike; QPS is the median pass."""
    k = 10
    built = {s: _ann_index(s, X, m, efc, efs, metric, tmp, k) for s in storages}
    rows = {s: {"storage": s, "m": m, "ef_construct": efc, "build_s": built[s][1], "points": []} for s in storages}
    queries = list(Q)
    for ef in efs:
        recall = {}
        for s in storages:
            search = built[s][0]
            found = [[i for i in search(q, ef) if i >= 0] for q in queries]
            scores = [-np.sqrt(((X[f].astype(np.float64) - q) ** 2).sum(axis=1)) if metric == "l2"
                      else X[f].astype(np.float64) @ q for q, f in zip(queries, found)]
            recall[s] = float(np.mean([M.recall_at_k(f, gi, gs, k, sc)
                                       for f, gi, gs, sc in zip(found, gt_ids, gt_scores, scores)]))
            for q in queries[: max(1, len(queries) // 5)]:  # warm-up
                search(q, ef)
        rates = {s: [] for s in storages}
        lats = {s: [] for s in storages}
        for _ in range(passes):
            for s in storages:
                search, lat = built[s][0], []
                t0 = time.perf_counter()
                for q in queries:
                    t = time.perf_counter()
                    search(q, ef)
                    lat.append(time.perf_counter() - t)
                rates[s].append(len(queries) / (time.perf_counter() - t0))
                lats[s] = lat
        for s in storages:
            rows[s]["points"].append({"ef": ef, "recall": recall[s], "qps": M.median(rates[s]),
                                      "p50_ms": 1000 * M.percentile(lats[s], 50),
                                      "p99_ms": 1000 * M.percentile(lats[s], 99)})
    for s in storages:
        built[s][2]()
    return [rows[s] for s in storages]


# ---------------------------------------------------------------- six tasks
def six_tasks(storage: str, X, Q, gt_ids, gt_scores, options: dict, tmp: str, n_ops: int = 500) -> dict:
    """DocArray's benchmark tasks: create N, read, update, delete, find by condition, find by vector."""
    rng = np.random.default_rng(0)
    schema = _schema(X.shape[1], text=False)
    da = open_storage(storage, schema, dict(options, metric="l2"), tmp)
    n = len(X)
    docs = [{"id": str(i), "v": X[i], "group": int(i % 100), "price": int(i % 1000)} for i in range(n)]
    out = {"storage": storage, "n": n}
    with M.CpuClock() as c:
        for a in range(0, n, 5000):
            da.extend(docs[a:a + 5000])
    out["create_s"] = c.wall
    ids = [str(i) for i in rng.choice(n, n_ops, replace=False)]
    qps, lat = timed_qps(lambda i: da[i], ids, passes=1)
    out["read"] = {"qps": qps, "ms": 1000 * M.median(lat)}
    it = iter(range(10 ** 9))
    qps, lat = timed_qps(lambda i: da.update(i, price=next(it) % 1000), ids, passes=1)
    out["update"] = {"qps": qps, "ms": 1000 * M.median(lat)}
    flts = [{"group": int(g), "price": {"$lt": 500}} for g in rng.integers(0, 100, 50)]
    qps, lat = timed_qps(lambda f: da.find(filter=f, limit=10), flts, passes=1)
    out["find_by_condition"] = {"qps": qps, "ms": 1000 * M.median(lat)}
    found = [[int(i) for i in da.find(vector=q, limit=10).ids] for q in Q]
    scores = [-np.sqrt(((X[f].astype(np.float64) - q) ** 2).sum(axis=1)) if f else [] for q, f in zip(Q, found)]
    out["recall_at_10"] = float(np.mean([M.recall_at_k(f, gi, gs, 10, s)
                                         for f, gi, gs, s in zip(found, gt_ids, gt_scores, scores)]))
    qps, lat = timed_qps(lambda q: da.find(vector=q, limit=10), list(Q), passes=1)
    out["find_by_vector"] = {"qps": qps, "ms": 1000 * M.median(lat)}
    dels = [[i] for i in ids]
    qps, lat = timed_qps(lambda i: da.delete(i), dels[len(dels) // 5:], passes=1)  # warm-up deletes the first fifth
    out["delete"] = {"qps": qps, "ms": 1000 * M.median(lat)}
    _drop(da)
    return out


# ------------------------------------------------------------ e-commerce
def _concurrent(fn, items: list, threads: int, pid: Optional[int]) -> dict:
    lat, lock = [], threading.Lock()

    def worker(part):
        mine = []
        for a in part:
            t = time.perf_counter()
            fn(a)
            mine.append(time.perf_counter() - t)
        with lock:
            lat.extend(mine)

    for a in items[: max(1, len(items) // 10)]:
        fn(a)
    with M.CpuClock(pid) as c:
        ts = [threading.Thread(target=worker, args=(items[i::threads],)) for i in range(threads)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
    cpu = c.other_cpu if pid is not None else c.cpu
    r = M.qps_per_core(len(items), c.wall, cpu)
    r.update({"threads": threads, "mean_ms": 1000 * float(np.mean(lat)), "p99_ms": 1000 * M.percentile(lat, 99)})
    return r


def ecommerce(storage: str, prod, threads: list, options: dict, tmp: str, pid: Optional[int] = None) -> dict:
    """Lexical, vector and hybrid queries with and without a category filter, over a concurrency
    sweep; then writes: initial feed, re-feed, partial update of price."""
    schema = _schema(prod.query_vectors.shape[1], text=True)
    da = open_storage(storage, schema, options, tmp)
    docs = prod.docs
    out = {"storage": storage, "writes": {}, "queries": {}, "ids": {}}
    with M.CpuClock(pid) as c:
        for a in range(0, len(docs), 2000):
            da.extend(docs[a:a + 2000])
    cpu = c.other_cpu if pid is not None else c.cpu
    out["writes"]["feed"] = M.qps_per_core(len(docs), c.wall, cpu)
    cat = docs[0]["category"]
    kinds = {
        "lexical": lambda i, f: da.find(text=prod.queries[i], filter=f, limit=10),
        "vector": lambda i, f: da.find(vector=prod.query_vectors[i], filter=f, limit=10),
        "hybrid": lambda i, f: da.find(text=prod.queries[i], vector=prod.query_vectors[i], filter=f, limit=10),
    }
    items = list(range(len(prod.queries)))
    for name, fn in kinds.items():
        for label, flt in (("", None), (" + filter", {"category": cat})):
            try:
                out["ids"][name + label] = [fn(i, flt).ids for i in items]
                out["queries"][name + label] = [_concurrent(lambda i: fn(i, flt), items, t, pid) for t in threads]
            except Exception as e:  # e.g. annlite has no text search: the row says why
                out["queries"][name + label] = {"error": f"{type(e).__name__}: {e}"}
    sub = docs[: max(1, len(docs) // 4)]
    with M.CpuClock(pid) as c:
        for a in range(0, len(sub), 2000):
            da.extend(sub[a:a + 2000])
    out["writes"]["re-feed"] = M.qps_per_core(len(sub), c.wall, c.other_cpu if pid is not None else c.cpu)
    ids = [d["id"] for d in docs[: min(500, len(docs))]]
    with M.CpuClock(pid) as c:
        for n, i in enumerate(ids):
            da.update(i, price=n)
    out["writes"]["partial update price"] = M.qps_per_core(len(ids), c.wall, c.other_cpu if pid is not None else c.cpu)
    _drop(da)
    return out


def lexical_anchor(name: str, prod, threads: list) -> dict:
    """bm25s or tantivy on the same title + description texts (a user's alternative), single field."""
    texts = [d["title"] + " " + d["description"] for d in prod.docs]
    items = list(range(len(prod.queries)))
    if name == "bm25s":
        import bm25s
        t = time.perf_counter()
        retriever = bm25s.BM25()
        retriever.index(bm25s.tokenize(texts, stopwords=None, show_progress=False), show_progress=False)
        feed = time.perf_counter() - t

        def run(i):
            toks = bm25s.tokenize([prod.queries[i]], stopwords=None, show_progress=False)
            return [str(x) for x in retriever.retrieve(toks, k=10, show_progress=False, n_threads=0)[0][0]]
    else:
        import re

        import tantivy
        sb = tantivy.SchemaBuilder()
        sb.add_integer_field("id", stored=True, fast=True)
        sb.add_text_field("body", stored=False)
        index = tantivy.Index(sb.build())
        t = time.perf_counter()
        w = index.writer()
        for i, txt in enumerate(texts):
            w.add_document(tantivy.Document(id=i, body=txt))
        w.commit()
        index.reload()
        feed = time.perf_counter() - t
        searcher = index.searcher()

        def run(i):
            q = index.parse_query(re.sub(r"[^\w\s]", " ", prod.queries[i]), ["body"])
            return [str(searcher.doc(a)["id"][0]) for _, a in searcher.search(q, 10, count=False).hits]
    ids = [run(i) for i in items]
    return {"storage": name, "writes": {"feed": M.qps_per_core(len(texts), feed, feed)},
            "queries": {"lexical": [_concurrent(run, items, t, None) for t in threads]}, "ids": {"lexical": ids}}


# --------------------------------------------------------------- relevance
def relevance(storage: str, rel, options: dict, tmp: str) -> dict:
    """nDCG@10 and recall@100 of lexical search (and its speed) on a judged collection."""
    import hybridsearch as hs

    class Verse(hs.Document):
        text: hs.Text

    da = open_storage(storage, Verse, options, tmp)
    for a in range(0, len(rel.corpus), 5000):
        da.extend(rel.corpus[a:a + 5000])
    qids = list(rel.queries)
    runs = {q: da.find(text=rel.queries[q], limit=100).ids for q in qids}
    qps, lat = timed_qps(lambda q: da.find(text=rel.queries[q], limit=10), qids, passes=1)
    _drop(da)
    return {"storage": storage, "ndcg@10": float(np.mean([M.ndcg_at_k(runs[q], rel.qrels[q], 10) for q in qids])),
            "recall@100": float(np.mean([M.recall_of_relevant(runs[q], rel.qrels[q], 100) for q in qids])),
            "qps": qps, "queries": len(qids)}


def relevance_bm25s(rel) -> dict:
    import bm25s
    import Stemmer
    stem = Stemmer.Stemmer("english")
    retriever = bm25s.BM25()
    retriever.index(bm25s.tokenize([d["text"] for d in rel.corpus], stemmer=stem, show_progress=False),
                    show_progress=False)
    qids = list(rel.queries)
    out = {}
    for q in qids:
        docs, _ = retriever.retrieve(bm25s.tokenize([rel.queries[q]], stemmer=stem, show_progress=False), k=100,
                                     show_progress=False, n_threads=0)
        out[q] = [rel.corpus[int(i)]["id"] for i in docs[0]]
    return {"storage": "bm25s", "ndcg@10": float(np.mean([M.ndcg_at_k(out[q], rel.qrels[q], 10) for q in qids])),
            "recall@100": float(np.mean([M.recall_of_relevant(out[q], rel.qrels[q], 100) for q in qids])),
            "queries": len(qids)}


def safe(fn, *args, **kwargs):
    """fn(...) or {"error": the exception and where}, so one failing row never ends a run."""
    try:
        return fn(*args, **kwargs)
    except Exception as e:
        return {"error": f"{type(e).__name__}: {e}", "trace": traceback.format_exc(limit=3)}
