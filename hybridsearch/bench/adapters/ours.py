"""Ours, as the benchmarks measure it: a DocumentArray on any storage (what users get), the raw
HNSW graph (hybridsearch.engine.graph.HnswGraph) and the exact kernel
(hybridsearch.engine.exact.ExactIndex). Facts about a collection come from da.stats()."""
from __future__ import annotations

import os
import uuid

import numpy as np

import hybridsearch as hs
from hybridsearch.bench.adapters import remote
from hybridsearch.bench.adapters.base import TextAdapter, VectorAdapter
from hybridsearch.engine.analysis import forget_stems
from hybridsearch.engine.exact import ExactIndex
from hybridsearch.engine.graph import PLAIN, TWO_HOP, HnswGraph

GRAPH_OPTIONS = ("m", "ef_construct", "ef")
EXACT_STORAGES = ("memory", "sqlite")  # storages without a graph: its options do not apply


# ------------------------------------------------------------------ schemas
def model(name: str, fields: dict) -> type:
    """A Document subclass named `name` with `fields` (name -> annotation, or (annotation,
    default)); built at run time so that every benchmark schema comes from one place."""
    annotations, defaults = {}, {}
    for field, spec in fields.items():
        annotations[field] = spec[0] if isinstance(spec, tuple) else spec
        if isinstance(spec, tuple):
            defaults[field] = spec[1]
    return type(name, (hs.Document,), {"__annotations__": annotations, "__module__": __name__, **defaults})


def vector_model(dim: int) -> type:
    """Rows of a vector set: the vector `v`, a `bucket` column to filter on and a `price` to update."""
    return model("Item", {"bucket": (int, 0), "price": (int, 0), "v": hs.Vector[dim]})


def product_model(dim: int) -> type:
    """The products of hybridsearch.bench.corpora.products."""
    return model("Product", {"title": hs.Text, "description": (hs.Text, ""), "category": hs.Keyword,
                             "price": (int, 0), "average_rating": (float, 0.0), "embedding": hs.Vector[dim]})


def text_model(fields) -> type:
    """Documents with one hs.Text field per name in `fields`."""
    return model("Texts", {f: hs.Text for f in fields})


# ------------------------------------------------------------------ collections
_remote_indexes: dict = {}  # id(da) -> (url, index) to drop when the benchmark closes it


def open_collection(storage: str, schema: type, options: dict, tmp: str):
    """A fresh DocumentArray on `storage`, with a file under `tmp` where the storage needs one
    ("hnsw+path" is hnsw with its files) and a fresh index on a remote node (options["hosts"]);
    graph options are dropped for storages without a graph."""
    options = dict(options)
    if storage == "hnsw+path":
        storage, options["path"] = "hnsw", os.path.join(tmp, f"hnsw-{uuid.uuid4().hex[:8]}")
    if storage in ("sqlite", "annlite"):
        options.setdefault("path", os.path.join(tmp, f"{storage}-{uuid.uuid4().hex[:8]}"
                                                + (".db" if storage == "sqlite" else "")))
    if storage == "qdrant":  # embedded qdrant-edge: its shard in a folder under tmp
        options.setdefault("path", os.path.join(tmp, f"qdrant-{uuid.uuid4().hex[:8]}"))
    if storage in remote.REMOTE:
        options = {**remote.collection_options(options.pop("hosts"), storage), **options}
    if storage in EXACT_STORAGES:
        for key in GRAPH_OPTIONS:
            options.pop(key, None)
    da = hs.DocumentArray(schema, storage=storage, **options)
    if storage == "weaviate":
        _remote_indexes[id(da)] = (options["url"], options["collection"], storage)
    elif storage in remote.REMOTE:
        _remote_indexes[id(da)] = (options["hosts"], options["index"])
    return da


def close_collection(da) -> None:
    """Closes a collection of open_collection, dropping its index on a remote node."""
    where = _remote_indexes.pop(id(da), None)
    da.close()
    if where:
        remote.drop_index(*where)


