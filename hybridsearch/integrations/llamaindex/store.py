"""HybridSearchVectorStore: LlamaIndex's BasePydanticVectorStore over a hybridsearch DocumentArray.

One document per node: `id` (the node id), `text` (hs.Text: BM25, so TEXT_SEARCH and HYBRID
queries work), `embedding` (hs.Vector[d]), `ref_doc_id` (hs.Keyword: delete(ref_doc_id) and
`doc_ids` are filters the storage answers), `metadata` (what LlamaIndex's own stores keep:
node_to_metadata_dict, the node's JSON under "_node_content"), and one typed column per
declared metadata field. Query modes: DEFAULT (vector), TEXT_SEARCH and SPARSE (BM25), HYBRID
(`fusion="linear"`, weights text = 1 - alpha, vector = alpha; alpha None is 0.5).
"""
from __future__ import annotations

import os
import threading
from typing import Any, Dict, List, Optional, Sequence

from llama_index.core.bridge.pydantic import PrivateAttr
from llama_index.core.schema import BaseNode, MetadataMode, TextNode
from llama_index.core.vector_stores.types import (BasePydanticVectorStore, MetadataFilters, VectorStoreQuery,
                                                  VectorStoreQueryMode, VectorStoreQueryResult)
from llama_index.core.vector_stores.utils import metadata_dict_to_node, node_to_metadata_dict

import hybridsearch as hs
from hybridsearch.document import Kind
from hybridsearch.errors import ConfigError, SchemaError, UnsupportedError
from hybridsearch.integrations import collection as col
from hybridsearch.integrations.llamaindex.filters import evaluator, split

# the metadata keys node_to_metadata_dict writes over a node's own (doc_id, document_id,
# ref_doc_id, _node_content, _node_type): a column declared for one would hold the node's value
# while filters on the stored metadata answer for LlamaIndex's, so they cannot be declared
_WRITTEN = tuple(sorted(node_to_metadata_dict(TextNode(text=""), remove_text=True)))
_RESERVED = ("id", "text", "embedding", "metadata", *_WRITTEN)
# the store's own columns as an open DocumentArray must have them (Kind, must be Optional)
_LAYOUT = {"text": (Kind.TEXT, False), "embedding": (Kind.VECTOR, False), "ref_doc_id": (Kind.KEYWORD, False),
           "metadata": (Kind.OTHER, False)}
_TEXT_MODES = (VectorStoreQueryMode.TEXT_SEARCH, VectorStoreQueryMode.SPARSE)
_MODES = (VectorStoreQueryMode.DEFAULT, *_TEXT_MODES, VectorStoreQueryMode.HYBRID)
# storages that hold nothing before this process writes, unless given a place to read from
_VOLATILE = ("memory", "hnsw", "hnswlib", "qdrant")
_PLACES = ("path", "url", "hosts")


def node_schema(dim: int, metadata_fields: Dict[str, Any]) -> type:
    """The hs.Document class of the nodes of a store of `dim`-dimensional embeddings, with a
    column per declared metadata field (name -> str, int, float, bool or its name)."""
    own = {"text": (hs.Text, ""), "embedding": (hs.Vector[dim], ...), "ref_doc_id": (Optional[hs.Keyword], None),
           "metadata": (dict, {})}
    return col.make_schema("LlamaIndexNode", own, col.declare(metadata_fields, _RESERVED))


