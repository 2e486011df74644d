"""storage="annlite": the DocumentArray API over the AnnLite library (HNSW +
SQLite pre-filtering).

AnnLite (Jina's embedded ANN library, 0.5.x) keeps an hnswlib-style graph, a
SQLite table of filterable columns and a key-value store of docarray
Documents. This wrapper exists so users can compare it with our storages
under the same API; it adds what our semantics need and AnnLite lacks:

- insertion order: a `_seq` column (AnnLite orders by its own row id, which
  changes on every re-insert);
- upsert and partial update as delete + insert: AnnLite's own `update` leaves
  the filter columns stale when only scalar fields change, so it is not used;
- optional fields: a `_has_<field>` column each (see annlite_filter), and a
  placeholder vector (never returned: every vector search filters `_has_<v>`)
  for documents without a vector, which AnnLite cannot store;
- min(limit, matches) hits: matches are counted first, and a search that
  comes back short (or raises) is answered exactly over the matching rows;
- scores: computed exactly (float64, API.md definitions) from the returned
  documents' vectors, so they mean the same as on every other storage;
- all-or-nothing writes (below).

The folder holds `hybridsearch-annlite.json` (schema fingerprint, written
atomically before AnnLite creates anything), `hybridsearch-annlite.lock` (a
flock held while open: a second DocumentArray on the folder, in this or
another process, is refused with `hs.BackendError` "already open" before it
touches anything), at times `hybridsearch-annlite.intent.json` (below), and
AnnLite's own data. AnnLite 0.5.10 keeps exactly one thing on disk: its
document store, a RocksDB database in `cell_0/` (via rocksdict). Its SQLite
tables (filter columns, id -> row) are in-memory databases and its HNSW graph
is only saved by its `dump()`/`backup()`, which this wrapper never calls, so
every open rebuilds all three from RocksDB. Every RocksDB write AnnLite makes
is one WriteBatch with `sync=True` (appended to RocksDB's write-ahead log and
fsynced before it returns; RocksDB replays the log on open), so after a kill
AnnLite's state is a prefix of its batches, each document (one key) whole or
absent, and nothing outside RocksDB can be left stale. But one of our writes
is many such batches: AnnLite's `delete` commits one batch per id, and an
upsert or `update()` is delete + insert (one batch per replaced id, then one
for all inserted documents). A kill between them would leave a
write half applied (a replaced document deleted and not re-inserted).

So writes (upsert, delete, update, and by filter) are all-or-nothing through a redo
("intent") file, `hybridsearch-annlite.intent.json`:

    {"format": "hybridsearch-annlite-intent", "version": 1,
     "delete": [<id>, ...],                  # ids to remove (absent ones are skipped)
     "insert": [{"seq": <int>,                # the document's insertion-order number (>= 1)
                 "doc": "<JSON of every field but the vector>",
                 "vector": "<base64 of the little-endian float32 vector>" | null}, ...]}

Applying it deletes every id in "delete" and every id in "insert" (those
present), then inserts the "insert" documents, rebuilt through the schema from
"doc" + "vector" as reads rebuild them, with their `_seq`: it is idempotent. A
write (1) builds and serialises every AnnLite document and the whole intent
(strict UTF-8 JSON) first: a value that cannot be serialised raises
`hs.SchemaError` and nothing has changed; (2) reads the stored documents it
replaces or deletes (kept in memory, to undo); (3) writes the intent to a .tmp
file, fsyncs it, renames it over the intent file and fsyncs the folder; (4)
calls AnnLite; (5) removes the intent file (not fsynced: if a crash loses the
removal, reopening redoes a write that is already applied, which changes
nothing, and the next write replaces the file durably before it calls AnnLite).
Opening a path removes stale .tmp files and, if an intent file exists, applies
it, then removes it; a damaged one (not UTF-8 JSON, wrong shape, a document the
schema refuses, a vector of the wrong size) raises `hs.BackendError` naming it
and opens nothing. So after a kill -9 and a reopen, every acknowledged write is
there in full, and the write in flight is either absent (killed before the
rename in step 3) or entirely applied (after it), never half of it.

If AnnLite raises in step 4, the wrapper reopens AnnLite from disk (its in-memory tables
may be half updated), applies an undo intent (the touched ids deleted, the
documents read in step 2 re-inserted; written and removed like any intent) and
raises `hs.BackendError`: the collection is as it was before the call, in this
handle and after a reopen. If that restore fails too, or a KeyboardInterrupt
(any BaseException) interrupts steps 3-5, the handle refuses every further call
with `hs.BackendError`; close and reopen it, and the intent on disk (the write,
or its undo) is completed then.

Not guaranteed: atomicity is per call (an `extend`, an `update_many` or a
`delete(filter=)` is one write; a loop of `update()`s is many); power loss is covered only as far as fsync reaches the
disk and RocksDB keeps its own promise for synced batches (the tests kill the
process, they do not cut power); a document
whose JSON does not read back through the schema (DocumentArray refuses such
values, see `document.check_storable`) would make its intent "damaged" just as
it makes the document unreadable. Cost: every write adds an intent file
written, fsynced and renamed (a file and a folder fsync) and reads the
documents it replaces (measured on one machine: a single-document update about 6 ms
against 2.4 ms for AnnLite's own calls, an extend of 20,000 new documents within 10%); an intent holds a
full copy of the documents it (re)inserts, so a bulk upsert is written twice.

Limits that stay: no text search (UnsupportedError), AnnLite's SQLite
connection is not thread-safe so calls are serialised, and reopening a path
rebuilds the graph from the stored documents (AnnLite's own behaviour).

annlite and hnswlib cannot be imported into one process (both register a
native class "Index"); the registry refuses with UnsupportedError.
"""
from __future__ import annotations

