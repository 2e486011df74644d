"""Milvus Lite (pymilvus MilvusClient on a local .db file, milvus-lite) as a read-only comparison
row: an explicit schema, an HNSW index on the vector field, boolean filter expressions, BM25
full-text search (a VARCHAR field with an analyzer, a BM25 Function into a sparse vector field
with a SPARSE_INVERTED_INDEX) and hybrid search with its RRFRanker. After the insert: flush,
compact, load; searches use consistency level "Eventually" (nothing is written while they run). The client is closed at the
end, which also stops the milvus-lite server it started."""
from __future__ import annotations

import os
import time

import numpy as np

from hybridsearch.bench.adapters.base import VectorAdapter
from hybridsearch.bench.adapters.databases import ProductAdapter, Workdir, bound, product_columns

METRIC = {"l2": "L2", "ip": "IP", "cosine": "COSINE"}
# standard tokenizer, lower case, English Snowball stemming, no stop words: our analysis
ANALYZER = {"tokenizer": "standard", "filter": ["lowercase", {"type": "stemmer", "language": "english"}]}
BATCH = 5000
READ = "Eventually"  # the benchmark reads after the flush: no need to wait for newer writes


def connect(path: str):
    """A MilvusClient on the Milvus Lite file `path` (a local file name is what selects Lite)."""
    from pymilvus import MilvusClient
    return MilvusClient(os.path.join(path, "bench.db"))


def insert_batches(client, name: str, columns: dict) -> None:
    """insert of row dicts, BATCH at a time, then flush and load (searchable from here on)."""
    keys, n = list(columns), len(next(iter(columns.values())))
    for lo in range(0, n, BATCH):
        client.insert(name, [{k: columns[k][i] for k in keys} for i in range(lo, min(n, lo + BATCH))])
    client.flush(name)
    compact(client, name)
    client.load_collection(name)


def compact(client, name: str, timeout_s: float = 600.0) -> None:
    """Merges the flushed segments (one per insert batch) and waits for it: a search visits
    every segment, and uncompacted ones cost Milvus Lite several times its compacted QPS."""
    job, t0 = client.compact(name), time.monotonic()
    while str(client.get_compaction_state(job)) != "Completed" and time.monotonic() - t0 < timeout_s:
        time.sleep(0.2)


def index_kind(client, name: str, field: str) -> str:
    """The index type Milvus reports for `field` (Lite may serve another than asked for)."""
    try:
        return str(client.describe_index(name, field).get("index_type"))
    except Exception:  # noqa: BLE001 -- only a note
        return "?"


def hits(res) -> tuple:
    """(ids as strings, scores) of a one-query search result."""
    return [str(h["id"]) for h in res[0]], [float(h["distance"]) for h in res[0]]


class Vectors(VectorAdapter):
    """Milvus Lite: HNSW (M, efConstruction) on a FLOAT_VECTOR field; search param ef; a filter
    is the expression "bucket < t"."""

    name = "milvus-lite"
    label = "Milvus Lite (HNSW)"
    query_rows = False

    def build(self) -> None:
        """Schema (id, bucket, vec), index, insert, flush, load."""
        from pymilvus import DataType
        X, cfg = self.X, self.cfg
        self.work = Workdir()
        self.client = c = connect(self.work.path)
        s = c.create_schema(auto_id=False, enable_dynamic_field=False)
        s.add_field("id", DataType.INT64, is_primary=True)
        s.add_field("bucket", DataType.INT64)
        s.add_field("vec", DataType.FLOAT_VECTOR, dim=X.shape[1])
        ip = c.prepare_index_params()
        ip.add_index("vec", index_type="HNSW", metric_type=METRIC[self.metric],
                     params={"M": cfg.m, "efConstruction": cfg.ef_construct})
        c.create_collection("bench", schema=s, index_params=ip)
        bucket = self.bucket if self.bucket is not None else np.zeros(len(X), np.int64)
        insert_batches(c, "bench", {"id": np.arange(len(X)).tolist(), "bucket": bucket.astype(np.int64).tolist(),
                                    "vec": list(X)})

    def finish(self) -> None:
        """Says which index Milvus Lite reports."""
        self.note = f"milvus-lite, index {index_kind(self.client, 'bench', 'vec')}, M={self.cfg.m}"

    def searcher(self, k, ef, sel=None, query=None, mode=None):
        """search of one vector, ids only, params ef = max(ef, k)."""
        t, search = bound(query), self.client.search
        params = {"params": {"ef": max(ef, k)}}
        flt = "" if t is None else f"bucket < {t}"
        return lambda q: search("bench", data=[q], anns_field="vec", limit=k, filter=flt,
                                search_params=params, output_fields=["id"], consistency_level=READ)

    def ids(self, out) -> np.ndarray:
        """The ids of the one query."""
        return np.array([h["id"] for h in out[0]], dtype=np.int64)

    def close(self) -> None:
        """Closes the client (stopping its Lite server) and deletes the file."""
        if hasattr(self, "client"):
            self.client.close()
            self.work.remove()


