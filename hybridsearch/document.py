"""Schema: hs.Document and the field kinds Text, Keyword, Vector[d], SparseVector, MultiVector[d].

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

from hybridsearch.embedding.base import Embedded
from hybridsearch.errors import SchemaError
from hybridsearch.vector_rules import check_sparse, token_block

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
# A nonzero vector's Euclidean norm must lie in [VECTOR_NORM_MIN, VECTOR_NORM_MAX]: inside it every
# score of every metric (dot products, squared distances, 1/norm for cosine) stays a normal float32
# on every storage; outside it float32 arithmetic overflows or underflows and results go wrong.
VECTOR_NORM_MIN, VECTOR_NORM_MAX = 1e-15, 1e15


class Kind(enum.Enum):
    """How a field is stored and what it can be searched or filtered by."""

    ID = "id"
    TEXT = "text"
    KEYWORD = "keyword"
    VECTOR = "vector"
    SPARSE = "sparse"  # hs.SparseVector: {int key: weight > 0}
    MULTI = "multi"  # hs.MultiVector[d]: (n_tokens, d) token vectors
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
    root_dim = math.sqrt(dim)

    def validate(value: Any) -> np.ndarray:
        if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple, np.ndarray)):
            raise PydanticCustomError(
                "vector_type", "expected a list, tuple or numpy array of {dim} numbers", {"dim": dim}
            )
        if isinstance(value, np.ndarray) and value.dtype.kind == "c":
            # numpy would cast a complex array by dropping its imaginary part (a warning only)
            raise PydanticCustomError("vector_type", "expected real numbers, got an array of {dtype}",
                                      {"dtype": str(value.dtype)})
        try:
            if isinstance(value, np.ndarray) and value.dtype == np.float32:
                arr = np.array(value)  # a copy; float32 to float32 cannot overflow (errstate costs ~1 us)
            else:
                with np.errstate(over="ignore"):  # a value beyond float32 becomes inf, refused below
                    arr = np.array(value, dtype=np.float32)  # always a copy: later edits to the input do not leak in
        except OverflowError:
            raise PydanticCustomError("vector_range", "a number is too large for float32") from None
        except (TypeError, ValueError):
            raise PydanticCustomError("vector_type", "expected numbers only") from None
        if arr.ndim != 1 or arr.shape[0] != dim:
            got = arr.shape[0] if arr.ndim == 1 else f"shape {arr.shape}"
            raise PydanticCustomError(
                "vector_dim", "expected {dim} dimensions, got {got}", {"dim": dim, "got": got}
            )
        # the usual vector passes both checks below on one reduction: its norm lies in
        # [max|x|, max|x| * sqrt(d)], here at least 2x inside the bounds (rounding cannot cross
        # them); NaN / inf / zero / extreme vectors fail the test and take the full checks
        top = float(np.abs(arr).max())
        if not (2 * VECTOR_NORM_MIN <= top and top * root_dim * 2 <= VECTOR_NORM_MAX):
            if not np.isfinite(arr).all():
                raise PydanticCustomError("vector_nan", "contains NaN or inf")
            problem = vector_norm_problem(arr.reshape(1, -1))
            if problem:
                raise PydanticCustomError("vector_norm", problem)
        arr.flags.writeable = False  # stored documents share this buffer
        return arr

    return validate


def vector_norm_problem(block: np.ndarray) -> Optional[str]:
    """Why some row of a finite float32 (n, d) block cannot be stored or searched, or None.

    Norms are taken in float64, so the check itself cannot overflow."""
    if block.size == 0:
        return None
    norms = np.sqrt(np.einsum("ij,ij->i", block, block, dtype=np.float64))
    bad = (norms > VECTOR_NORM_MAX) | ((norms > 0) & (norms < VECTOR_NORM_MIN))
    if not bad.any():
        return None
    norm = float(norms[np.flatnonzero(bad)[0]])
    return (f"its Euclidean norm {norm:.3g} is outside [{VECTOR_NORM_MIN:g}, {VECTOR_NORM_MAX:g}] "
            "(scale the vector: float32 scores would overflow or lose all precision)")


class _DimensionMeta(type):
    """`hs.Vector[d]` / `hs.MultiVector[d]`: one subclass per base and dimension, made once
    (pydantic caches schemas by type, so the same d must give the same class)."""

    _made: dict = {}

    def __getitem__(cls, dim: int):
        base = cls.__mro__[-2]  # Vector or MultiVector, also when indexed through a subclass
        if not isinstance(dim, int) or isinstance(dim, bool) or dim < 1:
            raise SchemaError(f"hs.{base.__name__}[d] needs a positive integer dimension, got {dim!r}")
        made = _DimensionMeta._made.get((base, dim))
        if made is None:
            made = _DimensionMeta(f"{base.__name__}[{dim}]", (base,), {"dim": dim})
            _DimensionMeta._made[(base, dim)] = made
        return made


class Vector(metaclass=_DimensionMeta):
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



def _sparse_validate(value: Any) -> dict:
    try:
        idx, val = check_sparse(value, "sparse vector")
    except SchemaError as e:
        raise PydanticCustomError("sparse_vector", "{problem}", {"problem": str(e)}) from None
    # read back as a dict {int: float}, keys ascending, weights as float32 holds them
    return dict(zip(idx.tolist(), val.tolist()))


class SparseVector(dict):
    """A learned sparse vector (SPLADE-style): `splade: hs.SparseVector = {}`.

    Takes a dict {int key in [0, 2**31): weight} or an (indices, values) pair; weights finite
    and >= 0 (zeros dropped), at most 65,536 entries. Read back as a dict {int: float}; `{}`
    (no entry) means the document has no value for the field."""

    def __class_getitem__(cls, item):
        # dict's own would make hs.SparseVector[30522] a plain dict annotation, silently no
        # vector field: a sparse vector has no dimension to give
        raise SchemaError(f"hs.SparseVector takes no dimension (its keys are any ints in [0, 2**31)); "
                          f"write `hs.SparseVector`, not hs.SparseVector[{item!r}]")

    @classmethod
    def __get_pydantic_core_schema__(cls, source, handler):
        return core_schema.no_info_plain_validator_function(
            _sparse_validate,
            # JSON has no int keys: the JSON form is the [indices, values] pair the validator takes
            serialization=core_schema.plain_serializer_function_ser_schema(
                lambda v: [list(v), list(v.values())], when_used="json"
            ),
        )


def _multi_validator(dim: int):
    def validate(value: Any) -> np.ndarray:
        if isinstance(value, (str, bytes, dict)) or isinstance(value, np.ndarray) and value.dtype.kind == "c":
            raise PydanticCustomError("multi_vector_type", "expected an (n_tokens, {dim}) array of real numbers",
                                      {"dim": dim})
        try:
            arr = token_block(value, dim, "multi-vector value")
        except SchemaError as e:
            raise PydanticCustomError("multi_vector", "{problem}", {"problem": str(e)}) from None
        arr = np.array(arr)  # always a copy: later edits to the input do not leak in
        arr.flags.writeable = False  # stored documents share this buffer
        return arr

    return validate


class MultiVector(metaclass=_DimensionMeta):
    """Token vectors for late interaction (ColBERT-style): `hs.MultiVector[128]`, a float32
    (n_tokens, d) array with 1 <= n_tokens <= 4096 rows, each finite with a norm in
    [1e-15, 1e15]; `Optional[hs.MultiVector[d]] = None` for documents without one."""

    dim: ClassVar[int] = 0

    @classmethod
    def __get_pydantic_core_schema__(cls, source, handler):
        if cls.dim < 1:
            raise SchemaError("use hs.MultiVector[d] with a dimension, not bare hs.MultiVector")
        return core_schema.no_info_plain_validator_function(
            _multi_validator(cls.dim),
            serialization=core_schema.plain_serializer_function_ser_schema(
                lambda v: [[float(x) for x in row] for row in v], when_used="json"
            ),
        )



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
    # the dense vector fields (hs.Vector[d]), in declaration order; `vector` is the one of them
    # when there is exactly one (what `find(vector=<array>)` searches), else None
    vectors: dict[str, FieldSpec] = field(default_factory=dict)
    vector: Optional[FieldSpec] = None
    sparse: dict[str, FieldSpec] = field(default_factory=dict)  # hs.SparseVector fields
    multi: dict[str, FieldSpec] = field(default_factory=dict)  # hs.MultiVector[d] fields
    texts: list[FieldSpec] = field(default_factory=list)
    adapters: dict = field(default_factory=dict, repr=False)  # per-field validators for update()
    # vector fields declared with hs.embedded(...): name -> Embedded (sources, fn); API.md section 11
    embedded: dict = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.model.__name__

    def fingerprint(self) -> list:
        """What stored data depends on: [name, kind, optional, dim] of every field, in
        declaration order. Every storage that records its schema records this (the hnsw
        files sort it by name; remote indexes and annlite append the metric)."""
        return [[s.name, s.kind.value, bool(s.optional), int(s.dim)] for s in self.fields.values()]


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
        if issubclass(annotation, SparseVector):
            return Kind.SPARSE
        if issubclass(annotation, MultiVector):
            return Kind.MULTI
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
            schema.vectors[name] = spec
        elif spec.kind is Kind.SPARSE:
            schema.sparse[name] = spec
        elif spec.kind is Kind.MULTI:
            schema.multi[name] = spec
        elif spec.kind is Kind.TEXT:
            schema.texts.append(spec)
        marker = next((m for m in metadata if isinstance(m, Embedded)), None)
        if marker is not None:
            schema.embedded[name] = marker
    if len(schema.vectors) == 1:
        schema.vector = next(iter(schema.vectors.values()))
    for name, marker in schema.embedded.items():
        _check_embedded(schema, name, marker)
    return schema


_EMBEDDED_KINDS = {Kind.VECTOR: "dense", Kind.SPARSE: "sparse", Kind.MULTI: "multi"}


def _check_embedded(schema: Schema, name: str, marker: Embedded) -> None:
    """SchemaError unless an hs.embedded field is a vector field fitting its function, fed by string fields."""
    spec = schema.fields[name]
    kind = _EMBEDDED_KINDS.get(spec.kind)
    where = f"{schema.name}.{name}"
    if kind is None:
        raise SchemaError(f"{where}: hs.embedded() declares a vector field (hs.Vector[d], hs.SparseVector, "
                          f"hs.MultiVector[d]), not a {spec.kind.value} field")
    fn = marker.fn
    if getattr(fn, "kind", "dense") != kind:
        raise SchemaError(f"{where}: {fn!r} makes {getattr(fn, 'kind', 'dense')} vectors, the field holds {kind} ones")
    if kind != "sparse" and fn.dimension != spec.dim:
        raise SchemaError(f"{where}: {fn!r} makes {fn.dimension}-dimensional vectors, the field holds {spec.dim}")
    for source in marker.sources:
        src = schema.fields.get(source)
        if src is None:
            raise SchemaError(f"{where}: hs.embedded() names {source!r}, which is not a field of {schema.name}")
        if src.kind not in (Kind.TEXT, Kind.KEYWORD):
            raise SchemaError(f"{where}: hs.embedded() embeds text fields (hs.Text, hs.Keyword); "
                              f"{source!r} is a {src.kind.value} field")


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
        else:
            try:
                finite = math.isfinite(float(value))
            except OverflowError:  # an int beyond the float range
                finite = False
            if not finite:
                raise SchemaError(f"{spec.name}: expected a finite number, got {value!r}")
    elif spec.kind in (Kind.ID, Kind.TEXT, Kind.KEYWORD) and isinstance(value, str):
        if not is_valid_unicode(value):
            raise SchemaError(f"{spec.name}: the string holds a lone surrogate ({_first_surrogate(value)}), "
                              "which no storage can write as UTF-8")


_PLAIN = {Kind.ID: str, Kind.TEXT: str, Kind.KEYWORD: str, Kind.INT: int, Kind.FLOAT: float}


def _plain_types(schema: "Schema") -> dict:
    """field name -> the type whose ordinary values _check_scalar accepts unchanged (str for
    strings, int for INT, float for FLOAT), for the fast path of Document._strict_scalars."""
    return {name: _PLAIN[spec.kind] for name, spec in schema.fields.items() if spec.kind in _PLAIN}


def is_valid_unicode(s: str) -> bool:
    """False for a str holding a lone surrogate (\\ud800-\\udfff), which has no UTF-8 form."""
    if s.isascii():
        return True
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _first_surrogate(s: str) -> str:
    return next((f"U+{ord(c):04X} at index {i}" for i, c in enumerate(s) if 0xD800 <= ord(c) <= 0xDFFF), "?")


def _canonical_float(value: Any) -> Any:
    """-0.0 is stored as 0.0 on every storage (SQLite cannot keep the sign of a zero REAL)."""
    if isinstance(value, (float, np.floating)) and value == 0 and math.copysign(1.0, value) < 0:
        return 0.0
    return value


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
        cls.__hs_plain__ = _plain_types(cls.__hs_schema__)

    @model_validator(mode="before")
    @classmethod
    def _strict_scalars(cls, data: Any) -> Any:
        if isinstance(data, dict):
            fields, plain = cls.__hs_schema__.fields, cls.__hs_plain__
            for name, value in data.items():
                t = plain.get(name)
                # a value of the field's plain type that _check_scalar would accept as it is:
                # skip the call (the same verdict; most values of a batch are these)
                if t is not None and type(value) is t and (
                        value.isascii() if t is str else INT64_MIN <= value <= INT64_MAX if t is int
                        else value != 0.0 and value - value == 0.0):  # float: finite, not +-0.0
                    continue
                spec = fields.get(name)
                if spec is not None:
                    _check_scalar(spec, value)
                    if spec.kind is Kind.FLOAT and value is not None and _canonical_float(value) is not value:
                        data = {**data, name: _canonical_float(value)}
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
Document.__hs_plain__ = _plain_types(Document.__hs_schema__)


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
    if spec.kind is Kind.FLOAT:
        value = _canonical_float(value)
    adapter = field_adapter(schema, name)
    try:
        value = adapter.validate_python(value)
    except ValidationError as e:
        raise SchemaError(_describe(e, f"{schema.name}.{name}")) from None
    if spec.kind is Kind.OTHER:
        check_storable(schema, name, [value])
    return value


def check_storable(schema: Schema, name: str, values: list) -> None:
    """SchemaError unless every value of unindexed field `name` reads back exactly from its JSON form.

    Every storage that persists keeps unindexed fields as JSON, so a value JSON cannot carry
    (NaN or inf, int dict keys, a set in an untyped field, bytes that are not UTF-8, arbitrary
    objects) would come back changed or not at all. Refusing it at write time keeps every storage
    alike, the memory storage included. One JSON round trip per batch and field."""
    adapter = field_adapter(schema, name, as_list=True)
    try:
        back = adapter.validate_json(adapter.dump_json(values))
    except Exception as e:  # pydantic raises serialisation errors of several types
        raise SchemaError(f"{schema.name}.{name}: cannot be stored (it has no exact JSON form): "
                          f"{str(e).splitlines()[0]}") from None
    for i, (a, b) in enumerate(zip(values, back)):
        if not same_value(a, b):
            raise SchemaError(f"{schema.name}.{name}: the value {_short(a)} would read back as {_short(b)}; "
                              "unindexed fields hold only values with an exact JSON form "
                              "(no NaN or inf, string dict keys, typed sets)")


def _short(v: Any) -> str:
    r = repr(v)
    return r if len(r) <= 80 else r[:77] + "..."


def same_value(a: Any, b: Any) -> bool:
    """Equal and of the same types all the way down (0.0 is not -0.0, 1 is not 1.0 or '1')."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)
    if isinstance(a, dict):
        return len(a) == len(b) and all(same_value(ka, kb) and same_value(va, vb)
                                        for (ka, va), (kb, vb) in zip(a.items(), b.items()))
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same_value(x, y) for x, y in zip(a, b))
    if isinstance(a, BaseModel):
        return same_value(a.__dict__, b.__dict__)
    if isinstance(a, np.ndarray):
        return a.dtype == b.dtype and a.shape == b.shape and bool(np.array_equal(a, b))
    try:
        return bool(a == b)
    except Exception:
        return False


