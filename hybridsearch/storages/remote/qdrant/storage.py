"""storage="qdrant": the DocumentArray API on Qdrant, embedded (qdrant-edge, `path=`) or on a
server (qdrant-client, `url=`); engines.py holds the two clients, filters.py the filter compiler.

Points: Qdrant ids are UUIDs or integers, so a document's point id is uuid5 of its id, and the
id itself is the payload field `hs_id` (FieldCodec, ../base.py, gives the payload: `hs_seq`
the insertion number, `hs_present` the optional fields holding a value, `hs_extra` the
unindexed fields; `hs_floats` the float fields' exact values: Qdrant's own payload floats can
be one ulp off what was written, and are used only to filter). Each vector field (API.md
section 10) is a Qdrant named vector of its name: dense ones with their metric, sparse ones as
Qdrant sparse vectors, multi-vector ones as MaxSim multivectors without a graph (engines.py,
Layout); a cosine field's original rides beside as an unindexed vector, read back. An
embedded shard's folder also holds hybridsearch-schema.json: opening it with another schema or
metric is a ConfigError.

Searches read ids, insertion numbers and original values; documents are read by id when the
results are asked for them. Vector hits are ranked by API.md's scores computed here; a
(filtered) dense query that returns fewer than min(limit, matches) is run again exactly;
Qdrant's MaxSim over Euclid is not API.md's, so an l2 multi-vector field is scanned here.
Lexical search is one Qdrant TextQuery (BM25, scaled to Lucene's) per hs.Text field, the best
field winning; a repeated query term is scored term by term (docs/storages/qdrant.md). Text and
hybrid finds run on the retrieval primitives (storages/base.py, ../base.py) and
query/executor.py fuses them: the BM25 of given documents is the TextQuery restricted to their
point ids. Filter-only finds scroll in insertion order (`hs_seq`). Counts, facets and deletes by
condition run in Qdrant.

Writes: each batch is one upsert operation per chunk of CHUNK points (a chunk is applied whole
by Qdrant's write-ahead log); a failed chunk puts back what the earlier ones changed. An
embedded batch of more than one chunk is first recorded whole beside the shard (intent.py), so
that a crash between its chunks is completed on the next open: every call is all or nothing
across a kill -9. Methods run in a fair reader/writer section (storages/locking.py): a write
is alone, and the several engine calls of one read see one state. A shard whose files qdrant-edge
cannot read (it panics) is a BackendError naming the folder. After
`optimize_after` points, the next vector query first runs Qdrant's optimizer, which builds the
HNSW index (embedded; a server optimizes on its own): until then new points sit in segments
searched exhaustively.
"""
from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
import uuid
from collections import Counter
from typing import Iterator, Optional

import numpy as np

from hybridsearch.batch import Batch
from hybridsearch.document import Kind
from hybridsearch.engine.analysis import analyzer_for
from hybridsearch.engine.files import write_durably
from hybridsearch.errors import (BackendError, ConfigError, HybridSearchError, SchemaError, UnsupportedError,
                                 missing_extra)
from hybridsearch.query.candidates import Candidates
from hybridsearch.query.filters import And, Compare, Exists, Node
from hybridsearch.query.text import TextQuery
from hybridsearch.storages import contents
from hybridsearch.storages.base import Storage
from hybridsearch.storages.fieldscores import field_scores
from hybridsearch.storages.locking import Section, reads, sections_inside, writes
from hybridsearch.storages.remote.base import (ID_FIELD, PRESENT_FIELD, ROLLED_BACK, SEQ_FIELD, FieldCodec, RemoteStorage, public_url,
                                              uuid_of)
from hybridsearch.storages.remote.qdrant import filters as F
from hybridsearch.storages.remote.qdrant import intent
from hybridsearch.storages.remote.qdrant.config import QdrantConfig, secret_strings
from hybridsearch.storages.remote.qdrant.engines import ClientEngine, EdgeEngine, Layout, Rec

NAMESPACE = uuid.uuid5(uuid.NAMESPACE_URL, "hybridsearch/qdrant")  # fixed: part of the on-disk format
CHUNK = 2000   # points per upsert operation
PAGE = 1000    # points per scroll page
FLOATS_FIELD = "hs_floats"  # the float fields' exact values, one JSON string
BM25_SCALE = 1 / 2.2  # Qdrant's BM25 keeps the (k1 + 1) factor of the classic formula; Lucene's drops it
FINGERPRINT = "hybridsearch-schema.json"  # the schema and metric a shard was made for
log = logging.getLogger("hybridsearch")
MARGIN = 8     # extra vector candidates, so that rescoring cannot lose a hit to rounding


