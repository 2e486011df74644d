"""The Document class the LangChain store keeps its documents in.

One row per LangChain document: `id`, its text as hs.Text (BM25, so lexical and hybrid search
work), its embedding as hs.Vector[d], the whole metadata as a stored dict, and one typed,
filterable column per metadata key the user declares (`metadata_fields={"year": int}`). What
the framework stores share (declaring the columns, checking their values, adopting an open
collection) is hybridsearch/integrations/collection.py.
"""
from __future__ import annotations

from typing import Any

import hybridsearch as hs
from hybridsearch.document import Kind
from hybridsearch.errors import SchemaError
from hybridsearch.integrations import collection

TEXT, EMBEDDING, METADATA = "text", "embedding", "metadata"
RESERVED = ("id", TEXT, EMBEDDING, METADATA)
# the store's own columns as an open collection must have them (Kind, must be Optional)
LAYOUT = {TEXT: (Kind.TEXT, False), EMBEDDING: (Kind.VECTOR, False), METADATA: (Kind.OTHER, False)}


def make_schema(dimension: int, fields: dict) -> type:
    """The hs.Document subclass of a store with this dimension and these declared columns."""
    own = {TEXT: (hs.Text, ...), EMBEDDING: (hs.Vector[dimension], ...), METADATA: (dict, {})}
    return collection.make_schema("LangChainDocument", own, fields)


def row(schema: type, fields: dict, id: str, text: Any, vector: Any, metadata: Any) -> Any:
    """One LangChain document as a row of `schema`."""
    if metadata is None:
        metadata = {}
    if not isinstance(metadata, dict):
        raise SchemaError(f"metadata must be a dict, got {type(metadata).__name__} (document {id!r})")
    if not isinstance(text, str):
        raise SchemaError(f"the text of document {id!r} must be a str, got {type(text).__name__}")
    values = collection.column_values(fields, metadata)
    return schema(id=id, **{TEXT: text, EMBEDDING: vector, METADATA: dict(metadata)}, **values)
