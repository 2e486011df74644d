"""Columns in and out: `extend_columns` validation and `to_columns` / `to_pandas` / `to_arrow`.

Validation is column-wise (one numpy check per column, a Python loop only over
string columns), with the same rules as a document's: no NaN or inf, integers
within 64 bits, no bool where a number is expected, vectors of the schema's
dimension with a usable norm, unindexed values that read back exactly. The first
problem raises SchemaError naming the column and the row; nothing is written.
"""
from __future__ import annotations

import uuid
from typing import Any, Optional

import numpy as np
from pydantic import ValidationError

from hybridsearch.batch import Batch
from hybridsearch.document import (VECTOR_NORM_MAX, VECTOR_NORM_MIN, Kind, Schema, check_storable, field_adapter,
                                   is_valid_unicode)
from hybridsearch.engine.idmap import hash_ids
from hybridsearch.errors import SchemaError, missing_extra

_INT64 = np.iinfo(np.int64)


def _is_missing(v: Any) -> bool:
    """None, or a missing value as pandas writes one (NaN in an object column, pd.NA)."""
    if v is None:
        return True
    if isinstance(v, float) and v != v:
        return True
    return type(v).__name__ in ("NAType", "NaTType")


def as_column_dict(data: Any) -> dict:
    """name -> column from a dict of columns, a pandas DataFrame or a pyarrow Table/RecordBatch."""
    if isinstance(data, dict):
        return dict(data)
    kind = type(data).__module__.split(".")[0]
    if kind == "pandas" and hasattr(data, "columns"):
        out = {}
        for name in data.columns:
            col = data[name]
            if col.dtype == object or str(col.dtype) in ("string", "str"):
                out[str(name)] = col.tolist()
            elif str(col.dtype).startswith(("Int", "Float", "boolean")):  # nullable: pd.NA for missing
                out[str(name)] = col.astype(object).where(col.notna(), None).tolist()
            else:
                out[str(name)] = col.to_numpy()
        return out
    if kind == "pyarrow" and hasattr(data, "column_names"):
        out = {}
        for name in data.column_names:
            col = data.column(name)
            if col.null_count == 0 and _arrow_numeric(col.type):
                out[name] = col.to_numpy()
            elif col.null_count == 0 and _arrow_fixed_vector(col.type):
                flat = col.combine_chunks().flatten().to_numpy(zero_copy_only=False)
                out[name] = flat.reshape(len(col), col.type.list_size)
            else:
                out[name] = col.to_pylist()
        return out
    raise SchemaError(f"extend_columns takes a dict of columns, a pandas DataFrame or a pyarrow Table, "
                      f"got {type(data).__name__}")


def _arrow_numeric(t) -> bool:
    import pyarrow as pa

    return pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t)


def _arrow_fixed_vector(t) -> bool:
    import pyarrow as pa

    return pa.types.is_fixed_size_list(t) and pa.types.is_floating(t.value_type)