class Products(ProductAdapter):
    """The catalogue with BM25 over the text (Milvus' own analyzer: standard tokenizer, lower
    case, English stemmer), HNSW (cosine) over the embeddings and the category as a VARCHAR:
    lexical, vector and hybrid (RRF, k=60, each side asked for 10 * k), each optionally filtered."""

    name = "milvus-lite"
    label = "Milvus Lite (BM25 function + HNSW, RRFRanker)"
    note = "hybrid = RRFRanker(60) over the BM25 and the vector request"

    def load(self, prod) -> None:
        """Schema with the BM25 function, both indexes, insert, flush, load."""
        from pymilvus import DataType, Function, FunctionType
        cols = product_columns(prod)
        self.client = c = connect(self.work.path)
        s = c.create_schema(auto_id=False, enable_dynamic_field=False)
        s.add_field("id", DataType.INT64, is_primary=True)
        s.add_field("category", DataType.VARCHAR, max_length=64)
        s.add_field("text", DataType.VARCHAR, max_length=8192, enable_analyzer=True, analyzer_params=ANALYZER)
        s.add_field("vec", DataType.FLOAT_VECTOR, dim=cols["embedding"].shape[1])
        s.add_field("sparse", DataType.SPARSE_FLOAT_VECTOR)
        s.add_function(Function(name="bm25", function_type=FunctionType.BM25, input_field_names=["text"],
                                output_field_names=["sparse"]))
        ip = c.prepare_index_params()
        ip.add_index("vec", index_type="HNSW", metric_type="COSINE", params={"M": 16, "efConstruction": 100})
        ip.add_index("sparse", index_type="SPARSE_INVERTED_INDEX", metric_type="BM25",
                     params={"bm25_k1": 1.2, "bm25_b": 0.75})
        c.create_collection("products", schema=s, index_params=ip)
        insert_batches(c, "products", {"id": cols["id"].tolist(), "category": cols["category"], "text": cols["text"],
                                       "vec": list(cols["embedding"])})

    def searchers(self, prod, k: int) -> dict:
        """Every query kind with and without `category == "..."`."""
        from pymilvus import AnnSearchRequest, RRFRanker
        c, qs, qv = self.client, prod.queries, prod.query_vectors
        cat = prod.filter["category"].replace('"', '\\"')
        vp = {"params": {"ef": 100}}

        def lexical(i, flt=""):
            return hits(c.search("products", data=[qs[i]], anns_field="sparse", limit=k, filter=flt,
                                 search_params={"params": {}}, output_fields=["id"],
                                 consistency_level=READ))

        def vector(i, flt=""):
            return hits(c.search("products", data=[qv[i]], anns_field="vec", limit=k, filter=flt,
                                 search_params=vp, output_fields=["id"], consistency_level=READ))

        def hybrid(i, flt=""):
            reqs = [AnnSearchRequest(data=[qs[i]], anns_field="sparse", param={"params": {}}, limit=10 * k, expr=flt),
                    AnnSearchRequest(data=[qv[i]], anns_field="vec", param=vp, limit=10 * k, expr=flt)]
            return hits(c.hybrid_search("products", reqs, ranker=RRFRanker(60), limit=k, output_fields=["id"],
                                        consistency_level=READ))
        flt = f'category == "{cat}"'
        return {"lexical": lexical, "lexical + filter": lambda i: lexical(i, flt), "vector": vector,
                "vector + filter": lambda i: vector(i, flt), "hybrid": hybrid,
                "hybrid + filter": lambda i: hybrid(i, flt)}

    def close(self) -> None:
        """Closes the client (stopping its Lite server) and deletes the file."""
        if hasattr(self, "client"):
            self.client.close()
        super().close()
