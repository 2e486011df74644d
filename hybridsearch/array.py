"""DocumentArray: the public collection API (API.md sections 2-4).

It validates every input, turns documents into columns and makes one call
into the storage per batch; the storage holds the data and searches it.
"""
from __future__ import annotations

import atexit
import dataclasses
import logging
import math
import os
import warnings
import weakref
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Iterable, Iterator, Optional

import numpy as np

from hybridsearch.batch import build_batch, build_batch_in_parts
from hybridsearch.engine.exact import sum_squares
from hybridsearch.engine.find import SQ_NORM_SAFE as _SQ_NORM_SAFE
from hybridsearch.document import (Document, Kind, check_storable, schema_of,
                                   validate_value, vector_norm_problem)
from hybridsearch.embedding import compute as embedding
from hybridsearch.embedding.identity import check_identity, copy_record, record_identity
from hybridsearch.errors import ClosedError, ConfigError, IdError, SchemaError, UnsupportedError, missing_extra
from hybridsearch.frames import as_column_dict, to_arrow, to_pandas
from hybridsearch.ingest import batch_from_columns, last_of_each_id, public_columns
from hybridsearch.query.executor import execute
from hybridsearch.query.filters import parse_filter
from hybridsearch.query.hints import looks_like_text, looks_like_vector, unknown_argument
from hybridsearch.query.options import (EF_MAX, SIZE_CAP, check_ef, check_facet, facet_bounds,  # noqa: F401
                                        check_exact, check_fusion, check_min_score, check_operator, check_size,
                                        check_sort, check_text_fields, check_weights)
from hybridsearch.query.rerank import check_rerank, rerank as rerank_results
from hybridsearch.query.plan import FILTER, HYBRID, SORTED, TEXT, VECTOR, Plan, VectorList
from hybridsearch.query.text import TextQuery, parse_text, uses_syntax
from hybridsearch.results import Results
from hybridsearch.storages.open_mode import check_mode, requested
from hybridsearch.storages.registry import missing_package, storage_class, storage_config
from hybridsearch.typed_init import T, TypedInit
from hybridsearch.vector_rules import field_queries


_PROGRESS_MIN = 10_000  # documents: below this a progress bar would only flicker
_PART = 4096  # documents validated and turned into columns at a time by extend() (its garbage is one part's)

# writers still open, closed (cleanly: flushed, snapshot written, lock released) at interpreter exit
_open_writers: "weakref.WeakSet" = weakref.WeakSet()


@atexit.register
def _close_open_writers() -> None:
    for da in list(_open_writers):
        try:
            da.close()
        except Exception as e:  # a full disk, say: the log holds every acknowledged write, reopening replays it
            logging.getLogger("hybridsearch").warning(
                "closing %r at exit failed (%s); the next open replays its log", da, e)


