"""Schema: hs.Document and the field kinds Text, Keyword, Vector[d].

A schema is a pydantic v2 model. `schema_of(cls)` introspects it once into a
`Schema` of typed `FieldSpec`s, which every storage uses to lay out columns.
"""
from __future__ import annotations

import enum
import math
import types
import typing
import uuid
from dataclasses import dataclass, field
from typing import Any, ClassVar, Optional

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, model_validator
from pydantic_core import PydanticCustomError, core_schema

from .errors import SchemaError

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


class Kind(enum.Enum):
    """How a field is stored and what it can be searched or filtered by."""

    ID = "id"
    TEXT = "text"
    KEYWORD = "keyword"
    VECTOR = "vector"
    INT = "int"
    FLOAT = "float"
    BOOL = "bool"
    OTHER = "other"  # stored and returned, not indexed


@dataclass(frozen=True)
class Analyzer:
    """Analyzer settings of one hs.Text field: `Annotated[hs.Text, hs.Analyzer(stemmer=None)]`."""

    stemmer: Optional[str] = "english"
    lowercase: bool = True


class Text(str):
    """Analysed text, BM25-indexed (configure with `Annotated[hs.Text, hs.Analyzer(...)]`)."""

    @classmethod
    def __get_pydantic_core_schema__(cls, source, handler):
        return core_schema.str_schema(strict=True)


class Keyword(str):
    """Exact-match string, filterable."""

    @classmethod
    def __get_pydantic_core_schema__(cls, source, handler):
        return core_schema.str_schema(strict=True)


def _vector_validator(dim: int):
    def validate(value: Any) -> np.ndarray:
        if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple, np.ndarray)):
            raise PydanticCustomError(
                "vector_type", "expected a list, tuple or numpy array of {dim} numbers", {"dim": dim}
            )
        try:
            arr = np.array(value, dtype=np.float32)  # always a copy: later edits to the input do not leak in
        except (TypeError, ValueError):
            raise PydanticCustomError("vector_type", "expected numbers only") from None
        if arr.ndim != 1 or arr.shape[0] != dim:
            got = arr.shape[0] if arr.ndim == 1 else f"shape {arr.shape}"
            raise PydanticCustomError(
                "vector_dim", "expected {dim} dimensions, got {got}", {"dim": dim, "got": got}
            )
        if not np.isfinite(arr).all():
            raise PydanticCustomError("vector_nan", "contains NaN or inf")
        arr.flags.writeable = False  # stored documents share this buffer
        return arr

    return validate


class _VectorMeta(type):
    def __getitem__(cls, dim: int):
        if not isinstance(dim, int) or isinstance(dim, bool) or dim < 1:
            raise SchemaError(f"hs.Vector[d] needs a positive integer dimension, got {dim!r}")
        cached = _VECTOR_TYPES.get(dim)
        if cached is None:
            cached = _VectorMeta(f"Vector[{dim}]", (Vector,), {"dim": dim})
            _VECTOR_TYPES[dim] = cached
        return cached


class Vector(metaclass=_VectorMeta):
    """Float32 vector of fixed dimension: `hs.Vector[384]`; accepts list, tuple or ndarray."""

    dim: ClassVar[int] = 0

    @classmethod
    def __get_pydantic_core_schema__(cls, source, handler):
        if cls.dim < 1:
            raise SchemaError("use hs.Vector[d] with a dimension, not bare hs.Vector")
        return core_schema.no_info_plain_validator_function(
            _vector_validator(cls.dim),
            serialization=core_schema.plain_serializer_function_ser_schema(
                lambda v: [float(x) for x in v], when_used="json"
            ),
        )


_VECTOR_TYPES: dict[int, type] = {}


@dataclass(frozen=True)
class FieldSpec:
    """One field of a schema as the storages see it."""

    name: str
    kind: Kind
    optional: bool  # None is a valid value
    dim: int = 0
    analyzer: Optional[Analyzer] = None

    @property
    def filterable(self) -> bool:
        """Whether comparisons (not just $exists) are allowed on it."""
        return self.kind in (Kind.ID, Kind.KEYWORD, Kind.INT, Kind.FLOAT, Kind.BOOL)


@dataclass
class Schema:
    """The introspected layout of a Document class."""

    model: type
    fields: dict[str, FieldSpec] = field(default_factory=dict)
    vector: Optional[FieldSpec] = None
    texts: list[FieldSpec] = field(default_factory=list)
    adapters: dict = field(default_factory=dict, repr=False)  # per-field validators for update()

    @property
    def name(self) -> str:
        return self.model.__name__


def _unwrap(annotation: Any) -> tuple[Any, bool, tuple]:
    """-> (inner annotation, allows None, Annotated metadata)."""
    optional = False
    metadata: tuple = ()
    for _ in range(4):
        origin = typing.get_origin(annotation)
        if origin is typing.Annotated:
            metadata += tuple(annotation.__metadata__)
            annotation = typing.get_args(annotation)[0]
        elif origin in (typing.Union, types.UnionType):
            args = [a for a in typing.get_args(annotation) if a is not type(None)]
            if len(args) != len(typing.get_args(annotation)):
                optional = True
            if len(args) != 1:
                return annotation, optional, metadata
            annotation = args[0]
        else:
            break
    return annotation, optional, metadata


def _kind_of(annotation: Any) -> Kind:
    if isinstance(annotation, type):
        if issubclass(annotation, Vector):
            return Kind.VECTOR
        if issubclass(annotation, Text):
            return Kind.TEXT
        if issubclass(annotation, Keyword):
            return Kind.KEYWORD
        if annotation is bool:
            return Kind.BOOL
        if annotation is int:
            return Kind.INT
        if annotation is float:
            return Kind.FLOAT
    return Kind.OTHER


