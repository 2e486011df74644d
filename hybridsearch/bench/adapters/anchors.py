"""The vector libraries ours is measured against, each used the way its documentation shows:
hnswlib's Index, faiss IndexHNSWFlat and IndexFlat, and numpy (matrix product + argpartition)."""
from __future__ import annotations

import importlib.util
import os

import numpy as np

from hybridsearch.bench.adapters.base import VectorAdapter

SEED = 20240607


def installed(module: str) -> bool:
    """Whether `module` can be imported here."""
    return importlib.util.find_spec(module) is not None


class Hnswlib(VectorAdapter):
    """hnswlib.Index: knn_query one query per call; a filter is its Python callable on labels."""

    name = "hnswlib-raw"
    label = "hnswlib knn_query (its Python API)"
    kind = "raw"
    query_rows = False

    def build(self) -> None:
        """init_index + add_items on cfg.threads threads, seeded."""
        import hnswlib
        X, cfg = self.X, self.cfg
        self.index = hnswlib.Index(space=self.metric, dim=X.shape[1])
        self.index.init_index(max_elements=len(X), M=cfg.m, ef_construction=cfg.ef_construct, random_seed=SEED)
        self.index.add_items(X, np.arange(len(X)), num_threads=cfg.threads)

    def finish(self) -> None:
        """The graph's bytes (the saved file is the in-memory layout: level-0 block of links +
        vector + label per element, then the upper links); searches on one thread from now on."""
        self.graph_bytes = self.index.index_file_size() - len(self.X) * (self.X.shape[1] * 4 + 8)
        self.note = "graph = index_file_size() - vectors - labels"
        self.index.set_num_threads(1)

    def searcher(self, k, ef, sel=None, query=None, mode=None):
        """knn_query of one row (filtered: the selection's set as hnswlib's filter callable)."""
        self.index.set_ef(max(ef, k))
        knn = self.index.knn_query
        if sel is None:
            return lambda q: knn(q, k=k, num_threads=1)
        allowed = sel.allowed.__contains__

        def search(q):
            try:
                return knn(q, k=k, num_threads=1, filter=allowed)
            except RuntimeError:  # fewer than k allowed results found
                return None
        return search

    def ids(self, out) -> np.ndarray:
        """The labels of the row (none where hnswlib found fewer than k allowed)."""
        return np.empty(0, np.int64) if out is None else out[0][0].astype(np.int64)


class FaissHnsw(VectorAdapter):
    """faiss IndexHNSWFlat; a filter is SearchParametersHNSW with an IDSelectorBitmap."""

    name = "faiss-raw"
    label = "faiss IndexHNSWFlat.search"
    kind = "raw"

    def build(self) -> None:
        """IndexHNSWFlat (L2 or inner product) filled on cfg.threads OpenMP threads."""
        import faiss
        X, cfg = self.X, self.cfg
        faiss.omp_set_num_threads(cfg.threads)
        metric = faiss.METRIC_L2 if self.metric == "l2" else faiss.METRIC_INNER_PRODUCT
        self.index = faiss.IndexHNSWFlat(X.shape[1], cfg.m, metric)
        self.index.hnsw.efConstruction = cfg.ef_construct
        self.index.add(X)

    def finish(self) -> None:
        """The graph's bytes (neighbours, offsets, levels); one OpenMP thread from now on."""
        import faiss
        faiss.omp_set_num_threads(1)
        h = self.index.hnsw
        self.graph_bytes = h.neighbors.size() * 4 + h.offsets.size() * 8 + h.levels.size() * 4
        self.note = "graph = neighbors + offsets + levels arrays"

    def searcher(self, k, ef, sel=None, query=None, mode=None):
        """search of a (1, d) block with SearchParametersHNSW (filtered: an IDSelectorBitmap)."""
        import faiss
        if sel is None:
            params = faiss.SearchParametersHNSW(efSearch=max(ef, k))
        else:
            selector = faiss.IDSelectorBitmap(len(sel.mask), faiss.swig_ptr(sel.bitmap8))
            params = faiss.SearchParametersHNSW(efSearch=max(ef, k), sel=selector)
            params.keep_alive = (selector, sel.bitmap8)
        search = self.index.search
        return lambda q: search(q, k, params=params)

    def ids(self, out) -> np.ndarray:
        """The labels of the block's one row (-1 padded)."""
        return out[1][0].astype(np.int64)


def numpy_topk(S: np.ndarray, k: int) -> np.ndarray:
    """Ids of the k largest scores of every row of S (c, n), best first."""
    n = S.shape[1]
    part = np.argpartition(S, n - k, axis=1)[:, n - k:]
    order = np.argsort(-np.take_along_axis(S, part, axis=1), axis=1, kind="stable")
    return np.take_along_axis(part, order, axis=1)


def numpy_flat(X: np.ndarray, k: int, chunk: int = 64):
    """Exact inner-product top-k with numpy: `X @ q` (or Qc @ X.T per chunk of queries, which
    keeps argpartition on contiguous rows) + argpartition + a sort of the k survivors."""
    def search(Q):
        if Q.shape[0] == 1:
            return numpy_topk((X @ Q[0])[None, :], k)
        return np.vstack([numpy_topk(Q[i:i + chunk] @ X.T, k) for i in range(0, Q.shape[0], chunk)])
    return search


def faiss_flat(X: np.ndarray, metric: str, k: int):
    """faiss IndexFlatIP / IndexFlatL2 on one thread as a function of a query block -> ids."""
    import faiss
    faiss.omp_set_num_threads(1)
    index = (faiss.IndexFlatIP if metric == "ip" else faiss.IndexFlatL2)(X.shape[1])
    index.add(X)
    return lambda Q: index.search(Q, k)[1]


def cpu_count() -> int:
    """Cores this process may use (build threads default to all of them)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
