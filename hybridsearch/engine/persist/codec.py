"""Documents <-> the bytes of one log or snapshot record: columns as JSON, each dense vector
field as a presence mask and one little-endian float32 block (fields in declaration order, so
a schema with one vector field writes what it always wrote), no pickle; decoding checks every
type (persist/__init__.py). Unindexed, sparse and multi-vector fields are written as each
value's pydantic JSON (sparse: an [indices, values] pair; multi-vector: rows of float32 values
as floats, which read back exactly) and validated again when read."""
from __future__ import annotations

import contextlib
import gc
import json

import numpy as np

from hybridsearch.document import Kind, Schema, field_adapter
from hybridsearch.engine.persist import records as R
from hybridsearch.errors import SchemaError


class Corrupt(Exception):
    """A payload that does not decode; turned into BackendError naming the file."""


_ALLOWED = {
    Kind.ID: {str},
    Kind.TEXT: {str, type(None)},
    Kind.KEYWORD: {str, type(None)},
    Kind.INT: {int, type(None)},
    Kind.FLOAT: {float, int, type(None)},  # an int default in a float field stays an int
    Kind.BOOL: {bool, type(None)},
    Kind.OTHER: {str},  # each value as its own pydantic JSON
    Kind.SPARSE: {str},
    Kind.MULTI: {str},
}
# kinds written as each value's pydantic JSON and validated by the field's adapter when read
_JSON_KINDS = (Kind.OTHER, Kind.SPARSE, Kind.MULTI)


