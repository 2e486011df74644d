"""Lexical BM25 side by side in one process: ours (two fields, best field, on memory and hnsw;
and one joined field), bm25s and tantivy index the same products, then answer the same queries
from query string to top-10 ids, one per call on one thread, timed round-robin; overlaps between
all of them, bm25s' batched retrieve, and ours' hybrid and filtered queries."""
from __future__ import annotations

import gc
import time

import hybridsearch as hs
from hybridsearch.bench.adapters.lexical import Bm25s, Tantivy
from hybridsearch.bench.adapters.ours import Texts, product_model
from hybridsearch.bench.metrics import mean_overlap
from hybridsearch.bench.timing import median_seconds, round_robin

K = 10

WARM_DOCS = 2000  # documents of the untimed build before each timed one


def candidates(dim: int, threads: int, hnsw: bool = True) -> list:
    """The indexes compared: ours on memory (the main row; text fields indexed `threads` at a
    time), the same on one thread (index time only), on hnsw (its index time includes the graph over the vectors),
    ours with one joined field, bm25s, tantivy."""
    schema = product_model(dim)
    ours = [Texts("memory", "ours", schema, threads=threads), Texts("memory", "ours-1thread", schema, searched=False, threads=1)]
    ours += [Texts("hnsw", "ours-hnsw", schema, threads=threads)] if hnsw else []
    return ours + [Texts("memory", "ours-1f", join=True), Bm25s(), Tantivy(threads)]


def build(adapters: list, prod, log=None) -> tuple:
    """(built adapters, name -> index seconds, name -> "measured" or why not)."""
    fields = {"title": [d["title"] for d in prod.docs], "description": [d["description"] for d in prod.docs]}
    ids = [d["id"] for d in prod.docs]
    built, seconds, status = [], {}, {}
    for a in adapters:
        gc.collect()
        try:
            # untimed warm-up on a slice: the first build of a process also pays for imports and
            # pydantic's lazily built validators, which would be charged to whichever row ran first
            a.build(ids[:WARM_DOCS], {f: v[:WARM_DOCS] for f, v in fields.items()}, prod.docs[:WARM_DOCS])
            gc.collect()
            t = time.perf_counter()
            a.build(ids, fields, prod.docs)
        except ImportError as e:
            status[a.name] = f"not available ({e})"
        except Exception as e:  # noqa: BLE001 -- one broken library must not hide the others
            status[a.name] = f"error ({type(e).__name__}: {e})"
        else:
            seconds[a.name], status[a.name] = time.perf_counter() - t, "measured"
            built.append(a)
        if log:
            log(f"  {a.name + ':':10s} " + (f"{seconds[a.name]:7.2f} s  {a.note}" if a.name in seconds
                                            else status[a.name]))
    return built, seconds, status


def hybrid_searchers(a: Texts, prod) -> dict:
    """ours' hybrid and filtered variants on one collection."""
    da, qs, qv, flt, tag = a.da, prod.queries, prod.query_vectors, prod.filter, a.storage
    return {f"{tag}: text + vector, sum": lambda i: da.find(text=qs[i], vector=qv[i], limit=K).ids,
            f"{tag}: text + vector, rrf": lambda i: da.find(text=qs[i], vector=qv[i], fusion="rrf", limit=K).ids,
            f"{tag}: text + vector, sum, category filter":
                lambda i: da.find(text=qs[i], vector=qv[i], filter=flt, limit=K).ids,
            f"{tag}: text, category filter": lambda i: da.find(text=qs[i], filter=flt, limit=K).ids}


def compare(built: list, prod, nq: int, nwarm: int, repeats: int, status: dict) -> dict:
    """Times every variant round-robin over queries [0, nq) after warming on [nq, nq + nwarm):
    {"search": variant -> timings, "owner": variant -> adapter name, "overlap": "a / b" -> mean
    overlap@10, "bm25s_batched": {...}, "hybrid": variant -> timings}. Call it under
    threadpool_limits(1) for single-thread figures."""
    from threadpoolctl import threadpool_limits
    timed_q, warm = list(range(nq)), list(range(nq, nq + nwarm))
    fns, owner = {}, {}
    for a in built:
        if not a.searched:
            continue
        for v, f in a.searchers(prod.queries, K).items():
            try:
                f(warm[0])
            except Exception as e:  # noqa: BLE001 -- e.g. hs.UnsupportedError: that variant only
                status[v] = f"{'not available' if isinstance(e, hs.UnsupportedError) else 'error'} ({e})"
                continue
            fns[v], owner[v] = f, a.name
    speed = round_robin(fns, timed_q, warm, repeats, keep=True)
    tops = {v: s.pop("out") for v, s in speed.items() if "out" in s}
    names = [v for v in tops if v != "tantivy count=True"]
    overlap = {f"{x} / {y}": mean_overlap(tops[x], tops[y], K) for x in names for y in names if x < y}
    batched = {}
    bm = next((a for a in built if isinstance(a, Bm25s)), None)
    if bm is not None:
        texts = [prod.queries[i] for i in timed_q]
        for threads, key in ((0, "bm25s batched, 1 thread"), (-1, "bm25s batched, all cores")):
            with threadpool_limits(limits=None if threads else 1):
                batched[key] = {"qps": nq / median_seconds(lambda t=threads: bm.batched(texts, K, t), repeats)}
    hyb = {}
    for a in built:
        if isinstance(a, Texts) and not a.join and a.name in fns:
            hyb.update(hybrid_searchers(a, prod))
    hybrid = round_robin(hyb, timed_q, warm, repeats) if hyb else {}
    return {"search": speed, "owner": owner, "overlap": overlap, "bm25s_batched": batched, "hybrid": hybrid}