class DocumentArray(TypedInit[T]):
    """A collection of documents of one schema in one storage.

    `hs.DocumentArray(Product, storage="memory", metric="cosine")`, or the options as the
    storage's config dataclass: `storage="hnsw", config=hs.HnswConfig(m=32)`. `mode="create"`
    refuses a path= (or a remote index / collection) that holds a collection, `mode="open"` one
    that does not ("either", the default, takes both); see API.md section 2. Generic in the
    schema: `da[id]`, `res.docs` and iteration are typed as `Product` for a type checker.
    """

    def _open(self, schema: type[T], storage: str, config: Any, mode: str, options: dict) -> None:
        """The constructor's work; its signature, one overload per storage, is typed_init.TypedInit's."""
        self._schema = schema_of(schema)
        self._model = schema
        if not isinstance(storage, str):
            raise ConfigError(f"storage must be a name, got {storage!r}")
        cls = storage_class(storage)
        config = storage_config(storage, cls, config, options)
        check_mode(mode, storage, config, cls)
        self._read_only = getattr(config, "read_only", False)
        # a reader that follows the writer catches up before each read (API.md section 2)
        self._follow = bool(self._read_only and getattr(config, "follow", False))
        check_identity(self._schema, config)  # before the storage: another model's dimension is a ConfigError
        try:
            with requested(mode):  # a remote storage settles the mode once its engine says what exists
                self._storage = cls(self._schema, config)
        except ImportError as e:  # a client some storages import only when they connect
            raise missing_package(storage, e) from None
        self._closed = False
        if self._storage.writer_path is not None:
            _open_writers.add(self)
        try:
            record_identity(self._schema, config)
        except BaseException:
            self.close()
            raise

    # ------------------------------------------------------------ plumbing
    @property
    def schema(self) -> type[T]:
        """The Document class of this collection."""
        return self._model

    @property
    def storage(self) -> str:
        """Name of the storage in use."""
        return self._storage.name

    def stats(self) -> dict:
        """What the collection holds and how its storage is set up: "storage", "documents" and
        the storage's options (credentials left out), plus what the storage can tell (for hnsw
        the graph's nodes and bytes, the plan of this thread's last vector search; see
        docs/storages/<name>.md). Meant for sizing and debugging; keys beyond the first two
        differ between storages."""
        return self._open_storage().stats()

    def refresh(self) -> int:
        """Applies the writes the writer (another process, or another DocumentArray on the path)
        has acknowledged since this read_only=True collection last looked -> how many writes it
        applied. Costs what changed, not the collection (a snapshot the writer took meanwhile is
        mapped anew). With follow=True, the default, every read does this first when the files
        grew; with follow=False the view stays as it was until refresh(). 0 for a writer, and on
        the remote storages, which always answer from the engine's current state."""
        if self._closed:
            self._open_storage()  # ClosedError
        return self._storage.refresh()  # not through _open_storage: its catch-up would apply them first

    def backup(self, dest: Any) -> dict:
        """Writes a consistent copy of the collection to `dest`, a path that does not exist yet (or
        an empty folder; anything else is a ConfigError and nothing is written), while writes go
        on: it opens as a collection of the same storage with `path=dest` (or `hs.restore` copies
        it elsewhere), holding every write acknowledged before the call and perhaps some made
        during it. A read_only=True opener can back up too. -> {"documents", "bytes", "seconds",
        "stall_seconds" (how long writers were held off), "path"}. Memory, hnsw and sqlite back
        up; other storages raise UnsupportedError (API.md, "Backup and restore")."""
        report = self._open_storage().backup(dest)
        copy_record(getattr(self._storage.config, "path", None), report["path"])
        return report

    def close(self) -> None:
        """Flushes and releases the storage; further use raises an error."""
        if not self._closed:
            self._storage.close()
            self._closed = True

    def __del__(self) -> None:
        # dropped without close(): the files and the writer's lock go back now, not when some
        # collector gets to the storage's cycles; an unclosed writer is reported like an unclosed file
        if self.__dict__.get("_closed", True):
            return
        self._closed = True
        storage = self._storage
        path = storage.writer_path
        if path is not None:
            warnings.warn(f"unclosed DocumentArray writing {path}: call close() or open it in a `with` block "
                          "(its lock is released now, its writes were durable already)", ResourceWarning, source=self)
        try:
            storage.release()
        except Exception:  # pragma: no cover - a finalizer must not raise; the process exit releases the rest
            pass

    def __enter__(self) -> "DocumentArray":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        n = "closed" if self._closed else len(self)
        return f"DocumentArray({self._model.__name__}, storage={self.storage!r}, n={n})"

    def _open_storage(self):
        if self._closed:
            raise ClosedError(f"this DocumentArray ({self._model.__name__}, storage {self._storage.name!r}) is "
                              "closed: open a new one to use the collection again")
        if self._follow:
            self._storage.catch_up()
        return self._storage

    def _writable_storage(self):
        """The storage, for a write: refused on a collection opened read_only=True."""
        storage = self._open_storage()
        if self._read_only:
            raise ConfigError("this DocumentArray was opened with read_only=True: writes are refused")
        return storage

    def _validate_batch(self, docs: Iterable[Any], first: int = 0) -> list:
        """Every document validated; a bad one raises SchemaError naming its position (counted
        from `first`) and id."""
        out = []
        for i, d in enumerate(docs, first):
            try:
                out.append(self._validate(d))
            except SchemaError as e:
                raise SchemaError(f"document {i} (id {_id_of(d)!r}): {e}; nothing was written") from None
        return out

    def _validate(self, doc: Any) -> Document:
        if isinstance(doc, self._model):
            # a copy, so later changes to the caller's object do not reach the store unseen
            return self._model.model_validate(self._without_pending(doc.model_dump()))
        if isinstance(doc, dict):
            return self._model.model_validate(self._without_pending(doc))
        if isinstance(doc, Document):
            raise SchemaError(f"expected a {self._model.__name__} or a dict, got a {type(doc).__name__}")
        raise SchemaError(f"expected a {self._model.__name__} or a dict, got {type(doc).__name__} {doc!r}")

    def _without_pending(self, data: dict) -> dict:
        """The document's values without the hs.embedded fields it leaves None: those are computed
        when written (embedding.fill_documents), not refused as a missing vector."""
        if not self._schema.embedded:  # the common schema: no call per document beyond this test
            return data
        pending = [name for name in self._schema.embedded if name in data and data[name] is None]
        return {k: v for k, v in data.items() if k not in pending} if pending else data

    def _check_storable(self, docs: list) -> None:
        """Unindexed values must read back exactly on every storage (document.check_storable)."""
        for spec in self._schema.fields.values():
            if spec.kind is Kind.OTHER:
                check_storable(self._schema, spec.name, [getattr(d, spec.name) for d in docs])

    @staticmethod
    def _check_id(id: Any) -> str:
        if not isinstance(id, str):
            raise IdError(f"document ids are strings, got {type(id).__name__} {id!r}"
                              + (f"; did you mean {str(id)!r}?" if isinstance(id, (int, np.integer)) else ""))
        return id

    # ---------------------------------------------------------------- CRUD
    def extend(self, docs: Iterable[Any], progress: bool = False) -> None:
        """Batch upsert; atomic: one invalid document -> SchemaError naming its position and id,
        and nothing written. `progress=True` shows a progress bar (rich) while a long batch is
        validated; the batch is still written in one atomic write."""
        storage = self._writable_storage()
        if not progress and not self._schema.embedded and getattr(storage, "builds_from_columns", False):
            return self._extend_in_parts(storage, docs if isinstance(docs, list) else list(docs))
        if progress:
            validated = self._validate_with_progress(docs)
        else:
            validated = self._validate_batch(docs)
        if not validated:
            return
        # last write wins for a repeated id, at the position of its first occurrence
        last = {}
        for i, d in enumerate(validated):
            last[d.id] = i
        if len(last) != len(validated):
            validated = [validated[i] for i in last.values()]
        self._check_storable(validated)
        if self._schema.embedded:  # hs.embedded fields missing from documents: computed now, before any write
            validated = embedding.fill_documents(self._schema, validated)
        storage.upsert(build_batch(self._schema, validated))

    def _extend_in_parts(self, storage, docs: list) -> None:
        """extend() on a storage that writes from columns: documents validated and turned into
        columns _PART at a time, each part's validated copies dropped before the next part is
        validated (see batch.build_batch_in_parts); then the one atomic write, as extend()."""
        parts = (self._validate_batch(docs[start:start + _PART], first=start)
                 for start in range(0, len(docs), _PART))
        batch = build_batch_in_parts(self._schema, parts)
        if not len(batch):
            return
        batch = last_of_each_id(batch)  # last write wins, at the position of the first
        for spec in self._schema.fields.values():
            if spec.kind is Kind.OTHER:
                check_storable(self._schema, spec.name, batch.columns[spec.name])
        storage.upsert(batch)

    def _validate_with_progress(self, docs: Iterable[Any]) -> list:
        """_validate_batch with a progress bar over parts of _PROGRESS_MIN documents (validation
        is most of an extend's Python time); nothing is written here."""
        try:
            from rich.progress import Progress
        except ImportError:
            raise missing_extra("extend(progress=True)", "rich", "progress") from None
        docs = list(docs)
        if len(docs) < _PROGRESS_MIN:
            return self._validate_batch(docs)
        out: list = []
        with Progress(transient=True) as bar:
            task = bar.add_task(f"validate {self._model.__name__}", total=len(docs))
            for start in range(0, len(docs), _PROGRESS_MIN):
                out.extend(self._validate_batch(docs[start:start + _PROGRESS_MIN], first=start))
                bar.advance(task, min(_PROGRESS_MIN, len(docs) - start))
        return out

    def extend_columns(self, columns: Any) -> None:
        """Batch upsert from columns: a dict of name -> values (a numpy array, a list or tuple,
        a pandas Series, a pyarrow Array or an iterator; the vector field as one (n, d) array),
        a pandas DataFrame or a pyarrow Table or RecordBatch. Every column is validated before
        anything is written (one value per row, dtype, length, NaN/inf, ranges, dimension; no
        str, scalar, set or repeated name in place of a column): SchemaError naming the column
        and the first bad row, nothing written; no document object is created. A missing "id"
        column gives every row a new random id; a missing column takes the field's default."""
        storage = self._writable_storage()
        if self._schema.embedded:  # hs.embedded columns missing (or rows holding None): computed first
            columns = embedding.fill_columns(self._schema, as_column_dict(columns, self._schema.name))
        batch = batch_from_columns(self._schema, columns)
        if len(batch):
            storage.upsert(batch)

    def to_columns(self, fields: Optional[Iterable[str]] = None) -> dict:
        """Every document as columns, in insertion order: name -> numpy array for numbers and
        bools (int64 / float64 / bool) and the vector field ((n, d) float32), lists for ids,
        strings and unindexed values; an object array with None where an optional field is
        missing. `fields` picks the columns (default: all, "id" first)."""
        storage = self._open_storage()
        names = list(self._schema.fields) if fields is None else list(fields)
        for name in names:
            if name not in self._schema.fields:
                raise SchemaError(f"{self._model.__name__} has no field {name!r}")
        return public_columns(self._schema, storage.column_values(names))

    def to_pandas(self, fields: Optional[Iterable[str]] = None):
        """to_columns() as a pandas DataFrame (needs pandas; a vector cell holds a numpy row)."""
        return to_pandas(self.to_columns(fields))

    def to_arrow(self, fields: Optional[Iterable[str]] = None):
        """to_columns() as a pyarrow Table (needs pyarrow; vectors as fixed_size_list<float32>)."""
        return to_arrow(self.to_columns(fields), self._schema)

    def append(self, doc: Any) -> None:
        """Upserts one document."""
        self.extend([doc])

    def __len__(self) -> int:
        return self._open_storage().count()

    def __contains__(self, id: object) -> bool:
        return isinstance(id, str) and self._open_storage().contains(id)

    def __iter__(self) -> Iterator[T]:
        storage = self._open_storage()
        ids = list(storage.iter_ids())
        for start in range(0, len(ids), 1024):
            for d in storage.get(ids[start:start + 1024]):
                if d is not None:  # deleted while iterating
                    yield d

    def __getitem__(self, id: str) -> T:
        doc = self._open_storage().get([self._check_id(id)])[0]
        if doc is None:
            raise KeyError(id)
        return doc

    def __setitem__(self, id: str, doc: Any) -> None:
        self._check_id(id)
        validated = self._validate(doc)
        validated = [validated.model_copy(update={"id": id})]
        self._check_storable(validated)
        storage = self._writable_storage()
        if self._schema.embedded:
            validated = embedding.fill_documents(self._schema, validated)
        storage.upsert(build_batch(self._schema, validated))

    def update(self, id: str, **fields: Any) -> None:
        """Partial update of the named fields only; KeyError if absent, SchemaError if a value is bad."""
        storage = self._writable_storage()
        self._check_id(id)
        if "id" in fields:
            raise SchemaError("update() cannot change a document's id; delete and re-add it")
        values = {name: validate_value(self._schema, name, v) for name, v in fields.items()}
        if self._schema.embedded:
            values = self._reembed(storage, id, values)
        storage.update_fields(id, values)

    def _reembed(self, storage, id: str, values: dict) -> dict:
        """update()'s values plus the hs.embedded fields whose source text it changes (unless it
        sets them too): computed from the document as it will read after the update."""
        stale = [name for name, m in self._schema.embedded.items()
                 if name not in values and any(s in values for s in m.sources)]
        if not stale:
            return values
        doc = storage.get([id])[0]
        if doc is None:
            raise KeyError(id)
        merged = doc.model_copy(update={**values, **{name: None for name in stale}})
        filled = embedding.fill_documents(self._schema, [merged])[0]
        return {**values, **{name: getattr(filled, name) for name in stale}}

    def __delitem__(self, id: str) -> None:
        if self._writable_storage().delete([self._check_id(id)]) == 0:
            raise KeyError(id)

    def delete(self, ids: Any = None, *, filter: Optional[dict] = None) -> int:
        """Deletes the given ids (one id as a string, or an iterable; absent ids are skipped) or
        every document matching `filter`, atomically; returns the number deleted."""
        storage = self._writable_storage()
        if (ids is None) == (filter is None):
            raise ConfigError("delete() takes ids or filter=, exactly one of them")
        if filter is not None:
            return storage.delete_where(parse_filter(filter, self._schema))
        if isinstance(ids, str):  # one id, not its characters
            ids = [ids]
        elif not isinstance(ids, Iterable) or isinstance(ids, (bytes, dict)):
            raise SchemaError(f"delete() takes an id (a string), an iterable of ids or filter=, "
                              f"got {type(ids).__name__} {ids!r}")
        ids = [self._check_id(i) for i in ids]
        return storage.delete(list(dict.fromkeys(ids)))

    def update_many(self, filter: dict, **fields: Any) -> int:
        """Sets the named fields on every document matching `filter`, atomically, in one write;
        every value is validated first (SchemaError: nothing changes). Returns how many matched."""
        storage = self._writable_storage()
        if not isinstance(filter, dict):
            raise ConfigError(f"update_many() takes a filter dict first, got {type(filter).__name__}")
        node = parse_filter(filter, self._schema)
        if "id" in fields:
            raise SchemaError("update_many() cannot change ids; delete and re-add the documents")
        values = {name: validate_value(self._schema, name, v) for name, v in fields.items()}
        stale = [name for name, m in self._schema.embedded.items()
                 if name not in fields and any(s in fields for s in m.sources)]
        if stale:
            raise UnsupportedError(f"update_many() cannot recompute {', '.join(stale)} (embedded from the fields it "
                                   "changes) yet: update the documents with extend() or update(), or set the "
                                   "vector field too")
        return storage.update_where(node, values)

    # -------------------------------------------------------------- search
    def _vector_lists(self, storage, vector: Any, name: str) -> tuple:
        """The VectorLists of `vector=` (find) or `vectors=` (find_batched): an array for the
        schema's one dense field (list "vector"), or a dict naming one or more vector fields
        (lists named by the fields; API.md section 10). Each query is checked here."""
        fields = self._schema.vectors
        if isinstance(vector, dict):
            every = {**fields, **self._schema.sparse, **self._schema.multi}
            if not vector:
                raise ConfigError(f"{name}= as a dict names one vector field or more, got an empty dict; "
                                  f"vector fields of {self._model.__name__}: {', '.join(every) or '(none)'}")
            out = []
            for field, q in vector.items():
                spec = every.get(field) if isinstance(field, str) else None
                if spec is None:
                    raise ConfigError(f"{name}={{{field!r}: ...}}: {field!r} is not a vector field of "
                                      f"{self._model.__name__}; its vector fields: {', '.join(every) or '(none)'}")
                if spec.kind is not Kind.VECTOR:  # sparse / multi-vector: a list of checked queries
                    dim = None if spec.kind is Kind.SPARSE else spec.dim
                    out.append(VectorList(field, field, field_queries(dim, q, f"{name}[{field!r}]",
                                                                      batched=name == "vectors")))
                    continue
                # a storage holding one dense field is asked for it without naming it
                out.append(VectorList(field, field if storage.named_vectors else None,
                                      self._query_vectors(q, f"{name}[{field!r}]", spec)))
            return tuple(out)
        if len(fields) > 1:
            first = next(iter(fields))
            raise ConfigError(f"{self._model.__name__} has several vector fields ({', '.join(fields)}): name the one "
                              f"to search, e.g. {name}={{{first!r}: q}}")
        return (VectorList("vector", None, self._query_vectors(vector, name, self._schema.vector)),)

    def _query_vectors(self, vectors: Any, name: str, spec) -> np.ndarray:
        if spec is None:
            raise SchemaError(f"{self._model.__name__} has no hs.Vector field to search")
        if (type(vectors) is np.ndarray and vectors.shape == (spec.dim,) and vectors.dtype in _FAST_DTYPES
                and vectors.flags.c_contiguous):
            # one query as a flat float array (the common call): a finite squared norm inside
            # the bounds (or exactly 0) says all the checks below would pass; a copy, as below
            ss = sum_squares(vectors)
            if _SQ_NORM_SAFE[0] < ss < _SQ_NORM_SAFE[1] or ss == 0.0:
                return vectors.astype(np.float32).reshape(1, -1)
        if isinstance(vectors, np.ndarray) and vectors.dtype.kind == "c":
            # numpy would cast a complex array by dropping its imaginary part (a warning only)
            raise SchemaError(f"{name} must be real numbers, got an array of {vectors.dtype}")
        try:
            with np.errstate(over="ignore"):  # a value beyond float32 becomes inf, refused below
                arr = np.array(vectors, dtype=np.float32, ndmin=2, copy=True, order="C")
        except OverflowError:
            raise SchemaError(f"{name}: a number is too large for float32") from None
        except (TypeError, ValueError):
            raise SchemaError(f"{name} must be numbers, got {type(vectors).__name__}") from None
        if arr.ndim != 2 or arr.shape[1] != spec.dim:
            raise SchemaError(f"{name}: expected {spec.dim} dimensions ({spec.name}), got shape {arr.shape}")
        if not np.isfinite(arr).all():
            raise SchemaError(f"{name} contains NaN or inf")
        problem = vector_norm_problem(arr)
        if problem:
            raise SchemaError(f"{name}: {problem}")
        return arr

    @staticmethod
    def _check_limit(limit: Optional[int], allow_none: bool) -> Optional[int]:
        if limit is None:
            if allow_none:
                return None
            raise ConfigError("limit=None (all) only applies to filter-only find")
        return check_size(limit, "limit", 0)

    def find(self, vector: Any = None, text: Optional[str] = None, *, filter: Optional[dict] = None,
             limit: Optional[int] = 10, offset: int = 0, sort: Optional[list] = None, exact: bool = False,
             ef: Optional[int] = None, fusion: str = "sum", candidates: int = 100, rrf_k: int = 60,
             weights: Optional[dict] = None, text_fields: Optional[dict] = None,
             min_score: Optional[float] = None, operator: str = "or", rerank: Any = None,
             rerank_top: Optional[int] = None, rerank_query: Optional[str] = None, **unknown: Any) -> Results[T]:
        """Find by vector, text, both (hybrid) or condition; see API.md sections 4, 7, 8 and 11.
        `offset` skips that many hits: the page is exactly that slice of the longer ranking.
        `sort` orders a filter-only or text find by fields instead of by score. `fusion="linear"`
        with `weights` mixes min-max normalised parts; `text_fields` weights the text fields;
        `min_score` keeps the hits scoring at least that (then `total` is None). `text` may use
        the query syntax ("phrases", +required, -excluded, prefix*; docs/usage.md) and
        `operator="and"` makes every clause without a sign required. `rerank` re-scores the top
        `rerank_top` hits (default max(limit + offset, 50)) with a reranker: a callable
        (query, documents) -> scores or hs.RRFReranker / hs.LinearReranker /
        hs.CrossEncoderReranker; min_score, limit and offset then apply to the reranked ranking. `vector="auto"` embeds
        `text` for every hs.embedded field (API.md section 12): hybrid when the schema has text
        fields, the vectors alone when it has none. A name find does not take raises ConfigError
        naming the nearest one ("did you mean text=?")."""
        if unknown:
            raise unknown_argument("find", unknown, DocumentArray.find)
        if type(vector) is str and vector == "auto":  # API.md section 12: the text, embedded per field
            self._open_storage()
            vector = embedding.query_vectors(self._schema, text)
            if not self._schema.texts:
                text = None  # nothing to match the words against: the embedded vectors alone
        # the common call -- a vector alone, limit / ef / exact at most set, every other option
        # its default (by identity: cheap, and a default is valid) -- in one native call; None
        # from the storage sends it down the general path, which checks the query and refuses it
        if (vector is not None and text is None and filter is None and sort is None and min_score is None
                and weights is None and text_fields is None and offset is _OFFSET and fusion is _FUSION
                and candidates is _CANDIDATES and rrf_k is _RRF_K and operator is _OPERATOR
                and rerank is None and rerank_top is None and rerank_query is None
                and type(limit) is int and limit > 0 and (ef is None or type(ef) is int and 0 < ef <= EF_MAX)
                and (exact is False or exact is True) and not self._closed):
            if self._follow:
                self._storage.catch_up()
            hits = self._storage.find_vector(vector, limit, ef, exact)
            if hits is not None:
                return Results.of_hits(hits[0], hits[1], self._storage.get, {"vector": hits[1]})
        storage = self._open_storage()
        if vector is not None and text is None and looks_like_text(vector):
            raise SchemaError(f"find(vector=...) takes numbers, got the string {vector!r}: "
                              f"did you mean find(text={vector!r})?")
        node = parse_filter(filter, self._schema) if filter is not None else None
        only_filter = vector is None and text is None
        tq = self._text_query(storage, text, text_fields, operator)
        min_score = check_min_score(min_score)
        # every option is checked whatever the mode, so a bad one is never silently ignored
        ef = check_ef(ef)
        exact = check_exact(exact)
        fusion = check_fusion(fusion)
        candidates = check_size(candidates, "candidates", 1)
        rrf_k = check_size(rrf_k, "rrf_k", 0)
        known = ("text", "vector", *self._schema.vectors, *self._schema.sparse, *self._schema.multi)
        check_weights(weights, fusion, known, known)
        if min_score is not None and (only_filter or sort is not None):
            raise ConfigError("min_score applies to text, vector and hybrid finds without sort")
        if rerank is not None and (only_filter or sort is not None):
            raise ConfigError("rerank applies to text, vector and hybrid finds without sort: a filter-only or "
                              "sorted find has no ranking to re-score")
        check_rerank(None, rerank_top if rerank is None else None, rerank_query if rerank is None else None, 0, None)
        if sort is not None:
            if vector is not None:
                raise ConfigError("sort applies to filter-only and text finds: a vector query has no finite "
                                  "set of matches to sort")
            keys = check_sort(sort, self._schema)
            k = self._check_limit(limit, allow_none=True)
            offset = check_size(offset, "offset", 0)
            kk = None if k is None else min(k + offset, SIZE_CAP)
            return execute(storage, Plan(SORTED, text=tq, node=node, want=kk, offset=offset, sort=keys))
        k = self._check_limit(limit, allow_none=only_filter)
        offset = check_size(offset, "offset", 0)
        lists = self._vector_lists(storage, vector, "vector") if vector is not None else ()
        if any(len(lst.query) != 1 for lst in lists):
            raise SchemaError("find(vector=...) takes one vector per field; use find_batched for several")
        kk = None if k is None else min(k + offset, SIZE_CAP)  # the longer ranking the page is cut from
        reranking = check_rerank(rerank, rerank_top, rerank_query, kk or 0, text)
        if only_filter:
            node = node if node is not None else parse_filter({}, self._schema)
            return execute(storage, Plan(FILTER, node=node, want=kk, offset=offset))
        if not lists:  # text alone, one list: nothing to weigh against another
            return execute(storage, Plan(TEXT, text=tq, node=node, want=kk, offset=offset, min_score=min_score,
                                         rerank=reranking))
        if text is None and len(lists) == 1:
            return execute(storage, Plan(VECTOR, lists, None, node, kk, offset, exact=exact, ef=ef,
                                         min_score=min_score, rerank=reranking))
        plan = Plan(HYBRID, lists, tq, node, kk, offset, candidates, fusion, rrf_k, None, exact, ef, min_score,
                    rerank=reranking)
        if fusion == "linear":
            self._requires(storage, "linear")
            # the lists of this find, no others: a weight for a list it does not run would be lost
            plan = dataclasses.replace(plan, weights=check_weights(weights, fusion, plan.labels, plan.labels))
        return execute(storage, plan)

    def _text_query(self, storage, text: Any, text_fields: Optional[dict], operator: str = "or"):
        """The text as the storage takes it: the string, or a TextQuery with field weights or
        operator="and". A storage that does not declare the query syntax ("syntax" in its
        query_options) gets plain words only: a phrase, a sign or a prefix raises UnsupportedError
        there rather than run as other words."""
        if text is not None and not isinstance(text, str):
            raise ConfigError(f"text must be a string, got {type(text).__name__}"
                              + ("; did you mean vector=...?" if looks_like_vector(text) else ""))
        operator = check_operator(operator)
        if text is None:
            if text_fields is not None or operator != "or":
                raise ConfigError("text_fields and operator apply to a text query")
            return None
        if uses_syntax(parse_text(text)):
            self._requires(storage, "syntax", 'query syntax ("phrases", +required, -excluded, prefix*)')
        if operator != "or":
            self._requires(storage, "operator", 'operator="and"')
        if text_fields is None and operator == "or":
            return text
        fields = None
        if text_fields is not None:
            fields = check_text_fields(text_fields, self._schema)
            self._requires(storage, "text_fields")
        return TextQuery(text, fields, operator)

    @staticmethod
    def _requires(storage, option: str, what: Optional[str] = None) -> None:
        if option not in storage.query_options:
            raise UnsupportedError(f"{what or option} is not available on storage {storage.name!r} yet")

    def facets(self, field: str, *, filter: Optional[dict] = None, text: Optional[str] = None,
               limit: int = 10, ranges: Optional[list] = None, text_fields: Optional[dict] = None,
               operator: str = "or") -> list:
        """Counts of the matching documents (as count()) per value of a keyword, bool or int
        field: [(value, count)], most frequent first, ties by value; with `ranges` [(lo, hi)]
        (lo inclusive, hi exclusive, None unbounded) one count per range, in the given order."""
        storage = self._open_storage()
        ranges = check_facet(field, ranges, self._schema)
        limit = check_size(limit, "limit", 0)
        tq = self._text_query(storage, text, text_fields, operator)
        node = parse_filter(filter, self._schema) if filter is not None else None
        if ranges is None:
            return storage.facets(field, node, tq, limit, None)
        # bounds beyond what the field holds are cut here once, for every storage
        bounds = facet_bounds(ranges, self._schema.fields[field].kind.name)
        asked = [b for b in bounds if b is not None]
        counts = iter(storage.facets(field, node, tq, limit, asked) if asked else [])
        return [((lo, hi), 0 if b is None else next(counts)[1]) for (lo, hi), b in zip(ranges, bounds)]

    def count(self, filter: Optional[dict] = None, text: Optional[str] = None,
              text_fields: Optional[dict] = None, operator: str = "or") -> int:
        """Documents matching the filter (all without one) and, with `text`, matching the text
        query (a plain one: holding at least one of its terms): `find(...).total` without
        fetching hits."""
        storage = self._open_storage()
        tq = self._text_query(storage, text, text_fields, operator)
        node = parse_filter(filter, self._schema) if filter is not None else None
        if node is None and text is None:
            return storage.count()
        return storage.count_matches(node, tq)

    def find_batched(self, vectors: Any = None, limit: int = 10, filter: Optional[dict] = None, *,
                     texts: Optional[list] = None, offset: int = 0, min_score: Optional[float] = None,
                     exact: bool = False, ef: Optional[int] = None, threads: Optional[int] = None,
                     rerank: Any = None, rerank_top: Optional[int] = None,
                     rerank_query: Optional[list] = None) -> list[Results[T]]:
        """One Results per row of `vectors` (n, d), spread over all cores (the GIL is released).
        `vectors` may be a dict naming one vector field: {"image_vec": Q} (API.md section 10).
        `offset` and `min_score` cut each row's ranking as find's do; `rerank` re-scores each
        row's top hits as find's does (`rerank_query`: one query text per row, for a reranker
        that reads the query). `texts` (one query text per row) makes each row a text find,
        or a hybrid one with `vectors`; `vectors="auto"` embeds the texts for every
        hs.embedded field, one model call per batch: row i is find(text=texts[i],
        vector="auto") (API.md section 12)."""
        if texts is not None or (type(vectors) is str and vectors == "auto"):
            return self._find_texts_batched(vectors, texts, threads, rerank_query, dict(
                limit=limit, filter=filter, offset=offset, min_score=min_score, exact=exact, ef=ef,
                rerank=rerank, rerank_top=rerank_top))
        if vectors is None:
            raise ConfigError("find_batched takes vectors= (n query vectors), texts= (n query texts) or both")
        storage = self._open_storage()
        node = parse_filter(filter, self._schema) if filter is not None else None
        k = self._check_limit(limit, allow_none=False)
        offset = check_size(offset, "offset", 0)
        min_score = check_min_score(min_score)
        ef = check_ef(ef)
        exact = check_exact(exact)
        lists = self._vector_lists(storage, vectors, "vectors")
        if len(lists) > 1:
            raise UnsupportedError("find_batched searches one vector field per call; to fuse several fields, "
                                   "call find(vector={...}) per query")
        Q, field = lists[0].query, lists[0].kwargs
        n = len(Q)
        reranks = self._batched_reranks(rerank, rerank_top, rerank_query, n, min(k + offset, SIZE_CAP))
        if n == 0 or k == 0:
            return [Results.empty() for _ in range(n)]
        k = min(k + offset, SIZE_CAP)  # the longer ranking each page is cut from
        if reranks is not None:  # each row's retrieval ranking is its reranker's top hits
            want, k = k, reranks[0].top
        workers = max(1, min(threads or os.cpu_count() or 1, math.ceil(n / 8)))
        if workers == 1:
            parts = [storage.search_vectors(Q, k, node, exact, ef, **field)]
        else:
            bounds = np.linspace(0, n, workers + 1).astype(int)
            with ThreadPoolExecutor(workers) as pool:
                parts = list(pool.map(lambda b: storage.search_vectors(Q[b[0]:b[1]], k, node, exact, ef, **field),
                                      zip(bounds[:-1], bounds[1:])))
        if reranks is not None:  # the retrieval part kept beside the reranker's (as find's)
            rows = [Results(ids, scores, storage.get, docs, None, {lists[0].label: scores})
                    for part in parts for ids, scores, docs in part]
            return [rerank_results(res, spec).above(min_score)[:want].page(offset) for res, spec in zip(rows, reranks)]
        return [Results(ids, scores, storage.get, docs).above(min_score).page(offset)
                for part in parts for ids, scores, docs in part]

    def _find_texts_batched(self, vectors: Any, texts: Any, threads: Optional[int], rerank_query: Any,
                            options: dict) -> list[Results[T]]:
        """find_batched with texts=: row i is find(text=texts[i], vector=<row i of vectors>, **options),
        the rows spread over threads; vectors="auto" embeds every text first, batch by batch."""
        self._open_storage()
        if isinstance(texts, (str, bytes)) or not isinstance(texts, (list, tuple)):
            raise ConfigError(f"find_batched texts= takes a list of query texts (one per row), got "
                              f"{type(texts).__name__}" + ("" if texts is not None else
                                                           '; vectors="auto" embeds the texts= queries'))
        bad = next((t for t in texts if not isinstance(t, str)), None)
        if bad is not None:
            raise ConfigError(f"find_batched texts= holds {type(bad).__name__} {bad!r:.40}, not a string")
        n = len(texts)
        if rerank_query is not None and (isinstance(rerank_query, (str, bytes)) or
                                         not isinstance(rerank_query, (list, tuple)) or len(rerank_query) != n):
            raise ConfigError(f"find_batched rerank_query must be a list of {n} query texts (one per row), "
                              f"got {rerank_query!r:.80}")
        if type(vectors) is str and vectors == "auto":
            rows = embedding.query_vectors_batched(self._schema, list(texts))
            if not self._schema.texts:  # as find(vector="auto"): nothing to match the words against
                texts = [None] * n
        elif vectors is None:
            rows = [None] * n
        else:
            lists = self._vector_lists(self._storage, vectors, "vectors")
            if any(len(lst.query) != n for lst in lists):
                raise ConfigError(f"find_batched: {n} texts but {len(lists[0].query)} query vectors; "
                                  f"give one of each per row")
            rows = ([{lst.label: lst.query[i] for lst in lists} for i in range(n)] if isinstance(vectors, dict)
                    else [lists[0].query[i] for i in range(n)])
        if n == 0:
            return []

        def one(i: int) -> Results[T]:
            q = None if rerank_query is None else rerank_query[i]
            return self.find(rows[i], texts[i], rerank_query=q, **options)

        workers = max(1, min(threads or os.cpu_count() or 1, math.ceil(n / 8)))
        if workers == 1:
            return [one(i) for i in range(n)]
        with ThreadPoolExecutor(workers) as pool:
            return list(pool.map(one, range(n)))

    @staticmethod
    def _batched_reranks(rerank: Any, top: Any, queries: Any, n: int, want: int) -> Optional[list]:
        """find_batched's rerank arguments, checked: one query.rerank.Rerank per row, or None."""
        if rerank is None or queries is None:
            spec = check_rerank(rerank, top, queries, want, None)
            return None if spec is None else [spec] * n
        if isinstance(queries, (str, bytes)) or not isinstance(queries, (list, tuple)) or len(queries) != n:
            raise ConfigError(f"find_batched rerank_query must be a list of {n} query texts (one per row), "
                              f"got {queries!r:.80}")
        return [check_rerank(rerank, top, q, want, None) for q in queries]


# find()'s own defaults, which its fast path compares by identity
_OFFSET, _FUSION, _CANDIDATES, _RRF_K, _OPERATOR = (
    DocumentArray.find.__kwdefaults__[k] for k in ("offset", "fusion", "candidates", "rrf_k", "operator"))
_FAST_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


def _id_of(doc: Any) -> Any:
    """The id of a document or dict that failed validation, for the error message."""
    return doc.get("id") if isinstance(doc, dict) else getattr(doc, "id", None)