class _Checker:
    """Validates the columns of one extend_columns call against a schema."""

    def __init__(self, schema: Schema) -> None:
        self.schema = schema

    def fail(self, name: str, row: Optional[int], what: str) -> None:
        where = f"{self.schema.name}.{name}" + (f", row {row}" if row is not None else "")
        raise SchemaError(f"{where}: {what}; nothing was written")

    def optional_values(self, spec, col) -> tuple:
        """(values with None where missing, present uint8 or None) of an object column."""
        values = list(col)
        return self._missing_to_none(spec, values, range(len(values)))

    def _missing_to_none(self, spec, values: list, candidates) -> tuple:
        """Replaces missing values (among rows `candidates`) by None; (values, present)."""
        miss = [i for i in candidates if _is_missing(values[i])]
        if miss and not spec.optional:
            self.fail(spec.name, miss[0], "a value is missing and the field is required")
        for i in miss:
            values[i] = None
        present = None
        if spec.optional:
            present = np.ones(len(values), dtype=np.uint8)
            present[miss] = 0
        return values, present

    def strings(self, spec, col) -> tuple:
        values = list(col)
        # the common case costs two C-level passes: every value a str, all of them ASCII
        odd = [i for i, v in enumerate(values) if type(v) is not str]
        values, present = self._missing_to_none(spec, values, odd)
        for i in odd:
            v = values[i]
            if v is not None and not isinstance(v, str):
                self.fail(spec.name, i, f"expected a string, got {type(v).__name__} {v!r}")
            if v is not None:
                values[i] = str(v)
        texts = values if not odd else [v for v in values if v is not None]
        if not "".join(texts).isascii():
            for i, v in enumerate(values):
                if v is not None and not is_valid_unicode(v):
                    self.fail(spec.name, i, "the string holds a lone surrogate, which has no UTF-8 form")
        if spec.kind is Kind.ID and not all(values):
            self.fail("id", values.index(""), "expected a non-empty string")
        return values, present

    def numbers(self, spec, col) -> tuple:
        if isinstance(col, np.ndarray):
            arr = col
        else:  # a list: every element is checked for its type (no bool passes for a number)
            arr = np.empty(len(col), dtype=object)
            arr[:] = list(col)
        present = None
        if arr.dtype == object:
            values, present = self.optional_values(spec, col)
            fill = False if spec.kind is Kind.BOOL else 0
            for i, v in enumerate(values):
                if v is None:
                    continue
                ok = isinstance(v, (bool, np.bool_)) if spec.kind is Kind.BOOL else (
                    isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, (bool, np.bool_)))
                if not ok:
                    self.fail(spec.name, i, f"expected a {'bool' if spec.kind is Kind.BOOL else 'number'}, "
                                            f"got {type(v).__name__} {v!r}")
            values = [fill if v is None else v for v in values]
            arr = np.array(values, dtype=np.float64 if spec.kind is Kind.FLOAT else object)
            if spec.kind is not Kind.FLOAT:
                arr = self._ints(spec, arr) if spec.kind is Kind.INT else arr.astype(np.int64)
        elif spec.kind is Kind.BOOL:
            if arr.dtype != np.bool_:
                self.fail(spec.name, 0, f"expected bools, got a column of {arr.dtype}")
            arr = arr.astype(np.int64)
        else:
            if arr.dtype == np.bool_ or arr.dtype.kind not in "iuf":
                self.fail(spec.name, 0, f"expected numbers, got a column of {arr.dtype}")
            if spec.kind is Kind.INT:
                arr = self._ints(spec, arr)
        if spec.kind is Kind.FLOAT:
            with np.errstate(over="ignore"):
                arr = np.asarray(arr, dtype=np.float64)
            bad = np.flatnonzero(~np.isfinite(arr))
            if len(bad):
                self.fail(spec.name, int(bad[0]), f"expected a finite number, got {arr[bad[0]]!r}")
            arr = arr + 0.0  # -0.0 -> 0.0, as every storage stores it
        return arr, present

    def _ints(self, spec, arr: np.ndarray) -> np.ndarray:
        if arr.dtype.kind == "i":
            return arr.astype(np.int64)
        if arr.dtype.kind == "u":
            bad = np.flatnonzero(arr > _INT64.max)
            if len(bad):
                self.fail(spec.name, int(bad[0]), f"integer {arr[bad[0]]} is outside the 64-bit range")
            return arr.astype(np.int64)
        if arr.dtype.kind == "f":
            bad = np.flatnonzero(~np.isfinite(arr) | (arr != np.round(arr)) | (np.abs(arr) >= 2.0 ** 63))
            if len(bad):
                self.fail(spec.name, int(bad[0]), f"expected an integer, got {arr[bad[0]]!r}")
            return arr.astype(np.int64)
        for i, v in enumerate(arr.tolist()):  # Python ints of any size, floats
            if isinstance(v, float) and not (v == v and v.is_integer() and abs(v) < 2.0 ** 63):
                self.fail(spec.name, i, f"expected an integer, got {v!r}")
            if isinstance(v, int) and not _INT64.min <= v <= _INT64.max:
                self.fail(spec.name, i, f"integer {v} is outside the 64-bit range")
        return np.array([int(v) for v in arr.tolist()], dtype=np.int64)

    def vectors(self, spec, col) -> tuple:
        present = None
        if isinstance(col, np.ndarray) and col.dtype != object:
            block = col
        else:
            values, present = self.optional_values(spec, col)
            rows = [v for v in values if v is not None]
            block = np.zeros((len(values), spec.dim), dtype=np.float32)
            if rows:
                try:
                    dense = np.array(rows, dtype=np.float64)
                except (TypeError, ValueError):
                    self.fail(spec.name, None, f"expected rows of {spec.dim} numbers")
                if dense.ndim != 2 or dense.shape[1] != spec.dim:
                    self.fail(spec.name, None, f"expected {spec.dim} dimensions, got shape {dense.shape}")
                have = np.flatnonzero([v is not None for v in values])
                block[have] = self._finite(spec, dense, have)
            return block, present
        if block.ndim != 2 or block.shape[1] != spec.dim:
            self.fail(spec.name, None, f"expected an (n, {spec.dim}) array, got shape {block.shape}")
        if block.dtype.kind not in "iuf" or block.dtype == np.bool_:
            self.fail(spec.name, None, f"expected numbers, got {block.dtype}")
        return self._finite(spec, block, None), present

    def _finite(self, spec, block: np.ndarray, rows: Optional[np.ndarray]) -> np.ndarray:
        with np.errstate(over="ignore"):
            out = np.ascontiguousarray(block, dtype=np.float32)
        bad = np.flatnonzero(~np.isfinite(out).all(axis=1))
        row = (lambda i: int(i) if rows is None else int(rows[i]))
        if len(bad):
            self.fail(spec.name, row(bad[0]), "contains NaN or inf (or a number too large for float32)")
        norms = np.sqrt(np.einsum("ij,ij->i", out, out, dtype=np.float64))
        bad = np.flatnonzero((norms > VECTOR_NORM_MAX) | ((norms > 0) & (norms < VECTOR_NORM_MIN)))
        if len(bad):
            self.fail(spec.name, row(bad[0]), f"its Euclidean norm {norms[bad[0]]:.3g} is outside "
                                              f"[{VECTOR_NORM_MIN:g}, {VECTOR_NORM_MAX:g}]")
        return out

    def others(self, spec, col) -> tuple:
        if isinstance(col, _Repeated):
            return col, None
        values = [None if _is_missing(v) else v for v in col]
        try:
            values = field_adapter(self.schema, spec.name, as_list=True).validate_python(values)
        except ValidationError as e:
            err = e.errors()[0]
            row = err["loc"][0] if err["loc"] else None
            self.fail(spec.name, row if isinstance(row, int) else None, err["msg"])
        check_storable(self.schema, spec.name, values)
        return values, None