def field_adapter(schema: Schema, name: str, as_list: bool = False) -> TypeAdapter:
    """The pydantic validator of one field (or of a list of its values), built once per schema."""
    key = ("list", name) if as_list else name
    adapter = schema.adapters.get(key)
    if adapter is None:
        info = schema.model.model_fields[name]
        annotation = info.annotation
        if info.metadata:
            annotation = typing.Annotated[(annotation, *info.metadata)]
        adapter = schema.adapters[key] = TypeAdapter(list[annotation] if as_list else annotation)
    return adapter


def extras_adapter(schema: Schema) -> tuple:
    """(names, validator) of the unindexed fields, which columnar storages keep together as one
    JSON array per row: `validator.dump_json(tuple_of_values)` / `validator.validate_json(raw)`.
    Every value was checked to read back exactly (check_storable). ((), None) when there are none."""
    adapter = schema.adapters.get("__extras__")
    if adapter is None:
        names = tuple(s.name for s in schema.fields.values() if s.kind is Kind.OTHER)
        validator = None
        if names:
            annotations = []
            for name in names:
                info = schema.model.model_fields[name]
                ann = info.annotation
                annotations.append(typing.Annotated[(ann, *info.metadata)] if info.metadata else ann)
            validator = TypeAdapter(tuple[tuple(annotations)])
        adapter = schema.adapters["__extras__"] = (names, validator)
    return adapter
