"""The two ways to reach Qdrant, behind one small interface the storage uses.

- `EdgeEngine`: qdrant-edge, Qdrant's own Rust engine embedded in the process (one shard in a
  directory: `path=`). Writes go to its write-ahead log and are visible at once.
- `ClientEngine`: qdrant-client, to a Qdrant server (`url=`) or to the client's local mode
  (`url=":memory:"` or `url="local:DIR"`: pure Python, for tests of this code path).

Both take the neutral filter trees of filters.py and give back records as
`Rec(uuid, payload, vectors, score)`. Payload indexes: one per filterable field (Keyword,
Integer with range and lookup (bools too: stored as 0 / 1), Float), `hs_id` and `hs_present` as keywords, `hs_seq`
as an integer with range (filter-only finds are ordered by it), and one text index with
BM25 scoring per hs.Text field.
"""
from __future__ import annotations

import os
import threading
from typing import NamedTuple, Optional

import numpy as np

from hybridsearch.document import Kind, Schema
from hybridsearch.errors import ConfigError
from hybridsearch.storages.open_mode import settle
from hybridsearch.storages.remote.base import ID_FIELD, PRESENT_FIELD, SEQ_FIELD
from hybridsearch.storages.remote.qdrant import filters as F

RAW = "hs_raw"  # cosine vectors are stored normalised: the original is kept beside, unindexed


class Layout(NamedTuple):
    """The Qdrant vectors of a schema: `dense` and `multi` as (field, dim, metric), `sparse` the
    sparse field names. Every field is a Qdrant named vector of its own name; a cosine field
    (dense or multi) is stored normalised by Qdrant, so its original rides beside as an
    unindexed vector `raw(field)`: "hs_raw" for the first dense field (the one-field format of
    shards written before named fields), "hs_raw_<field>" for the others. Multi-vector fields
    have no HNSW graph (m=0): Qdrant scans them exactly with its MaxSim comparator."""

    dense: tuple = ()
    sparse: tuple = ()
    multi: tuple = ()

    @classmethod
    def of(cls, schema: Schema, metrics: dict) -> "Layout":
        return cls(tuple((n, s.dim, metrics[n]) for n, s in schema.vectors.items()), tuple(schema.sparse),
                   tuple((n, s.dim, metrics[n]) for n, s in schema.multi.items()))

    def raw(self, field: str) -> str:
        return RAW if self.dense and field == self.dense[0][0] else f"{RAW}_{field}"

    def stored(self, field: str) -> str:
        """The vector name holding the field's value as written."""
        for name, _, metric in self.dense + self.multi:
            if name == field:
                return self.raw(field) if metric == "cosine" else field
        return field

    def keys(self) -> list:
        """Every vector name a read of the originals asks for."""
        return [self.stored(n) for n, _, _ in self.dense] + list(self.sparse) + [self.stored(n) for n, _, _ in self.multi]

    def empty(self) -> bool:
        return not (self.dense or self.sparse or self.multi)


class Rec(NamedTuple):
    """One point as read back: its uuid, payload, named vectors ({} when not asked) and score."""

    id: str
    payload: dict
    vectors: dict
    score: float


def _vectors(v) -> dict:
    return v if isinstance(v, dict) else {}


def payload_kinds(schema: Schema) -> list:
    """(payload key, kind name) of every payload index a collection of `schema` keeps."""
    out = [(ID_FIELD, "keyword"), (SEQ_FIELD, "seq"), (PRESENT_FIELD, "keyword")]
    names = {Kind.KEYWORD: "keyword", Kind.INT: "integer", Kind.FLOAT: "float", Kind.BOOL: "integer", Kind.TEXT: "text"}
    for spec in schema.fields.values():
        if spec.kind in names:
            out.append((spec.name, names[spec.kind]))
    return out


