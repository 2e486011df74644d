"""Schema evolution on reopen: what changed between the fields a collection's files were written
for and the schema it is opened with, whether the change can be applied without rewriting the
vectors (and graphs) the files hold, and the schema history kept with the collection.

Shared by every embedded storage that records its schema (the journaled memory and hnsw files,
sqlite's hs_meta). The rules (API.md section 2, "Schema changes on reopen"):

- a field added to the model is filled with its default on every stored document; it needs one
  (a pydantic default, or Optional, whose default is None). A dense vector field may be added
  only as Optional with no vector by default;
- a field removed from the model is dropped from every stored document;
- a field whose values are strings may change between unindexed `str`, hs.Text and hs.Keyword
  (the values are indexed as the new kind: a Text field added this way indexes the values the
  documents already hold); a field may become Optional, or become required when it has a
  default (stored None values take it);
- anything else is refused with ConfigError naming the field and what to do: another kind, a
  vector's dimension, a required field without a default. (A vector's metric is the storage's
  option, checked where the storage keeps an index built for it.)

A plan is computed from the stored fingerprint ([name, kind, optional, dim] per field) alone,
before anything is read, so a refused change leaves the files untouched.
"""
from __future__ import annotations

import datetime
import typing
from dataclasses import dataclass, field
from typing import Any, Optional

import pydantic

from hybridsearch.document import Document, Kind, MultiVector, Schema, SparseVector, Text, Keyword, Vector, schema_of
from hybridsearch.document import validate_value
from hybridsearch.errors import ConfigError, SchemaError

# kinds whose stored values are strings: a field may move between them (re-indexed as the new kind)
_STRING_KINDS = {Kind.OTHER.value, Kind.TEXT.value, Kind.KEYWORD.value}
_INTO_STRING_KINDS = {Kind.TEXT.value, Kind.KEYWORD.value}


@dataclass
class Plan:
    """What opening files of fingerprint `stored` with `schema` changes.

    `added`: new fields (filled with `defaults`); `removed`: fields dropped; `changed`: fields
    kept whose stored values are carried into the new kind or optionality (re-indexed, None
    values taking the default); every other field is kept as it is."""

    schema: Schema
    stored: list
    added: list = field(default_factory=list)
    removed: list = field(default_factory=list)
    changed: list = field(default_factory=list)
    defaults: dict = field(default_factory=dict)

    @property
    def kept(self) -> list:
        """Fields of the new schema whose stored columns are carried over unchanged."""
        new = set(self.added) | set(self.changed)
        return [n for n in self.schema.fields if n not in new]

    def stored_of(self, name: str) -> list:
        return next(f for f in self.stored if f[0] == name)

    def describe(self) -> str:
        parts = [f"added {', '.join(self.added)}" if self.added else "",
                 f"removed {', '.join(self.removed)}" if self.removed else "",
                 f"changed {', '.join(self.changed)}" if self.changed else ""]
        return "; ".join(p for p in parts if p) or "no change"


def _fields(fp: list) -> dict:
    out = {}
    for f in fp if isinstance(fp, list) else []:
        if (isinstance(f, list) and len(f) == 4 and isinstance(f[0], str) and isinstance(f[1], str)
                and isinstance(f[2], bool) and type(f[3]) is int):
            out[f[0]] = f
        else:
            raise ConfigError(f"the stored schema fingerprint holds a malformed field {f!r}")
    return out


def _has_default(schema: Schema, name: str) -> bool:
    return not schema.model.model_fields[name].is_required()


def _default(schema: Schema, name: str) -> Any:
    """The field's default in its stored form (validated as a value of the field)."""
    info = schema.model.model_fields[name]
    value = info.get_default(call_default_factory=True)
    if value is None:
        return None
    try:
        return validate_value(schema, name, value)
    except SchemaError as e:
        raise ConfigError(f"{schema.name}.{name} is new to the stored collection, and its default "
                          f"cannot fill the stored documents: {e}") from None


def plan(stored_fp: list, schema: Schema) -> Plan:
    """The change from the stored fingerprint to `schema`, or ConfigError naming the first field
    that cannot change so (nothing is read or written)."""
    old = _fields(stored_fp)
    new = {f[0]: f for f in schema.fingerprint()}
    name = schema.name
    p = Plan(schema=schema, stored=[list(f) for f in old.values()])
    for fname, (_, kind, opt, dim) in new.items():
        spec = schema.fields[fname]
        if fname not in old:
            if spec.kind is Kind.VECTOR and not spec.optional:
                raise ConfigError(f"{name}.{fname} is a required vector field new to the stored collection, whose "
                                  "documents have no vector for it: declare it Optional (default None), or store "
                                  "the documents again in a new collection")
            if not _has_default(schema, fname):
                raise ConfigError(f"{name}.{fname} is new to the stored collection and has no default to fill "
                                  f"its stored documents with: give it a default (or make it Optional)")
            value = _default(schema, fname)
            if value is not None and spec.kind in (Kind.VECTOR, Kind.MULTI):
                raise ConfigError(f"{name}.{fname} is a vector field new to the stored collection: its default "
                                  "must be None (the stored documents have no vector for it)")
            p.added.append(fname)
            p.defaults[fname] = value
            continue
        _, okind, oopt, odim = old[fname]
        if okind != kind:
            if not (okind in _STRING_KINDS and kind in _INTO_STRING_KINDS):
                raise ConfigError(f"{name}.{fname} is {'an' if kind[0] in 'aeiou' else 'a'} {kind} field, but the stored collection holds it as "
                                  f"{okind}: a field cannot change kind so (only between str, hs.Text and "
                                  f"hs.Keyword); rename the field, or store the documents again in a new collection")
            p.changed.append(fname)
        elif dim != odim:
            raise ConfigError(f"{name}.{fname} has {dim} dimensions, but the stored collection holds vectors of "
                              f"{odim}: declare it with {odim}, or store the documents again in a new collection "
                              "(vectors are never converted)")
        elif opt != oopt:
            if spec.kind in (Kind.VECTOR, Kind.SPARSE, Kind.MULTI) and not opt:
                raise ConfigError(f"{name}.{fname} is required, but the stored collection holds it as Optional: "
                                  "stored documents may have no vector for it; keep it Optional")
            if not opt and not _has_default(schema, fname):
                raise ConfigError(f"{name}.{fname} is required, but the stored collection holds it as Optional: "
                                  "give it a default (stored documents without a value take it) or keep it Optional")
            p.changed.append(fname)
        if fname in p.changed:
            p.defaults[fname] = _default(schema, fname) if _has_default(schema, fname) else None
    p.removed = sorted(f for f in old if f not in new)
    return p