class DocCodec:
    """Batches of documents of one schema <-> bytes (JSON columns + one float32 block)."""

    def __init__(self, schema: Schema) -> None:
        self.schema = schema
        self.model = schema.model
        self.specs = sorted((s for s in schema.fields.values() if s.kind is not Kind.VECTOR),
                            key=lambda s: s.name)
        self.names = [s.name for s in self.specs]
        self.vecs = list(schema.vectors.values())  # declaration order
        self.adapters = {s.name: field_adapter(schema, s.name) for s in self.specs if s.kind in _JSON_KINDS}
        self.all_names = self.names + [v.name for v in self.vecs]
        self.all_set = frozenset(self.all_names)
        model = self.model
        # documents are built with their fields in declaration order, as validation leaves them
        self.declared = list(model.model_fields)
        self.order = [self.all_names.index(f) for f in self.declared] if set(self.declared) == self.all_set else None
        # plain models are built directly (what model_construct does, minus its per-field
        # alias handling); anything with private attributes or post-init hooks goes the long way
        self.fast = (not getattr(model, "__private_attributes__", None)
                     and getattr(model, "__pydantic_post_init__", None) is None
                     and model.model_config.get("extra") != "allow"
                     and self.order is not None)

    # ------------------------------------------------------------ encode
    def encode(self, docs: list, unique_ids: bool = True) -> bytes:
        n = len(docs)
        for d in docs:
            if not isinstance(d, self.model):
                raise SchemaError(f"expected {self.model.__name__} documents, got {type(d).__name__}")
        columns = {spec.name: [getattr(d, spec.name) for d in docs] for spec in self.specs}
        vectors = []
        for spec in self.vecs:
            vecs = [getattr(d, spec.name) for d in docs]
            mask = np.fromiter((v is not None for v in vecs), dtype=np.uint8, count=n)
            present = [v for v in vecs if v is not None]
            block = np.empty((0, spec.dim), dtype="<f4")
            if present:
                try:
                    block = np.ascontiguousarray(np.stack(present), dtype="<f4")
                except (ValueError, TypeError) as e:
                    raise SchemaError(f"{self.model.__name__}.{spec.name}: {e}") from None
            vectors.append((mask, block))
        return self._encode(columns, n, vectors, unique_ids)

    def encode_batch(self, batch) -> bytes:
        """The same bytes as encode(batch.docs), read straight from the batch's columns (a batch
        from extend_columns never builds its documents for the log)."""
        if batch.given_docs is not None:
            return self.encode(batch.given_docs)
        n = len(batch)
        columns = {spec.name: batch.values_of(spec.name) for spec in self.specs}
        vectors = []
        for spec in self.vecs:
            mask = batch.present.get(spec.name)
            mask = np.ones(n, dtype=np.uint8) if mask is None else np.asarray(mask, dtype=np.uint8)
            vectors.append((mask, np.ascontiguousarray(batch.vecs[spec.name][mask != 0], dtype="<f4")))
        return self._encode(columns, n, vectors, True)

    def _encode(self, columns: dict, n: int, vectors: list, unique_ids: bool) -> bytes:
        out = []
        for spec in self.specs:
            name = spec.name
            values = columns[name]
            if spec.kind in _JSON_KINDS:
                adapter = self.adapters[name]
                try:
                    values = [adapter.dump_json(v).decode() for v in values]
                    for v in values:  # what is written must read back
                        adapter.validate_json(v)
                except Exception as e:
                    raise SchemaError(f"{self.model.__name__}.{name}: cannot be stored: {e}") from None
            elif not set(map(type, values)) <= _ALLOWED[spec.kind]:
                values = [_exact(spec, v, self.model.__name__) for v in values]
            out.append(values)
        ids = out[self.names.index("id")]
        if not all(ids):
            raise SchemaError(f"{self.model.__name__}.id: empty id")
        if unique_ids and len(set(ids)) != n:
            raise SchemaError(f"{self.model.__name__}: repeated id in one batch")
        try:
            js = json.dumps({"f": self.names, "c": out}, separators=(",", ":")).encode("ascii")
        except ValueError as e:  # an int too long to print
            raise SchemaError(f"{self.model.__name__}: cannot be stored: {e}") from None
        parts = [b"", js]
        total = 0  # vectors present over every field: the header's count
        for spec, (mask, block) in zip(self.vecs, vectors):
            m = int(np.count_nonzero(mask))
            if block.shape != (m, spec.dim):
                raise SchemaError(f"{self.model.__name__}.{spec.name}: expected {spec.dim} dimensions")
            if not np.isfinite(block).all():
                raise SchemaError(f"{self.model.__name__}.{spec.name}: contains NaN or inf")
            parts += [mask.tobytes(), block.tobytes()]
            total += m
        parts[0] = R.BATCH.pack(n, len(js), total)
        return b"".join(parts)

    # ------------------------------------------------------------ decode
    def decode(self, payload) -> list:
        # hundreds of thousands of new objects: the cyclic GC would rescan them all repeatedly
        with _gc_paused():
            return self._decode(payload)

    def _decode(self, payload) -> list:
        size = len(payload)
        if size < R.BATCH.size:
            raise Corrupt("batch header cut short")
        n, jlen, m = R.BATCH.unpack_from(payload)
        pos = R.BATCH.size
        if jlen > size - pos:
            raise Corrupt("JSON length runs past the record")
        js = bytes(payload[pos:pos + jlen])
        pos += jlen
        blocks = []
        total = 0
        for spec in self.vecs:
            if n > size - pos:
                raise Corrupt("presence mask runs past the record")
            mask = np.frombuffer(payload, dtype=np.uint8, count=n, offset=pos)
            pos += n
            if n and mask.max() > 1:
                raise Corrupt("bad vector presence mask")
            present = int(np.count_nonzero(mask))
            total += present
            if total > m or present * spec.dim * 4 > size - pos:
                raise Corrupt("vector block size does not match")
            block = np.frombuffer(payload, dtype="<f4", count=present * spec.dim, offset=pos)
            pos += present * spec.dim * 4
            block = block.reshape(present, spec.dim)
            if not np.isfinite(block).all():
                raise Corrupt("vector contains NaN or inf")
            blocks.append((mask, block))
        if total != m or pos != size:
            raise Corrupt("vector block size does not match" if self.vecs else "unexpected bytes after the JSON")
        try:
            obj = json.loads(js)
        except (ValueError, RecursionError) as e:
            raise Corrupt(f"bad JSON: {e}") from None
        if not isinstance(obj, dict) or obj.get("f") != self.names:
            raise Corrupt("fields do not match the schema")
        columns = obj.get("c")
        if (not isinstance(columns, list) or len(columns) != len(self.names)
                or not all(isinstance(c, list) and len(c) == n for c in columns)):
            raise Corrupt("columns do not match the document count")
        for spec, col in zip(self.specs, columns):
            if not set(map(type, col)) <= _ALLOWED[spec.kind]:
                raise Corrupt(f"field {spec.name!r} holds a value of the wrong type")
            if spec.kind is Kind.ID and not all(col):
                raise Corrupt("empty id")
            if spec.kind in _JSON_KINDS:
                adapter = self.adapters[spec.name]
                try:
                    columns[self.names.index(spec.name)] = [adapter.validate_json(v) for v in col]
                except Exception as e:
                    raise Corrupt(f"field {spec.name!r}: {e}") from None
        for mask, block in blocks:
            vectors = []
            it = iter(block)
            for present in mask.tolist():
                if present:
                    v = next(it).copy()  # each document owns its vector, as after validation
                    v.flags.writeable = False
                    vectors.append(v)
                else:
                    vectors.append(None)
            if block.dtype != np.float32:  # a big-endian host
                vectors = [None if v is None else _native_ro(v) for v in vectors]
            columns = columns + [vectors]
        return self._build(columns, n)

    def _build(self, columns: list, n: int) -> list:
        """Documents from columns in `all_names` order."""
        model = self.model
        if not n:
            return []
        names = self.all_names
        if self.order is not None:
            names = self.declared
            columns = [columns[i] for i in self.order]
        rows = zip(*columns)
        if self.fast:
            new = model.__new__
            setattr_ = object.__setattr__
            all_set = self.all_set
            out = []
            for row in rows:
                d = new(model)
                setattr_(d, "__dict__", dict(zip(names, row)))
                setattr_(d, "__pydantic_fields_set__", set(all_set))
                setattr_(d, "__pydantic_extra__", None)
                setattr_(d, "__pydantic_private__", None)
                out.append(d)
            return out
        construct = model.model_construct
        return [construct(**dict(zip(names, row))) for row in rows]


@contextlib.contextmanager
def _gc_paused():
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _exact(spec, v, model: str):
    """A value of a subclass of the stored type (a str Enum, an IntEnum) as the exact type."""
    allowed = _ALLOWED[spec.kind]
    if type(v) in allowed:
        return v
    for t in (bool, int, float, str):
        if t in allowed and isinstance(v, t) and not (t is int and isinstance(v, bool)):
            return t(v)
    raise SchemaError(f"{model}.{spec.name}: cannot store a value of type {type(v).__name__} "
                      f"in a {spec.kind.value} field")


def _native_ro(v: np.ndarray) -> np.ndarray:
    out = v.astype(np.float32)
    out.flags.writeable = False
    return out