class Engine:
    """What both engines share."""

    layout: Layout = Layout()

    def _light(self, full: bool) -> tuple:
        return self._read("all" if full else "vector")

    def _read(self, read: str) -> tuple:
        """(with_payload, with_vector) of a read: "all" (every field and vector), "ids" (`hs_id`
        and `hs_seq`) or "vector" (those and the original value of every vector field: `hs_raw`
        for cosine, which Qdrant keeps normalised)."""
        if read == "all":
            return True, True
        if read == "ids" or self.layout.empty():
            return [ID_FIELD, SEQ_FIELD], False
        return [ID_FIELD, SEQ_FIELD], self.layout.keys()

    def _query(self, v, field: str):
        """A query of `field` as the client takes it: floats, a sparse vector or rows of floats."""
        if field in self.layout.sparse:
            idx, val = v
            return self._sparse([int(k) for k in idx], [float(w) for w in val])
        arr = np.asarray(v, dtype=np.float64)
        return arr.tolist()

    def _vectors_of(self, vectors: dict) -> dict:
        """A point's vectors as the client takes them: a sparse value, written (and recorded by
        intent.py) as {"indices": [...], "values": [...]}, becomes the client's sparse vector."""
        return {k: self._sparse(v["indices"], v["values"]) if isinstance(v, dict) else v for k, v in vectors.items()}

    def unindexed(self) -> int:
        """Points whose vectors no HNSW index holds yet (embedded; a server indexes on its own)."""
        return 0


