"""What every framework store does with its collection, whatever the framework (API.md section 13).

A framework store keeps one hybridsearch document per framework document: a few columns of its
own (id, text, embedding, the whole metadata as a stored dict, ...) and one typed, filterable
column per metadata key the user declares (`metadata_fields={"year": int}`: str -> hs.Keyword,
int, float, bool). This module holds the parts that are the same idea in every store:

- `declare`: the declared columns, checked, as {name: "str" | "int" | "float" | "bool"};
- `make_schema` / `adopt`: the Document class of a store, or the layout of an open DocumentArray
  a store can use;
- `column_values`: the declared columns of one document, its metadata values checked;
- `ids_where` / `id_filter`: the part of a filter only Python can answer, evaluated over the
  stored metadata and sent down as `{"id": {"$in": ids}}`.

The filter syntax of each framework stays with its store: the languages differ. No framework
is imported here.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable, Iterable, Optional

import pydantic

import hybridsearch as hs
from hybridsearch.document import Kind, schema_of
from hybridsearch.errors import ConfigError, IdError, SchemaError
from hybridsearch.storages.registry import storage_class

# declared type name -> the annotation of its column, and the column kind that reads back as it
ANNOTATIONS = {"str": hs.Keyword, "int": int, "float": float, "bool": bool}
KINDS = {"str": Kind.KEYWORD, "int": Kind.INT, "float": Kind.FLOAT, "bool": Kind.BOOL}
_NAMES = {kind: name for name, kind in KINDS.items()}
_TYPES = {str: "str", int: "int", float: "float", bool: "bool"}
# integers beyond 2**53 lose precision as floats: a float column would hold another number than
# the metadata, and filters on the column would answer for that other number
EXACT_FLOAT_INT = 2 ** 53
NOTHING = {"id": {"$in": []}}  # the filter no document matches (stores test it with `is`)


def declare(metadata_fields: Any, reserved: Iterable[str]) -> dict:
    """The declared metadata columns {name: "str" | "int" | "float" | "bool"}, from the user's
    {name: type or type name}, in name order (the stored schema must not depend on the dict's
    order: reopening a path= store with the same keys finds the same columns). ConfigError for
    a name that cannot be a column: not an identifier, starting with '_', one of the store's own
    columns (`reserved`) or an attribute of the pydantic model."""
    if metadata_fields is None:
        return {}
    if not isinstance(metadata_fields, dict):
        raise ConfigError(f"metadata_fields must be a dict of name -> type (str, int, float or bool), "
                          f"got {type(metadata_fields).__name__}")
    reserved = tuple(reserved)
    out = {}
    for name, kind in metadata_fields.items():
        if not isinstance(name, str) or not name.isidentifier() or name.startswith("_"):
            raise ConfigError(f"metadata_fields: {name!r} cannot be a column name; declare keys that are Python "
                              "identifiers not starting with '_' (other keys are still filterable, in Python)")
        if name in reserved:
            raise ConfigError(f"metadata_fields: {name!r} is reserved (a column of the store's own, or a metadata key "
                              f"the framework writes itself over the document's value); reserved names are "
                              f"{', '.join(reserved)} (it stays filterable undeclared, in Python)")
        if hasattr(hs.Document, name) or name.startswith("model_"):
            raise ConfigError(f"metadata_fields: {name!r} is the name of a pydantic model attribute and cannot be a "
                              "column; leave it undeclared (filters on it are still answered exactly, in Python)")
        type_name = kind if isinstance(kind, str) else _TYPES.get(kind) if isinstance(kind, type) else None
        if type_name not in ANNOTATIONS:
            raise ConfigError(f"metadata_fields[{name!r}] must be str, int, float or bool, got {kind!r}")
        out[name] = type_name
    return dict(sorted(out.items()))


def check_dimension(value: Any, argument: str) -> int:
    """An embedding dimension: an integer >= 1, else ConfigError naming the argument."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{argument} must be an integer >= 1, got {value!r}")
    return value