class HybridSearchVectorStore(BasePydanticVectorStore):
    """A LlamaIndex vector store over any hybridsearch storage.

    `HybridSearchVectorStore(storage="memory", *, metadata_fields=None, embed_dim=None,
    flat_metadata=False, **options)`: `storage` is any name hs.backends() lists (or an open
    hs.DocumentArray whose schema is `node_schema(d, metadata_fields)`), `options` go to
    hs.DocumentArray (`path=`, `metric=`, `hosts=` ...). `metadata_fields` declares metadata keys
    as typed, filterable columns (str -> hs.Keyword, int, float, bool): filters on them run in
    the storage, filters on other keys are evaluated exactly over the stored metadata (slower:
    declare the keys you filter on). `embed_dim` is taken from the first nodes added or the first
    vector query; reopening a stored collection (path=, a remote index) needs it.
    """

    stores_text: bool = True
    is_embedding_query: bool = True
    flat_metadata: bool = False
    storage: str = "memory"
    metadata_fields: Dict[str, str] = {}  # name -> "str" | "int" | "float" | "bool"
    embed_dim: Optional[int] = None

    _da: Any = PrivateAttr(default=None)
    _options: dict = PrivateAttr(default_factory=dict)
    # the first add / query opens the DocumentArray: two threads doing it at once would open two
    # (memory: one's nodes vanish; path=: the second open fails), so it opens under this lock
    _open_lock: Any = PrivateAttr(default_factory=threading.Lock)
    _adopted: bool = PrivateAttr(default=False)

    def __init__(self, storage: Any = "memory", *, metadata_fields: Optional[Dict[str, type]] = None,
                 embed_dim: Optional[int] = None, flat_metadata: bool = False, **options: Any) -> None:
        if embed_dim is not None:
            col.check_dimension(embed_dim, "embed_dim")
        da = None
        if isinstance(storage, hs.DocumentArray):
            da = storage
            embed_dim, declared = col.adopt(da, _LAYOUT, "LlamaIndex", metadata_fields, embed_dim,
                                          written=[w for w in _WRITTEN if w not in _LAYOUT])
            storage = storage.storage
        elif not isinstance(storage, str):
            raise ConfigError(f"storage takes a storage name or an hs.DocumentArray, got {type(storage).__name__}")
        else:
            declared = col.declare(metadata_fields, _RESERVED)
        super().__init__(storage=storage, metadata_fields=declared, embed_dim=embed_dim, flat_metadata=flat_metadata)
        self._options = options
        self._da = da
        self._adopted = da is not None
        if da is None and embed_dim is not None:
            self._open(embed_dim)

    @classmethod
    def class_name(cls) -> str:
        return "HybridSearchVectorStore"

    def to_dict(self, **kwargs: Any) -> Dict[str, Any]:
        """The constructor's arguments, options (path=, metric=, ...) included: from_dict
        reopens the same collection. hs.UnsupportedError for a store made over an open
        DocumentArray, or whose options hold credentials (they would be written in clear)."""
        if self._adopted:
            raise UnsupportedError("a store made over an open DocumentArray cannot be serialised: make it with "
                                   "a storage name, path= and options to save it")
        secrets = col.secret_options(self.storage, self._options)
        if secrets:
            raise UnsupportedError(f"to_dict would write the credentials of {', '.join(secrets)} in clear text; "
                                   "build this store in code instead")
        options = {k: str(v) if isinstance(v, os.PathLike) else v for k, v in self._options.items()}
        return {"storage": self.storage, "metadata_fields": dict(self.metadata_fields), "embed_dim": self.embed_dim,
                "flat_metadata": self.flat_metadata, **options, "class_name": self.class_name()}

    @classmethod
    def from_dict(cls, data: Dict[str, Any], **kwargs: Any) -> "HybridSearchVectorStore":
        """The store to_dict describes, reopened on the same collection (stores_text and
        is_embedding_query, fixed for this class, are accepted and ignored)."""
        data = {**data, **kwargs}
        data.pop("class_name", None)
        for fixed in ("stores_text", "is_embedding_query"):
            if fixed in data and data.pop(fixed) is not getattr(cls, fixed, True):
                raise ConfigError(f"{fixed} is always True for HybridSearchVectorStore")
        return cls(**data)

    @property
    def client(self) -> Any:
        """The hs.DocumentArray holding the nodes (None until the dimension is known)."""
        return self._da

    # ------------------------------------------------------------ opening
    def _open(self, dim: int) -> Any:
        self._da = col.open_array(node_schema(dim, self.metadata_fields), self.storage, self._options)
        self.embed_dim = dim
        return self._da

    def _array(self, dim: Optional[int] = None) -> Any:
        """The DocumentArray, opened with `dim` if not yet open; None when the store cannot hold
        anything yet (a fresh in-memory store or a path that does not exist)."""
        if self._da is not None:
            return self._da
        with self._open_lock:
            if self._da is not None:  # another thread opened it while this one waited
                return self._da
            if dim is not None:
                return self._open(dim)
        path = self._options.get("path")
        if path is not None and not os.path.exists(path):
            return None
        places = {p: v for p, v in self._options.items() if p in _PLACES and v != ":memory:"}  # qdrant-client's RAM
        if path is None and self.storage in _VOLATILE and not places:
            return None
        raise ConfigError(f"this {self.storage} store may hold nodes already: pass embed_dim= to open it "
                          "(the dimension of its embeddings)")

    def close(self) -> None:
        """Closes the DocumentArray (a path= store can then be reopened)."""
        if self._da is not None:
            self._da.close()

    # ------------------------------------------------------------ writes
    def add(self, nodes: Sequence[BaseNode], **add_kwargs: Any) -> List[str]:
        """Upserts the nodes (each with its embedding) in one atomic batch; returns their ids.
        A node without an embedding, of another dimension or with a declared metadata value of
        the wrong type raises hs.SchemaError and nothing is written."""
        if not nodes:
            return []
        rows = []
        for node in nodes:
            if node.embedding is None:
                raise SchemaError(f"node {node.node_id!r} has no embedding: embed it first (VectorStoreIndex "
                                  "does, given an embed_model); nothing was written")
            try:
                metadata = node_to_metadata_dict(node, remove_text=True, flat_metadata=self.flat_metadata)
            except ValueError as e:  # flat_metadata=True and a nested value
                raise SchemaError(f"node {node.node_id!r}: {e}; nothing was written") from None
            row = {"id": node.node_id, "text": node.get_content(metadata_mode=MetadataMode.NONE),
                   "embedding": node.embedding, "ref_doc_id": node.ref_doc_id, "metadata": metadata}
            try:
                row.update(col.column_values(self.metadata_fields, node.metadata))
            except SchemaError as e:
                raise SchemaError(f"node {node.node_id!r}: {e}") from None
            rows.append(row)
        self._array(len(nodes[0].embedding)).extend(rows)
        return [node.node_id for node in nodes]

    def delete(self, ref_doc_id: str, **delete_kwargs: Any) -> None:
        """Deletes every node of the source document `ref_doc_id`."""
        da = self._array()
        if da is not None:
            da.delete(filter={"ref_doc_id": ref_doc_id})

    def delete_nodes(self, node_ids: Optional[List[str]] = None, filters: Optional[MetadataFilters] = None,
                     **delete_kwargs: Any) -> None:
        """Deletes the nodes among `node_ids` (None: every node) that pass `filters`, atomically
        (as SimpleVectorStore: with neither, every node)."""
        da = self._array()
        if da is None:
            return
        flt = self._filter(da, filters, node_ids, None)
        if flt is not col.NOTHING:
            da.delete(filter=flt or {})

    def clear(self) -> None:
        """Deletes every node."""
        da = self._array()
        if da is not None:
            da.delete(filter={})

    # ------------------------------------------------------------ reads
    def get_nodes(self, node_ids: Optional[List[str]] = None,
                  filters: Optional[MetadataFilters] = None) -> List[BaseNode]:
        """The nodes among `node_ids` (None: every node) that pass `filters`, in the order of
        `node_ids` when given, else in insertion order."""
        da = self._array()
        if da is None:
            return []
        flt = self._filter(da, filters, node_ids, None)
        if flt is col.NOTHING:
            return []
        docs = da.find(filter=flt or {}, limit=None).docs
        if node_ids is not None:
            at = {i: n for n, i in enumerate(dict.fromkeys(col.id_list(node_ids, "node_ids")))}
            docs = sorted(docs, key=lambda d: at[d.id])
        return [self._node(d) for d in docs]

    def query(self, query: VectorStoreQuery, **kwargs: Any) -> VectorStoreQueryResult:
        """DEFAULT: the nodes nearest to query_embedding (the storage's metric, cosine by default);
        TEXT_SEARCH / SPARSE: BM25 over the node texts; HYBRID: both, fused linearly with weight
        alpha on the vector part and 1 - alpha on BM25 (alpha None: 0.5), each part min-max
        normalised over the candidates. Filters, node_ids and doc_ids (each when not empty, as
        LlamaIndex's retrievers mean them) restrict every mode. The query string is plain words;
        `query_syntax=True` (a keyword, e.g. the retriever's vector_store_kwargs) reads it as
        hybridsearch's query syntax ("phrases", +required, -excluded, prefix*)."""
        mode = query.mode
        syntax = kwargs.get("query_syntax", False)
        if mode not in _MODES:
            raise UnsupportedError(f"query mode {getattr(mode, 'value', mode)!r} is not supported by "
                                   f"HybridSearchVectorStore; supported: {', '.join(m.value for m in _MODES)}")
        vector, text = query.query_embedding, query.query_str
        if mode in (VectorStoreQueryMode.DEFAULT, VectorStoreQueryMode.HYBRID) and vector is None:
            raise ConfigError(f"query mode {mode.value!r} needs query_embedding")
        if mode != VectorStoreQueryMode.DEFAULT and not isinstance(text, str):
            raise ConfigError(f"query mode {mode.value!r} needs query_str")
        if query.embedding_field not in (None, "embedding"):
            raise ConfigError(f"embedding_field {query.embedding_field!r}: the store's embeddings are in 'embedding'")
        da = self._array(None if vector is None else len(vector))
        if da is None:
            return VectorStoreQueryResult(nodes=[], similarities=[], ids=[])
        # an empty node_ids / doc_ids list is no restriction here: VectorStoreIndex.as_retriever()
        # sends node_ids=[] (its index struct lists no nodes when the store keeps the text)
        flt = self._filter(da, query.filters, query.node_ids or None, query.doc_ids or None)
        if flt is col.NOTHING:
            return VectorStoreQueryResult(nodes=[], similarities=[], ids=[])
        k = query.similarity_top_k
        if mode == VectorStoreQueryMode.DEFAULT:
            res = da.find(vector=vector, filter=flt, limit=k)
        elif mode in _TEXT_MODES:
            k = query.sparse_top_k or k if mode == VectorStoreQueryMode.SPARSE else k
            res = da.find(text=col.query_text(text, syntax), filter=flt, limit=k)
        else:
            alpha = 0.5 if query.alpha is None else query.alpha
            if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0.0 <= alpha <= 1.0:
                raise ConfigError(f"alpha must be a number in [0, 1] (0: BM25 only, 1: vector only), got {alpha!r}")
            limit = query.hybrid_top_k or k
            res = da.find(text=col.query_text(text, syntax), vector=vector, filter=flt, limit=limit, fusion="linear",
                          weights={"text": 1.0 - alpha, "vector": float(alpha)},
                          candidates=max(100, k, limit, query.sparse_top_k or 0))
        nodes = [self._node(d) for d in res.docs]
        return VectorStoreQueryResult(nodes=nodes, similarities=[float(s) for s in res.scores], ids=list(res.ids))

    # ------------------------------------------------------------ helpers
    @staticmethod
    def _node(doc: Any) -> BaseNode:
        node = metadata_dict_to_node(doc.metadata, text=doc.text)
        node.embedding = [float(x) for x in doc.embedding]
        return node

    def _filter(self, da: Any, filters: Optional[MetadataFilters], node_ids: Optional[List[str]],
                doc_ids: Optional[List[str]]) -> Optional[dict]:
        """Our filter for the restrictions (None: none; col.NOTHING: no node can pass). Metadata
        filters our language cannot state are evaluated over the stored metadata of the nodes
        the rest lets through, and come down as their ids."""
        parts = []
        if node_ids is not None:
            parts.append({"id": {"$in": col.id_list(node_ids, "node_ids")}})
        if doc_ids is not None:
            parts.append({"ref_doc_id": {"$in": col.id_list(doc_ids, "doc_ids")}})
        pushed, rest = split(filters, self.metadata_fields)
        if pushed is not None:
            parts.append(pushed)
        where = None if not parts else parts[0] if len(parts) == 1 else {"$and": parts}
        if rest is None:
            return where
        passes = evaluator(rest)
        return col.id_filter(col.ids_where(da, lambda m: passes({k: v for k, v in m.items() if k != "_node_content"}),
                                           where=where))
