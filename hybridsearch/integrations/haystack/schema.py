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
import pydantic
from haystack.dataclasses import ByteStream, Document, SparseEmbedding

import hybridsearch as hs
from hybridsearch.document import Kind, schema_of

SCHEMA_NAME = "HaystackDocument"
RESERVED = ("id", "content", "meta", "embedding", "extra")
COLUMN_TYPES = {"str": hs.Keyword, "int": int, "float": float, "bool": bool}
KIND_NAMES = {Kind.KEYWORD: "str", Kind.INT: "int", Kind.FLOAT: "float", Kind.BOOL: "bool"}


def check_fields(metadata_fields: Optional[dict]) -> dict:
    """{name: "str" | "int" | "float" | "bool"} from the user's {name: type or type name}; ConfigError if bad."""
    if metadata_fields is None:
        return {}
    if not isinstance(metadata_fields, dict):
        raise hs.ConfigError(f"metadata_fields is a dict {{name: str | int | float | bool}}, "
                             f"got {type(metadata_fields).__name__}")
    out = {}
    for name, typ in metadata_fields.items():
        if not isinstance(name, str) or not name.isidentifier() or name.startswith("_") or name in RESERVED:
            raise hs.ConfigError(f"metadata_fields: {name!r} cannot be a column name (an identifier not "
                                 f"starting with '_', none of {', '.join(RESERVED)})")
        if hasattr(hs.Document, name) or name.startswith("model_"):
            raise hs.ConfigError(f"metadata_fields: {name!r} is the name of a pydantic model attribute and cannot be "
                                 "a column; leave it undeclared (filters on it are still answered exactly)")
        type_name = typ if isinstance(typ, str) else getattr(typ, "__name__", None)
        if type_name not in COLUMN_TYPES or not isinstance(typ, str) and typ not in (str, int, float, bool):
            raise hs.ConfigError(f"metadata_fields[{name!r}]: the type is one of str, int, float, bool, got {typ!r}")
        out[name] = type_name
    # columns in name order: the stored schema does not depend on the dict's order (a pipeline's
    # YAML sorts keys, and must reopen the same files)
    return dict(sorted(out.items()))


def check_dim(embedding_dim: Any) -> int:
    """A positive int dimension, else ConfigError."""
    if isinstance(embedding_dim, bool) or not isinstance(embedding_dim, int) or embedding_dim < 1:
        raise hs.ConfigError(f"embedding_dim is a positive integer, got {embedding_dim!r}")
    return embedding_dim


def document_class(embedding_dim: int, fields: dict) -> type:
    """The hs.Document subclass of a store with this dimension and declared fields."""
    spec: dict = {"content": (Optional[hs.Text], None), "meta": (dict, {}),
                  "embedding": (Optional[hs.Vector[embedding_dim]], None), "extra": (dict, {})}
    for name, type_name in fields.items():
        spec[name] = (Optional[COLUMN_TYPES[type_name]], None)
    return pydantic.create_model(SCHEMA_NAME, __base__=hs.Document, **spec)


def layout_of(document_array: hs.DocumentArray) -> tuple:
    """(embedding_dim, declared fields) of an open DocumentArray laid out as this store's, else ConfigError."""
    schema = schema_of(document_array.schema)
    f = schema.fields
    problems = []
    if "content" not in f or f["content"].kind is not Kind.TEXT or not f["content"].optional:
        problems.append("content: Optional[hs.Text]")
    if "embedding" not in f or f["embedding"].kind is not Kind.VECTOR or not f["embedding"].optional:
        problems.append("embedding: Optional[hs.Vector[d]]")
    for name in ("meta", "extra"):
        if name not in f or f[name].kind is not Kind.OTHER:
            problems.append(f"{name}: dict")
    declared = {}
    for name, spec in f.items():
        if name in RESERVED:
            continue
        if spec.kind not in KIND_NAMES or not spec.optional:
            problems.append(f"{name}: an Optional str (hs.Keyword), int, float or bool column, not {spec.kind.value}")
        else:
            declared[name] = KIND_NAMES[spec.kind]
    if problems:
        raise hs.ConfigError(f"the DocumentArray's schema {schema.name} does not fit a Haystack store; it needs "
                             + "; ".join(problems))
    return f["embedding"].dim, declared


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
    if isinstance(meta, dict):
        for name, type_name in fields.items():
            value = record[name] = meta.get(name)
            if type_name == "float" and type(value) is int and abs(value) > 2 ** 53:
                # the float column would round it, and filters on the column would then differ from meta
                raise hs.SchemaError(f"meta[{name!r}] = {value}: the declared float column cannot hold this "
                                     "integer exactly (declare it int, or write a float)")
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
