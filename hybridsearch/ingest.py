"""Columns in and out: `extend_columns` validation and `to_columns`' public form.

Validation is column-wise (one numpy check per column, a Python loop only over
lists and object columns), with the same rules as a document's: no NaN or inf,
integers within 64 bits, floats within float64, no bool or str where a number is
expected, one value per row (no 2-D column but the vector field's), vectors of the
schema's dimension with a usable norm, unindexed values that read back exactly.
What is not a column at all (a str, a scalar, a set, a name given twice) is refused
by hybridsearch.frames while reading the container. Every column is checked before
the Batch exists: the first problem raises SchemaError naming the column and the
row, and no storage sees anything.
"""
from __future__ import annotations

import uuid
from typing import Any, Optional

import numpy as np
from pydantic import ValidationError

from hybridsearch.batch import Batch
from hybridsearch.document import (VECTOR_NORM_MAX, VECTOR_NORM_MIN, Kind, Schema, check_storable, field_adapter,
                                   is_valid_unicode)
from hybridsearch.engine.exact import row_norms2
from hybridsearch.engine.strings import encode_strings
from hybridsearch.errors import SchemaError
from hybridsearch.frames import as_column_dict

_INT64 = np.iinfo(np.int64)


def _is_missing(v: Any) -> bool:
    """None, or a missing value as pandas writes one (NaN in an object column, pd.NA)."""
    if v is None:
        return True
    if isinstance(v, float) and v != v:
        return True
    return type(v).__name__ in ("NAType", "NaTType")


