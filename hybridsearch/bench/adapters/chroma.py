"""Chroma (local, chromadb 1.x) as a read-only comparison row: a PersistentClient in a temporary
folder, telemetry off, one collection whose HNSW takes the harness's m / ef_construct; `where`
metadata filters; vectors added in batches of the client's max batch size. Chroma has no ranked
full-text search locally: its `where_document` {"$contains": ...} is an unranked substring
filter, not BM25, so this row has no lexical or hybrid queries."""
from __future__ import annotations

import numpy as np

from hybridsearch.bench.adapters.base import VectorAdapter
from hybridsearch.bench.adapters.databases import ProductAdapter, Workdir, bound, product_columns, quiet

SPACE = {"l2": "l2", "ip": "ip", "cosine": "cosine"}
NO_TEXT = ("Chroma has no ranked full-text search locally: where_document $contains is an unranked "
           "substring filter, not BM25")


def client(path: str):
    """A PersistentClient at `path` with anonymized telemetry off."""
    quiet()
    import chromadb
    from chromadb.config import Settings
    return chromadb.PersistentClient(path=path, settings=Settings(anonymized_telemetry=False))


def add_batches(client_, col, ids: list, vectors: np.ndarray, metadatas: list, documents: list | None = None) -> None:
    """col.add in slices of the client's max batch size (larger adds are refused)."""
    step = client_.get_max_batch_size()
    for lo in range(0, len(ids), step):
        part = slice(lo, lo + step)
        col.add(ids=ids[part], embeddings=vectors[part], metadatas=metadatas[part],
                documents=None if documents is None else documents[part])


def close_client(client_) -> None:
    """Closes the client (chromadb >= 1.1 has close()) and drops its cached system."""
    if hasattr(client_, "close"):
        client_.close()
    client_.clear_system_cache()


def _ids(out) -> np.ndarray:
    return np.array(out["ids"][0], dtype=np.int64)


class Vectors(VectorAdapter):
    """Chroma's HNSW: max_neighbors = m, ef_construction, num_threads = build threads; ef_search
    set per sweep point with collection.modify; a filter is `where` {"bucket": {"$lt": t}}."""

    name = "chroma"
    label = "Chroma (PersistentClient, HNSW)"

    def build(self) -> None:
        """A collection configured from cfg, filled with string ids, the vectors, {"bucket"}."""
        cfg, X = self.cfg, self.X
        self.work = Workdir()
        self.client = client(self.work.path)
        hnsw = {"space": SPACE[self.metric], "max_neighbors": cfg.m, "ef_construction": cfg.ef_construct,
                "ef_search": 64, "num_threads": cfg.threads}
        self.ef = 64
        self.col = self.client.create_collection("bench", configuration={"hnsw": hnsw}, embedding_function=None)
        bucket = self.bucket if self.bucket is not None else np.zeros(len(X), np.int64)
        add_batches(self.client, self.col, [str(i) for i in range(len(X))], X,
                    [{"bucket": int(b)} for b in bucket])

    def finish(self) -> None:
        """Says how the row was built."""
        self.note = f"chromadb, M={self.cfg.m}, ef_construction={self.cfg.ef_construct}"

    def set_ef(self, ef: int) -> None:
        """ef_search from now on: modify() records it, but a loaded index keeps the ef it was
        loaded with, so the client is closed and opened again (outside the clock)."""
        if ef == getattr(self, "ef", None):
            return
        self.col.modify(configuration={"hnsw": {"ef_search": ef}})
        close_client(self.client)
        self.client = client(self.work.path)
        self.col, self.ef = self.client.get_collection("bench", embedding_function=None), ef

    def searcher(self, k, ef, sel=None, query=None, mode=None):
        """query of one (1, d) block, ids only, at ef_search = max(ef, k)."""
        self.set_ef(max(ef, k))
        t, q_ = bound(query), self.col.query
        where = None if t is None else {"bucket": {"$lt": t}}
        return lambda q: q_(query_embeddings=q, n_results=k, where=where, include=[])

    def ids(self, out) -> np.ndarray:
        """The string ids of the one query, as row numbers."""
        return _ids(out)

    def close(self) -> None:
        """Closes the client and deletes its folder."""
        if hasattr(self, "client"):
            close_client(self.client)
            self.work.remove()


class Products(ProductAdapter):
    """The catalogue in one cosine collection (category in the metadata, the text as documents):
    vector and vector + category filter; no lexical or hybrid (see NO_TEXT)."""

    name = "chroma"
    label = "Chroma (HNSW, where filter)"
    note = "no BM25 (where_document $contains is an unranked substring filter)"

    def load(self, prod) -> None:
        """Adds every product (documents included, as a real Chroma user would)."""
        cols = product_columns(prod)
        self.client = client(self.work.path)
        hnsw = {"space": "cosine", "max_neighbors": 16, "ef_construction": 100, "ef_search": 100}
        self.col = self.client.create_collection("products", configuration={"hnsw": hnsw}, embedding_function=None)
        add_batches(self.client, self.col, [str(i) for i in cols["id"]], cols["embedding"],
                    [{"category": c} for c in cols["category"]], cols["text"])

    def searchers(self, prod, k: int) -> dict:
        """vector and vector + filter (a `where` on the category)."""
        qv, col = prod.query_vectors, self.col

        def run(i, where=None):
            out = col.query(query_embeddings=qv[i:i + 1], n_results=k, where=where, include=["distances"])
            return out["ids"][0], [-d for d in out["distances"][0]]
        self.unsupported = {q + f: NO_TEXT for q in ("lexical", "hybrid") for f in ("", " + filter")}
        return {"vector": run, "vector + filter": lambda i: run(i, prod.filter)}

    def close(self) -> None:
        """Closes the client and deletes its folder."""
        if hasattr(self, "client"):
            close_client(self.client)
        super().close()