import base64
import binascii
import dataclasses
import json
import logging
import os
import shutil
import sqlite3
import tempfile
import threading
from typing import Iterator, Optional

import annlite
import numpy as np
from annlite.filter import Filter as AlFilter
from docarray import Document as AlDocument
from docarray import DocumentArray as AlArray

from hybridsearch.batch import Batch
from hybridsearch.document import Kind
from hybridsearch.engine.files import fsync_dir, lock_exclusive, unlock, write_durably
from hybridsearch.errors import BackendError, ConfigError, SchemaError, UnsupportedError
from hybridsearch.query.filters import MatchAll, Node
from hybridsearch.storages import contents
from hybridsearch.storages.base import Storage, rank_exactly
from hybridsearch.storages.config import GraphConfig, option, path_or_none, StrPath
from hybridsearch.storages.wrapped.annlite.filter import TRUE, AnnliteFilter, column, has_column

log = logging.getLogger("hybridsearch")


def _adapt_uint64_for_annlite() -> None:
    """AnnLite hands np.uint64 row ids to sqlite3, which numpy 2 no longer adapts by itself.
    The adapter is process-wide (sqlite3 has no other kind), so it is registered when an
    annlite collection opens, not at import, and never over one the application set."""
    if (np.uint64, sqlite3.PrepareProtocol) not in sqlite3.adapters:
        sqlite3.register_adapter(np.uint64, int)

_METRICS = {"cosine": "cosine", "ip": "inner_product", "l2": "euclidean"}
_COLUMN_TYPES = {Kind.KEYWORD: str, Kind.INT: int, Kind.FLOAT: float, Kind.BOOL: int}  # bool as 0/1
_PREFIX = "hybridsearch-annlite"  # every file of ours in the folder starts with this
_MANIFEST = _PREFIX + ".json"
_INTENT = _PREFIX + ".intent.json"
_LOCK = _PREFIX + ".lock"
_INTENT_FORMAT = "hybridsearch-annlite-intent"
_TMP = ".tmp"