# ------------------------------------------------------------------ the stored layout
_ANNOTATIONS = {Kind.TEXT.value: Text, Kind.KEYWORD.value: Keyword, Kind.INT.value: int,
                Kind.FLOAT.value: float, Kind.BOOL.value: bool, Kind.SPARSE.value: SparseVector}


def old_schema(p: Plan, declared: Optional[list]) -> Schema:
    """A Schema of the fields the files were written for, to decode them: the kept fields as the
    new model declares them, the others from their stored kind (unindexed ones as Any: their
    values are carried or dropped, never interpreted). `declared`: the field names in the order
    the files were written in (MANIFEST records it); without it the order must be unambiguous."""
    model = p.schema.model
    names = [f[0] for f in p.stored]
    order = _order(p, declared, names)
    fields: dict = {}
    for fname in order:
        if fname == "id":
            continue
        _, kind, opt, dim = p.stored_of(fname)
        if fname in model.model_fields and fname not in p.changed:
            info = model.model_fields[fname]
            ann = info.annotation
            if info.metadata:
                ann = typing.Annotated[(ann, *info.metadata)]
            fields[fname] = (ann, info)
            continue
        if kind == Kind.VECTOR.value:
            ann = Vector[dim]
        elif kind == Kind.MULTI.value:
            ann = MultiVector[dim]
        elif kind == Kind.OTHER.value:
            ann = Any
        elif kind in _ANNOTATIONS:
            ann = _ANNOTATIONS[kind]
        else:
            raise ConfigError(f"the stored collection holds field {fname!r} of an unknown kind {kind!r}")
        if opt and kind != Kind.OTHER.value:
            ann = Optional[ann]
        fields[fname] = (ann, None if opt else ...)
    try:
        built = pydantic.create_model(f"{model.__name__}AsStored", __base__=Document, **fields)
    except Exception as e:  # pydantic raises several types for a model it cannot build
        raise ConfigError(f"cannot read the stored layout of {p.schema.name}: {e}") from None
    return schema_of(built)


def _order(p: Plan, declared: Optional[list], names: list) -> list:
    if isinstance(declared, list) and sorted(declared) == sorted(names):
        return list(declared)
    # files written before the order was recorded: the order matters only among the unindexed
    # fields (one JSON array per document) and the dense vector fields (one block each, in order)
    new_order = list(p.schema.model.model_fields)
    for kind in (Kind.OTHER.value, Kind.VECTOR.value):
        group = [f[0] for f in p.stored if f[1] == kind]
        carried = [n for n in group if n in p.schema.fields and p.schema.fields[n].kind.value == kind]
        if len(group) > 1 and len(carried) != len(group):
            raise ConfigError(
                f"the stored collection was written before hybridsearch recorded the order of its fields, "
                f"which a change of its {'unindexed' if kind == 'other' else 'vector'} fields needs: open it as a "
                "writer with its old schema, write to it and close it (that records the order), then open it "
                f"with {p.schema.name}")
    rank = {n: i for i, n in enumerate(new_order)}
    return sorted(names, key=lambda n: (rank.get(n, len(rank)), n))


# ------------------------------------------------------------------ history
def now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def first_version(fp: list, at: Optional[str]) -> dict:
    """The history of a collection as created (`at` None: created before history was kept)."""
    return {"version": 1, "at": at, "added": [], "removed": [], "changed": [], "fields": fp}


def next_version(history: list, p: Plan, fp: list) -> list:
    """`history` with the version `p` makes appended."""
    version = (history[-1]["version"] if history else 0) + 1
    return [*history, {"version": version, "at": now(), "added": list(p.added), "removed": list(p.removed),
                       "changed": list(p.changed), "fields": fp}]


def valid_history(history: Any) -> Optional[list]:
    """The stored history if it is well formed, else None (the caller starts one)."""
    if not isinstance(history, list) or not history:
        return None
    for h in history:
        if not isinstance(h, dict) or type(h.get("version")) is not int:
            return None
    return history
