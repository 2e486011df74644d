"""HybridSearchDocumentStore: Haystack 2's DocumentStore over any hybridsearch storage."""
from __future__ import annotations

import asyncio
import json
import threading
import weakref
from pathlib import Path
from typing import Any, Optional, Union

from haystack import default_from_dict, default_to_dict
from haystack.dataclasses import Document
from haystack.document_stores.errors import DuplicateDocumentError
from haystack.document_stores.types import DuplicatePolicy

import hybridsearch as hs
from hybridsearch.integrations import collection as col
from hybridsearch.integrations.haystack import filters as hf
from hybridsearch.integrations.haystack.schema import (check_dim, check_fields, document_class, layout_of,
                                                       to_document, to_record)

_INFO_TYPES = {"str": "keyword", "int": "int", "float": "float", "bool": "boolean"}
# from_dict's open path= stores, by their serialised form: a pipeline whose components share a
# store serialises it once per component, and a path takes one writer at a time
_OPEN: "weakref.WeakValueDictionary[str, HybridSearchDocumentStore]" = weakref.WeakValueDictionary()
_OPEN_LOCK = threading.Lock()


def _meta_key(field: str) -> str:
    return field[len("meta."):] if field.startswith("meta.") else field


def _found(res: hs.Results) -> list:
    """(record, score) of each hit still stored: hits load lazily, and a document another writer
    deletes after the find reads as None, i.e. gone."""
    return [(r, float(s)) for r, s in zip(res.docs, res.scores) if r is not None]


def _hashable(value: Any) -> Any:
    """A hashable stand-in for a metadata value, telling 1, 1.0, True and "1" apart."""
    if isinstance(value, (list, tuple, dict)):
        return (type(value).__name__, json.dumps(value, sort_keys=True, default=repr))
    return (type(value).__name__, value)