def extend_in_batches(da, docs: list, batch: int = 10000) -> None:
    """da.extend over `docs` in batches (one call per batch, as a feeding application would)."""
    for a in range(0, len(docs), batch):
        da.extend(docs[a:a + batch])


def extend_columns_in_batches(da, columns: dict, batch: int = 10000) -> None:
    """da.extend_columns over `columns` (name -> list or array, equal lengths) in row batches
    (one call per batch: the columnar way in, without a document object per row)."""
    n = len(columns["id"])
    for a in range(0, n, batch):
        da.extend_columns({name: col[a:a + batch] for name, col in columns.items()})


def vector_docs(X: np.ndarray, bucket: np.ndarray | None = None) -> list:
    """Documents of vector_model: id = row number as a string."""
    b = bucket.tolist() if bucket is not None else [0] * len(X)
    return [{"id": str(i), "bucket": b[i], "price": i % 1000, "v": X[i]} for i in range(len(X))]


def int_ids(results) -> np.ndarray:
    """The ids of a find() result (row numbers as strings) as int64."""
    return np.fromiter((int(i) for i in results.ids), dtype=np.int64, count=len(results.ids))


class Collection(VectorAdapter):
    """A DocumentArray on `storage` built by extend and searched with find(vector=q, limit=k,
    ef=ef, filter=...): the API users get."""

    query_rows = False

    def __init__(self, storage: str = "hnsw", name: str = "ours-api", tmp: str = "/tmp", **options) -> None:
        super().__init__()
        self.storage, self.name, self.tmp, self.options = storage, name, tmp, options
        self.label = f'find() on storage="{storage}"'

    def prepare(self, X, bucket, metric, cfg) -> None:
        """The documents as dicts (the caller's data: made before the clock; validating them counts)."""
        self.docs = vector_docs(X, bucket)
        self.schema = vector_model(X.shape[1])
        self.opts = {"metric": metric, "m": cfg.m, "ef_construct": cfg.ef_construct, **self.options}
        if self.storage == "hnsw" and cfg.threads:
            self.opts.setdefault("threads", cfg.threads)

    def build(self) -> None:
        """A fresh collection filled by extend in batches of 10,000."""
        self.da = open_collection(self.storage, self.schema, self.opts, self.tmp)
        extend_in_batches(self.da, self.docs)

    def finish(self) -> None:
        """The graph's bytes from da.stats() (None for a storage without one)."""
        del self.docs
        stats = self.da.stats()
        self.graph_bytes = stats.get("graph_bytes")
        self.note = "RSS includes the stored documents and columns"

    def searcher(self, k: int, ef: int, sel=None, query: dict | None = None, mode=None):
        """find(vector=q, limit=k, ef=ef[, filter=query])."""
        find = self.da.find
        if query is None:
            return lambda q: find(vector=q, limit=k, ef=ef)
        return lambda q: find(vector=q, limit=k, ef=ef, filter=query)

    def ids(self, out) -> np.ndarray:
        """The result's ids as row numbers."""
        return int_ids(out)

    def plan(self, k: int, ef: int, q: np.ndarray, query: dict) -> str | None:
        """The strategy the storage's planner picks for this filter (stats()["last_plan"])."""
        self.da.find(vector=q, limit=k, ef=ef, filter=query)
        p = self.da.stats().get("last_plan")
        return None if p is None else f"{p['strategy']} (ef {p['ef']})"

    def close(self) -> None:
        """Closes the collection (dropping a remote index)."""
        close_collection(self.da)
        self.da = None