class _Checker:
    """Validates the columns of one extend_columns call against a schema."""

    def __init__(self, schema: Schema) -> None:
        self.schema = schema
        self.encoded: dict = {}  # string column -> Encoded (its UTF-8 bytes, for the writes)
        self.norms2: dict = {}  # vector field -> float64 squared norm per row

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
        # the common case (every value an exact str, or None where the field may miss it) is one
        # native pass that also encodes the batch for the writes; anything else takes the loop
        # below, which names the first bad row
        enc = encode_strings(values)
        if enc is not None:
            lengths = enc.length
            if spec.kind is Kind.ID or not spec.optional:
                missing = np.flatnonzero(lengths < 0)
                if len(missing):
                    enc = None  # a None where a value is required: refused below
            if enc is not None:
                if spec.kind is Kind.ID and len(lengths) and int(lengths.min()) == 0:
                    self.fail("id", int(np.argmin(lengths)), "expected a non-empty string")
                self.encoded[spec.name] = enc
                present = (lengths >= 0).view(np.uint8) if spec.optional else None
                return values, present
        odd = [i for i, v in enumerate(values) if type(v) is not str]
        values, present = self._missing_to_none(spec, values, odd)
        for i in odd:
            v = values[i]
            if v is not None and not isinstance(v, str):
                self.fail(spec.name, i, f"expected a string, got {type(v).__name__} {_short(v)}")
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
        present = None
        if not isinstance(col, np.ndarray) or col.dtype == object:
            # a list or object array: every element is checked for its type (no bool passes for a number)
            values, present = self.optional_values(spec, col)
            fill = False if spec.kind is Kind.BOOL else 0
            plain = {bool} if spec.kind is Kind.BOOL else _PLAIN_NUMBER
            # the common case (every value a Python number, none missing) costs one C-level pass
            for i, v in enumerate(values if not set(map(type, values)) <= plain else ()):
                if v is None:
                    values[i] = fill
                    continue
                ok = isinstance(v, (bool, np.bool_)) if spec.kind is Kind.BOOL else (
                    isinstance(v, _NUMBER) and not isinstance(v, (bool, np.bool_)))
                if not ok:
                    self.fail(spec.name, i, f"expected a {'bool' if spec.kind is Kind.BOOL else 'number'}, "
                                            f"got {type(v).__name__} {_short(v)}")
                if isinstance(v, np.generic) and not isinstance(v, np.longdouble):
                    values[i] = v.item()  # np.float32 1.5 must not pass as the int 1
            if spec.kind is Kind.FLOAT:
                arr = self._floats(spec, values)
            elif spec.kind is Kind.INT:
                arr = self._ints(spec, np.array(values, dtype=object))
            else:
                arr = np.array(values, dtype=np.int64)
        elif spec.kind is Kind.BOOL:
            if col.dtype != np.bool_:
                self.fail(spec.name, 0, f"expected bools, got a column of {col.dtype}")
            arr = col.astype(np.int64)
        else:
            arr = col
            if arr.dtype == np.bool_ or arr.dtype.kind not in "iuf":
                self.fail(spec.name, 0, f"expected numbers, got a column of {arr.dtype}")
            if spec.kind is Kind.INT:
                arr = self._ints(spec, arr)
        if spec.kind is Kind.FLOAT:
            with np.errstate(over="ignore"):  # beyond float64 (a longdouble) becomes inf, refused below
                arr = np.asarray(arr, dtype=np.float64)
            bad = np.flatnonzero(~np.isfinite(arr))
            if len(bad):
                self.fail(spec.name, int(bad[0]), f"expected a finite number, got {arr[bad[0]]!r}")
            arr = arr + 0.0  # -0.0 -> 0.0, as every storage stores it
        return arr, present

    def _floats(self, spec, values: list) -> np.ndarray:
        try:
            with np.errstate(over="ignore"):
                return np.array(values, dtype=np.float64)
        except OverflowError:  # a Python int beyond the float64 range
            for i, v in enumerate(values):
                try:
                    float(v)
                except OverflowError:
                    self.fail(spec.name, i, f"expected a finite number, got {_short(v)} (beyond float64)")
            raise

    def _ints(self, spec, arr: np.ndarray) -> np.ndarray:
        if arr.dtype.kind == "i":
            return arr.astype(np.int64)
        if arr.dtype.kind == "u":
            bad = np.flatnonzero(arr > _INT64.max)
            if len(bad):
                self.fail(spec.name, int(bad[0]), f"integer {arr[bad[0]]} is outside the 64-bit range")
            return arr.astype(np.int64)
        if arr.dtype.kind == "f":
            with np.errstate(invalid="ignore"):
                bad = np.flatnonzero(~np.isfinite(arr) | (arr != np.round(arr)) | (np.abs(arr) >= 2.0 ** 63))
            if len(bad):
                self.fail(spec.name, int(bad[0]), f"expected an integer, got {arr[bad[0]]!r}")
            return arr.astype(np.int64)
        values = arr.tolist()  # Python ints of any size, floats (numpy scalars made Python ones)
        for i, v in enumerate(values):
            if isinstance(v, (float, np.floating)) and not (v == v and float(v).is_integer()
                                                            and abs(float(v)) < 2.0 ** 63):
                self.fail(spec.name, i, f"expected an integer, got {v!r}")
            if isinstance(v, int) and not _INT64.min <= v <= _INT64.max:
                self.fail(spec.name, i, f"integer {_short(v)} is outside the 64-bit range")
        return np.array([int(v) for v in values], dtype=np.int64)

    def vectors(self, spec, col) -> tuple:
        present = None
        if isinstance(col, np.ndarray) and col.dtype != object:
            if col.ndim != 2 or col.shape[1] != spec.dim:
                self.fail(spec.name, None, f"expected an (n, {spec.dim}) array, got shape {col.shape}")
            if col.dtype.kind not in "iuf":
                self.fail(spec.name, None, f"expected numbers, got {col.dtype}")
            return self._finite(spec, col, None), present
        if isinstance(col, np.ndarray) and col.ndim == 2:  # an object array of (n, d) numbers
            col = [list(row) for row in col]
        elif isinstance(col, np.ndarray) and col.ndim != 1:
            self.fail(spec.name, None, f"expected an (n, {spec.dim}) array or one row per entry, "
                                       f"got an array of shape {col.shape}")
        values, present = self.optional_values(spec, col)
        have = [i for i, v in enumerate(values) if v is not None]
        for i in have:
            values[i] = self._vector_row(spec, i, values[i])
        block = np.zeros((len(values), spec.dim), dtype=np.float32)
        if have:
            try:
                with np.errstate(over="ignore"):
                    dense = np.array([values[i] for i in have], dtype=np.float64)
            except OverflowError:  # a Python int beyond float64: name its row
                for i in have:
                    try:
                        np.array(values[i], dtype=np.float64)
                    except OverflowError:
                        self.fail(spec.name, i, "a number is too large (beyond float64)")
                raise
            block[have] = self._finite(spec, dense, np.array(have))
        return block, present

    def _vector_row(self, spec, i: int, row):
        """One row of a vector column as a sequence of dim numbers, or SchemaError naming the row."""
        if isinstance(row, np.ndarray):
            if row.dtype == object:
                row = row.tolist()
            elif row.dtype.kind not in "iuf":
                self.fail(spec.name, i, f"expected {spec.dim} numbers, got an array of {row.dtype}")
            elif row.shape != (spec.dim,):
                self.fail(spec.name, i, f"expected {spec.dim} numbers, got an array of shape {row.shape}")
        if isinstance(row, tuple):
            row = list(row)
        if not isinstance(row, (list, np.ndarray)):
            self.fail(spec.name, i, f"expected a list or array of {spec.dim} numbers, got "
                                    f"{type(row).__name__} {_short(row)}")
        if isinstance(row, list):
            if len(row) != spec.dim:
                self.fail(spec.name, i, f"expected {spec.dim} numbers, got {len(row)}")
            if not set(map(type, row)) <= _PLAIN_NUMBER:
                for v in row:  # np.bool_ and bool are not numbers here, as in a number column
                    if not isinstance(v, _NUMBER) or isinstance(v, (bool, np.bool_)):
                        self.fail(spec.name, i, f"expected numbers, got {type(v).__name__} {_short(v)}")
        return row

    def _finite(self, spec, block: np.ndarray, rows: Optional[np.ndarray]) -> np.ndarray:
        with np.errstate(over="ignore"):
            out = np.ascontiguousarray(block, dtype=np.float32)
        norms2, bad_row = row_norms2(out)  # one pass: finite check and norms together
        row = (lambda i: int(i) if rows is None else int(rows[i]))
        if bad_row >= 0:
            self.fail(spec.name, row(bad_row), "contains NaN or inf (or a number too large for float32)")
        if rows is None:
            self.norms2[spec.name] = norms2  # every row of the batch's block: the writes reuse them
        norms = np.sqrt(norms2)
        bad = np.flatnonzero((norms > VECTOR_NORM_MAX) | ((norms > 0) & (norms < VECTOR_NORM_MIN)))
        if len(bad):
            self.fail(spec.name, row(bad[0]), f"its Euclidean norm {norms[bad[0]]:.3g} is outside "
                                              f"[{VECTOR_NORM_MIN:g}, {VECTOR_NORM_MAX:g}]")
        return out

    def others(self, spec, col) -> tuple:
        if isinstance(col, _Repeated):
            return col, None
        if isinstance(col, np.ndarray) and col.dtype != object:
            values = col.tolist()  # numpy numbers as the Python numbers they hold
        else:
            values = [None if _is_missing(v) else v.item() if isinstance(v, np.generic) else v for v in col]
        try:
            values = field_adapter(self.schema, spec.name, as_list=True).validate_python(values)
        except ValidationError as e:
            err = e.errors()[0]
            row = err["loc"][0] if err["loc"] else None
            self.fail(spec.name, row if isinstance(row, int) else None, err["msg"])
        try:
            check_storable(self.schema, spec.name, values)
        except SchemaError as e:
            raise SchemaError(f"{e}; nothing was written") from None
        return values, None


