"""The one shape every compared vector index takes in the benchmarks (ours through the API or
raw, hnswlib, faiss): prepared and built once on a dataset, then asked for search functions."""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from hybridsearch.bench.timing import release_free_heap, rss_bytes


@dataclass
class GraphConfig:
    """HNSW parameters every compared index gets, and the threads it builds on."""
    m: int = 16
    ef_construct: int = 200
    threads: int = 1


class VectorAdapter:
    """A vector index under test.

    prepare(X, bucket, metric, cfg) does what happens before the clock (the caller's data);
    build() is timed, with the growth of the resident set around it; finish() reads sizes.
    searcher(k, ef, sel, query, mode) returns a function of one query (a row of Q, or a (1, d)
    block when `query_rows` is True) whose output ids(out) turns into int64 row numbers; `sel`
    is a vectors.Selection, `query` the same filter as a DocumentArray filter dict, `mode` one
    of variants() (indexes with several filtered strategies list them there).

    `label` says what is timed (which call of which library); `kind` is "api" for a call
    through a library's document or collection API (our find(), a database client) and "raw"
    for a bare index's search on row numbers (hnswlib's knn_query, faiss, our HnswGraph): the
    reports compare like with like."""

    name = ""
    label = ""
    kind = "api"
    query_rows = True

    def __init__(self) -> None:
        self.build_s: float | None = None
        self.rss_delta: int | None = None
        self.graph_bytes: int | None = None
        self.note = ""

    def prepare(self, X: np.ndarray, bucket: np.ndarray | None, metric: str, cfg: GraphConfig) -> None:
        """Work before the clock starts; by default it keeps the data and the settings for build."""
        self.X, self.bucket, self.metric, self.cfg = X, bucket, metric, cfg

    def build(self) -> None:
        """Builds the index (timed)."""
        raise NotImplementedError

    def finish(self) -> None:
        """Work after the clock and the memory reading (sizes, notes)."""

    def variants(self) -> dict:
        """Filtered-search variant name -> mode; one variant named after the index by default."""
        return {self.name: None}

    def searcher(self, k: int, ef: int, sel=None, query: dict | None = None, mode=None):
        """A function of one query returning this index's raw output (see ids)."""
        raise NotImplementedError

    def ids(self, out) -> np.ndarray:
        """A searcher's output -> int64 row numbers, best first (possibly fewer than k, or -1 padded)."""
        raise NotImplementedError

    def rows(self, Q: np.ndarray) -> list:
        """The queries as this index's searchers take them."""
        return [Q[i:i + 1] for i in range(len(Q))] if self.query_rows else [Q[i] for i in range(len(Q))]

    def plan(self, k: int, ef: int, q: np.ndarray, query: dict) -> str | None:
        """How the index answers a filtered search when it chooses (None: always the same way)."""
        return None

    def close(self) -> None:
        """Releases the index."""

    def build_timed(self, X: np.ndarray, bucket: np.ndarray | None, metric: str, cfg: GraphConfig) -> None:
        """prepare, then build under the clock and the RSS reading, then finish."""
        self.prepare(X, bucket, metric, cfg)
        release_free_heap()
        before = rss_bytes()
        t0 = time.perf_counter()
        self.build()
        self.build_s = time.perf_counter() - t0
        self.rss_delta = rss_bytes() - before
        self.finish()


class TextAdapter:
    """A lexical search library under test: build(ids, fields, docs) indexes documents given as
    ids and field name -> texts (`docs`, the same documents as dicts, serves adapters that take
    whole documents); searchers(queries, k) returns variant name -> a function of a query's
    position in `queries` returning the top-k ids (strings)."""

    name = ""
    label = ""
    note = ""
    searched = True  # False: a row of index time only (its searches would repeat another row's)

    def build(self, ids: list, fields: dict, docs: list | None = None) -> None:
        """Indexes the documents (timed by the caller)."""
        raise NotImplementedError

    def searchers(self, queries: list, k: int) -> dict:
        """variant name -> fn(i) -> top-k ids of queries[i]."""
        raise NotImplementedError

    def close(self) -> None:
        """Releases the index."""
