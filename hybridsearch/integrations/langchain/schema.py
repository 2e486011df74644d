"""The Document class a framework store keeps its documents in: framework-neutral.

One row per framework document: `id`, its text as hs.Text (BM25, so lexical and hybrid search
work), its embedding as hs.Vector[d], the whole metadata as a stored dict, and one typed,
filterable column per metadata key the user declares (`metadata_fields={"year": int}`).
"""
from __future__ import annotations

import math
from typing import Any, Optional

import hybridsearch as hs
from hybridsearch.document import Kind, schema_of
from hybridsearch.errors import ConfigError, SchemaError

TEXT, EMBEDDING, METADATA = "text", "embedding", "metadata"
RESERVED = ("id", TEXT, EMBEDDING, METADATA)
# declared metadata type -> the column's annotation
KINDS = {str: hs.Keyword, int: int, float: float, bool: bool}
_TYPE_NAMES = {str: "str", int: "int", float: "float", bool: "bool"}


def check_metadata_fields(fields: Optional[dict]) -> dict:
    """The declared metadata columns, checked: {name: str | int | float | bool}."""
    if fields is None:
        return {}
    if not isinstance(fields, dict):
        raise ConfigError(f"metadata_fields must be a dict of name -> type (str, int, float or bool), got {fields!r}")
    for name, kind in fields.items():
        if not isinstance(name, str) or not name.isidentifier() or name.startswith("_"):
            raise ConfigError(f"metadata_fields: {name!r} cannot be a column name; declare keys that are "
                              "Python identifiers not starting with '_' (other keys are still filterable, "
                              "in Python)")
        if name in RESERVED:
            raise ConfigError(f"metadata_fields: {name!r} is reserved for the store's own column; "
                              f"reserved names are {', '.join(RESERVED)} (it stays filterable, in Python)")
        if kind not in KINDS:
            raise ConfigError(f"metadata_fields[{name!r}] must be str, int, float or bool, got {kind!r}")
    return dict(fields)


def check_dimension(dimension: Any) -> int:
    """The embedding dimension: an integer >= 1."""
    if isinstance(dimension, bool) or not isinstance(dimension, int) or dimension < 1:
        raise ConfigError(f"dimension must be an integer >= 1, got {dimension!r}")
    return dimension


def make_schema(dimension: int, fields: dict, name: str = "FrameworkDocument") -> type:
    """The hs.Document subclass of a store with this dimension and these declared columns.
    Built the same way every time, so a store reopened with path= finds its schema."""
    annotations: dict = {TEXT: hs.Text, EMBEDDING: hs.Vector[dimension], METADATA: dict}
    namespace: dict = {METADATA: {}, "__module__": __name__}
    for key, kind in fields.items():
        annotations[key] = Optional[KINDS[kind]]
        namespace[key] = None
    namespace["__annotations__"] = annotations
    return type(name, (hs.Document,), namespace)


def column_value(key: str, kind: type, value: Any) -> Any:
    """A declared metadata value as its column holds it (None when absent); a value of another
    type is a SchemaError naming the key, so nothing of the batch is written."""
    if value is None:
        return None
    fits = (isinstance(value, str) if kind is str else
            isinstance(value, bool) if kind is bool else
            isinstance(value, int) and not isinstance(value, bool) if kind is int else
            isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value))
    if not fits:
        raise SchemaError(f"metadata {key!r} is declared {_TYPE_NAMES[kind]} (metadata_fields) but a document "
                          f"holds {type(value).__name__} {value!r}; nothing was written")
    return float(value) if kind is float else value


def row(schema: type, fields: dict, id: str, text: Any, vector: Any, metadata: Any) -> Any:
    """One framework document as a row of `schema`."""
    if metadata is None:
        metadata = {}
    if not isinstance(metadata, dict):
        raise SchemaError(f"metadata must be a dict, got {type(metadata).__name__} (document {id!r})")
    if not isinstance(text, str):
        raise SchemaError(f"the text of document {id!r} must be a str, got {type(text).__name__}")
    values = {key: column_value(key, kind, metadata.get(key)) for key, kind in fields.items()}
    return schema(id=id, **{TEXT: text, EMBEDDING: vector, METADATA: dict(metadata)}, **values)


_COLUMN_TYPES = {Kind.KEYWORD: str, Kind.INT: int, Kind.FLOAT: float, Kind.BOOL: bool}


def adopt(collection: Any) -> tuple:
    """(dimension, declared fields) of an already-open DocumentArray whose schema a store can use:
    `text` hs.Text, `embedding` hs.Vector[d], `metadata` a stored dict, and any optional
    str / int / float / bool columns (the declared metadata). Else ConfigError saying what is off."""
    if not isinstance(collection, hs.DocumentArray):
        raise ConfigError(f"collection must be an open hs.DocumentArray, got {type(collection).__name__}")
    specs = schema_of(collection.schema).fields
    want = {TEXT: Kind.TEXT, EMBEDDING: Kind.VECTOR, METADATA: Kind.OTHER}
    for name, kind in want.items():
        if name not in specs or specs[name].kind is not kind:
            raise ConfigError(f"collection's schema {collection.schema.__name__} does not fit a framework store: it "
                              f"needs text: hs.Text, embedding: hs.Vector[d] and metadata: dict = {{}}")
    fields: dict = {}
    for name, spec in specs.items():
        if name in RESERVED:
            continue
        if spec.kind not in _COLUMN_TYPES or not spec.optional:
            raise ConfigError(f"collection's field {name!r} cannot hold declared metadata: declared metadata "
                              "columns are Optional str (hs.Keyword), int, float or bool, default None")
        fields[name] = _COLUMN_TYPES[spec.kind]
    return specs[EMBEDDING].dim, fields