def batch_from_columns(schema: Schema, data: Any) -> Batch:
    """A Batch from columns (dict / DataFrame / Arrow table), validated column-wise; a repeated
    id keeps its last row at the position of its first, as `extend` does."""
    cols = as_column_dict(data)
    unknown = [k for k in cols if k not in schema.fields]
    if unknown:
        raise SchemaError(f"{schema.name} has no field {unknown[0]!r} (columns: {', '.join(map(str, cols))}); "
                          "nothing was written")
    lengths = {k: len(v) for k, v in cols.items()}
    n = max(lengths.values(), default=0)
    short = [k for k, m in lengths.items() if m != n]
    if short:
        raise SchemaError(f"{schema.name}.{short[0]}: column has {lengths[short[0]]} rows, "
                          f"another has {n}; nothing was written")
    check = _Checker(schema)
    if "id" in cols:
        ids, _ = check.strings(schema.fields["id"], cols["id"])
    else:
        ids = [uuid.uuid4().hex for _ in range(n)]
    batch = Batch(schema=schema, ids=ids)
    for spec in schema.fields.values():
        if spec.kind is Kind.ID:
            continue
        col = cols.get(spec.name)
        if col is None:
            col = _defaults(schema, spec, n, check)
        if spec.kind is Kind.VECTOR:
            batch.vectors, present = check.vectors(spec, col)
        elif spec.kind in (Kind.INT, Kind.FLOAT, Kind.BOOL):
            batch.columns[spec.name], present = check.numbers(spec, col)
        elif spec.kind is Kind.KEYWORD:
            values, present = check.strings(spec, col)
            arr = np.empty(n, dtype=object)
            arr[:] = values
            batch.columns[spec.name] = arr
        elif spec.kind is Kind.TEXT:
            batch.columns[spec.name], present = check.strings(spec, col)
        else:
            batch.columns[spec.name], present = check.others(spec, col)
        if spec.optional:
            batch.present[spec.name] = present if present is not None else np.ones(n, dtype=np.uint8)
    return _last_of_each_id(batch)


