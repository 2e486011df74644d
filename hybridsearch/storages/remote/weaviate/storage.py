"""storage="weaviate": the DocumentArray API on a real Weaviate server, through weaviate-client v4.

One collection per DocumentArray (`collection=`), created from the schema on first open
(config.py): the schema's fields are properties, the one dense vector is the object's own
(self-provided) vector in an HNSW index, and the collection's description records the schema's
fingerprint. With several vector fields (API.md section 10) each is a named vector of its
field's name and metric: dense ones searched with nearVector's target vector, hs.MultiVector
ones as Weaviate multi-vectors (MaxSim). Weaviate's MaxSim is not API.md's (it sums dot
products for a dot and an l2-squared field alike, and another number for cosine): a multi-vector
find takes Weaviate's candidates only above `exact_max` matches and never for l2, and ranks by
exact MaxSim here (storages/fieldscores.py).
Weaviate has no sparse vectors: a schema with one is refused at open.
Weaviate takes only uuids as object ids: a document's object id is uuid5 of its id, and the id
itself is the `hs_id` property. What every remote storage shares (retries, redaction, rollback,
document <-> fields, exact rescoring, the retrieval primitives keyed by id) lives in ../base.py.

Semantics of API.md kept here:
- writes go through batch requests (an object with an existing uuid is replaced) and are
  visible on return; when the server refuses any object of a batch, or a request fails
  half-way, what the batch overwrote is put back and what it added is deleted;
- insertion order: the `hs_seq` property, kept by upserts of an existing id; filter-only finds
  page through the matches sorted by it (`hs_seq > last`, no deep offsets);
- vector scores are recomputed from the hits' stored vectors (Weaviate reports distances); a
  query asks for max(limit, ef) neighbours, so `ef` works per query; a filtered query that
  comes back short of min(limit, matches) is answered exactly here;
- lexical scores: Weaviate's multi-property BM25 is BM25F-like (one score over the properties
  together), ours is the best field's BM25: each text property is queried on its own and a
  document keeps its best score (times its `text_fields` weight). Per property, Weaviate's
  BM25 is Lucene's (k1 1.2, b 0.75, stopwords off); its `word` tokenization is lowercased runs
  of letters and digits, without stemming;
- text and hybrid finds run on the retrieval primitives and query/executor.py fuses them (sum,
  rrf, linear): Weaviate's relativeScore and ranked fusions normalise or rank its BM25F, which
  is not API.md's. Every lexical match is read with its score anyway (`_lexical`), so the
  candidates' BM25 costs no further request;
- API.md section 7: counts and value facets are aggregations (group by), range facets one
  filtered count per range; text counts / facets and sorted finds read the matches here
  (Weaviate sorts missing values first); writes by condition read the matches and write them
  as batches with the same rollback as extend.
"""
from __future__ import annotations

import logging
import time
import urllib.parse
from typing import Iterator, Optional

import numpy as np
import weaviate  # imported here, so that a missing client is the registry's "pip install" error

from hybridsearch.batch import Batch
from hybridsearch.document import Kind
from hybridsearch.errors import BackendError, UnsupportedError
from hybridsearch.query.candidates import Candidates
from hybridsearch.query.filters import MatchAll, Node
from hybridsearch.query.text import TextQuery
from hybridsearch.storages.fieldscores import field_scores
from hybridsearch.storages.remote.base import ID_FIELD, SEQ_FIELD, FieldCodec, RemoteStorage, userinfo_secrets
from hybridsearch.storages.remote.weaviate import config as C
from hybridsearch.storages.remote.weaviate import filters as F

log = logging.getLogger("hybridsearch")
PAGE = 2000    # objects per page when listing
GET = 500      # ids per fetch-by-id request
EXACT_INT = 2 ** 53  # the largest int a float64 holds with every smaller one