def point_id(id: str) -> str:
    """The Qdrant point id of a document id (uuid5 in a fixed namespace)."""
    return str(uuid_of(NAMESPACE, id))


def _fingerprint(schema, metric: str) -> str:
    return json.dumps(schema.fingerprint() + [metric])


def _holds_a_shard(path: str) -> bool:
    """True when the folder holds anything but our own files (a shard, or files of another program)."""
    return os.path.isdir(path) and any(n != FINGERPRINT and not n.startswith("hybridsearch-")
                                       for n in os.listdir(path))


def check_fingerprint(path: str, schema, metric: str) -> None:
    """ConfigError when the shard at `path` was made for another schema or metric (its
    FINGERPRINT file, beside the shard's own files, says which); BackendError when a folder
    holding a shard has no readable FINGERPRINT (it is written before the shard is created)."""
    target = os.path.join(path, FINGERPRINT)
    if os.path.exists(path) and not os.path.isdir(path):
        raise BackendError(f"{path} is a file, not a Qdrant shard folder")
    try:
        with open(target, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        if _holds_a_shard(path):
            raise BackendError(f"{target} is missing: {path} is not empty, and a shard made here by "
                               "hybridsearch always has it; the folder is damaged or not ours") from None
        return
    except OSError as e:
        raise BackendError(f"{target}: cannot read it: {e}") from None
    try:
        stored = raw.decode("utf-8")
        if not isinstance(json.loads(stored), list):
            raise ValueError("not a JSON list")
    except ValueError as e:  # UnicodeDecodeError is one
        raise BackendError(f"{target} is damaged ({e}): the shard's schema cannot be checked") from None
    if stored != _fingerprint(schema, metric):
        raise ConfigError(f"the Qdrant shard at {path} was made for another schema or metric "
                          f"({stored}); open it with the same model and metric, or use another path")


def write_fingerprint(path: str, schema, metric: str) -> None:
    """Written durably before the shard is created, so a shard never exists without it."""
    target = os.path.join(path, FINGERPRINT)
    if not os.path.exists(target):
        os.makedirs(path, exist_ok=True)
        write_durably(target, _fingerprint(schema, metric).encode("utf-8"))


def _is_panic(e: BaseException) -> bool:
    """pyo3's PanicException (qdrant-edge's Rust panicked): a BaseException, so `except Exception` misses it."""
    return type(e).__name__ == "PanicException"


def _utf8(text: str) -> str:
    """The text with each lone surrogate (no UTF-8 form) as a space: the analyzer splits words
    there too, so Qdrant receives the same words."""
    return "".join(" " if "\ud800" <= c <= "\udfff" else c for c in text)


class QdrantStorage(RemoteStorage):
    """A collection on Qdrant: an embedded qdrant-edge shard, or a server's collection."""

    name = "qdrant"
    engine = "Qdrant"
    remote_modes = True  # url=: mode= settled in engines.ClientEngine; path=: by its files (open_mode)
    Config = QdrantConfig
    query_options = frozenset({"linear", "text_fields"})
    named_vectors = True
    vector_kinds = frozenset({"sparse", "multi"})

    def __init__(self, schema, config: QdrantConfig) -> None:
        super().__init__(schema, config, secret_strings(config), FieldCodec(schema))
        self.layout = Layout.of(schema, self.metrics)
        self.kinds = {**{n: "dense" for n in schema.vectors}, **{n: "sparse" for n in schema.sparse},
                      **{n: "multi" for n in schema.multi}}
        # the metric the shard records: the one string of a one-field schema (the format of
        # shards written before named fields), else every field's
        metric = (self.metric if len(schema.vectors) <= 1 and not schema.multi
                  else sorted(self.metrics.items()))
        # qdrant-edge's MatchValue cannot match a stored bool (it reads True as 1): bools are stored as 0 / 1
        self.bools = [s.name for s in schema.fields.values() if s.kind is Kind.BOOL]
        self.floats = [s.name for s in schema.fields.values() if s.kind is Kind.FLOAT]
        self.temp = None
        self.compiler = F.Compiler(schema, self._keyword_values)
        self.optimize_after = config.optimize_after
        self.unoptimized = 0
        self.url = config.url
        self.collection = config.collection or schema.name.lower()
        self.calls = Section()
        self.q = None
        try:
            if config.url is not None:
                self.path = None
                self.q = ClientEngine(config.url, self.collection, schema, self.layout, config.m, config.ef_construct,
                                      config.api_key, self.timeout, config.ca_certs or config.verify_certs)
            else:
                if config.path is None:
                    self.temp = tempfile.mkdtemp(prefix="hs-qdrant-")
                self.path = config.path or self.temp
                check_fingerprint(self.path, schema, metric)
                write_fingerprint(self.path, schema, metric)
                intent.clear_tmp(self.path)
                self.q = EdgeEngine(self.path, schema, self.layout, config.m, config.ef_construct)
                self._redo()
        except ImportError as e:  # qdrant-edge serves path= / no url=, qdrant-client serves url=
            what = "storage 'qdrant' with url=" if config.url is not None else "storage 'qdrant' (embedded, no url=)"
            raise missing_extra(what, e.name or str(e), "qdrant") from None
        except BaseException as e:  # a panic of qdrant-edge on damaged files is a BaseException
            if not isinstance(e, Exception) and not _is_panic(e):
                raise
            if getattr(self, "q", None) is not None:  # opened, then failed: release the shard's lock
                try:
                    self.q.close()
                except Exception:  # noqa: BLE001 -- the first error is the one to report
                    pass
                self.q = None
            if self.temp is not None:
                shutil.rmtree(self.temp, ignore_errors=True)
            if self.url is None and "WouldBlock" in str(e):  # qdrant-edge locks its write-ahead log
                raise BackendError(f"the qdrant collection at {self.path} is already open by another writer "
                                   "(in this or another process); close it first") from None
            if _is_panic(e):
                raise self.damaged("open the collection", e) from None
            info = self.failure(e)
            if info is None:
                raise
            raise self.error("open the collection", *info) from None
        self.kept = self.url is None and self.temp is None  # a shard that outlives this handle
        try:
            last = self.call("read the last insertion number", self.q.scroll, F.ALL, 1, None, False, True)
            self.next_seq = int(last[0].payload[SEQ_FIELD]) + 1 if last else 1
            self.unoptimized = self.q.unindexed()  # points a session before wrote and never indexed
            # what the shard held at its last clean close (storages/contents.py): damage read as less fails here
            self.recorded = self.kept and contents.verify(self.path, self.call("count documents", self.q.count, F.ALL),
                                                          self._all_ids)
        except BaseException:
            self._close()
            raise

    def _redo(self) -> None:
        """Completes the write an intent record left by a crash holds (intent.py), then removes it."""
        points = intent.read(self.path)
        if points is None:
            return
        contents.forget(self.path)  # older than the record (a write removes it first): it no longer holds
        for a in range(0, len(points), CHUNK):
            self._write(points[a:a + CHUNK])
        intent.remove(self.path)
        log.warning("%s: completed a write of %d points interrupted by a crash (recorded in %s)", self.path,
                    len(points), intent.path_of(self.path))

    def damaged(self, what: str, e: BaseException) -> BackendError:
        return BackendError(f"Qdrant at {self.where()} failed to {what}: qdrant-edge cannot read the shard's "
                            f"files in {self.path} (they are damaged: it panicked with {str(e)[:300]!r})")

    def call(self, what: str, fn, *args, **kwargs):
        try:
            return super().call(what, fn, *args, **kwargs)
        except BaseException as e:
            if not _is_panic(e):
                raise
            raise self.damaged(what, e) from None

    def usable(self) -> None:
        """Run by every method (storages/locking.py): a closed collection answers nothing."""
        if self.q is None:
            raise ConfigError("this DocumentArray is closed")

    def address(self) -> dict:
        if self.url is not None:
            return {"url": public_url(self.url), "collection": self.collection}
        return {"path": self.path}

    def failure(self, e):
        """qdrant-edge reports refusals as ValueError / RuntimeError / Exception; qdrant-client as its
        UnexpectedResponse (with the HTTP status) or ResponseHandlingException."""
        if isinstance(e, HybridSearchError):  # ours (a ConfigError is a ValueError too): not the engine's
            return None
        status = getattr(e, "status_code", None)
        if status is not None or type(e).__name__ in ("UnexpectedResponse", "ResponseHandlingException",
                                                      "RpcError"):
            return status, str(e)[:500]
        if isinstance(e, (ValueError, RuntimeError, OSError)) or type(e) is Exception:
            # qdrant-edge raises a bare Exception for its service errors (a WAL another writer holds)
            return None, f"{type(e).__name__}: {e}"
        return None

    # ------------------------------------------------------------ records
    def _point(self, doc, seq: int) -> tuple:
        fields = self.codec.fields(doc, seq)
        floats = {f: fields[f] for f in self.floats if f in fields}
        for f in self.bools:
            if f in fields:
                fields[f] = int(fields[f])
        if floats:  # Qdrant's payload parsing can move a float by an ulp: the exact value rides along
            fields[FLOATS_FIELD] = json.dumps(floats)
        vectors = {}
        for name, kind in self.kinds.items():
            v = fields.pop(name, None)
            if v is None:
                continue
            if kind == "sparse":
                if not v:  # Qdrant keeps no empty sparse vector: `hs_present` or the default says {}
                    continue
                keys = sorted(v)
                v = {"indices": [int(k) for k in keys], "values": [float(v[k]) for k in keys]}
            elif kind == "multi":
                v = np.asarray(v, dtype=np.float32).tolist()
            vectors[name] = v
            if kind != "sparse" and self.metrics[name] == "cosine":
                vectors[self.layout.raw(name)] = v
        return point_id(doc.id), vectors, fields

    def _fields(self, rec: Rec) -> dict:
        """The engine fields FieldCodec reads: the payload and the original vector."""
        fields = dict(rec.payload)
        if FLOATS_FIELD in fields:
            fields.update(json.loads(fields.pop(FLOATS_FIELD)))
        for f in self.bools:
            if f in fields:
                fields[f] = bool(fields[f])
        present = fields.get(PRESENT_FIELD) or ()
        for name, kind in self.kinds.items():
            v = rec.vectors.get(self.layout.stored(name))
            if kind == "sparse":
                if v is not None:
                    fields[name] = {int(k): float(w) for k, w in zip(v.indices, v.values)}
                elif name in present or not self.schema.sparse[name].optional:
                    fields[name] = {}  # an empty value (Qdrant keeps none)
            elif v is not None:
                fields[name] = v
        return fields

    def _doc(self, rec: Rec):
        return self.codec.document(self._fields(rec))

    def _retrieve(self, ids: list, vectors: bool = True) -> dict:
        """id -> record of the ids that exist."""
        recs = self.call("read documents", self.q.retrieve, [point_id(i) for i in ids], vectors)
        return {r.payload[ID_FIELD]: r for r in recs}

    # ------------------------------------------------------------- writes
    def _write(self, points: list) -> None:
        self.call("write documents", self.q.upsert, points)

    def _restore(self, items: list) -> bool:
        back = [self._point(self._doc(rec), int(rec.payload[SEQ_FIELD])) for _, rec in items if rec is not None]
        gone = [point_id(i) for i, rec in items if rec is None]
        if back:
            self._write(back)
        if gone:
            self.call("delete documents", self.q.delete, gone)
        return True

    def _write_all(self, ids: list, points: list, before: dict, seq0: Optional[int] = None) -> None:
        """Upserts `points` (those of `ids`, in order) as one call: one operation per CHUNK; more
        than one chunk on an embedded shard is first recorded whole (intent.py), so a crash
        between chunks is completed on the next open. A failed chunk puts `before` back."""
        recorded = self.path is not None and len(points) > CHUNK
        if recorded:
            try:
                intent.write(self.path, points)
            except OSError as e:
                raise BackendError(f"{intent.path_of(self.path)}: could not record this write of {len(points)} "
                                   f"points ({e}); nothing was written") from None
        done = []
        try:
            for a in range(0, len(points), CHUNK):
                done += ids[a:a + CHUNK]  # a failed chunk may have been applied in part
                self._write(points[a:a + CHUNK])
        except BackendError as e:
            undo = self.rollback(self._restore, done, before, seq0)
            if recorded and undo == ROLLED_BACK:
                self._forget(e)
            elif recorded:  # left on disk: reopening the collection completes the write whole
                undo += f"; reopening the collection completes the write (recorded in {intent.path_of(self.path)})"
            raise BackendError(f"{e}; {undo}") from None
        if recorded:
            self._forget(None)

    def _forget(self, error) -> None:
        """Removes the record of a write that is done or undone (durably: left behind, it would be redone)."""
        try:
            intent.remove(self.path)
        except OSError as e:
            raise BackendError(f"{intent.path_of(self.path)}: could not remove the record of a finished write "
                               f"({e}); close and reopen the collection{'' if error is None else f' ({error})'}"
                               ) from None

    @writes
    def upsert(self, batch: Batch) -> None:
        self._changing()
        docs = batch.docs
        before = self._retrieve([d.id for d in docs])
        seq0 = self.next_seq
        seqs = self.sequence([d.id for d in docs], {i: r.payload for i, r in before.items()})
        try:
            self._write_all([d.id for d in docs], [self._point(d, s) for d, s in zip(docs, seqs)], before, seq0)
        except SchemaError:  # refused before anything was sent: the insertion numbers go back
            self.next_seq = seq0
            raise
        self._wrote(len(docs))

    def _wrote(self, n: int) -> None:
        """Counts written points: the optimizer runs before the next vector query (`_ready`),
        so that a load in many batches builds the index once, not after every batch."""
        self.unoptimized += n

    def _ready(self) -> None:
        """Runs the optimizer (HNSW build) when `optimize_after` points or more were written
        since it last ran; until then new points sit in segments searched exhaustively."""
        if self.optimize_after is not None and self.unoptimized >= self.optimize_after:
            self.optimize()

    @writes
    def optimize(self) -> None:
        """Runs Qdrant's segment optimizers now (embedded: builds the HNSW index, blocking)."""
        self.call("optimize", self.q.optimize)
        self.unoptimized = 0

    @writes
    def delete(self, ids: list) -> int:
        found = self._retrieve(list(dict.fromkeys(ids)), vectors=False)
        if found:
            self._changing()
            self.call("delete documents", self.q.delete, [point_id(i) for i in found])
        return len(found)

    @writes
    def update_fields(self, id: str, values: dict) -> None:
        rec = self._retrieve([id]).get(id)
        if rec is None:
            raise KeyError(id)
        if values:
            self._changing()
            doc = self._doc(rec).model_copy(update=values)
            self._write([self._point(doc, int(rec.payload[SEQ_FIELD]))])

    @writes
    def delete_where(self, node: Node) -> int:
        """One delete-by-filter in Qdrant -> the documents it matched (counted first)."""
        tree = self.compiler.compile(node)
        n = self.call("count documents", self.q.count, tree)
        if n:
            self._changing()
            self.call("delete documents by condition", self.q.delete_where, tree)
        return n

    @writes
    def update_where(self, node: Node, values: dict) -> int:
        """The matching documents rewritten with the values in one upsert (per CHUNK points)."""
        recs = self._scan(self.compiler.compile(node), None, True)
        if values and recs:
            self._changing()
            before = {r.payload[ID_FIELD]: r for r in recs}
            points = [self._point(self._doc(r).model_copy(update=values), int(r.payload[SEQ_FIELD])) for r in recs]
            self._write_all(list(before), points, before)
        return len(recs)

    # --------------------------------------------------------------- reads
    @reads
    def count(self) -> int:
        return self.call("count documents", self.q.count, F.ALL)

    @reads
    def contains(self, id: str) -> bool:
        return bool(self._retrieve([id], vectors=False))

    @reads
    def get(self, ids: list) -> list:
        found = {}
        for a in range(0, len(ids), PAGE):
            found.update(self._retrieve(ids[a:a + PAGE]))
        return [self._doc(found[i]) if i in found else None for i in ids]

    def _scan(self, tree, limit: Optional[int], vectors: bool) -> list:
        """The matches in insertion order (up to `limit`), page after page of hs_seq."""
        out, start = [], None
        while limit is None or len(out) < limit:
            size = PAGE if limit is None else min(PAGE, limit - len(out))
            page = self.call("scroll documents", self.q.scroll, tree, size, start, vectors)
            out += page
            if len(page) < size:
                break
            start = int(page[-1].payload[SEQ_FIELD]) + 1
        return out

    @reads
    def iter_ids(self) -> Iterator[str]:
        """Every id, read in one section (so that a writer cannot interleave), in insertion order."""
        return iter([r.payload[ID_FIELD] for r in self._scan(F.ALL, None, False)])

    # the generic sort and column reads compose several reads: one section keeps them one state
    search_sorted = reads(Storage.search_sorted)
    column_values = reads(Storage.column_values)

    @reads
    def search_filter(self, node: Node, limit: Optional[int]) -> tuple:
        recs = self._scan(self.compiler.compile(node), limit, False)  # ids: documents are read when asked for
        return [r.payload[ID_FIELD] for r in recs], None

    def _keyword_values(self, key: str) -> list:
        """Every distinct value of a keyword payload field (for string ranges: filters.py)."""
        n = max(self.count(), 1)
        return [v for v, _ in self.call("count facet values", self.q.facet, key, F.ALL, n)]

    def _text_tree(self, text) -> tuple:
        raw, weights = self._text_parts(text)
        return F.text_tree([f for f, _ in weights], raw)

    @reads
    def count_matches(self, node: Optional[Node], text) -> int:
        tree = self.compiler.compile(node)
        if text is not None:
            tree = F.conj([tree, self._text_tree(text)])
        return self.call("count documents", self.q.count, tree)

    @reads
    def facets(self, field: str, node: Optional[Node], text, limit: int, ranges: Optional[list]) -> list:
        """Qdrant's exact facet counts (ranges: one exact count each). When the last value kept
        ties with the first left out, Qdrant is asked for twice as many, so that ties are
        broken by value here."""
        tree = self.compiler.compile(node)
        if text is not None:
            tree = F.conj([tree, self._text_tree(text)])
        if ranges is not None:
            out = []
            for lo, hi in ranges:
                bounds = [Compare(field, "$gte", lo)] if lo is not None else []
                bounds += [Compare(field, "$lt", hi)] if hi is not None else []
                part = self.compiler.compile(And(tuple(bounds))) if bounds else self.compiler.compile(
                    Exists(field))
                out.append(((lo, hi), self.call("count documents", self.q.count, F.conj([tree, part]))))
            return out
        if limit == 0:
            return []
        n = limit + 1
        while True:
            hits = self.call("count facet values", self.q.facet, field, tree, n)
            cast = bool if field in self.bools else (lambda v: v)
            pairs = sorted(((cast(v), int(c)) for v, c in hits if c > 0), key=lambda p: (-p[1], p[0]))
            if len(hits) < n or pairs[limit - 1][1] > pairs[-1][1]:
                return pairs[:limit]
            n *= 2

    # ------------------------------------------------------------ vectors
    def _field(self, field: Optional[str]) -> str:
        """The vector field a search names (None: the schema's one dense field)."""
        if field is None:
            self.need_vector()
            return self.vec.name
        return field

    def _with_vector(self, tree, field: str) -> tuple:
        """The tree restricted to documents holding `field` (those a query of it can return)."""
        return F.conj([tree, self.compiler.compile(Exists(field))])

    def _nearest(self, queries: np.ndarray, n: int, tree, ef: Optional[int], exact: bool, full: bool = True,
                 field: Optional[str] = None) -> list:
        """Per query, the engine's `n` nearest records of dense field `field` (None: the one); a
        query answered with fewer than min(n, matches) (HNSW under a selective filter can lose
        some) is asked again exactly."""
        field = self._field(field)
        out = self.call("run vector queries", self.q.nearest, queries, n, tree, ef, exact, full, field)
        total = None
        for i, recs in enumerate(out):
            if len(recs) < n and not exact:
                if total is None:
                    total = self.call("count documents", self.q.count, self._with_vector(tree, field))
                if len(recs) < min(n, total):
                    out[i] = self.call("run an exact vector query", self.q.nearest, queries[i:i + 1], n, tree,
                                       None, True, full, field)[0]
        return out

    def _exact_top(self, query, k: int, tree, field: str) -> list:
        """Qdrant's exact top-k of a sparse or multi-vector field (sparse search is exact; a
        multi-vector field has no graph, so Qdrant scans it) and every record tying with the
        k-th: Qdrant cuts among equal scores in its own order, and ties here go to the earlier
        document."""
        m = k + MARGIN
        while True:
            recs = self.call("run a vector query", self.q.nearest, [query], m, tree, None, True, False, field)[0]
            if len(recs) < m or recs[k - 1].score - recs[-1].score > 1e-5 * max(1.0, abs(recs[k - 1].score)):
                return recs
            m *= 2

    def _found(self, query, k: int, tree, exact: bool, ef: Optional[int], field: str) -> list:
        """The records (read with every vector field's value) among which the field's top-k of
        `query` is: a dense query (d,) or (1, d); a sparse or multi-vector one as the array
        gives them, a list holding one checked query."""
        kind = self.kinds[field]
        if kind == "dense":
            n = k + MARGIN
            q = np.asarray(query, dtype=np.float32).reshape(1, -1)
            return self._nearest(q, n, tree, max(ef or self.ef, n), exact, False, field)[0]
        q = query[0]
        if kind == "sparse" and len(q[0]) == 0:
            return []  # an empty query matches nothing
        if kind == "multi" and self.metrics[field] == "l2":
            # Qdrant's MaxSim over Euclid sums squared distances, an order other than API.md's
            # (minus the distances summed): the matches are scanned and scored here
            return self._scan(self._with_vector(tree, field), None, True)
        return self._exact_top(q, k, tree, field)

    def _exact(self, field: str, values: list, query) -> np.ndarray:
        """API.md's score of each value of `field` (None: the document has none, NaN) for `query`
        (as `_found` takes it), float64."""
        kind = self.kinds[field]
        return field_scores(kind, self.metrics.get(field, "ip"), values, query if kind == "dense" else query[0])

    def _ranked(self, recs: list, field: str, query, k: int) -> tuple:
        """(engine fields, scores float32) of the records holding `field`, best first by API.md's
        exact score (ties in insertion order), cut to k."""
        records = sorted((f for f in map(self._fields, recs) if f.get(field) is not None),
                         key=lambda r: int(r[SEQ_FIELD]))
        scores = self._exact(field, [r[field] for r in records], query)
        order = np.argsort(-scores, kind="stable")[:k]
        return [records[i] for i in order.tolist()], scores[order].astype(np.float32)

    @sections_inside  # the optimizer (a write) first, then the read section
    def search_vectors(self, queries, limit: int, node: Optional[Node], exact: bool,
                       ef: Optional[int], field: Optional[str] = None) -> list:
        field = self._field(field)
        self._ready()
        return self._search_vectors(queries, limit, node, exact, ef, field)

    @reads
    def _search_vectors(self, queries, limit: int, node: Optional[Node], exact: bool,
                        ef: Optional[int], field: str) -> list:
        tree = self.compiler.compile(node)
        if self.kinds[field] == "dense":  # one batch request for every query
            n = limit + MARGIN
            pairs = zip(queries, self._nearest(np.asarray(queries, dtype=np.float32), n, tree, max(ef or self.ef, n),
                                               exact, False, field))
        else:
            pairs = [([q], self._found([q], limit, tree, exact, ef, field)) for q in queries]
        res = []
        for q, recs in pairs:  # ranks only: the documents are read when asked for
            ranked, scores = self._ranked(recs, field, q, limit)
            res.append(([r[ID_FIELD] for r in ranked], scores, None))
        return res

    # --------------------------------------------------------------- text
    def _text_parts(self, text) -> tuple:
        """(query string, [(field, weight)]) of a string or a TextQuery."""
        if isinstance(text, TextQuery):
            if text.operator != "or":
                raise UnsupportedError("storage 'qdrant' has no operator=\"and\" for text queries")
            return _utf8(text.text), list(text.fields) if text.fields else [(f, 1.0) for f in self.texts]
        return _utf8(text), [(f, 1.0) for f in self.texts]

    def _lexical(self, text, n: int, tree, read: str = "all") -> list:
        """The best `n` (record, BM25) by the best field's weighted BM25, ties in insertion
        order: each field's top-n holds every document of the top-n by the maximum."""
        raw, weights = self._text_parts(text)
        best = {}
        for field, w in weights:
            for r, s in self._field_scores(field, raw, n, tree, read):
                s *= w
                if r.id not in best or s > best[r.id][1]:
                    best[r.id] = (r, s)
        ranked = sorted(best.values(), key=lambda p: (-p[1], int(p[0].payload[SEQ_FIELD])))
        return ranked[:n]

    def _field_scores(self, field: str, raw: str, n: int, tree, read: str) -> list:
        """(record, BM25) of the field's top-n for the text. Qdrant counts a repeated query
        term once, API.md once per occurrence (c times). Such a query reads Qdrant's top-m
        (each distinct term once), scores those m term by term (c x each term's BM25, one
        TextQuery per term restricted to them), and stops when no document left out can
        beat the n-th: its score is at most max(c) x the m-th of Qdrant's."""
        analyzer = analyzer_for(self.schema.fields[field])
        counts = Counter(analyzer.tokens(raw))
        if all(c == 1 for c in counts.values()):
            return [(r, float(r.score) * BM25_SCALE) for r in self._field_top(field, raw, n, tree, read)]
        surface = dict(zip(analyzer.tokens(raw), analyzer.words(raw)))  # a word that analyses to each term
        most = max(counts.values())
        m = max(4 * n, 64)
        while True:
            top = self._field_top(field, raw, m, tree, read)
            if not top:  # nothing matches: no term query to run (Qdrant refuses a limit of 0)
                return []
            only = F.conj([tree, ("ids", [r.id for r in top])])
            total = {r.id: (r, 0.0) for r in top}
            for term, c in counts.items():
                for r in self.call("run a text query", self.q.text, field, surface[term], len(top), only, "ids"):
                    rec, prev = total[r.id]
                    total[r.id] = (rec, prev + c * float(r.score) * BM25_SCALE)
            ranked = sorted(total.values(), key=lambda p: (-p[1], int(p[0].payload[SEQ_FIELD])))
            if len(top) < m or (len(ranked) >= n and ranked[n - 1][1] > most * float(top[-1].score) * BM25_SCALE):
                return ranked[:n]
            m *= 4

    def _field_top(self, field: str, raw: str, n: int, tree, read: str) -> list:
        """The field's top-n by Qdrant's BM25 and every hit tying with the n-th: Qdrant cuts
        among equal scores in its own order, and ties here go to the earlier document."""
        m = n + 1
        while True:
            hits = self.call("run a text query", self.q.text, field, raw, m, tree, read)
            if len(hits) < m or hits[-1].score < hits[n - 1].score:
                return hits
            m *= 2

    # ------------------------------------- retrieval primitives (query/executor.py fuses)
    def reading(self):
        """The optimizer first when it is due (a write, so before the find's read section; not
        inside a read already held), then RemoteStorage's reading."""
        if self.layout.dense and not self.calls.held_here():
            self._ready()
        return super().reading()

    def text_top(self, text, k: int, node: Optional[Node]) -> Candidates:
        """Ids and scores only: the documents are read when the results are asked for them."""
        self.need_texts()
        hits = self._lexical(text, k, self.compiler.compile(node), "ids")
        return self.lexical_list(text, node, [self._fields(r) for r, _ in hits], [sc for _, sc in hits], k,
                                 docs=False)

    def text_matches(self, text, node: Optional[Node]) -> Candidates:
        """Every match, read with its original vector (exact=True hybrid scores each)."""
        self.need_texts()
        tree = self.compiler.compile(node)
        matches = self.call("count documents", self.q.count, F.conj([tree, self._text_tree(text)]))
        hits = self._lexical(text, max(matches, 1), tree, "vector")
        return self.lexical_list(text, node, [self._fields(r) for r, _ in hits], [sc for _, sc in hits], None,
                                 docs=False, vectors=not self.layout.empty())

    def bm25_of(self, text, ids: list) -> dict:
        only = ("ids", [point_id(i) for i in ids])
        return {r.payload[ID_FIELD]: sc for r, sc in self._lexical(text, len(ids), only, "ids")}

    def records_of(self, ids: list) -> dict:
        found = {}
        for a in range(0, len(ids), PAGE):
            found.update(self._retrieve(ids[a:a + PAGE]))
        return {i: self._fields(r) for i, r in found.items()}

    def vector_top(self, query, k: int, node: Optional[Node], exact: bool, ef: Optional[int],
                   field: Optional[str] = None) -> Candidates:
        """The field's top-k: Qdrant's candidates (dense: MARGIN more, asked again exactly when
        short; sparse and multi-vector: exact, with every tie of the k-th), ranked by exact score."""
        field = self._field(field)
        recs = self._found(query, k, self.compiler.compile(node), exact, ef, field)
        ranked, scores = self._ranked(recs, field, query, k)
        return self.candidates(ranked, scores, docs=False, vectors=True)

    def field_scores(self, field: str, records: list, query) -> np.ndarray:
        return self._exact(field, [r.get(field) if r is not None else None for r in records], query)

    @reads
    def stats(self) -> dict:
        return {**super().stats(), "unoptimized_points": self.unoptimized}

    def close(self) -> None:
        guard = self.calls.enter(True)  # waits for the calls in flight (no `usable`: a second close is fine)
        try:
            self._close()
        finally:
            self.calls.leave(guard)

    def _all_ids(self) -> list:
        return [r.payload[ID_FIELD] for r in self._scan(F.ALL, None, False)]

    def _changing(self) -> None:
        """Before the first write after an open: the record of the last close no longer holds."""
        if self.recorded:
            contents.forget(self.path)
            self.recorded = False

    def _close(self) -> None:
        if self.q is None:
            return
        try:
            try:
                if self.kept and not getattr(self, "recorded", True):  # never after a failed open
                    contents.record(self.path, self._all_ids())
                self.q.flush()
            finally:  # a failed flush still releases the shard (and its lock)
                self.q.close()
        finally:
            self.q = None
            if self.temp is not None:
                shutil.rmtree(self.temp, ignore_errors=True)