class EdgeEngine(Engine):
    """One qdrant-edge shard in a directory."""

    edge = True

    def __init__(self, path: str, schema: Schema, layout: Layout, m: int, ef_construct: int) -> None:
        import qdrant_edge as q
        self.q = q
        self.path = path
        self.layout = layout
        # our own files (the schema's fingerprint, written first) do not make a shard
        fresh = not os.path.isdir(path) or all(n.startswith("hybridsearch-") for n in os.listdir(path))
        config = q.EdgeConfig(vectors=self._vector_params(layout),
                              sparse_vectors={n: q.EdgeSparseVectorParams() for n in layout.sparse} or None,
                              hnsw_config=q.HnswIndexConfig(m=m, ef_construct=ef_construct, full_scan_threshold=10000))
        self.shard = q.EdgeShard.create(path, config) if fresh else q.EdgeShard.load(path)
        if fresh:
            for key, kind in payload_kinds(schema):
                self.shard.update(q.UpdateOperation.create_field_index(key, self._index(kind, schema, key)))

    def _vector_params(self, layout: Layout) -> dict:
        q = self.q
        if not layout.dense and not layout.multi:  # a shard needs a vector config: one unused dimension
            return {RAW: q.EdgeVectorParams(size=1, distance=q.Distance.Dot)}
        dists = {"cosine": q.Distance.Cosine, "ip": q.Distance.Dot, "l2": q.Distance.Euclid}
        flat = q.HnswIndexConfig(m=0, ef_construct=4, full_scan_threshold=10000)  # no graph: scanned
        out = {}
        for kind, fields in (("dense", layout.dense), ("multi", layout.multi)):
            multi = q.MultiVectorConfig(q.MultiVectorComparator.MaxSim) if kind == "multi" else None
            for name, dim, metric in fields:
                out[name] = q.EdgeVectorParams(size=dim, distance=dists[metric], multivector_config=multi,
                                               hnsw_config=flat if multi else None)
                if metric == "cosine":
                    out[layout.raw(name)] = q.EdgeVectorParams(size=dim, distance=q.Distance.Dot,
                                                               multivector_config=multi, hnsw_config=flat)
        return out

    def _sparse(self, indices: list, values: list):
        return self.q.SparseVector(indices, values)

    def _index(self, kind: str, schema: Schema, key: str):
        q = self.q
        if kind == "keyword":
            return q.PayloadSchemaType.Keyword
        if kind == "seq":
            return q.IntegerIndexParams(lookup=True, range=True, is_principal=True)
        if kind == "integer":
            return q.IntegerIndexParams(lookup=True, range=True)
        if kind == "float":
            return q.PayloadSchemaType.Float
        stem = schema.fields[key].analyzer.stemmer
        stemmer = q.SnowballParams(_snowball(q.SnowballLanguage, stem)) if stem else q.DisabledStemmer()
        return q.TextIndexParams(tokenizer=q.TokenizerType.Word, lowercase=schema.fields[key].analyzer.lowercase,
                                 stemmer=stemmer, scoring=True)

    def filter(self, tree):
        return F.build(tree, self.q, True)

    # ------------------------------------------------------------ writes
    def upsert(self, points: list) -> None:
        """points: (uuid, {vector name: list}, payload)."""
        q = self.q
        self.shard.update(q.UpdateOperation.upsert_points([q.Point(i, self._vectors_of(v), p) for i, v, p in points]))

    def delete(self, uuids: list) -> None:
        self.shard.update(self.q.UpdateOperation.delete_points(list(uuids)))

    def delete_where(self, tree) -> None:
        self.shard.update(self.q.UpdateOperation.delete_points_by_filter(F.selector(tree, self.q, True)))

    def optimize(self) -> None:
        self.shard.optimize()

    def unindexed(self) -> int:
        """Points whose vectors no HNSW index holds yet."""
        info = self.shard.info()
        return max(0, info.points_count - info.indexed_vectors_count) if self.layout.dense else 0

    def flush(self) -> None:
        self.shard.flush()

    def close(self) -> None:
        self.shard.close()

    # ------------------------------------------------------------- reads
    def retrieve(self, uuids: list, vectors: bool) -> list:
        recs = self.shard.retrieve(list(uuids), with_payload=True, with_vector=vectors)
        return [Rec(str(r.id), r.payload or {}, _vectors(r.vector), 0.0) for r in recs]

    def scroll(self, tree, limit: int, start: Optional[int], vectors: bool, desc: bool = False) -> list:
        """Up to `limit` matches ordered by hs_seq from `start` on (ascending, or descending):
        whole points with `vectors`, else only their `hs_id` and `hs_seq`."""
        q = self.q
        order = q.OrderBy(SEQ_FIELD, direction=q.Direction.Desc if desc else q.Direction.Asc, start_from=start)
        recs, _ = self.shard.scroll(q.ScrollRequest(limit=limit, filter=self.filter(tree), with_vector=vectors,
                                                    with_payload=True if vectors else [ID_FIELD, SEQ_FIELD],
                                                    order_by=order))
        return [Rec(str(r.id), r.payload or {}, _vectors(r.vector), 0.0) for r in recs]

    def count(self, tree) -> int:
        return self.shard.count(self.q.CountRequest(exact=True, filter=self.filter(tree)))

    def facet(self, key: str, tree, limit: int) -> list:
        res = self.shard.facet(self.q.FacetRequest(key, limit=limit, exact=True, filter=self.filter(tree)))
        return [(h.value, h.count) for h in res.hits]

    def _params(self, ef: Optional[int], exact: bool):
        return self.q.SearchParams(hnsw_ef=ef, exact=exact)

    def nearest(self, queries: list, limit: int, tree, ef: Optional[int], exact: bool, full: bool = True,
                field: Optional[str] = None) -> list:
        """Per query, the `limit` nearest matches of vector field `field` (None: the first dense
        one) with payloads and vectors, or (`full` False) with `hs_id`, `hs_seq` and the original
        values only."""
        q = self.q
        field = field or self.layout.dense[0][0]
        flt = self.filter(tree)
        payload, vectors = self._light(full)
        reqs = [q.QueryRequest(limit=limit, query=q.Query.Nearest(self._query(v, field), using=field),
                               filter=flt, params=self._params(ef, exact), with_payload=payload, with_vector=vectors)
                for v in queries]
        out = self.shard.query_batch(q.QueryBatchRequest(reqs))
        return [[Rec(str(p.id), p.payload or {}, _vectors(p.vector), p.score) for p in res] for res in out]

    def text(self, field: str, text: str, limit: int, tree, read: str = "all") -> list:
        """The `limit` best matches of `text` by the field's BM25 (score: Qdrant's BM25); `read`
        as `Engine._read` says."""
        q = self.q
        payload, vectors = self._read(read)
        res = self.shard.query(q.QueryRequest(limit=limit, query=q.TextQuery(field, text), filter=self.filter(tree),
                                              with_payload=payload, with_vector=vectors))
        return [Rec(str(p.id), p.payload or {}, _vectors(p.vector), p.score) for p in res]


