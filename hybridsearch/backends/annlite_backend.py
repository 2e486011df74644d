"""storage="annlite": the DocumentArray API over the AnnLite library (HNSW + SQLite pre-filtering).

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
  documents' vectors, so they mean the same as on every other storage.

Limits that stay: no text search (UnsupportedError), a write is several
AnnLite calls and is not atomic against a crash, AnnLite's SQLite connection
is not thread-safe so calls are serialised, and reopening a path rebuilds the
graph from the stored documents (AnnLite's own behaviour).

annlite and hnswlib cannot be imported into one process (both register a
native class "Index"); the registry refuses with UnsupportedError.
"""
from __future__ import annotations

import json
import os
import shutil
import sqlite3
import tempfile
import threading
from typing import Iterator, Optional

import numpy as np

from ..batch import Batch
from ..document import Kind
from ..errors import BackendError, ConfigError, UnsupportedError
from ..filters import MatchAll, Node
from .annlite_filter import AnnliteFilter, TRUE, column, has_column
from .base import Backend, exact_scores

# AnnLite passes np.uint64 row ids to sqlite3, which numpy 2 no longer lets it adapt
sqlite3.register_adapter(np.uint64, int)

import annlite  # noqa: E402  (after the adapter, which its first query needs)
from docarray import Document as AlDocument  # noqa: E402
from annlite.filter import Filter as AlFilter  # noqa: E402
from docarray import DocumentArray as AlArray  # noqa: E402

_METRICS = {"cosine": "cosine", "ip": "inner_product", "l2": "euclidean"}
_COLUMN_TYPES = {Kind.KEYWORD: str, Kind.INT: int, Kind.FLOAT: float, Kind.BOOL: int}  # bool as 0/1
_MANIFEST = "hybridsearch-annlite.json"


def _positive_int(options: dict, name: str, minimum: int = 1) -> None:
    v = options[name]
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < minimum:
        raise ConfigError(f"storage 'annlite' option {name} must be an integer >= {minimum}, got {v!r}")