class Graph(VectorAdapter):
    """The raw native HNSW graph (HnswGraph) over the caller's float32 block; filtered search
    by bitset, walking PLAIN (disallowed nodes skipped in the results) or TWO_HOP."""

    def __init__(self, quantization: str = "none", seed: int = 20240607) -> None:
        super().__init__()
        self.quantization, self.seed = quantization, seed
        self.name = "ours-raw" if quantization == "none" else f"ours-raw-{quantization}"
        self.label = f"raw kernel HnswGraph.search{' (' + quantization + ')' if quantization != 'none' else ''}"
        self.kind = "raw"
        self.note = "graph = HnswGraph.nbytes; vectors stay in the caller's block"

    def build(self) -> None:
        """HnswGraph over the block's rows (node id = row), inserted on cfg.threads threads."""
        X, cfg = self.X, self.cfg
        self.index = HnswGraph(X.shape[1], self.metric, cfg.m, cfg.ef_construct, seed=self.seed,
                               quantization=self.quantization)
        self.index.reserve(len(X))
        self.index.add(X, np.arange(len(X), dtype=np.int64), cfg.threads)

    def finish(self) -> None:
        """The graph's bytes (HnswGraph.nbytes)."""
        self.graph_bytes = self.index.nbytes

    def variants(self) -> dict:
        """Both filtered walks of the float32 graph (PLAIN, TWO_HOP); none for int8."""
        if self.quantization != "none":
            return {}
        return {f"{self.name} plain": PLAIN, f"{self.name} two-hop": TWO_HOP}

    def searcher(self, k: int, ef: int, sel=None, query=None, mode=None):
        """HnswGraph.search of a (1, d) block (filtered: the selection's bitset and walk mode)."""
        X, search = self.X, self.index.search
        if sel is None:
            return lambda q: search(X, q, k, ef)
        bits = sel.bits
        return lambda q: search(X, q, k, ef, bits=bits, mode=mode)

    def ids(self, out) -> np.ndarray:
        """The rows found for the block's one query (-1 padded)."""
        return np.asarray(out[1][0], dtype=np.int64)


def exact(X: np.ndarray, metric: str, k: int):
    """Our exact kernel as a function of a (nq, d) query block -> (nq, k) ids (the matrix is
    prepared once, as a storage keeps it)."""
    index = ExactIndex(X, metric)
    return lambda Q: index.search(Q, k)[1]


class Texts(TextAdapter):
    """A DocumentArray on `storage` with one hs.Text field per field (or the documents given,
    e.g. products with their vectors, under `schema`), searched with find(text=q, limit=k)."""

    def __init__(self, storage: str = "memory", name: str = "ours", schema: type | None = None,
                 tmp: str = "/tmp", join: bool = False, searched: bool = True, **options) -> None:
        self.storage, self.name, self.schema, self.tmp, self.options = storage, name, schema, tmp, options
        self.searched = searched
        self.join = join  # the fields joined into one "text" field (the work a one-field library does)
        self.label = f"ours (storage={storage!r}, {'1 field' if join else 'best field'})"

    def build(self, ids: list, fields: dict, docs: list | None = None) -> None:
        """A fresh collection of the documents (made from the fields unless a schema was given)."""
        if self.join:
            fields = {"text": [" ".join(parts) for parts in zip(*fields.values())]}
        schema = self.schema or text_model(fields)
        if docs is None or self.schema is None:
            names = list(fields)
            docs = [{"id": d, **{f: fields[f][j] for f in names}} for j, d in enumerate(ids)]
        if getattr(self, "da", None) is not None:  # built before (a warm-up): that collection goes first
            self.close()
        forget_stems()  # each build stems its words, as a fresh process would: none rides on an earlier row's memo
        self.da = open_collection(self.storage, schema, self.options, self.tmp)
        extend_in_batches(self.da, docs)

    def searchers(self, queries: list, k: int) -> dict:
        """The adapter's name -> find(text=q, limit=k).ids."""
        find = self.da.find
        return {self.name: lambda i: find(text=queries[i], limit=k).ids}

    def close(self) -> None:
        """Closes the collection (dropping a remote index)."""
        close_collection(self.da)
        self.da = None