def _snowball(languages, name: str):
    for member in languages.__members__.values() if hasattr(languages, "__members__") else []:
        if str(member).split(".")[-1].lower() == name.lower():
            return member
    return getattr(languages, name.capitalize())


class Serialized:
    """A client whose calls run one at a time: the local mode is not safe for a reader beside a
    writer (a server is)."""

    def __init__(self, client) -> None:
        self._client = client
        self._lock = threading.RLock()

    def __getattr__(self, name):
        attr = getattr(self._client, name)
        if not callable(attr):
            return attr

        def locked(*args, **kwargs):
            with self._lock:
                return attr(*args, **kwargs)
        return locked


class ClientEngine(Engine):
    """One collection through qdrant-client: a server at `url`, or the client's local mode."""

    edge = False

    def __init__(self, url: str, collection: str, schema: Schema, layout: Layout, m: int,
                 ef_construct: int, api_key: Optional[str], timeout: float, verify=True) -> None:
        from qdrant_client import QdrantClient, models
        self.q = models
        self.layout = layout
        self.collection = collection
        self.local = url == ":memory:" or url.startswith("local:")
        if url == ":memory:":
            self.client = Serialized(QdrantClient(location=":memory:"))
        elif url.startswith("local:"):
            self.client = Serialized(QdrantClient(path=url[len("local:"):]))
        else:
            # verify: a CA bundle or a bool, handed to the HTTP client (httpx) of the REST transport
            self.client = QdrantClient(url=url, api_key=api_key, timeout=int(max(1, timeout)), verify=verify,
                                       check_compatibility=False)
        exists = self.client.collection_exists(collection)
        try:
            settle(exists, f"Qdrant collection {collection!r}" + (" (the client's :memory: mode starts empty)"
                                                                   if url == ":memory:" else ""))
        except ConfigError:
            self.client.close()  # the local mode's lock on its directory, released for the next open
            raise
        if not exists:
            sparse = {n: models.SparseVectorParams() for n in layout.sparse} or None
            self.client.create_collection(collection, vectors_config=self._vector_params(layout, m, ef_construct),
                                          sparse_vectors_config=sparse)
            for key, kind in payload_kinds(schema):
                self.client.create_payload_index(collection, key, field_schema=self._index(kind, schema, key),
                                                 wait=True)

    def _vector_params(self, layout: Layout, m: int, ef_construct: int) -> dict:
        M = self.q
        if not layout.dense and not layout.multi:
            return {RAW: M.VectorParams(size=1, distance=M.Distance.DOT)}
        dists = {"cosine": M.Distance.COSINE, "ip": M.Distance.DOT, "l2": M.Distance.EUCLID}
        out = {}
        for kind, fields in (("dense", layout.dense), ("multi", layout.multi)):
            multi = M.MultiVectorConfig(comparator=M.MultiVectorComparator.MAX_SIM) if kind == "multi" else None
            graph = M.HnswConfigDiff(m=0) if multi else M.HnswConfigDiff(m=m, ef_construct=ef_construct)
            for name, dim, metric in fields:
                out[name] = M.VectorParams(size=dim, distance=dists[metric], hnsw_config=graph,
                                           multivector_config=multi)
                if metric == "cosine":
                    out[layout.raw(name)] = M.VectorParams(size=dim, distance=M.Distance.DOT, multivector_config=multi,
                                                           hnsw_config=M.HnswConfigDiff(m=0))
        return out

    def _sparse(self, indices: list, values: list):
        return self.q.SparseVector(indices=indices, values=values)

    def _index(self, kind: str, schema: Schema, key: str):
        M = self.q
        if kind == "keyword":
            return M.PayloadSchemaType.KEYWORD
        if kind in ("seq", "integer"):
            return M.IntegerIndexParams(type=M.IntegerIndexType.INTEGER, lookup=True, range=True,
                                        is_principal=kind == "seq")
        if kind == "float":
            return M.PayloadSchemaType.FLOAT
        an = schema.fields[key].analyzer
        if self.local:  # the local mode scores only the default tokenization (no stemmer, no options)
            return M.TextIndexParams(type=M.TextIndexType.TEXT, scoring=True)
        stemmer = M.SnowballParams(type=M.Snowball.SNOWBALL, language=an.stemmer) if an.stemmer else None
        return M.TextIndexParams(type=M.TextIndexType.TEXT, tokenizer=M.TokenizerType.WORD, lowercase=an.lowercase,
                                 stemmer=stemmer, scoring=True)

    def filter(self, tree):
        return F.build(tree, self.q, False)

    def _rec(self, p) -> Rec:
        return Rec(str(p.id), p.payload or {}, _vectors(p.vector), float(getattr(p, "score", 0.0) or 0.0))

    def upsert(self, points: list) -> None:
        M = self.q
        self.client.upsert(self.collection, [M.PointStruct(id=i, vector=self._vectors_of(v), payload=p) for i, v, p in points],
                           wait=True)

    def delete(self, uuids: list) -> None:
        self.client.delete(self.collection, points_selector=self.q.PointIdsList(points=list(uuids)), wait=True)

    def delete_where(self, tree) -> None:
        self.client.delete(self.collection, points_selector=self.q.FilterSelector(filter=F.selector(tree, self.q, False)), wait=True)

    def optimize(self) -> None:
        """A server optimizes in the background; nothing to run here."""

    def flush(self) -> None:
        """Writes are acknowledged with wait=True, applied when the call returns."""

    def close(self) -> None:
        self.client.close()

    def retrieve(self, uuids: list, vectors: bool) -> list:
        recs = self.client.retrieve(self.collection, list(uuids), with_payload=True, with_vectors=vectors)
        return [self._rec(r) for r in recs]

    def scroll(self, tree, limit: int, start: Optional[int], vectors: bool, desc: bool = False) -> list:
        M = self.q
        order = M.OrderBy(key=SEQ_FIELD, direction=M.Direction.DESC if desc else M.Direction.ASC, start_from=start)
        recs, _ = self.client.scroll(self.collection, scroll_filter=self.filter(tree), limit=limit,
                                     with_payload=True if vectors else [ID_FIELD, SEQ_FIELD], with_vectors=vectors,
                                     order_by=order)
        return [self._rec(r) for r in recs]

    def count(self, tree) -> int:
        return self.client.count(self.collection, count_filter=self.filter(tree), exact=True).count

    def facet(self, key: str, tree, limit: int) -> list:
        res = self.client.facet(self.collection, key, facet_filter=self.filter(tree), limit=limit, exact=True)
        return [(h.value, h.count) for h in res.hits]

    def nearest(self, queries: list, limit: int, tree, ef: Optional[int], exact: bool, full: bool = True,
                field: Optional[str] = None) -> list:
        M = self.q
        field = field or self.layout.dense[0][0]
        flt = self.filter(tree)
        payload, vectors = self._light(full)
        reqs = [M.QueryRequest(query=self._query(v, field), using=field, limit=limit, filter=flt,
                               params=M.SearchParams(hnsw_ef=ef, exact=exact), with_payload=payload,
                               with_vector=vectors) for v in queries]
        out = self.client.query_batch_points(self.collection, reqs)
        return [[self._rec(p) for p in res.points] for res in out]

    def text(self, field: str, text: str, limit: int, tree, read: str = "all") -> list:
        M = self.q
        payload, vectors = self._read(read)
        # the field is named by `using` (TextQueryInput holds only the words)
        res = self.client.query_points(self.collection, query=M.TextQuery(text=M.TextQueryInput(query=text)),
                                       using=field, limit=limit, query_filter=self.filter(tree),
                                       with_payload=payload, with_vectors=vectors)
        return [self._rec(p) for p in res.points]