class AnnliteBackend(Backend):
    """One AnnLite index (one cell: plain HNSW, no IVF/PQ) behind the Backend interface."""

    name = "annlite"
    OPTIONS = {"metric": "cosine", "path": None, "m": 16, "ef_construct": 200, "ef": 64}

    @classmethod
    def resolve_options(cls, options: dict) -> dict:
        resolved = super().resolve_options(options)
        _positive_int(resolved, "m", 2)
        _positive_int(resolved, "ef_construct")
        _positive_int(resolved, "ef")
        return resolved

    def __init__(self, schema, **options) -> None:
        super().__init__(schema, **options)
        if schema.vector is None:
            raise UnsupportedError("storage 'annlite' needs an hs.Vector field: AnnLite indexes every "
                                   "document in an HNSW graph")
        self.metric = options["metric"]
        self.ef = int(options["ef"])
        self.vec = schema.vector
        self.columns = {n: s for n, s in schema.fields.items() if s.kind in _COLUMN_TYPES}
        self.optional = [n for n, s in schema.fields.items() if s.optional]
        self.compiler = AnnliteFilter(schema)
        self.lock = threading.RLock()
        self._tmp = None
        path = options["path"]
        if path is None:
            self._tmp = tempfile.mkdtemp(prefix="hs-annlite-")
            path = self._tmp
        self.path = os.fspath(path)
        self._check_manifest()
        cols = [(column(n), _COLUMN_TYPES[s.kind]) for n, s in self.columns.items()]
        cols += [(has_column(n), int) for n in self.optional] + [("_seq", int)]
        try:
            self.index = annlite.AnnLite(self.vec.dim, metric=_METRICS[self.metric], columns=cols,
                                         data_path=self.path, max_connection=int(options["m"]),
                                         ef_construction=int(options["ef_construct"]), ef_search=self.ef)
            stored = self.index.filter({}, limit=0, order_by="_seq", include_metadata=True)
            self.seq_of = {d.id: int(d.tags["_seq"]) for d in stored}
        except Exception as e:  # AnnLite raises whatever its storage layers raise
            raise BackendError(f"{self.path}: AnnLite could not open this collection: "
                               f"{type(e).__name__}: {e}") from None
        self.next_seq = max(self.seq_of.values(), default=0) + 1
        self._write_manifest()

    # ----------------------------------------------------------- manifest
    def _fingerprint(self) -> list:
        return [[s.name, s.kind.value, s.optional, s.dim] for s in self.schema.fields.values()] + [self.metric]

    def _check_manifest(self) -> None:
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
        elif os.path.isdir(self.path) and os.listdir(self.path):
            raise BackendError(f"{self.path} is not empty and was not written by hybridsearch's annlite storage")

    def _write_manifest(self) -> None:
        with open(os.path.join(self.path, _MANIFEST), "w", encoding="utf-8") as f:
            json.dump({"fingerprint": self._fingerprint()}, f)

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
        return AlDocument(id=doc.id, embedding=np.asarray(v, dtype=np.float32), tags=tags)

    def _from_annlite(self, d):
        data = json.loads(d.tags["_doc"])
        if not (self.vec.optional and not d.tags.get(has_column(self.vec.name), 1)):
            data[self.vec.name] = np.asarray(d.embedding, dtype=np.float32)
        return self.schema.model.model_validate(data)

    def _call(self, what: str, fn, *args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except (UnsupportedError, ConfigError):
            raise
        except Exception as e:
            raise BackendError(f"AnnLite failed to {what}: {type(e).__name__}: {e}") from None

    # ------------------------------------------------------------- writes
    def _put(self, docs: list, seqs: list) -> None:
        """(Re-)inserts documents: existing ones are deleted first so every column is rewritten."""
        present = [d.id for d in docs if d.id in self.seq_of]
        if present:
            self._call("delete documents", self.index.delete, present)
        batch = AlArray([self._to_annlite(d, s) for d, s in zip(docs, seqs)])
        self._call("insert documents", self.index.index, batch)
        for d, s in zip(docs, seqs):
            self.seq_of[d.id] = s

    def upsert(self, batch: Batch) -> None:
        with self.lock:
            seqs = []
            for d in batch.docs:
                s = self.seq_of.get(d.id)
                if s is None:
                    s, self.next_seq = self.next_seq, self.next_seq + 1
                seqs.append(s)
            if batch.docs:
                self._put(batch.docs, seqs)

    def delete(self, ids: list) -> int:
        with self.lock:
            present = [i for i in dict.fromkeys(ids) if i in self.seq_of]
            if present:
                self._call("delete documents", self.index.delete, present)
                for i in present:
                    del self.seq_of[i]
            return len(present)

    def update_fields(self, id: str, values: dict) -> None:
        with self.lock:
            if id not in self.seq_of:
                raise KeyError(id)
            if not values:
                return
            (old,) = self.get([id])
            self._put([old.model_copy(update=values)], [self.seq_of[id]])

    # -------------------------------------------------------------- reads
    def count(self) -> int:
        return len(self.seq_of)

    def contains(self, id: str) -> bool:
        return id in self.seq_of

    def get(self, ids: list) -> list:
        with self.lock:
            out = []
            for i in ids:
                d = self._call("read a document", self.index.get_doc_by_id, i) if i in self.seq_of else None
                out.append(self._from_annlite(d) if d is not None else None)
            return out

    def iter_ids(self) -> Iterator[str]:
        with self.lock:
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
            docs = [self._from_annlite(d) for d in self._matching(flt, limit or 0)]
        return [d.id for d in docs], docs

    def _count(self, flt: dict) -> int:
        where, params = AlFilter(flt).parse_where_clause()
        return int(self._call("count matches", self.index.cell_table(0).count, where, params))

    def _ranked(self, docs: list, q: np.ndarray, limit: int) -> tuple:
        if not docs:
            return [], np.empty(0, dtype=np.float32), []
        X = np.stack([np.asarray(d.embedding, dtype=np.float32) for d in docs])
        s = exact_scores(X, q, self.metric)
        order = np.argsort(-s, kind="stable")[:limit]
        out = [self._from_annlite(docs[i]) for i in order]
        return [d.id for d in out], s[order].astype(np.float32), out

    def search_vectors(self, queries: np.ndarray, limit: int, node: Optional[Node], exact: bool,
                       ef: Optional[int]) -> list:
        parts = [] if node is None or isinstance(node, MatchAll) else [self.compiler.compile(node)]
        if self.vec.optional:
            parts.append({has_column(self.vec.name): {"$eq": 1}})
        flt = parts[0] if len(parts) == 1 else ({"$and": parts} if parts else None)
        results = []
        with self.lock:
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

    def search_text(self, *args, **kwargs):
        raise UnsupportedError("text search is not available on storage 'annlite': AnnLite has no lexical "
                               "engine (use memory, hnsw or sqlite for text and hybrid search)")

    def close(self) -> None:
        with self.lock:
            if self.index is not None:
                self._call("close", self.index.close)
                self.index = None
            if self._tmp is not None:
                shutil.rmtree(self._tmp, ignore_errors=True)
                self._tmp = None
