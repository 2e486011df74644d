"""The containers columns arrive in and leave in: a dict, a pandas DataFrame, a pyarrow Table or
RecordBatch in (`as_column_dict`), pandas and Arrow out (`to_pandas`, `to_arrow`).

`as_column_dict` hands ingest's checks only real columns: each a list, a tuple or a numpy array
of at least one dimension, one entry per row. Whatever is not a column of rows is refused here
with SchemaError naming it: a str (it would be read as its characters), a single value, a set or
a dict (no order of rows), a name given twice. A generator, a pandas Series or a pyarrow Array
is read into one.

Arrow cannot hold every value an unindexed field may (a list mixing ints and strings, an int
beyond 64 bits, dicts with different keys would come back changed): such a column goes out as
the JSON text of each value, its field's metadata saying so (`JSON_KEY`), and `as_column_dict`
reads it back as the values. Every other column keeps its Arrow type.
"""
from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence, Set
from typing import Any

import numpy as np

from hybridsearch.document import Kind, Schema, same_value
from hybridsearch.errors import SchemaError, missing_extra

JSON_KEY = b"hybridsearch.encoding"  # Arrow field metadata: b"json" = each cell is a value's JSON text
JSON = b"json"


def _refuse(where: str, name: Any, what: str) -> SchemaError:
    return SchemaError(f"{where}.{name}: {what}; nothing was written")


def as_column_dict(data: Any, where: str) -> dict:
    """name -> column (list, tuple or numpy array, one entry per row) of a dict of columns, a
    pandas DataFrame or a pyarrow Table / RecordBatch; `where` (the schema's name) starts every
    error message."""
    if isinstance(data, dict):
        return {name: _column(where, name, col) for name, col in data.items()}
    kind = type(data).__module__.split(".")[0]
    if kind == "pandas" and hasattr(data, "columns"):
        names = [str(name) for name in data.columns]
        _no_repeats(where, names)
        return {name: _pandas_values(data.iloc[:, j]) for j, name in enumerate(names)}
    if kind == "pyarrow" and hasattr(data, "column_names"):
        names = list(data.column_names)
        _no_repeats(where, names)
        return {name: _arrow_values(where, name, data.column(j), data.schema.field(j))
                for j, name in enumerate(names)}
    raise SchemaError(f"extend_columns takes a dict of columns, a pandas DataFrame or a pyarrow Table "
                      f"or RecordBatch, got {type(data).__name__}; nothing was written")


def _no_repeats(where: str, names: list) -> None:
    seen = set()
    for name in names:
        if name in seen:
            raise _refuse(where, name, "the column is given twice (which one holds the values?)")
        seen.add(name)


def _column(where: str, name: Any, col: Any):
    """One column of a dict as a list, tuple or numpy array, or SchemaError saying what it is."""
    if isinstance(col, np.ma.MaskedArray):
        # a masked entry is a missing value; read as a plain array the mask would be dropped and
        # the hidden value written (or not, depending on the storage's path)
        mask = np.ma.getmaskarray(col)
        col = np.ma.getdata(col)
        if mask.any():
            col = col.astype(object)
            col[mask] = None
    if isinstance(col, np.ndarray):
        if col.ndim == 0:
            raise _refuse(where, name, f"expected a column of values, got a single value {col!r}")
        return col
    if isinstance(col, (list, tuple)):
        return col
    if isinstance(col, (str, bytes, bytearray)):
        # a str is iterable, so it would be read as one row per character
        what = "string" if isinstance(col, str) else type(col).__name__
        raise _refuse(where, name, f"expected a column of values, got a single {what} {_short(col)} "
                                   "(put the values in a list)")
    if isinstance(col, (Set, Mapping)):
        raise _refuse(where, name, f"expected a column of values in row order, got a {type(col).__name__} "
                                   "(it has no order of rows; give a list)")
    kind = type(col).__module__.split(".")[0]
    if kind == "pandas" and hasattr(col, "dtype") and not hasattr(col, "columns"):  # Series, Index, array
        import pandas as pd

        return _pandas_values(pd.Series(col, copy=False).reset_index(drop=True))
    if kind == "pyarrow" and hasattr(col, "type") and hasattr(col, "to_pylist"):  # Array, ChunkedArray
        return _arrow_values(where, name, col, None)
    if isinstance(col, (Iterator, range)) or (isinstance(col, Sequence) and kind != "pandas"):
        return list(col)  # read once, before anything is checked or written
    if col is None or np.isscalar(col) or isinstance(col, (int, float, bool)):
        raise _refuse(where, name, f"expected a column of values, got a single value {_short(col)} "
                                   "(leave the column out to take the field's default)")
    raise _refuse(where, name, "expected a column (a list, tuple, numpy array, pandas Series or pyarrow "
                               f"Array), got {type(col).__name__}")


def _short(v: Any) -> str:
    r = repr(v)
    return r if len(r) <= 60 else r[:57] + "..."