class HybridSearchDocumentStore:
    """A Haystack ``DocumentStore`` keeping its Documents in a hybridsearch collection.

    ``HybridSearchDocumentStore(storage="memory", path=None, embedding_dim=768,
    metadata_fields={"year": int, "lang": str}, **options)`` opens
    ``hs.DocumentArray(..., storage=storage, path=path, **options)`` (any name ``hs.backends()``
    lists; ``options`` such as ``metric=``, ``hosts=``, ``index=`` go to that storage), or wraps
    an already-open DocumentArray laid out as this store's (pass it as ``storage``).

    Filters use Haystack's syntax. Comparisons on declared ``metadata_fields`` run in the
    storage; the others are evaluated in Python over the stored metadata (exact, slower on large
    collections: declare the fields you filter on). Writes follow ``DuplicatePolicy`` (``NONE``
    acts as ``FAIL``); each write is one atomic batch. Document embeddings are optional; one of
    the wrong dimension raises ``hs.SchemaError`` and nothing is written.
    """

    def __init__(self, storage: Union[str, hs.DocumentArray] = "memory", *, path: Optional[Union[str, Path]] = None,
                 embedding_dim: int = 768, metadata_fields: Optional[dict] = None, **options: Any) -> None:
        if isinstance(storage, hs.DocumentArray):
            if path is not None or options:
                raise hs.ConfigError("a store over an open DocumentArray takes no path= or storage options")
            dim, declared = layout_of(storage, metadata_fields)
            self._da, self._storage, self._path, self._options = storage, None, None, {}
            self.embedding_dim, self._fields = dim, declared
        else:
            self.embedding_dim = check_dim(embedding_dim)
            self._fields = check_fields(metadata_fields)
            self._storage, self._path, self._options = storage, path, dict(options)
            self._da = col.open_array(document_class(self.embedding_dim, self._fields), storage, options, path)
        self._declared = {name: col.KINDS[t] for name, t in self._fields.items()}
        self._closed = False
        # write_documents (FAIL / SKIP) and update_by_filter read, then write: every write of this
        # store takes this lock, so two threads (or async calls) cannot both pass the duplicate
        # check, and an update cannot bring back a document deleted between its read and its write
        self._write_lock = threading.Lock()

    @property
    def document_array(self) -> hs.DocumentArray:
        """The hybridsearch collection holding the Documents."""
        return self._da

    @property
    def metadata_fields(self) -> dict:
        """The declared metadata columns, {name: "str" | "int" | "float" | "bool"}."""
        return dict(self._fields)

    def close(self) -> None:
        """Close the collection (a path= store is reopened by a new store on the same path)."""
        self._closed = True
        self._da.close()

    def __enter__(self) -> "HybridSearchDocumentStore":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- serialisation --------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """Haystack's serialised form: the constructor's arguments. Refused (UnsupportedError) when
        they hold credentials, which a pipeline's YAML would carry in clear text."""
        if self._storage is None:
            raise hs.UnsupportedError("a store made over an open DocumentArray cannot be serialised: "
                                      "make it with storage=, path= and options to save it in a pipeline")
        secrets = col.secret_options(self._storage, self._options)
        if secrets:
            raise hs.UnsupportedError(f"to_dict would write the credentials of {', '.join(secrets)} in clear text "
                                      "into the serialised pipeline; build this store in code instead of loading it")
        return default_to_dict(self, storage=self._storage, path=None if self._path is None else str(self._path),
                               embedding_dim=self.embedding_dim, metadata_fields=dict(self._fields), **self._options)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "HybridSearchDocumentStore":
        """The store `to_dict` describes (a path= store reopens its files). A path= store this
        process already opened from the same dict and has not closed is returned again, so the
        components of one deserialised pipeline share it."""
        params = data.get("init_parameters", {})
        if params.get("path") is None:
            return default_from_dict(cls, data)
        key = json.dumps({**params, "path": str(Path(params["path"]).resolve())}, sort_keys=True, default=str)
        with _OPEN_LOCK:
            store = _OPEN.get(key)
            if store is None or store._closed:
                store = _OPEN[key] = default_from_dict(cls, data)
            return store

    # -- filters --------------------------------------------------------------------------
    def _leaf_documents(self, leaves: list) -> list:
        """The stored Documents, as much of them as the Python-evaluated comparisons read."""
        need = hf.leaf_fields(leaves)
        if need - {"content"}:
            return [to_document(r) for r in self._da]
        names = ["id", "meta"] + (["content"] if need else [])
        return [Document(id=r["id"], meta=r["meta"], content=r.get("content")) for r in col.rows(self._da, names)]

    def hs_filter(self, filters: Optional[dict]) -> dict:
        """The hybridsearch filter selecting the documents a Haystack filter matches (Python-evaluated
        comparisons enter as id lists). FilterError for a malformed filter."""
        compiled = hf.compile_filter(filters, self._declared)
        if not compiled.leaves:
            return hf.render(compiled.tree, None)
        ids = hf.evaluate(compiled.leaves, self._leaf_documents(compiled.leaves))
        return hf.render(compiled.tree, ids.__getitem__)

    # -- the DocumentStore protocol -------------------------------------------------------
    def count_documents(self) -> int:
        """The number of stored Documents."""
        return len(self._da)

    def filter_documents(self, filters: Optional[dict[str, Any]] = None) -> list[Document]:
        """The Documents matching a Haystack filter (all of them for None or {}), in insertion order."""
        flt = self.hs_filter(filters)
        return [to_document(r) for r, _ in _found(self._da.find(filter=flt or None, limit=None))]

    def write_documents(self, documents: list[Document], policy: DuplicatePolicy = DuplicatePolicy.NONE) -> int:
        """Write Documents in one atomic batch; returns how many were written.

        ``FAIL`` (and ``NONE``): DuplicateDocumentError, nothing written, if an id is stored already
        or repeated in the batch. ``SKIP``: those are left out. ``OVERWRITE``: they replace the
        stored Document (the last of repeated ids wins); returns len(documents)."""
        if not isinstance(documents, (list, tuple)):
            raise hs.SchemaError(f"write_documents takes a list of haystack Documents, got "
                                 f"{type(documents).__name__} {documents!r:.80}")
        records = [to_record(d, self._fields) for d in documents]
        if not records:
            return 0
        if not isinstance(policy, DuplicatePolicy):
            raise hs.ConfigError(f"policy is a haystack DuplicatePolicy, got {policy!r}")
        with self._write_lock:
            if policy is DuplicatePolicy.OVERWRITE:
                self._da.extend(list({r["id"]: r for r in records}.values()))  # the last of an id wins
                return len(records)
            return self._write_new(records, policy)

    def _write_new(self, records: list, policy: DuplicatePolicy) -> int:
        ids = list(dict.fromkeys(r["id"] for r in records))
        stored = set(self._da.find(filter={"id": {"$in": ids}}, limit=None).ids)
        batch: dict = {}
        for r in records:
            if r["id"] in stored or r["id"] in batch:
                if policy is DuplicatePolicy.SKIP:
                    continue
                raise DuplicateDocumentError(f"ID '{r['id']}' already exists in the document store"
                                             if r["id"] in stored else f"ID '{r['id']}' appears twice in the batch")
            batch[r["id"]] = r
        if batch:
            self._da.extend(list(batch.values()))
        return len(batch)

    def delete_documents(self, document_ids: list[str]) -> None:
        """Delete the Documents with these ids (absent ids are ignored; a str is one id)."""
        document_ids = col.id_list(document_ids, "delete_documents")
        with self._write_lock:
            self._da.delete(document_ids)

    # -- optional methods the standard test classes cover -----------------------------------
    def delete_all_documents(self, recreate_index: bool = False) -> None:
        """Delete every Document. `recreate_index` is accepted for parity with Haystack's other
        stores; the collection is emptied in place either way (there is no index to rebuild)."""
        with self._write_lock:
            self._da.delete(filter={})

    def delete_by_filter(self, filters: dict[str, Any]) -> int:
        """Delete the Documents matching a filter, atomically; returns how many."""
        with self._write_lock:
            return self._da.delete(filter=self.hs_filter(filters))

    def update_by_filter(self, filters: dict[str, Any], meta: dict[str, Any]) -> int:
        """Merge `meta` into the metadata of every Document matching a filter, in one atomic write
        (declared columns follow); returns how many were updated."""
        if not isinstance(meta, dict):
            raise hs.SchemaError(f"update_by_filter takes meta as a dict, got {type(meta).__name__}")
        with self._write_lock:
            return self._update(filters, meta)

    def _update(self, filters: dict, meta: dict) -> int:
        matched = [r for r, _ in _found(self._da.find(filter=self.hs_filter(filters) or None, limit=None))]
        records = []
        for r in matched:
            merged = {**r.meta, **meta}
            record = {"id": r.id, "content": r.content, "meta": merged, "embedding": r.embedding, "extra": r.extra}
            record.update(col.column_values(self._fields, merged))
            records.append(record)
        if records:
            self._da.extend(records)
        return len(records)

    def count_documents_by_filter(self, filters: dict[str, Any]) -> int:
        """The number of Documents matching a filter."""
        return self._da.count(filter=self.hs_filter(filters) or None)

    def _metas(self, filters: Optional[dict]) -> list:
        flt = self.hs_filter(filters)
        if not flt:
            return self._da.to_columns(fields=["meta"])["meta"]
        return [r.meta for r, _ in _found(self._da.find(filter=flt, limit=None))]

    def count_unique_metadata_by_filter(self, filters: dict[str, Any], metadata_fields: list[str]) -> dict[str, int]:
        """{field: number of distinct values} over the Documents matching a filter (missing values
        not counted; 1, 1.0, True and "1" are distinct)."""
        metas = self._metas(filters)
        out = {}
        for name in metadata_fields:
            key = _meta_key(name)
            out[key] = len({_hashable(m[key]) for m in metas if m.get(key) is not None})
        return out

    def get_metadata_fields_info(self) -> dict[str, dict[str, str]]:
        """{metadata key: {"type": keyword | int | float | boolean}} of the keys stored Documents hold
        (a declared column's own type; otherwise inferred from the values, the last one seen)."""
        types: dict = {}
        for meta in self._metas(None):
            for key, value in meta.items():
                if value is None:
                    continue
                if key in self._fields:
                    types[key] = _INFO_TYPES[self._fields[key]]
                elif isinstance(value, bool):
                    types[key] = "boolean"
                elif isinstance(value, int):
                    types[key] = "int"
                elif isinstance(value, float):
                    types[key] = "float"
                else:
                    types[key] = "keyword"
        return {k: {"type": v} for k, v in types.items()}

    def get_metadata_field_min_max(self, metadata_field: str) -> dict[str, Any]:
        """{"min", "max"} of a metadata field's numbers or strings ({"min": None, "max": None} when
        no Document holds a value, or the values cannot be ordered together)."""
        key = _meta_key(metadata_field)
        values = [m[key] for m in self._metas(None)
                  if m.get(key) is not None and isinstance(m[key], (int, float, str))]
        try:
            return {"min": min(values), "max": max(values)} if values else {"min": None, "max": None}
        except TypeError:
            return {"min": None, "max": None}

    def get_metadata_field_unique_values(self, metadata_field: str, search_term: Optional[str] = None, from_: int = 0,
                                         size: int = 10, filters: Optional[dict] = None) -> tuple[list, int]:
        """(one page of the distinct values of a metadata field, how many there are in all), over
        the Documents matching `filters`, optionally only values holding `search_term` (any case);
        ordered by their text, then type."""
        for name, value in (("from_", from_), ("size", size)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise hs.ConfigError(f"{name} is an integer >= 0, got {value!r}")
        key = _meta_key(metadata_field)
        unique: dict = {}
        for meta in self._metas(filters):
            value = meta.get(key)
            if value is not None:
                unique.setdefault(_hashable(value), value)
        if search_term:
            term = search_term.lower()
            unique = {k: v for k, v in unique.items() if term in str(v).lower()}
        ordered = sorted(unique, key=lambda k: (str(unique[k]), k[0]))
        return [unique[k] for k in ordered[from_:from_ + size]], len(ordered)

    # -- retrieval (the retriever components call these) -------------------------------------
    def _hits(self, top_k: int, return_embedding: bool, **find: Any) -> list[Document]:
        if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 0:
            raise hs.ConfigError(f"top_k is an integer >= 0, got {top_k!r}")
        if top_k == 0:
            return []
        res = self._da.find(limit=top_k, **find)
        return [to_document(r, score=s, with_embedding=return_embedding) for r, s in _found(res)]

    def embedding_retrieval(self, query_embedding: list[float], filters: Optional[dict] = None, top_k: int = 10,
                            return_embedding: bool = False, exact: bool = False) -> list[Document]:
        """The `top_k` Documents nearest to `query_embedding` (score: the storage's metric, cosine by
        default; higher is better) among those matching `filters`."""
        return self._hits(top_k, return_embedding, vector=query_embedding,
                          filter=self.hs_filter(filters) or None, exact=exact)

    def bm25_retrieval(self, query: str, filters: Optional[dict] = None, top_k: int = 10,
                       return_embedding: bool = False, query_syntax: bool = False) -> list[Document]:
        """The `top_k` Documents best matching `query` by BM25 over their content. The query is
        plain words; `query_syntax=True` reads it as hybridsearch's query syntax ("phrases",
        +required, -excluded, prefix*)."""
        if not isinstance(query, str) or not query.strip():
            raise hs.ConfigError(f"query is a non-empty string, got {query!r}")
        return self._hits(top_k, return_embedding, text=col.query_text(query, query_syntax),
                          filter=self.hs_filter(filters) or None)

    def hybrid_retrieval(self, query: str, query_embedding: list[float], filters: Optional[dict] = None,
                         top_k: int = 10, fusion: str = "rrf", weights: Optional[dict] = None,
                         return_embedding: bool = False, query_syntax: bool = False) -> list[Document]:
        """The `top_k` Documents of BM25 on `query` and vector search on `query_embedding`, fused
        (``"rrf"``, ``"sum"`` or ``"linear"`` with `weights` {"text", "vector"}: API.md section 4, 8).
        The query is plain words unless `query_syntax=True`, as in bm25_retrieval."""
        if not isinstance(query, str) or not query.strip():
            raise hs.ConfigError(f"query is a non-empty string, got {query!r}")
        find = {"weights": weights} if weights is not None else {}
        return self._hits(top_k, return_embedding, text=col.query_text(query, query_syntax), vector=query_embedding,
                          fusion=fusion, filter=self.hs_filter(filters) or None, **find)

    # -- async forms: the same calls on a worker thread ---------------------------------------
    async def count_documents_async(self) -> int:
        """count_documents, off the event loop."""
        return await asyncio.to_thread(self.count_documents)

    async def filter_documents_async(self, filters: Optional[dict[str, Any]] = None) -> list[Document]:
        """filter_documents, off the event loop."""
        return await asyncio.to_thread(self.filter_documents, filters)

    async def write_documents_async(self, documents: list[Document],
                                    policy: DuplicatePolicy = DuplicatePolicy.NONE) -> int:
        """write_documents, off the event loop."""
        return await asyncio.to_thread(self.write_documents, documents, policy)

    async def delete_documents_async(self, document_ids: list[str]) -> None:
        """delete_documents, off the event loop."""
        return await asyncio.to_thread(self.delete_documents, document_ids)

    async def delete_all_documents_async(self, recreate_index: bool = False) -> None:
        """delete_all_documents, off the event loop."""
        return await asyncio.to_thread(self.delete_all_documents, recreate_index)

    async def delete_by_filter_async(self, filters: dict[str, Any]) -> int:
        """delete_by_filter, off the event loop."""
        return await asyncio.to_thread(self.delete_by_filter, filters)

    async def update_by_filter_async(self, filters: dict[str, Any], meta: dict[str, Any]) -> int:
        """update_by_filter, off the event loop."""
        return await asyncio.to_thread(self.update_by_filter, filters, meta)

    async def count_documents_by_filter_async(self, filters: dict[str, Any]) -> int:
        """count_documents_by_filter, off the event loop."""
        return await asyncio.to_thread(self.count_documents_by_filter, filters)

    async def count_unique_metadata_by_filter_async(self, filters: dict[str, Any],
                                                    metadata_fields: list[str]) -> dict[str, int]:
        """count_unique_metadata_by_filter, off the event loop."""
        return await asyncio.to_thread(self.count_unique_metadata_by_filter, filters, metadata_fields)

    async def get_metadata_fields_info_async(self) -> dict[str, dict[str, str]]:
        """get_metadata_fields_info, off the event loop."""
        return await asyncio.to_thread(self.get_metadata_fields_info)

    async def get_metadata_field_min_max_async(self, metadata_field: str) -> dict[str, Any]:
        """get_metadata_field_min_max, off the event loop."""
        return await asyncio.to_thread(self.get_metadata_field_min_max, metadata_field)

    async def get_metadata_field_unique_values_async(self, metadata_field: str, search_term: Optional[str] = None,
                                                     from_: int = 0, size: int = 10,
                                                     filters: Optional[dict] = None) -> tuple[list, int]:
        """get_metadata_field_unique_values, off the event loop."""
        return await asyncio.to_thread(self.get_metadata_field_unique_values, metadata_field, search_term,
                                       from_, size, filters)

    async def embedding_retrieval_async(self, query_embedding: list[float], filters: Optional[dict] = None,
                                        top_k: int = 10, return_embedding: bool = False,
                                        exact: bool = False) -> list[Document]:
        """embedding_retrieval, off the event loop."""
        return await asyncio.to_thread(self.embedding_retrieval, query_embedding, filters, top_k,
                                       return_embedding, exact)

    async def bm25_retrieval_async(self, query: str, filters: Optional[dict] = None, top_k: int = 10,
                                   return_embedding: bool = False, query_syntax: bool = False) -> list[Document]:
        """bm25_retrieval, off the event loop."""
        return await asyncio.to_thread(self.bm25_retrieval, query, filters, top_k, return_embedding, query_syntax)