_NUMBER = (int, float, np.integer, np.floating)
_PLAIN_NUMBER = {int, float}


def _short(v: Any) -> str:
    r = repr(v)
    return r if len(r) <= 60 else r[:57] + "..."


def batch_from_columns(schema: Schema, data: Any) -> Batch:
    """A Batch from columns (dict / DataFrame / Arrow table), validated column-wise; a repeated
    id keeps its last row at the position of its first, as `extend` does. Every column is
    checked before the batch exists, so a refusal leaves every storage untouched."""
    cols = as_column_dict(data, schema.name)
    unknown = [k for k in cols if k not in schema.fields]
    if unknown:
        raise SchemaError(f"{schema.name} has no field {unknown[0]!r} (columns: {', '.join(map(str, cols))}); "
                          "nothing was written")
    check = _Checker(schema)
    for name, col in cols.items():  # vector columns check their own shape (an (n, d) block)
        kind = schema.fields[name].kind
        if isinstance(col, np.ndarray) and kind is Kind.MULTI and col.ndim == 3:
            cols[name] = list(col)  # (n, tokens, d): one token block per row, each checked as a value
        elif isinstance(col, np.ndarray) and col.ndim != 1 and kind is not Kind.VECTOR:
            check.fail(name, None, f"expected one value per row, got an array of shape {col.shape}")
    lengths = {k: len(v) for k, v in cols.items()}
    n = max(lengths.values(), default=0)
    short = [k for k, m in lengths.items() if m != n]
    if short:
        raise SchemaError(f"{schema.name}.{short[0]}: column has {lengths[short[0]]} rows, "
                          f"another has {n}; nothing was written")
    if "id" in cols:
        ids, _ = check.strings(schema.fields["id"], cols["id"])
    else:
        ids = [uuid.uuid4().hex for _ in range(n)]
    batch = Batch(schema=schema, ids=ids, encoded=check.encoded, norms2=check.norms2)
    for spec in schema.fields.values():
        if spec.kind is Kind.ID:
            continue
        col = cols[spec.name] if spec.name in cols else _defaults(schema, spec, n, check)
        if spec.kind is Kind.VECTOR:
            batch.vecs[spec.name], present = check.vectors(spec, col)
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
    return last_of_each_id(batch)


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


def last_of_each_id(batch: Batch) -> Batch:
    """The batch with one row per id: a repeated id keeps its last row at the position of its
    first (as extend and extend_columns promise)."""
    enc = batch.encoded.get("id")
    if enc is None:  # ids that took the slow path of validation (now each an exact str)
        enc = encode_strings(batch.ids)
    if enc is not None:  # native passes over the ids' bytes: a sort of their hashes, then grouping
        if enc.distinct():
            return batch
        _, first, keep = enc.grouped()
        if len(keep) == len(batch.ids):
            return batch
        ids = [batch.ids[i] for i in first.tolist()]
    else:
        last = dict(zip(batch.ids, range(len(batch.ids))))
        if len(last) == len(batch.ids):
            return batch
        keep = np.fromiter(last.values(), dtype=np.int64, count=len(last))
        ids = list(last)
    take = keep.tolist()
    # the encodings and norms were of every row: the writes of the kept rows measure their own
    out = Batch(schema=batch.schema, ids=ids)
    for name, col in batch.columns.items():
        out.columns[name] = col[keep] if isinstance(col, np.ndarray) else [col[i] for i in take]
    out.present = {name: p[keep] for name, p in batch.present.items()}
    out.vecs = {name: block[keep] for name, block in batch.vecs.items()}
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