def make_schema(name: str, own: dict, declared: dict) -> type:
    """The hs.Document subclass of a store: its own columns `own` ({name: (annotation, default)},
    `...` for required) and one optional column per declared field. Built the same way every
    time, so a store reopened with path= finds its schema."""
    fields = dict(own)
    for key, type_name in declared.items():
        fields[key] = (Optional[ANNOTATIONS[type_name]], None)
    return pydantic.create_model(name, __base__=hs.Document, **fields)


def adopt(document_array: Any, own: dict, framework: str, metadata_fields: Any = None,
          dimension: Optional[int] = None, written: Iterable[str] = ()) -> tuple:
    """(embedding dimension, declared fields) of an open DocumentArray laid out as a store's:
    `own` {column: (Kind, must be Optional)} for the store's own columns (the embedding is
    the column named "embedding"), every other column an Optional str (hs.Keyword), int, float or
    bool: the declared metadata. ConfigError when the layout, the `metadata_fields` given or the
    `dimension` given do not fit, or a column is one of the metadata keys the framework
    `written` itself (they cannot be declared: see `declare`)."""
    written = tuple(written)
    if not isinstance(document_array, hs.DocumentArray):
        raise ConfigError(f"the collection must be an open hs.DocumentArray, got {type(document_array).__name__}")
    schema = schema_of(document_array.schema)
    specs = schema.fields
    problems = []
    for column, (kind, optional) in own.items():
        spec = specs.get(column)
        if spec is None or spec.kind is not kind or (optional and not spec.optional):
            problems.append(f"{column}: {'an Optional ' if optional else 'a '}{kind.value} column")
    declared = {}
    for column, spec in specs.items():
        if column == "id" or column in own:
            continue
        if column in written:
            problems.append(f"{column}: no column ({framework} writes the metadata key {column!r} itself, so it "
                            "cannot be declared)")
            continue
        if spec.kind not in _NAMES or not spec.optional:
            problems.append(f"{column}: an Optional str (hs.Keyword), int, float or bool column (declared "
                            f"metadata), not {spec.kind.value}")
        else:
            declared[column] = _NAMES[spec.kind]
    if problems:
        raise ConfigError(f"the DocumentArray's schema {schema.name} does not fit a {framework} store (it is not a "
                          f"{framework} store's layout); it needs " + "; ".join(problems))
    if metadata_fields is not None and declare(metadata_fields, ("id", *own, *written)) != declared:
        raise ConfigError(f"metadata_fields {metadata_fields!r} differ from the DocumentArray's columns {declared!r}: "
                          f"it is not a {framework} store with these metadata_fields")
    found = specs["embedding"].dim
    if dimension is not None and dimension != found:
        raise ConfigError(f"the dimension given is {dimension} but the DocumentArray's embedding has {found}")
    return found, declared


def column_value(key: str, type_name: str, value: Any) -> Any:
    """A declared metadata value as its column holds it (None when absent); a value of another
    type (a bool for an int, a float for an int, NaN, an int a float column would round) is a
    SchemaError naming the key, so nothing of the batch is written."""
    if value is None:
        return None
    if type_name == "str":
        fits = isinstance(value, str)
    elif type_name == "bool":
        fits = isinstance(value, bool)
    elif type_name == "int":
        fits = isinstance(value, int) and not isinstance(value, bool)
    else:
        fits = (isinstance(value, float) and math.isfinite(value)
                or isinstance(value, int) and not isinstance(value, bool) and abs(value) <= EXACT_FLOAT_INT)
    if not fits:
        hint = (" (beyond 2**53 a float column cannot hold it exactly: declare it int, or write a float)"
                if type_name == "float" and isinstance(value, int) and not isinstance(value, bool) else "")
        raise SchemaError(f"metadata {key!r} is declared {type_name} (metadata_fields) but a document holds "
                          f"{type(value).__name__} {value!r}{hint}; nothing was written")
    return float(value) if type_name == "float" else value


