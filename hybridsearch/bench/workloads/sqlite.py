"""The sqlite storage: extend into it against memory, exact vector search (unfiltered and under a
~6% category filter, pre-filtered by our column bitset or by ids from SQL) against sqlite-vec's
vec0 brute force in the same process, and reopening a file of twice the documents."""
from __future__ import annotations

import os
import time

from hybridsearch.bench.adapters.ours import (
    close_collection,
    open_collection,
    product_model,
)
from hybridsearch.bench.adapters.sqlite_vec import SqliteVec
from hybridsearch.bench.metrics import mean_overlap
from hybridsearch.bench.timing import round_robin


def extend_seconds(storage: str, docs: list, dim: int, tmp: str, **options):
    """(seconds of one extend of all `docs` (products), the open collection)."""
    da = open_collection(storage, product_model(dim), options, tmp)
    t = time.perf_counter()
    da.extend(docs)
    return time.perf_counter() - t, da


def vector_rows(da, sql_da, prod, docs: list, log=None) -> dict:
    """name -> {"qps", "overlap"} for ours (bitset and SQL pre-filter) and sqlite-vec (when
    installed), unfiltered and filtered; overlap@10 against ours' results of the same kind."""
    flt, cat = prod.filter, prod.filter["category"]
    rows = {"ours, unfiltered": lambda q: da.find(vector=q, limit=10).ids,
            "ours, filter (columns bitset)": lambda q: da.find(vector=q, filter=flt, limit=10).ids,
            "ours, filter (ids from SQL)": lambda q: sql_da.find(vector=q, filter=flt, limit=10).ids}
    vec = None
    try:
        vec = SqliteVec(docs, prod.query_vectors.shape[1])
        rows[f"sqlite-vec {vec.version}, unfiltered"] = vec.search
        rows[f"sqlite-vec {vec.version}, filter"] = lambda q: vec.search(q, cat)
    except ImportError as e:
        if log:
            log(f"sqlite-vec rows skipped: {e} (pip install 'sqlite-vec>=0.1.6' pysqlite3-binary)")
    Q = list(prod.query_vectors)
    timed = round_robin(rows, Q, keep=True)
    ref = {kind: timed[f"ours, {kind}"]["out"] for kind in ("unfiltered", "filter (columns bitset)")}
    out = {}
    for name, t in timed.items():
        base = ref["unfiltered"] if "unfiltered" in name else ref["filter (columns bitset)"]
        out[name] = {"qps": t.get("qps"), "overlap": mean_overlap(t.get("out", []), base, 10), "error": t.get("error")}
    if vec is not None:
        vec.close()
    return out


def sqlite_run(prod, tmp: str, log=None) -> dict:
    """On the first half of the products: extend_sqlite_s and extend_memory_s, the vector rows;
    then the second half appended and the file reopened: reopen_s, documents, file_mib."""
    half, dim = len(prod.docs) // 2, prod.query_vectors.shape[1]
    docs, path = prod.docs[:half], os.path.join(tmp, "bench.db")
    res = {"n": half}
    res["extend_sqlite_s"], da = extend_seconds("sqlite", docs, dim, tmp, path=path)
    res["extend_memory_s"], mem = extend_seconds("memory", docs, dim, tmp)
    close_collection(mem)
    _, sql_da = extend_seconds("sqlite", docs, dim, tmp, path=path + "-sqlpre", prefilter="sql")
    res["vector"] = vector_rows(da, sql_da, prod, docs, log)
    close_collection(sql_da)
    da.extend(prod.docs[half:])
    close_collection(da)
    t = time.perf_counter()
    again = open_collection("sqlite", product_model(dim), {"path": path}, tmp)
    res["reopen_s"], res["documents"] = time.perf_counter() - t, len(again)
    res["file_mib"] = os.path.getsize(path) / 2 ** 20
    close_collection(again)
    return res
