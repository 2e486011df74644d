"""LanceDB (embedded, lancedb.connect on a local folder) as a read-only comparison row: a table
created from an Arrow table, an HNSW vector index (IVF_HNSW_FLAT with one partition: a plain
HNSW graph over the float vectors, no quantisation), `.where(filter, prefilter=True)`, its
native full-text index (BM25; English stemming, lower case, no stop words) and its hybrid query
(vector + full text, fused by its default RRF reranker: no embedding model, works offline)."""
from __future__ import annotations

import numpy as np

from hybridsearch.bench.adapters.base import VectorAdapter
from hybridsearch.bench.adapters.databases import ProductAdapter, Workdir, bound, product_columns, quiet

DISTANCE = {"l2": "l2", "ip": "dot", "cosine": "cosine"}


def table(path: str, name: str, columns: dict):
    """lancedb.connect(path).create_table(name, an Arrow table of `columns`; a 2-d array
    becomes the FixedSizeList column `vector`)."""
    quiet()
    import lancedb
    import pyarrow as pa
    arrays = {}
    for k, v in columns.items():
        if isinstance(v, np.ndarray) and v.ndim == 2:
            arrays["vector"] = pa.FixedSizeListArray.from_arrays(pa.array(v.ravel()), v.shape[1])
        else:
            arrays[k] = pa.array(v)
    db = lancedb.connect(path)
    return db, db.create_table(name, pa.table(arrays))


def hnsw(tbl, distance: str, m: int, ef_construct: int) -> None:
    """An IVF_HNSW_FLAT index with one partition on `vector`."""
    from lancedb.index import IvfHnswFlat
    tbl.create_index("vector", config=IvfHnswFlat(distance_type=distance, num_partitions=1, m=m,
                                                  ef_construction=ef_construct))


def _ids(t) -> list:
    return t.column("id").to_pylist()


class Vectors(VectorAdapter):
    """LanceDB: search(q).distance_type(...).ef(ef).limit(k), filtered with
    .where("bucket < t", prefilter=True)."""

    name = "lancedb"
    label = "LanceDB (IVF_HNSW_FLAT, 1 partition)"
    query_rows = False

    def build(self) -> None:
        """The table (id, bucket, vector) and its HNSW index."""
        X = self.X
        self.work = Workdir()
        bucket = self.bucket if self.bucket is not None else np.zeros(len(X), np.int64)
        self.db, self.tbl = table(self.work.path, "bench", {"id": np.arange(len(X)), "bucket": bucket, "vector": X})
        hnsw(self.tbl, DISTANCE[self.metric], self.cfg.m, self.cfg.ef_construct)

    def finish(self) -> None:
        """Says how it was built."""
        self.note = f"lancedb, IVF_HNSW_FLAT 1 partition, m={self.cfg.m}, ef_construction={self.cfg.ef_construct}"

    def searcher(self, k, ef, sel=None, query=None, mode=None):
        """One query -> an Arrow table of ids (the id column and Lance's distance)."""
        t, tbl, dist = bound(query), self.tbl, DISTANCE[self.metric]
        flt = None if t is None else f"bucket < {t}"

        def search(q):
            b = tbl.search(q).distance_type(dist).ef(max(ef, k)).limit(k).select(["id", "_distance"])
            return (b if flt is None else b.where(flt, prefilter=True)).to_arrow()
        return search

    def ids(self, out) -> np.ndarray:
        """The id column."""
        return np.array(_ids(out), dtype=np.int64)

    def close(self) -> None:
        """Drops the handles and deletes the folder."""
        if hasattr(self, "tbl"):
            self.tbl = self.db = None
            self.work.remove()


class Products(ProductAdapter):
    """The catalogue in one table: HNSW (cosine) on the embeddings, a native FTS index (BM25)
    on the text: lexical, vector and hybrid (RRF reranker), each optionally prefiltered."""

    name = "lancedb"
    label = "LanceDB (FTS + IVF_HNSW_FLAT, hybrid RRF)"
    note = "native FTS (English stem, lower case, no stop words); hybrid = its default RRF reranker"

    def load(self, prod) -> None:
        """Table, vector index, FTS index."""
        from lancedb.index import FTS
        cols = product_columns(prod)
        self.db, self.tbl = table(self.work.path, "products", {"id": cols["id"], "category": cols["category"],
                                                               "text": cols["text"], "vector": cols["embedding"]})
        hnsw(self.tbl, "cosine", 16, 100)
        self.tbl.create_index("text", config=FTS(with_position=False, stem=True, language="English",
                                                 lower_case=True, remove_stop_words=False))

    def searchers(self, prod, k: int) -> dict:
        """Every query kind with and without `category = '...'` (prefilter)."""
        tbl, qs, qv = self.tbl, prod.queries, prod.query_vectors
        cat = prod.filter["category"].replace("'", "''")

        def run(b, flt, score):
            t = (b if flt is None else b.where(flt, prefilter=True)).limit(k).to_arrow()
            return [str(i) for i in _ids(t)], t.column(score).to_pylist()

        def lexical(i, flt=None):
            return run(tbl.search(qs[i], query_type="fts").select(["id", "_score"]), flt, "_score")

        def vector(i, flt=None):
            return run(tbl.search(qv[i]).distance_type("cosine").ef(100).select(["id", "_distance"]), flt, "_distance")

        def hybrid(i, flt=None):
            b = tbl.search(query_type="hybrid").vector(qv[i]).text(qs[i]).distance_type("cosine").ef(100)
            return run(b.select(["id"]), flt, "_relevance_score")
        flt = f"category = '{cat}'"
        return {"lexical": lexical, "lexical + filter": lambda i: lexical(i, flt), "vector": vector,
                "vector + filter": lambda i: vector(i, flt), "hybrid": hybrid,
                "hybrid + filter": lambda i: hybrid(i, flt)}

    def close(self) -> None:
        """Drops the handles and deletes the folder."""
        self.tbl = self.db = None
        super().close()