@dataclasses.dataclass(frozen=True)
class AnnliteConfig(GraphConfig):
    """Options of storage="annlite"."""

    path: Optional[StrPath] = option(None, path_or_none, "folder of the collection; None: a temporary one")


def _first_line(e: BaseException) -> str:
    return (str(e).splitlines() or [""])[0]


class AnnliteStorage(Storage):
    """One AnnLite index (one cell: plain HNSW, no IVF/PQ) behind the Storage interface."""

    name = "annlite"
    Config = AnnliteConfig
    # every one is an option of a text query: declared so that the call reaches the text primitives, whose
    # refusal says why (no lexical engine), rather than the array's "not available ... yet"
    query_options = frozenset({"linear", "text_fields", "syntax", "operator"})

    def __init__(self, schema, config: AnnliteConfig) -> None:
        super().__init__(schema, config)
        _adapt_uint64_for_annlite()
        if schema.vector is None:
            raise UnsupportedError("storage 'annlite' needs an hs.Vector field: AnnLite indexes every "
                                   "document in an HNSW graph")
        self.ef = config.ef
        self.vec = schema.vector
        self.columns = {n: s for n, s in schema.fields.items() if s.kind in _COLUMN_TYPES}
        self.optional = [n for n, s in schema.fields.items() if s.optional]
        self.compiler = AnnliteFilter(schema)
        self.lock = threading.RLock()
        self.index = None
        self.recorded = False  # the folder holds the record of its last clean close (storages/contents.py)
        self.broken: Optional[str] = None  # why this handle refuses every call (see the module docstring)
        self.intent_writes = 0  # durable writes (intent files) made by this handle, for stats()
        self._tmp = None
        path = config.path
        if path is None:
            self._tmp = tempfile.mkdtemp(prefix="hs-annlite-")
            path = self._tmp
        self.path = os.fspath(path)
        self.intent_path = os.path.join(self.path, _INTENT)
        self._lock_fd = None
        existing = self._check_manifest()
        try:
            os.makedirs(self.path, exist_ok=True)
        except OSError as e:
            raise BackendError(f"{self.path}: cannot create the collection folder: {e}") from None
        # one writer per folder, in this or another process: a second opener stops here, touching nothing
        self._lock_fd = lock_exclusive(os.path.join(self.path, _LOCK), self.path)
        try:
            if not existing:  # before AnnLite creates anything, so that a crash cannot leave a "foreign" folder
                write_durably(os.path.join(self.path, _MANIFEST),
                               json.dumps({"fingerprint": self._fingerprint()}).encode("utf-8"))
            self._open_index()
            for name in os.listdir(self.path):  # an intent or manifest interrupted before its rename
                if name.startswith(_PREFIX) and name.endswith(_TMP):
                    os.remove(os.path.join(self.path, name))
            if os.path.exists(self.intent_path):  # a write interrupted by a crash: complete it
                contents.forget(self.path)  # older than the intent (a write removes it first): it no longer holds
                self._recover()
            # what the folder held at its last clean close (storages/contents.py): damage read as less fails here
            self.recorded = contents.verify(self.path, len(self.seq_of), self._ids_in_order)
            log.info("annlite storage opened %s: %d documents", self.path, len(self.seq_of))
        except BaseException as e:
            self._close_index()
            unlock(self._lock_fd)
            self._lock_fd = None
            if isinstance(e, OSError):
                raise BackendError(f"{self.path}: cannot open the collection: {e}") from None
            raise

    def _recover(self) -> None:
        """Completes the write the intent file records (one interrupted by a crash), then removes it."""
        deletes, docs = self._read_intent()
        try:
            self._apply(deletes, docs)
            self._remove_intent()
        except Exception as e:
            raise BackendError(f"{self.intent_path}: could not complete the interrupted write it "
                               f"records: {type(e).__name__}: {_first_line(e)}") from None
        # a warning, as the journal's torn tail is: the last process stopped in the middle of a write
        log.warning("%s: completed an interrupted write recorded in %s (%d ids deleted, %d documents "
                    "inserted)", self.path, self.intent_path, len(deletes), len(docs))

    def _ids_in_order(self) -> list:
        return sorted(self.seq_of, key=self.seq_of.__getitem__)

    def _open_index(self) -> None:
        """Opens AnnLite on the folder (it rebuilds its tables and graph from RocksDB) and loads the seqs."""
        cols = [(column(n), _COLUMN_TYPES[s.kind]) for n, s in self.columns.items()]
        cols += [(has_column(n), int) for n in self.optional] + [("_seq", int)]
        try:
            self.index = annlite.AnnLite(self.vec.dim, metric=_METRICS[self.metric], columns=cols,
                                         data_path=self.path, max_connection=self.config.m,
                                         ef_construction=self.config.ef_construct, ef_search=self.ef)
            stored = self.index.filter({}, limit=0, order_by="_seq", include_metadata=True)
            self.seq_of = {d.id: int(d.tags["_seq"]) for d in stored}
        except Exception as e:  # AnnLite raises whatever its storage layers raise
            self._close_index()
            raise BackendError(f"{self.path}: AnnLite could not open this collection: "
                               f"{type(e).__name__}: {e}") from None
        self.next_seq = max(self.seq_of.values(), default=0) + 1

    def _close_index(self) -> None:
        index, self.index = self.index, None
        if index is not None:
            try:
                index.close()
            except Exception:
                pass

    # ----------------------------------------------------------- manifest
    def _fingerprint(self) -> list:
        return self.schema.fingerprint() + [self.metric]

    def _check_manifest(self) -> bool:
        """True if the folder is one of ours with this schema, False if it is absent or empty."""
        if os.path.exists(self.path) and not os.path.isdir(self.path):
            raise BackendError(f"{self.path} is a file, not an annlite collection folder")
        manifest = os.path.join(self.path, _MANIFEST)
        if os.path.exists(manifest):
            try:
                with open(manifest, encoding="utf-8") as f:
                    stored = json.load(f)["fingerprint"]
            except (OSError, ValueError, KeyError, TypeError) as e:
                raise BackendError(f"{manifest} is damaged: {e}") from None
            if stored != json.loads(json.dumps(self._fingerprint())):
                raise BackendError(f"{self.path} holds another schema or metric ({stored})")
            return True
        # only files of ours (a manifest or intent .tmp of an interrupted first open): a new collection
        if os.path.isdir(self.path) and any(not n.startswith(_PREFIX) for n in os.listdir(self.path)):
            raise BackendError(f"{self.path} is not empty and was not written by hybridsearch's annlite storage")
        return False

    # ---------------------------------------------------------- documents
    def _to_annlite(self, doc, seq: int):
        tags = {"_seq": seq, "_doc": doc.model_dump_json(exclude={self.vec.name})}
        for n in self.columns:
            v = getattr(doc, n)
            if v is not None:
                tags[column(n)] = v
        for n in self.optional:
            tags[has_column(n)] = int(getattr(doc, n) is not None)
        v = getattr(doc, self.vec.name)
        if v is None:  # AnnLite needs a vector; this one is never a hit (filtered by _has_<v>)
            v = np.zeros(self.vec.dim, dtype=np.float32)
            v[0] = 1.0
        else:
            v = np.asarray(v, dtype=np.float32)
            if v.shape != (self.vec.dim,):
                raise ValueError(f"{self.vec.name}: expected {self.vec.dim} numbers, got shape {v.shape}")
        return AlDocument(id=doc.id, embedding=v, tags=tags)

    def _has_vector(self, d) -> bool:
        return not (self.vec.optional and not d.tags.get(has_column(self.vec.name), 1))

    def _from_annlite(self, d):
        data = json.loads(d.tags["_doc"])
        if self._has_vector(d):
            data[self.vec.name] = np.asarray(d.embedding, dtype=np.float32)
        return self.schema.model.model_validate(data)

    def _call(self, what: str, fn, *args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except (UnsupportedError, ConfigError):
            raise
        except Exception as e:
            raise BackendError(f"AnnLite failed to {what}: {type(e).__name__}: {e}") from None

    def _usable(self) -> None:
        if self.broken is not None:
            raise BackendError(self.broken)
        if self.index is None:
            raise BackendError(f"{self.path}: this annlite collection is closed")

    # -------------------------------------------------------------- intent
    def _entry(self, d) -> dict:
        """An AnnLite document as an intent "insert" entry."""
        vector = None
        if self._has_vector(d):
            vector = base64.b64encode(np.asarray(d.embedding, dtype="<f4").tobytes()).decode("ascii")
        return {"seq": d.tags["_seq"], "doc": d.tags["_doc"], "vector": vector}

    def _intent_bytes(self, deletes: list, docs: list) -> bytes:
        # strict JSON, UTF-8: a NaN, a lone surrogate or a non-JSON value raises here, before any change
        return json.dumps({"format": _INTENT_FORMAT, "version": 1, "delete": deletes,
                           "insert": [self._entry(d) for d in docs]},
                          ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode("utf-8")

    def _read_intent(self) -> tuple:
        """(ids to delete, AnnLite documents to insert) from the intent file; BackendError naming it if damaged."""
        def damaged(why: str) -> BackendError:
            return BackendError(f"{self.intent_path} is damaged ({why}). It records a write that was "
                                "interrupted; moving it away opens the collection without completing that "
                                "write, which may then be partly applied")
        try:
            with open(self.intent_path, "rb") as f:
                data = json.loads(f.read().decode("utf-8"))
        except OSError as e:
            raise BackendError(f"{self.intent_path}: cannot read it: {e}") from None
        except ValueError as e:  # bad UTF-8 or bad JSON
            raise damaged(f"not JSON: {_first_line(e)}") from None
        if not isinstance(data, dict) or data.get("format") != _INTENT_FORMAT or data.get("version") != 1:
            raise damaged(f'not a {{"format": "{_INTENT_FORMAT}", "version": 1, ...}} object')
        deletes, inserts = data.get("delete"), data.get("insert")
        if not isinstance(deletes, list) or not all(isinstance(i, str) for i in deletes):
            raise damaged('"delete" is not a list of ids')
        if not isinstance(inserts, list):
            raise damaged('"insert" is not a list')
        docs, seen = [], set()
        for k, e in enumerate(inserts):
            where = f'"insert"[{k}]'
            if not isinstance(e, dict) or set(e) != {"seq", "doc", "vector"}:
                raise damaged(f'{where} is not an object with keys "seq", "doc", "vector"')
            seq, text, vector = e["seq"], e["doc"], e["vector"]
            if isinstance(seq, bool) or not isinstance(seq, int) or seq < 1:
                raise damaged(f'{where}: "seq" is not a positive integer')
            if not isinstance(text, str):
                raise damaged(f'{where}: "doc" is not a string')
            try:
                fields = json.loads(text)
                if not isinstance(fields, dict):
                    raise ValueError("not a JSON object")
                if vector is not None:
                    if not isinstance(vector, str):
                        raise ValueError('"vector" is neither null nor a base64 string')
                    raw = base64.b64decode(vector, validate=True)
                    if len(raw) != 4 * self.vec.dim:
                        raise ValueError(f'"vector" holds {len(raw)} bytes, not {self.vec.dim} float32')
                    fields[self.vec.name] = np.frombuffer(raw, dtype="<f4").astype(np.float32)
                doc = self.schema.model.model_validate(fields)
                if doc.id in seen:
                    raise ValueError(f"id {doc.id!r} is inserted twice")
                seen.add(doc.id)
                docs.append(self._to_annlite(doc, seq))
            except (ValueError, TypeError, binascii.Error) as err:  # pydantic's ValidationError is a ValueError
                raise damaged(f"{where}: {_first_line(err)}") from None
        return deletes, docs

    def _remove_intent(self, sync: bool = True) -> None:
        """sync=False after a write: if the removal is lost, reopening redoes that (applied) write, which
        changes nothing, and the next write durably replaces the file before it calls AnnLite."""
        os.remove(self.intent_path)
        if sync:
            fsync_dir(self.path)

    def _apply(self, deletes: list, docs: list) -> None:
        """Deletes `deletes` and the ids of `docs` (absent ones are skipped), then inserts `docs`.
        Idempotent; seq_of (which mirrors what AnnLite holds) is updated when AnnLite has finished."""
        ids = [i for i in dict.fromkeys(list(deletes) + [d.id for d in docs]) if i in self.seq_of]
        if ids:
            self.index.delete(ids)
        if docs:
            self.index.index(AlArray(docs))
        seq_of = dict(self.seq_of)
        for i in ids:
            seq_of.pop(i, None)
        for d in docs:
            seq_of[d.id] = int(d.tags["_seq"])
        self.seq_of = seq_of
        self.next_seq = max(self.next_seq, max(seq_of.values(), default=0) + 1)

    # ------------------------------------------------------------- writes
    def _write(self, what: str, deletes: list, docs: list, seqs: list) -> None:
        """One all-or-nothing write: delete the ids `deletes`, (re-)insert `docs` with their `seqs`."""
        # 1. everything that can fail on bad data, before anything changes
        try:
            al_docs = [self._to_annlite(d, s) for d, s in zip(docs, seqs)]
            payload = self._intent_bytes(deletes, al_docs)
        except Exception as e:  # pydantic serialisation errors, UnicodeEncodeError, ValueError (NaN), ...
            raise SchemaError(f"storage 'annlite' cannot store this {what}: {type(e).__name__}: "
                              f"{_first_line(e)}") from None
        # 2. the documents this write replaces or deletes, to undo it if AnnLite fails
        touched = list(dict.fromkeys(list(deletes) + [d.id for d in al_docs]))
        before = []
        for i in touched:
            if i in self.seq_of:
                d = self._call("read a document", self.index.get_doc_by_id, i)
                if d is None:
                    raise BackendError(f"AnnLite lost document {i!r} (its id is indexed but not stored)")
                before.append(d)
        # 3. the intent, durable before AnnLite is called (the record of the last close goes first)
        try:
            if self.recorded:
                contents.forget(self.path)
                self.recorded = False
            write_durably(self.intent_path, payload)
            self.intent_writes += 1
        except Exception as e:
            try:  # nothing has been applied: the intent must not survive to be redone
                if os.path.exists(self.intent_path):
                    self._remove_intent()
            except OSError as e2:
                self.broken = (f"{self.path}: could not write, then could not remove, the intent file "
                               f"{self.intent_path} ({e}; {e2}); reopen the collection")
            raise BackendError(f"{self.intent_path}: could not write the intent of this {what}: "
                               f"{type(e).__name__}: {e}") from None
        except BaseException:
            self.broken = (f"{self.path}: a {what} was interrupted; close and reopen the collection "
                           "(reopening applies the write if its intent file was written)")
            raise
        # 4. AnnLite; 5. the intent is no longer needed
        try:
            self._apply(deletes, al_docs)
        except Exception as e:
            self._undo(what, touched, before, e)
        except BaseException:
            self.broken = (f"{self.path}: a {what} was interrupted; close and reopen the collection to "
                           f"complete it (it is recorded in {self.intent_path})")
            raise
        try:
            self._remove_intent(sync=False)
        except OSError:
            pass  # the write is applied; redoing it on open is harmless, and the next write replaces the file

    def _undo(self, what: str, touched: list, before: list, error: Exception) -> None:
        """AnnLite raised in the middle of a write: reopen it from disk and restore `before`. Always raises."""
        detail = f"{type(error).__name__}: {_first_line(error)}"
        undo_recorded = False
        try:
            # the undo replaces the write's intent first (it is small: deletes and the documents
            # replaced): if AnnLite cannot be reopened (a full disk, its lock), reopening the
            # collection later completes the undo, and the write that raised stays absent
            write_durably(self.intent_path, self._intent_bytes(touched, before))
            undo_recorded = True
            self.intent_writes += 1
            self._close_index()
            self._open_index()  # AnnLite's in-memory tables may be half updated: rebuild them from RocksDB
            self._apply(touched, before)
            self._remove_intent(sync=False)
        except BaseException as e:
            which = "its undo" if undo_recorded else "the write"
            self.broken = (f"AnnLite failed to {what} ({detail}) and restoring the collection failed too "
                           f"({type(e).__name__}: {_first_line(e)}); close and reopen it: {which}, recorded in "
                           f"{self.intent_path}, is then completed as a whole")
            if not isinstance(e, Exception):
                raise
            raise BackendError(self.broken) from None
        raise BackendError(f"AnnLite failed to {what}: {detail} (the collection is unchanged)")

    def upsert(self, batch: Batch) -> None:
        with self.lock:
            self._usable()
            docs = list({d.id: d for d in batch.docs}.values())  # a repeated id: the last one, once
            if not docs:
                return
            seqs, n = [], self.next_seq
            for d in docs:
                s = self.seq_of.get(d.id)
                if s is None:
                    s, n = n, n + 1
                seqs.append(s)
            self._write("upsert", [], docs, seqs)

    def delete(self, ids: list) -> int:
        with self.lock:
            self._usable()
            present = [i for i in dict.fromkeys(ids) if i in self.seq_of]
            if present:
                self._write("delete", present, [], [])
            return len(present)

    def update_fields(self, id: str, values: dict) -> None:
        with self.lock:
            self._usable()
            if id not in self.seq_of:
                raise KeyError(id)
            if not values:
                return
            (old,) = self.get([id])
            if old is None:
                raise BackendError(f"AnnLite lost document {id!r} (its id is indexed but not stored)")
            self._write("update", [], [old.model_copy(update=values)], [self.seq_of[id]])

    def delete_where(self, node: Node) -> int:
        """Every matching document in one all-or-nothing write (one intent), chosen under the lock."""
        with self.lock:
            self._usable()
            ids = [d.id for d in self._matching(self.compiler.compile(node))]
            if ids:
                self._write("delete", ids, [], [])
            return len(ids)

    def update_where(self, node: Node, values: dict) -> int:
        """Every matching document rewritten with `values` in one all-or-nothing write, as an
        extend is: one intent, one AnnLite delete + insert, undone whole if AnnLite fails."""
        with self.lock:
            self._usable()
            docs = [self._from_annlite(d) for d in self._matching(self.compiler.compile(node))]
            if docs and values:
                self._write("update", [], [d.model_copy(update=values) for d in docs],
                            [self.seq_of[d.id] for d in docs])
            return len(docs)

    # -------------------------------------------------------------- reads
    def count(self) -> int:
        with self.lock:
            self._usable()
            return len(self.seq_of)

    def contains(self, id: str) -> bool:
        with self.lock:
            self._usable()
            return id in self.seq_of

    def get(self, ids: list) -> list:
        with self.lock:
            self._usable()
            out = []
            for i in ids:
                d = self._call("read a document", self.index.get_doc_by_id, i) if i in self.seq_of else None
                out.append(self._from_annlite(d) if d is not None else None)
            return out

    def iter_ids(self) -> Iterator[str]:
        with self.lock:
            self._usable()
            return iter(sorted(self.seq_of, key=self.seq_of.__getitem__))

    def _matching(self, flt: dict, limit: int = 0) -> list:
        """AnnLite documents matching a filter dict, in insertion order (limit 0: all)."""
        return list(self._call("filter", self.index.filter, flt, limit=limit, order_by="_seq",
                               include_metadata=True))

    def search_filter(self, node: Node, limit: Optional[int]) -> tuple:
        if limit == 0:
            return [], []
        flt = self.compiler.compile(node)
        with self.lock:
            self._usable()
            docs = [self._from_annlite(d) for d in self._matching(flt, limit or 0)]
        return [d.id for d in docs], docs

    def _count(self, flt: dict) -> int:
        where, params = AlFilter(flt).parse_where_clause()
        return int(self._call("count matches", self.index.cell_table(0).count, where, params))

    def _ranked(self, docs: list, q: np.ndarray, limit: int) -> tuple:
        if not docs:
            return [], np.empty(0, dtype=np.float32), []
        X = np.stack([np.asarray(d.embedding, dtype=np.float32) for d in docs])
        order, scores = rank_exactly(X, q, self.metric, limit)
        out = [self._from_annlite(docs[i]) for i in order]
        return [d.id for d in out], scores, out

    def search_vectors(self, queries: np.ndarray, limit: int, node: Optional[Node], exact: bool,
                       ef: Optional[int]) -> list:
        parts = [] if node is None or isinstance(node, MatchAll) else [self.compiler.compile(node)]
        if self.vec.optional:
            parts.append({has_column(self.vec.name): {"$eq": 1}})
        flt = parts[0] if len(parts) == 1 else ({"$and": parts} if parts else None)
        results = []
        with self.lock:
            self._usable()
            matches = len(self.seq_of) if flt is None else self._count(flt)
            want = min(limit, matches)
            if want == 0:
                return [([], np.empty(0, dtype=np.float32), []) for _ in queries]
            everything = None
            self.index.vec_index(0).ef_search = int(ef or self.ef)
            for q in queries:
                hits = None
                if not exact:
                    try:
                        _, found = self.index.search_by_vectors(q[None, :].astype(np.float32), filter=flt,
                                                                limit=want, include_metadata=True)
                        hits = list(found[0])
                    except RuntimeError:  # hnswlib could not collect `want` neighbours
                        hits = None
                if hits is None or len(hits) < want:  # exact over the matching rows
                    if everything is None:
                        everything = self._matching(flt or TRUE)
                    hits = everything
                results.append(self._ranked(hits, q, want))
        return results

    def stats(self) -> dict:
        """Adds "folder" (the collection's folder: a temporary one, removed on close, when
        path=None) and what AnnLite's HNSW index was built with and searches with now:
        "index_m" (its max_connection), "index_ef_construct", "index_ef" (the ef of the last
        search, or the option's), and "intent_writes": the intent files this handle wrote, one
        per write call (an update_many or a delete by filter is one however many documents it
        changes), one more for each undo."""
        with self.lock:
            self._usable()
            index = self.index.vec_index(0)
            return {**super().stats(), "folder": self.path, "index_m": int(index.max_connection),
                    "index_ef_construct": int(index.ef_construction), "index_ef": int(index.ef_search),
                    "intent_writes": self.intent_writes}

    def no_text_search(self) -> UnsupportedError:
        return UnsupportedError("text search is not available on storage 'annlite': AnnLite has no lexical "
                                "engine (use memory, hnsw or sqlite for text and hybrid search)")

    def close(self) -> None:
        with self.lock:
            try:
                if self.index is not None:
                    if not self.recorded and self.broken is None and self._tmp is None:
                        contents.record(self.path, self._ids_in_order())
                        self.recorded = True
                    index, self.index = self.index, None
                    self._call("close", index.close)
            finally:
                if self._lock_fd is not None:  # not on a second close
                    log.info("annlite storage closed %s", self.path)
                unlock(self._lock_fd)
                self._lock_fd = None
                if self._tmp is not None:
                    shutil.rmtree(self._tmp, ignore_errors=True)
                    self._tmp = None