def _defaults(schema: Schema, spec, n: int, check: _Checker) -> list:
    info = schema.model.model_fields[spec.name]
    if info.is_required():
        check.fail(spec.name, None, "the column is missing and the field has no default")
    default = info.get_default(call_default_factory=True)
    if spec.kind is Kind.OTHER:  # checked once here, not once per row
        check_storable(schema, spec.name, [default])
        return _Repeated(default, n)
    return [default] * n


class _Repeated(list):
    """n copies of one (already checked) default value of an unindexed field."""

    def __init__(self, value: Any, n: int) -> None:
        super().__init__([value] * n)


def _last_of_each_id(batch: Batch) -> Batch:
    hashes = np.sort(hash_ids(batch.ids))  # in C: distinct hashes prove distinct ids without a dict of them
    if not (hashes[1:] == hashes[:-1]).any():  # a sort is ~50x faster than np.unique's hash table here
        return batch
    last = dict(zip(batch.ids, range(len(batch.ids))))
    if len(last) == len(batch.ids):
        return batch
    keep = np.fromiter(last.values(), dtype=np.int64, count=len(last))
    take = keep.tolist()
    out = Batch(schema=batch.schema, ids=list(last))
    for name, col in batch.columns.items():
        out.columns[name] = col[keep] if isinstance(col, np.ndarray) else [col[i] for i in take]
    out.present = {name: p[keep] for name, p in batch.present.items()}
    out.vectors = batch.vectors[keep] if batch.vectors is not None else None
    return out


# ------------------------------------------------------------------ out
_NUMPY = {Kind.INT: np.int64, Kind.FLOAT: np.float64, Kind.BOOL: np.bool_}


def public_columns(schema: Schema, values: dict) -> dict:
    """to_columns' form of name -> per-row values: numbers and bools as int64 / float64 / bool
    arrays, vectors as one (n, d) float32 array, strings and unindexed values as lists. A column
    with a missing value (an optional field) is an object array holding None there instead.
    Entries that already are numpy arrays are kept as they are."""
    out = {}
    for name, vals in values.items():
        spec = schema.fields[name]
        if isinstance(vals, np.ndarray) or spec.kind not in (*_NUMPY, Kind.VECTOR):
            out[name] = vals
            continue
        if any(v is None for v in vals):
            arr = np.empty(len(vals), dtype=object)
            arr[:] = vals
        elif spec.kind is Kind.VECTOR:
            arr = np.array(vals, dtype=np.float32).reshape(len(vals), spec.dim)
        else:
            arr = np.array(vals, dtype=_NUMPY[spec.kind])
        out[name] = arr
    return out


def to_pandas(columns: dict):
    """A pandas DataFrame of to_columns' output (a vector column holds one array per row)."""
    try:
        import pandas as pd
    except ImportError:
        raise missing_extra("to_pandas", "pandas", "pandas") from None
    data = {k: (list(v) if isinstance(v, np.ndarray) and v.ndim == 2 else v) for k, v in columns.items()}
    return pd.DataFrame(data)


def to_arrow(columns: dict, schema: Schema):
    """A pyarrow Table of to_columns' output (vectors as fixed_size_list<float32>[d])."""
    try:
        import pyarrow as pa
    except ImportError:
        raise missing_extra("to_arrow", "pyarrow", "arrow") from None
    arrays, names = [], []
    for name, col in columns.items():
        spec = schema.fields[name]
        if spec.kind is Kind.VECTOR:
            if isinstance(col, np.ndarray) and col.dtype != object:
                arr = pa.FixedSizeListArray.from_arrays(pa.array(col.reshape(-1), pa.float32()), spec.dim)
            else:
                arr = pa.array([None if v is None else np.asarray(v).tolist() for v in col],
                               pa.list_(pa.float32(), spec.dim))
        elif spec.kind is Kind.OTHER:
            from pydantic import TypeAdapter

            arr = pa.array(TypeAdapter(list).dump_python(list(col), mode="json"))
        else:
            arr = pa.array(col.tolist() if isinstance(col, np.ndarray) and col.dtype == object else col)
        arrays.append(arr)
        names.append(name)
    return pa.Table.from_arrays(arrays, names=names)