class WeaviateStorage(RemoteStorage):
    """One Weaviate collection, reached over REST and gRPC (weaviate-client v4)."""

    name = "weaviate"
    engine = "Weaviate"
    remote_modes = True  # mode= settled in _open_collection
    Config = C.WeaviateConfig
    # text_fields weights and operator="and" run per property; the query syntax (phrases, +/-,
    # prefix*) has no Weaviate BM25 equivalent and is refused by the array
    query_options = frozenset({"linear", "text_fields", "operator"})
    # API.md section 10: each dense field a named vector, each hs.MultiVector field a multi-vector
    # named vector (MaxSim); Weaviate has no sparse vectors
    named_vectors = True
    vector_kinds = frozenset({"multi"})

    def __init__(self, schema, config: C.WeaviateConfig) -> None:
        if schema.sparse:
            raise UnsupportedError(
                f"storage 'weaviate' does not hold hs.SparseVector fields ({schema.name}.{next(iter(schema.sparse))} "
                "is one): Weaviate has no sparse vectors (its BM25 scores text properties only); use storage "
                "qdrant or elasticsearch, or an embedded one (memory, hnsw, sqlite)")
        super().__init__(schema, config, [config.api_key] + userinfo_secrets(config.url), FieldCodec(schema))
        parts = urllib.parse.urlsplit(config.url)
        self.url = f"{parts.scheme}://{parts.hostname}:{parts.port or (443 if parts.scheme == 'https' else 80)}"
        self.collection_name = config.collection
        self.batch_size, self.max_results = config.batch_size, config.max_results
        self.m, self.ef_construct = config.m, config.ef_construct
        self.exact_max = config.exact_max
        # vector field -> "dense" / "multi"; `named`: one Weaviate named vector per field (else the
        # object's default vector holds the one dense field)
        self.kinds = {**{n: "dense" for n in schema.vectors}, **{n: "multi" for n in schema.multi}}
        self.named = C.named_layout(schema)
        self.ints = [s.name for s in schema.fields.values() if s.kind is Kind.INT]
        self.client = self.call("connect", self._connect, parts, config)
        try:
            self.col = self._open_collection()
            self.next_seq = self._first_seq() + 1
        except BaseException:
            self.close()
            raise

    def address(self) -> dict:
        return {"url": self.url, "collection": self.collection_name}

    # ------------------------------------------------------------ client
    def _connect(self, parts, config):
        from weaviate.classes.init import AdditionalConfig, Auth, Timeout
        auth = Auth.api_key(config.api_key) if config.api_key else None
        secure = parts.scheme == "https"
        t = float(config.timeout)
        return weaviate.connect_to_custom(
            http_host=parts.hostname, http_port=parts.port or (443 if secure else 80), http_secure=secure,
            grpc_host=parts.hostname, grpc_port=config.grpc_port, grpc_secure=secure, auth_credentials=auth,
            additional_config=AdditionalConfig(timeout=Timeout(init=min(t, 10.0), query=t, insert=t)))

    def failure(self, e):
        from weaviate.exceptions import WeaviateBaseError
        if not isinstance(e, WeaviateBaseError):
            return None
        status = getattr(e, "status_code", None)
        message = getattr(e, "message", None) or str(e)
        return status, f"{type(e).__name__}: {' '.join(str(message).split())[:500]}"

    def _open_collection(self):
        fp = C.fingerprint(self.schema, self.metrics if self.named else self.metric)
        name = self.collection_name
        exists = self.call("check the collection", self.client.collections.exists, name)
        self.settle_mode(exists, f"collection {name!r}")
        if not exists:
            col = self._create_collection(fp)
            if col is not None:
                return col
        return self._adopt_collection(fp)

    def _adopt_collection(self, fp: str):
        """The existing collection, after checking that hybridsearch made it for this schema (`fp`)."""
        name = self.collection_name
        col = self.client.collections.get(name)
        desc = self.call("read the collection", col.config.get).description or ""
        if not desc.startswith(C.META):
            raise BackendError(f"collection {name!r} exists and was not created by hybridsearch")
        if desc[len(C.META):] != fp:
            raise BackendError(f"collection {name!r} holds another schema or metric ({desc[len(C.META):]})")
        return col

    def _create_collection(self, fp: str):
        """The new collection, or None when it exists after all (RemoteStorage.create_or_find)."""
        return self.create_or_find("create the collection", lambda: self.client.collections.create(
            self.collection_name, description=C.META + fp, properties=C.properties(self.schema),
            vector_config=C.vector_config(self.schema, self.metrics, self.metric, self.m, self.ef_construct,
                                          self.ef),
            inverted_index_config=C.inverted_config()), "already exists")

    def drop(self) -> None:
        """Deletes the collection and everything in it from the server."""
        self.call("delete the collection", self.client.collections.delete, self.collection_name)

    # ----------------------------------------------------------- records
    def _vname(self, field: str) -> str:
        """The Weaviate vector holding a vector field."""
        return field if self.named else "default"

    def _record(self, obj) -> dict:
        """The engine fields of a returned object: its properties (absent ones left out) and,
        when they were asked for, the vectors it holds under their fields' names."""
        rec = {k: v for k, v in obj.properties.items() if v is not None}
        vectors = obj.vector if isinstance(obj.vector, dict) else {}
        for field in self.kinds:
            vec = vectors.get(self._vname(field))
            if vec is not None:
                rec[field] = vec
        return rec

    def _object(self, fields: dict):
        """A DataObject of engine fields (the vectors out of the properties; a multi-vector as
        its list of token rows)."""
        from weaviate.classes.data import DataObject
        props = dict(fields)
        vectors = {}
        for field, kind in self.kinds.items():
            v = props.pop(field, None)
            if v is not None:
                vectors[self._vname(field)] = np.asarray(v, dtype=np.float32).tolist() if kind == "multi" else v
        vec = (vectors or None) if self.named else vectors.get("default")
        return DataObject(properties=props, uuid=C.object_id(props[ID_FIELD]), vector=vec)

    def _fetch(self, what: str, **kwargs) -> list:
        res = self.call(what, self.col.query.fetch_objects, **kwargs)
        return [self._record(o) for o in res.objects]

    def _by_ids(self, ids: list, vectors: bool = True) -> dict:
        """id -> engine fields of the ids that exist."""
        from weaviate.classes.query import Filter
        out = {}
        for a in range(0, len(ids), GET):
            chunk = list(dict.fromkeys(ids[a:a + GET]))
            recs = self._fetch("read documents", filters=Filter.by_id().contains_any([C.object_id(i) for i in chunk]),
                               limit=len(chunk), include_vector=vectors and bool(self.kinds))
            out.update({r[ID_FIELD]: r for r in recs})
        return out

    def _first_seq(self) -> int:
        """_max_seq at open: a collection another process created a moment ago may not have its
        shard yet ("non-existing index"), so that answer is asked again for up to 10 s."""
        deadline = time.monotonic() + 10
        while True:
            try:
                return self._max_seq()
            except BackendError as e:
                if "non-existing index" not in str(e) or time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def _max_seq(self) -> int:
        from weaviate.classes.query import Sort
        recs = self._fetch("read the insertion sequence", limit=1, sort=Sort.by_property(SEQ_FIELD, ascending=False),
                           return_properties=[SEQ_FIELD])
        return int(recs[0][SEQ_FIELD]) if recs else 0

    # -------------------------------------------------------------- writes
    def _insert(self, records: list) -> Optional[str]:
        """Writes engine-field records in batches -> None, or why some were refused."""
        for a in range(0, len(records), self.batch_size):
            res = self.call("write documents", self.col.data.insert_many,
                            [self._object(r) for r in records[a:a + self.batch_size]])
            if res.errors:
                first = list(res.errors.items())[:3]
                return self.redact(f"{self.engine} rejected {len(res.errors)} objects (" + "; ".join(
                    f"{records[a + n][ID_FIELD]!r}: {getattr(e, 'message', e)}" for n, e in first) + ")")
        return None

    def _remove(self, ids: list) -> int:
        from weaviate.classes.query import Filter
        n = 0
        for a in range(0, len(ids), GET):
            chunk = ids[a:a + GET]
            res = self.call("delete documents", self.col.data.delete_many,
                            where=Filter.by_id().contains_any([C.object_id(i) for i in chunk]))
            if res.failed:
                raise self.refused("delete documents", f"{res.failed} of {res.matches} objects were not deleted")
            n += int(res.successful)
        return n

    def _restore(self, items: list) -> bool:
        """Puts back (id, fields or None: delete it); whether every one went back."""
        back = [f for _, f in items if f is not None]
        gone = [i for i, f in items if f is None]
        if gone:
            self._remove(gone)
        return not back or self._insert(back) is None

    def _check_ints(self, records: list) -> None:
        """UnsupportedError (before anything is written) for an int beyond +-2**53: Weaviate's
        batch requests carry property values as JSON-like numbers (float64), which hold larger
        ints only approximately, so they would come back changed or be refused."""
        for r in records:
            for name in self.ints:
                v = r.get(name)
                if v is not None and abs(v) > EXACT_INT:
                    raise UnsupportedError(f"storage 'weaviate' holds int values up to +-2**53 exactly (Weaviate "
                                           f"sends numbers as float64); document {r[ID_FIELD]!r} has {name}={v}")

    def _write(self, records: list, before: dict, seq0: Optional[int] = None) -> None:
        """Writes records; any failure rolls every one of them back and raises BackendError."""
        self._check_ints(records)
        try:
            refused = self._insert(records)
        except BackendError as e:
            refused = str(e)
        if refused is not None:
            state = self.rollback(self._restore, [r[ID_FIELD] for r in records], before, seq0)
            raise BackendError(f"{refused}; {state}")

    def upsert(self, batch: Batch) -> None:
        if not batch.docs:
            return
        ids = [d.id for d in batch.docs]
        before = self._by_ids(ids)
        seq0 = self.next_seq
        # a batch may name one id twice: the last document wins, at the place of the first
        records = {}
        for d, seq in zip(batch.docs, self.sequence(ids, before)):
            records[d.id] = self.codec.fields(d, records[d.id][SEQ_FIELD] if d.id in records else seq)
        self._write(list(records.values()), before, seq0)

    def delete(self, ids: list) -> int:
        ids = list(dict.fromkeys(ids))
        before = self._by_ids(ids) if ids else {}
        if not before:
            return 0
        try:
            return self._remove(list(before))
        except BackendError as e:
            raise BackendError(f"{e}; {self.rollback(self._restore, list(before), before)}") from None

    def update_fields(self, id: str, values: dict) -> None:
        old = self._by_ids([id]).get(id)
        if old is None:
            raise KeyError(id)
        if values:
            self._write([self._updated(old, values)], {id: old})

    def _updated(self, old: dict, values: dict) -> dict:
        """The engine fields of a stored document with `values` set (None removes a value)."""
        return self.codec.fields(self.codec.document(old).model_copy(update=values), int(old[SEQ_FIELD]))

    def update_where(self, node: Node, values: dict) -> int:
        """The matching documents read, changed here and written back in batches, rolled back
        like extend when the server refuses one (Weaviate has no update by filter)."""
        recs = self._scan(F.compile_filter(node, self.schema), None, vectors=True)
        if values and recs:
            self._write([self._updated(r, values) for r in recs], {r[ID_FIELD]: r for r in recs})
        return len(recs)

    # --------------------------------------------------------------- reads
    def _aggregate(self, what: str, flt, **kwargs):
        return self.call(what, self.col.aggregate.over_all, filters=flt, total_count=True, **kwargs)

    def count(self) -> int:
        return int(self._aggregate("count documents", None).total_count or 0)

    def contains(self, id: str) -> bool:
        return bool(self._by_ids([id], vectors=False))

    def get(self, ids: list) -> list:
        found = self._by_ids(list(ids))
        return [self.codec.document(found[i]) if i in found else None for i in ids]

    def _scan(self, flt, limit: Optional[int], vectors: bool = False, props=None) -> list:
        """Matching records in insertion order, up to limit (None: all): pages sorted by hs_seq,
        each after the last one's number (no deep offset)."""
        from weaviate.classes.query import Filter, Sort
        out, last = [], None
        while limit is None or len(out) < limit:
            size = PAGE if limit is None else min(PAGE, limit - len(out))
            after = None if last is None else Filter.by_property(SEQ_FIELD).greater_than(last)
            where = flt if after is None else (after if flt is None else Filter.all_of([flt, after]))
            page = self._fetch("list documents", filters=where, limit=size, sort=Sort.by_property(SEQ_FIELD),
                               include_vector=vectors and bool(self.kinds), return_properties=props)
            out += page
            if len(page) < size:
                break
            last = int(page[-1][SEQ_FIELD])
        return out

    def iter_ids(self) -> Iterator[str]:
        return iter([r[ID_FIELD] for r in self._scan(None, None, props=[ID_FIELD, SEQ_FIELD])])

    def search_filter(self, node: Node, limit: Optional[int]) -> tuple:
        if limit == 0:
            return [], []
        docs = [self.codec.document(r) for r in self._scan(F.compile_filter(node, self.schema), limit, True)]
        return [d.id for d in docs], docs

    def count_matches(self, node: Optional[Node], text) -> int:
        """An aggregation's total count (filter only); with text, the matches read here."""
        if text is not None:
            return len(self._lexical(text, self._flt(node)))
        return int(self._aggregate("count matches", self._flt(node)).total_count or 0)

    def facets(self, field: str, node: Optional[Node], text, limit: int, ranges: Optional[list]) -> list:
        """Filter-only facets are aggregations: one count per range, or the values grouped by
        Weaviate (every group asked for, then ordered here by count and value, since the server
        breaks ties its own way). With text, the matches are read and counted here."""
        if text is not None:
            return super().facets(field, node, text, limit, ranges)
        flt = self._flt(node)
        if ranges is not None:
            return [((lo, hi), self._range_count(field, flt, lo, hi)) for lo, hi in ranges]
        if limit == 0:
            return []
        from weaviate.classes.aggregate import GroupByAggregate
        kind = self.schema.fields[field].kind
        n = max(limit * 4, 100)
        while True:
            res = self._aggregate("count facet values", flt, group_by=GroupByAggregate(prop=field, limit=n))
            groups = [(g.grouped_by.value, int(g.total_count or 0)) for g in res.groups]
            if len(groups) < n:
                break
            n *= 4
        pairs = [(_value(kind, v), c) for v, c in groups if c > 0]
        return sorted(pairs, key=lambda p: (-p[1], p[0]))[:limit]

    def _range_count(self, field: str, flt, lo, hi) -> int:
        from hybridsearch.query.filters import And, Compare
        parts = [Compare(field, "$gte", lo)] if lo is not None else []
        parts += [Compare(field, "$lt", hi)] if hi is not None else []
        if not parts:
            from hybridsearch.query.filters import Exists
            parts = [Exists(field)]
        where = F.compile_filter(And(tuple(parts)), self.schema)
        return int(self._aggregate("count facet ranges", where if flt is None else
                                   _all_of([flt, where])).total_count or 0)

    def delete_where(self, node: Node) -> int:
        ids = [r[ID_FIELD] for r in self._scan(F.compile_filter(node, self.schema), None, props=[ID_FIELD, SEQ_FIELD])]
        return self.delete(ids) if ids else 0

    # ------------------------------------------------------------- vectors
    def _flt(self, node: Optional[Node]):
        return None if node is None else F.compile_filter(node, self.schema)

    def _field(self, field: Optional[str]) -> str:
        """The vector field a search names (None: the schema's one dense field)."""
        if field is None:
            self.need_vector()
            return self.vec.name
        return field

    def _with_vector(self, flt, field: str):
        """The filter of the objects holding a value of `field` (and matching flt)."""
        spec = self.schema.fields[field]
        if not spec.optional:
            return flt
        has = F.exists(field, self.schema)
        return has if flt is None else _all_of([flt, has])

    def _near(self, q: np.ndarray, n: int, flt, field: str) -> list:
        """Weaviate's n nearest objects of the field for q (a dense vector, or a multi-vector's
        token rows): an object without the field's vector is in none of its indexes."""
        if n > self.max_results:
            raise self._too_many(n)
        res = self.call("run a vector query", self.col.query.near_vector, near_vector=np.asarray(q).tolist(),
                        target_vector=self._vname(field) if self.named else None,
                        limit=n, filters=flt, include_vector=True)
        return [self._record(o) for o in res.objects]

    def _too_many(self, n: int) -> UnsupportedError:
        return UnsupportedError(f"storage 'weaviate' returns at most max_results={self.max_results} objects per "
                                f"query and {n} were needed: ask for fewer, or start the server with a larger "
                                "QUERY_MAXIMUM_RESULTS and open the collection with that max_results")

    def _holding(self, flt, field: str) -> int:
        return int(self._aggregate("count matches", self._with_vector(flt, field)).total_count or 0)

    def _with_vectors(self, flt, field: str) -> list:
        """Every matching record that holds a value of `field`, its vectors read."""
        return [r for r in self._scan(self._with_vector(flt, field), None, vectors=True) if field in r]

    def _found(self, query, k: int, flt, exact: bool, ef: Optional[int], field: str) -> list:
        """The records (read with their vectors) among which the field's top-k of `query` is; a
        dense query (d,) or (1, d), a multi-vector one the list holding its (m, d) block.
        Dense: Weaviate's max(k, ef) nearest, every match when exact or when the walk came back
        short of the matches. Multi-vector: every match (exhaustive MaxSim) when exact, with the
        l2 metric (Weaviate's MaxSim sums dot products there too, an order other than minus the
        distances summed) or when at most `exact_max` documents match and hold the field; else
        Weaviate's max(k, ef) best by its MaxSim, the query rows normalised for cosine (a cosine
        MaxSim does not change with a row's scale; Weaviate's own does), read exhaustively
        when short."""
        if exact:
            return self._with_vectors(flt, field)
        n = min(max(k, ef or self.ef), self.max_results)
        if self.kinds[field] == "dense":
            q = np.asarray(query, dtype=np.float32).reshape(-1)
            records = self._near(q, n, flt, field)
            if len(records) < k and len(records) < self._holding(flt, field):
                records = self._with_vectors(flt, field)
            return records
        Q = np.asarray(query[0], dtype=np.float64)
        metric = self.metrics[field]
        if metric == "l2":
            return self._with_vectors(flt, field)
        holding = self._holding(flt, field)
        if holding <= self.exact_max:
            return self._with_vectors(flt, field)
        if metric == "cosine":
            Q = Q / np.linalg.norm(Q, axis=1, keepdims=True)
        records = self._near(Q.astype(np.float32), n, flt, field)
        if len(records) < min(k, holding):
            records = self._with_vectors(flt, field)
        return records

    def _exact(self, field: str, values: list, query) -> np.ndarray:
        """API.md's score of each value of `field` (None: the document has none, NaN) for `query`
        (as `_found` takes it), float64: the similarity of a dense value, MaxSim of a block."""
        kind = self.kinds[field]
        return field_scores(kind, self.metrics.get(field, "ip"), values, query if kind == "dense" else query[0])

    def _rank_field(self, records: list, field: str, query, k: int) -> tuple:
        """(records, scores float32) of the records holding `field`, best first by API.md's exact
        score (ties in insertion order), cut to k."""
        records = sorted((r for r in records if field in r), key=lambda r: int(r[SEQ_FIELD]))
        scores = self._exact(field, [r[field] for r in records], query)
        order = np.argsort(-scores, kind="stable")[:k]
        return [records[i] for i in order.tolist()], scores[order].astype(np.float32)

    def search_vectors(self, queries, limit: int, node: Optional[Node], exact: bool,
                       ef: Optional[int], field: Optional[str] = None) -> list:
        field = self._field(field)
        flt = self._flt(node)
        every = self._with_vectors(flt, field) if exact else None  # read once for every query
        out = []
        for q in queries:
            query = q if self.kinds[field] == "dense" else [q]
            recs = every if exact else self._found(query, limit, flt, False, ef, field)
            ranked, scores = self._rank_field(recs, field, query, limit)
            docs = [self.codec.document(r) for r in ranked]
            out.append(([d.id for d in docs], scores, docs))
        return out

    # ----------------------------------------------------------------- text
    def _fields(self, text) -> tuple:
        """(query string, [(property, weight)], operator) of a string or a TextQuery."""
        if isinstance(text, TextQuery):
            return text.text, list(text.fields) if text.fields else [(f, 1.0) for f in self.texts], text.operator
        return text, [(f, 1.0) for f in self.texts], "or"

    def _lexical(self, text, flt) -> dict:
        """id -> (best weighted BM25 over the searched properties, insertion number) of every
        lexical match. Each property is queried on its own, so a document's score is its best
        field's (API.md), not Weaviate's BM25F over the properties together. Every match is
        read (ids and scores only): Weaviate's top-k of a BM25 query (BlockMax WAND) can miss
        better-scoring documents, and the top-k must equal exhaustive evaluation (API.md)."""
        from weaviate.classes.query import BM25Operator, MetadataQuery
        raw, fields, operator = self._fields(text)
        best: dict = {}
        if not any(ch.isalnum() for ch in raw):  # no word to search (Weaviate refuses an empty query)
            return best
        for prop, weight in fields:
            objects = self.call("run a text query", self.col.query.bm25, raw, query_properties=[prop],
                                limit=self.max_results, filters=flt,
                                operator=BM25Operator.and_() if operator == "and" else None,
                                return_metadata=MetadataQuery(score=True),
                                return_properties=[ID_FIELD, SEQ_FIELD]).objects
            if len(objects) >= self.max_results:
                raise self._too_many(self.max_results + 1)
            for o in objects:
                i, s = o.properties[ID_FIELD], float(o.metadata.score or 0.0) * weight
                if i not in best or s > best[i][0]:
                    best[i] = (s, int(o.properties[SEQ_FIELD]))
        return best

    @staticmethod
    def _ranked(best: dict, k: Optional[int]) -> list:
        """(id, score) by score descending, ties in insertion order, cut to k."""
        return [(i, p[0]) for i, p in sorted(best.items(), key=lambda kv: (-kv[1][0], kv[1][1]))[:k]]

    def _records(self, ids: list, known: Optional[dict] = None) -> list:
        """The engine fields of ids (all existing), those in `known` not read again."""
        known = dict(known or {})
        missing = [i for i in ids if i not in known]
        if missing:
            known.update(self._by_ids(missing))
        return [known[i] for i in ids]

    # ------------------------------------- retrieval primitives (query/executor.py fuses)
    def _every_match(self, text, node: Optional[Node]) -> list:
        """Every lexical match as (record with hs_id and hs_seq, BM25), best first, ties in
        insertion order; all their scores are kept for this find (`scores_of` asks nothing more)."""
        self.need_texts()
        best = self._lexical(text, self._flt(node))
        self.cache().keep_lexical(text, node, {i: p[0] for i, p in best.items()}, True)
        return [({ID_FIELD: i, SEQ_FIELD: best[i][1]}, sc) for i, sc in self._ranked(best, None)]

    def text_top(self, text, k: int, node: Optional[Node]) -> Candidates:
        """The top-k of every match (read whole: see `_lexical`); documents read when asked for."""
        top = self._every_match(text, node)[:k]
        return self.candidates([r for r, _ in top], [sc for _, sc in top], docs=False)

    def text_matches(self, text, node: Optional[Node]) -> Candidates:
        every = self._every_match(text, node)
        return self.candidates([r for r, _ in every], [sc for _, sc in every], docs=False)

    def bm25_of(self, text, ids: list) -> dict:
        best = self._lexical(text, None)
        return {i: best[i][0] for i in ids if i in best}

    def records_of(self, ids: list) -> dict:
        found = {}
        for a in range(0, len(ids), GET):
            found.update(self._by_ids(ids[a:a + GET]))
        return found

    def vector_top(self, query, k: int, node: Optional[Node], exact: bool, ef: Optional[int],
                   field: Optional[str] = None) -> Candidates:
        """The field's top-k among `_found`'s records, ranked by exact score; the records are
        kept, with their vectors, for this find's `scores_of`."""
        field = self._field(field)
        records = self._found(query, k, self._flt(node), exact, ef, field)
        ranked, scores = self._rank_field(records, field, query, k)
        self.cache().keep({r[ID_FIELD]: r for r in records}, True)
        return self.candidates(ranked, scores, docs=True, vectors=True)

    def field_scores(self, field: str, records: list, query) -> np.ndarray:
        return self._exact(field, [r.get(field) if r is not None else None for r in records], query)

    def close(self) -> None:
        try:
            self.client.close()
        except Exception:  # closing a client whose server is gone must not raise
            pass


def _all_of(parts: list):
    from weaviate.classes.query import Filter
    return Filter.all_of(parts)


def _value(kind, v):
    """A group's value as the field's type (Weaviate groups numbers as floats)."""
    if kind is Kind.INT:
        return int(v)
    if kind is Kind.BOOL:
        return v is True or str(v).lower() == "true"
    return v