def _pandas_values(col):
    """A pandas Series as a column: numbers as numpy arrays, objects and strings as lists,
    nullable numbers as lists with None where missing."""
    dtype = str(col.dtype)
    if col.dtype == object or dtype in ("string", "str"):
        return col.tolist()
    if dtype.startswith(("Int", "UInt", "Float", "boolean")):  # nullable: pd.NA for missing
        return col.astype(object).where(col.notna(), None).tolist()
    return col.to_numpy()


def _arrow_values(where: str, name: str, col, field):
    """A pyarrow Array or ChunkedArray as a column: numbers as a numpy array, a fixed-size list
    of floats as an (n, size) array, a JSON-marked column as its values, the rest as Python lists."""
    import pyarrow as pa

    t = col.type
    if field is not None and (field.metadata or {}).get(JSON_KEY) == JSON and pa.types.is_string(t):
        try:
            return [None if v is None else json.loads(v) for v in col.to_pylist()]
        except ValueError:
            raise _refuse(where, name, "the column is marked as JSON text but a cell is not JSON") from None
    if col.null_count == 0 and (pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t)):
        return col.to_numpy(zero_copy_only=False) if isinstance(col, pa.Array) else col.to_numpy()
    if pa.types.is_map(t):  # a sparse vector column: each row back as a dict (a list of pairs would not do)
        return [None if v is None else dict(v) for v in col.to_pylist()]
    if col.null_count == 0 and pa.types.is_fixed_size_list(t) and pa.types.is_floating(t.value_type):
        chunks = col.chunks if isinstance(col, pa.ChunkedArray) else [col]
        # flatten() (not .values) honours a slice's offset; a null inside a row reads as NaN
        parts = [c.flatten().to_numpy(zero_copy_only=False) for c in chunks]
        flat = np.concatenate(parts) if parts else np.empty(0, dtype=np.float32)
        return flat.reshape(len(col), t.list_size)
    return col.to_pylist()


# ------------------------------------------------------------------ out
def to_pandas(columns: dict):
    """A pandas DataFrame of to_columns' output (a vector column holds one array per row)."""
    try:
        import pandas as pd
    except ImportError:
        raise missing_extra("to_pandas", "pandas", "pandas") from None
    data = {k: (list(v) if isinstance(v, np.ndarray) and v.ndim == 2 else v) for k, v in columns.items()}
    return pd.DataFrame(data)


def to_arrow(columns: dict, schema: Schema):
    """A pyarrow Table of to_columns' output (vectors as fixed_size_list<float32>[d], sparse
    vectors as map<int32, float32>, multi-vectors as list<fixed_size_list<float32>[d]>; an unindexed
    column Arrow cannot hold exactly as the JSON text of each value, marked in its field's
    metadata)."""
    try:
        import pyarrow as pa
    except ImportError:
        raise missing_extra("to_arrow", "pyarrow", "arrow") from None
    fields, arrays = [], []
    for name, col in columns.items():
        spec = schema.fields[name]
        metadata = None
        if spec.kind is Kind.VECTOR:
            if isinstance(col, np.ndarray) and col.dtype != object:
                arr = pa.FixedSizeListArray.from_arrays(pa.array(col.reshape(-1), pa.float32()), spec.dim)
            else:
                arr = pa.array([None if v is None else np.asarray(v).tolist() for v in col],
                               pa.list_(pa.float32(), spec.dim))
        elif spec.kind is Kind.SPARSE:  # a map: Arrow keeps the int keys, as JSON could not
            arr = pa.array([None if v is None else list(v.items()) for v in col], pa.map_(pa.int32(), pa.float32()))
        elif spec.kind is Kind.MULTI:
            arr = pa.array([None if v is None else np.asarray(v).tolist() for v in col],
                           pa.list_(pa.list_(pa.float32(), spec.dim)))
        elif spec.kind is Kind.OTHER:
            arr, metadata = _unindexed_to_arrow(list(col))
        else:
            arr = pa.array(col.tolist() if isinstance(col, np.ndarray) and col.dtype == object else col)
        arrays.append(arr)
        fields.append(pa.field(name, arr.type, metadata=metadata))
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields))


def _unindexed_to_arrow(values: list) -> tuple:
    """(array, field metadata) of an unindexed field's values: Arrow's own type when it reads
    back every value exactly, else the JSON text of each value (None stays null)."""
    import pyarrow as pa
    from pydantic import TypeAdapter

    plain = TypeAdapter(list).dump_python(values, mode="json")
    try:
        arr = pa.array(plain)
        if all(same_value(a, b) for a, b in zip(arr.to_pylist(), plain)):
            return arr, None
    except (pa.ArrowException, OverflowError, TypeError, ValueError):
        pass  # Arrow has no type for them (a mixed list, an int beyond 64 bits)
    text = [None if v is None else json.dumps(v, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
            for v in plain]
    return pa.array(text, pa.string()), {JSON_KEY: JSON}