def column_values(declared: dict, metadata: Any) -> dict:
    """The declared columns of one document, from its metadata (a non-dict has none: the
    schema refuses it with its own message)."""
    if not isinstance(metadata, dict):
        return {key: None for key in declared}
    return {key: column_value(key, type_name, metadata.get(key)) for key, type_name in declared.items()}


def rows(document_array: Any, fields: list, where: Optional[dict] = None) -> list:
    """{field: value} of the stored documents `where` lets through (every one when None or {}):
    one column read when there is no filter, else the hits, skipping those another writer
    deleted after the find (they load lazily and read as None)."""
    if not where:
        columns = document_array.to_columns(fields=fields)
        return [dict(zip(fields, values)) for values in zip(*(columns[f] for f in fields))]
    docs = document_array.find(filter=where, limit=None).docs
    return [{f: getattr(d, f) for f in fields} for d in docs if d is not None]


def ids_where(document_array: Any, predicate: Callable[[dict], bool], metadata: str = "metadata",
              where: Optional[dict] = None) -> list:
    """The ids of the stored documents `where` lets through whose metadata (column `metadata`)
    passes `predicate`: the exact answer of a filter part the storage cannot state."""
    return [r["id"] for r in rows(document_array, ["id", metadata], where) if predicate(r[metadata] or {})]


def id_filter(ids: list) -> dict:
    """The filter selecting these ids; NOTHING (test it with `is`: no need to ask the storage)
    when there are none."""
    return {"id": {"$in": list(ids)}} if ids else NOTHING


def query_text(text: str, query_syntax: bool = False) -> str:
    """The text a store's lexical search sends to find(). Frameworks' queries are natural
    language, so by default quotes, a leading + or - and * are taken as the words around them,
    not as hybridsearch's query syntax ("phrases", +required, -excluded, prefix*: "python install
    -windows" must not exclude the documents about windows); `query_syntax=True` (each store's
    opt-in) passes the text as it is."""
    if query_syntax is not True and query_syntax is not False:
        raise ConfigError(f"query_syntax is True or False, got {query_syntax!r}")
    if query_syntax:
        return text
    return " ".join(w.lstrip("+-") for w in text.replace('"', " ").replace("*", " ").split())


def id_list(ids: Any, argument: str) -> list:
    """The ids a store method was given, as a list of strings. A str is ONE id, as
    hs.DocumentArray.delete takes it (the frameworks' own in-memory stores iterate its
    characters and touch other documents); bytes, a non-iterable or a non-str id is an
    IdError (ids are strings), before anything is read or written."""
    if isinstance(ids, str):
        return [ids]
    if isinstance(ids, (bytes, bytearray)) or not hasattr(ids, "__iter__") or isinstance(ids, dict):
        raise IdError(f"{argument} takes a list of ids (ids are strings), got {type(ids).__name__} {ids!r:.80}")
    out = list(ids)
    for i in out:
        if not isinstance(i, str):
            raise IdError(f"{argument}: ids are strings, got {type(i).__name__} {i!r:.80}")
    return out


def secret_options(storage: str, options: dict) -> list:
    """The options to_dict would write out that the storage marks secret (credentials, or a URL
    carrying user:password@)."""
    try:
        fields = dataclasses.fields(storage_class(storage).Config)
    except (hs.HybridSearchError, AttributeError, TypeError):
        return []  # a storage without a config dataclass declares no secrets
    secret = {f.name for f in fields if f.metadata.get("secret")}
    out = []
    for name, value in options.items():
        if name not in secret or value is None:
            continue
        urls = value if isinstance(value, (list, tuple)) else [value]
        if name in ("hosts", "url") and all(isinstance(u, str) and "@" not in u.split("//", 1)[-1] for u in urls):
            continue  # plain URLs: nothing secret in them
        out.append(name)
    return out


def open_array(schema: type, storage: str, options: dict, path: Any = None) -> hs.DocumentArray:
    """A store's DocumentArray: `storage` with its options, `path=` among them when given."""
    if path is not None:
        options = {**options, "path": path}
    return hs.DocumentArray(schema, storage=storage, **options)
