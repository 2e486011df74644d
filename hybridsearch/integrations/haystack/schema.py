"""The collection layout of the Haystack store and the conversions Document <-> record.

One hybridsearch document per Haystack Document: ``id``; ``content`` as ``hs.Text`` (BM25, so
lexical and hybrid retrieval work); ``embedding`` as ``Optional[hs.Vector[d]]`` (a Document may
have none); ``meta`` stored whole as a dict; ``extra`` for what round-trips but is not searched
(blob, sparse embedding, the exact embedding when float32 would round it); and one typed,
filterable column per declared metadata field (str -> hs.Keyword, int, float, bool), which
mirrors ``meta[name]``.
"""
from __future__ import annotations

import base64
from typing import Any, Optional

import numpy as np
from haystack.dataclasses import ByteStream, Document, SparseEmbedding

import hybridsearch as hs
from hybridsearch.document import Kind
from hybridsearch.integrations import collection

SCHEMA_NAME = "HaystackDocument"
RESERVED = ("id", "content", "meta", "embedding", "extra")
# the store's own columns as an open DocumentArray must have them (Kind, must be Optional)
LAYOUT = {"content": (Kind.TEXT, True), "embedding": (Kind.VECTOR, True), "meta": (Kind.OTHER, False),
          "extra": (Kind.OTHER, False)}


def check_fields(metadata_fields: Optional[dict]) -> dict:
    """{name: "str" | "int" | "float" | "bool"} from the user's {name: type or type name}; ConfigError if bad."""
    return collection.declare(metadata_fields, RESERVED)


def check_dim(embedding_dim: Any) -> int:
    """A positive int dimension, else ConfigError."""
    return collection.check_dimension(embedding_dim, "embedding_dim")


def document_class(embedding_dim: int, fields: dict) -> type:
    """The hs.Document subclass of a store with this dimension and declared fields."""
    own: dict = {"content": (Optional[hs.Text], None), "meta": (dict, {}),
                 "embedding": (Optional[hs.Vector[embedding_dim]], None), "extra": (dict, {})}
    return collection.make_schema(SCHEMA_NAME, own, fields)


def layout_of(document_array: hs.DocumentArray, metadata_fields: Optional[dict] = None) -> tuple:
    """(embedding_dim, declared fields) of an open DocumentArray laid out as this store's (with
    these metadata_fields when given), else ConfigError."""
    return collection.adopt(document_array, LAYOUT, "Haystack", metadata_fields)


def to_record(doc: Any, fields: dict) -> dict:
    """The record (a dict for DocumentArray.extend) of one Haystack Document."""
    if not isinstance(doc, Document):
        raise hs.SchemaError(f"write_documents takes haystack Documents, got {type(doc).__name__} {doc!r:.80}")
    extra: dict = {}
    embedding = doc.embedding
    if embedding is not None:
        try:
            rounded = np.asarray(embedding, dtype=np.float32).tolist()
        except (TypeError, ValueError, OverflowError):
            rounded = None  # the schema refuses it below, with its own message
        if rounded is not None and rounded != list(embedding):
            # float32 would round it: keep the exact values so the Document reads back equal
            extra["embedding"] = [float(x) for x in embedding]
    if doc.blob is not None:
        extra["blob"] = {"data": base64.b64encode(doc.blob.data).decode("ascii"),
                         "mime_type": doc.blob.mime_type, "meta": doc.blob.meta}
    if doc.sparse_embedding is not None:
        extra["sparse_embedding"] = doc.sparse_embedding.to_dict()
    meta = doc.meta  # the schema refuses a non-dict
    record = {"id": doc.id, "content": doc.content, "meta": meta, "embedding": embedding, "extra": extra}
    record.update(collection.column_values(fields, meta))
    return record


def to_document(record: Any, score: Optional[float] = None, with_embedding: bool = True) -> Document:
    """The Haystack Document of one stored record (`score` set by retrieval)."""
    extra = record.extra or {}
    embedding = None
    if with_embedding and record.embedding is not None:
        embedding = extra.get("embedding") or record.embedding.tolist()
    blob = extra.get("blob")
    if blob is not None:
        blob = ByteStream(data=base64.b64decode(blob["data"]), mime_type=blob.get("mime_type"),
                          meta=blob.get("meta") or {})
    sparse = extra.get("sparse_embedding")
    if sparse is not None:
        sparse = SparseEmbedding.from_dict(sparse)
    return Document(id=record.id, content=record.content, meta=dict(record.meta), embedding=embedding,
                    score=score, blob=blob, sparse_embedding=sparse)