def _introspect(model: type) -> Schema:
    schema = Schema(model=model)
    for name, info in model.model_fields.items():
        inner, optional, metadata = _unwrap(info.annotation)
        metadata += tuple(info.metadata)
        if name == "id":
            spec = FieldSpec(name, Kind.ID, False)
        else:
            kind = _kind_of(inner)
            analyzer = None
            if kind is Kind.TEXT:
                analyzer = next((m for m in metadata if isinstance(m, Analyzer)), Analyzer())
            spec = FieldSpec(name, kind, optional, dim=getattr(inner, "dim", 0), analyzer=analyzer)
        schema.fields[name] = spec
        if spec.kind is Kind.VECTOR:
            if schema.vector is not None:
                raise SchemaError(
                    f"{model.__name__} has two hs.Vector fields ({schema.vector.name}, {name}); "
                    "a schema has at most one"
                )
            schema.vector = spec
        elif spec.kind is Kind.TEXT:
            schema.texts.append(spec)
    return schema


def _check_scalar(spec: FieldSpec, value: Any) -> None:
    """Stricter than pydantic's lax mode: no '12' for an int, no True for a number."""
    if value is None:
        return
    if spec.kind is Kind.BOOL:
        if not isinstance(value, (bool, np.bool_)):
            raise SchemaError(f"{spec.name}: expected a bool, got {type(value).__name__} {value!r}")
    elif spec.kind in (Kind.INT, Kind.FLOAT):
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
            raise SchemaError(f"{spec.name}: expected a number, got {type(value).__name__} {value!r}")
        if spec.kind is Kind.INT:
            if isinstance(value, (float, np.floating)) and not float(value).is_integer():
                raise SchemaError(f"{spec.name}: expected an integer, got {value!r}")
            if isinstance(value, (int, np.integer)) and not INT64_MIN <= int(value) <= INT64_MAX:
                raise SchemaError(f"{spec.name}: integer {value} is outside the 64-bit range")
        elif not math.isfinite(float(value)):
            raise SchemaError(f"{spec.name}: expected a finite number, got {value!r}")


def _describe(error: ValidationError, prefix: str) -> str:
    """One sentence per problem, each naming the field: 'Product.price: expected a number ...'."""
    parts = []
    for e in error.errors():
        inner = (e.get("ctx") or {}).get("error")
        if isinstance(inner, SchemaError) and str(inner).startswith(prefix.split(".")[0] + "."):
            parts.append(str(inner))  # raised by a nested Document.__init__: already complete
            continue
        loc = ".".join(str(p) for p in e["loc"])
        msg = e["msg"]
        if e["type"] == "missing":
            msg = "required field is missing"
        elif e["type"] == "extra_forbidden":
            msg = "unknown field (not in the schema)"
        elif e["type"] == "value_error" and msg.startswith("Value error, "):
            msg = msg[len("Value error, "):]  # our own checks already name the field
            parts.append(f"{prefix}.{msg}" if not loc else f"{prefix}.{loc}: {msg}")
            continue
        parts.append(f"{prefix}.{loc}: {msg}" if loc else f"{prefix}: {msg}")
    return "; ".join(parts)


def _new_id() -> str:
    return uuid.uuid4().hex


class Document(BaseModel):
    """Base class of a schema; subclasses declare fields with Python/pydantic annotations.

    Every document has `id: str` (a random 32-hex id when omitted). Bad values
    raise `hs.SchemaError` naming the field.
    """

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    id: str = Field(default_factory=_new_id)

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs):
        super().__pydantic_init_subclass__(**kwargs)
        cls.__hs_schema__ = _introspect(cls)

    @model_validator(mode="before")
    @classmethod
    def _strict_scalars(cls, data: Any) -> Any:
        if isinstance(data, dict):
            fields = cls.__hs_schema__.fields
            for name, value in data.items():
                spec = fields.get(name)
                if spec is not None:
                    _check_scalar(spec, value)
            if "id" in data and (not isinstance(data["id"], str) or not data["id"]):
                raise SchemaError(f"id: expected a non-empty string, got {data['id']!r}")
        return data

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as e:
            raise SchemaError(_describe(e, type(self).__name__)) from None

    @classmethod
    def model_validate(cls, obj: Any, **kwargs: Any):
        try:
            return super().model_validate(obj, **kwargs)
        except ValidationError as e:
            raise SchemaError(_describe(e, cls.__name__)) from None


Document.__hs_schema__ = _introspect(Document)


def schema_of(model: type) -> Schema:
    """The introspected Schema of a Document subclass."""
    if not (isinstance(model, type) and issubclass(model, Document)):
        raise SchemaError(f"expected a subclass of hs.Document, got {model!r}")
    return model.__hs_schema__


def validate_value(schema: Schema, name: str, value: Any) -> Any:
    """Validates one field value as the schema would; returns the stored form."""
    spec = schema.fields.get(name)
    if spec is None:
        raise SchemaError(f"{schema.name} has no field {name!r}")
    try:
        _check_scalar(spec, value)
    except SchemaError as e:
        raise SchemaError(f"{schema.name}.{e}") from None
    adapter = _field_adapter(schema, name)
    try:
        return adapter.validate_python(value)
    except ValidationError as e:
        raise SchemaError(_describe(e, f"{schema.name}.{name}")) from None


def _field_adapter(schema: Schema, name: str) -> TypeAdapter:
    adapter = schema.adapters.get(name)
    if adapter is None:
        info = schema.model.model_fields[name]
        annotation = info.annotation
        if info.metadata:
            annotation = typing.Annotated[(annotation, *info.metadata)]
        adapter = schema.adapters[name] = TypeAdapter(annotation)
    return adapter
