"""Carrying a ColumnStore and its TextIndex over to an evolved schema (persist/evolve.py Plan).

The new store takes the old one's rows as they are: the same slots, ids, liveness and insertion
order, and the very column objects of every field kept unchanged, dense vector blocks included
(so a graph over the slots stays valid and no vector is copied or re-normalised). Only fields
added or changed get new columns: an added field holds its default on every live row, a changed
one the values the rows held (a string carried from an unindexed field into hs.Text or
hs.Keyword, a None taking the default of a field that became required). The unindexed fields,
kept together as one JSON array per row, are written again for every row when they change.
The text index keeps the index of every text field kept, and indexes the fields new to it.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from hybridsearch.document import Kind
from hybridsearch.engine.columns import _COLUMN_DTYPES, ColumnStore
from hybridsearch.engine.lexical import TextIndex
from hybridsearch.engine.strings import StringColumn
from hybridsearch.errors import ConfigError

_SHARED = ("free", "seq", "compactions", "next_seq", "n", "n_live", "cap", "ids", "row_of", "live")


def carry_store(old: ColumnStore, new: ColumnStore, plan) -> np.ndarray:
    """Fills `new` (an empty store of plan.schema) from `old` (the store as the files held it);
    -> the live rows. ConfigError (naming the field and a document) when a value cannot be
    carried into a changed field; `new` is then not to be used, and `old` is unchanged."""
    rows = old.live_rows()
    cap = old.cap
    kept, fresh = set(plan.kept), [n for n in plan.schema.fields if n in plan.added or n in plan.changed]
    carried = old.field_values(rows, [n for n in plan.changed if n in old.schema.fields])
    values = {}  # field -> the value of each live row, for the fields not kept as they are
    for name in fresh:
        spec = plan.schema.fields[name]
        default = plan.defaults.get(name)
        if name in plan.added:
            values[name] = [default] * len(rows)
            continue
        vals = carried[name]
        if spec.kind in (Kind.TEXT, Kind.KEYWORD):
            bad = next((i for i, v in enumerate(vals) if v is not None and type(v) is not str), None)
            if bad is not None:
                raise ConfigError(f"{plan.schema.name}.{name} becomes {spec.kind.value}, but document "
                                  f"{old.ids.get(int(rows[bad]))!r} holds {type(vals[bad]).__name__} "
                                  f"{_short(vals[bad])} there, not a string: keep the field's old type")
        if not spec.optional:
            missing = next((i for i, v in enumerate(vals) if v is None), None)
            if missing is not None and default is None:
                raise ConfigError(f"{plan.schema.name}.{name} is required, but document "
                                  f"{old.ids.get(int(rows[missing]))!r} holds no value for it: give it a "
                                  "default or keep it Optional")
            vals = [default if v is None else v for v in vals]
        values[name] = vals
    for attr in _SHARED:
        setattr(new, attr, getattr(old, attr))
    for name, spec in plan.schema.fields.items():
        if spec.kind is Kind.ID:
            continue
        if spec.kind is Kind.VECTOR and name in plan.added:  # Optional, no vector on any stored document
            new.dense[name].grow(cap, 0)
            new.present[name] = np.zeros(cap, dtype=np.uint8)
        elif name in kept or spec.kind is Kind.VECTOR:  # a changed vector field only became Optional
            _take(old, new, name)
            if name not in kept:  # required -> Optional: every stored document has its vector
                present = np.zeros(cap, dtype=np.uint8)
                present[rows] = 1
                new.present[name] = present
        else:  # an unindexed field (Kind.OTHER) has only its presence here, its values in the extras
            _fill(new, name, spec, rows, values[name], cap)
    if new.extras is not None:
        _carry_extras(old, new, plan, rows, values, cap)
    return rows


def _take(old: ColumnStore, new: ColumnStore, name: str) -> None:
    """Field `name`'s column objects, as they are."""
    for table in ("values", "present", "kw_dictionary", "kw_codes", "strings", "dense", "fieldvecs"):
        mine, theirs = getattr(new, table), getattr(old, table)
        if name in mine and name in theirs:
            mine[name] = theirs[name]


def _fill(new: ColumnStore, name: str, spec, rows: np.ndarray, vals: list, cap: int) -> None:
    """New columns of `cap` rows for field `name`, holding vals[i] at rows[i]."""
    if name in new.present:
        present = np.zeros(cap, dtype=np.uint8)
        present[rows] = np.fromiter((v is not None for v in vals), dtype=np.uint8, count=len(vals))
        new.present[name] = present
    if spec.kind is Kind.KEYWORD:
        codes = np.full(cap, -1, dtype=np.int32)
        codes[rows] = new._encode_keywords(name, vals, None)
        new.values[name] = codes
    elif spec.kind in _COLUMN_DTYPES:
        column = np.zeros(cap, dtype=_COLUMN_DTYPES[spec.kind])
        column[rows] = [0 if v is None else v for v in vals]
        new.values[name] = column
    elif spec.kind is Kind.TEXT:
        col = StringColumn()
        col.grow(cap)
        col.set(rows, vals)
        new.strings[name] = col
    elif name in new.fieldvecs:
        given = [i for i, v in enumerate(vals) if v is not None]
        if given:
            new.fieldvecs[name].set(rows[given], [vals[i] for i in given])


def _carry_extras(old: ColumnStore, new: ColumnStore, plan, rows: np.ndarray, values: dict, cap: int) -> None:
    """The JSON array of unindexed fields of every live row, in the new schema's order."""
    if (old.extras is not None and tuple(old.extra_names) == tuple(new.extra_names)
            and not any(n in values for n in new.extra_names)):
        new.extras = old.extras  # the same fields in the same order, none given new values: the same JSON
        return
    from_old = [n for n in new.extra_names if n not in values]
    have = old.field_values(rows, from_old) if from_old else {}
    columns = [have[n] if n in have else values[n] for n in new.extra_names]
    col = StringColumn()
    col.grow(cap)
    col.set(rows, new._encode_extras(list(zip(*columns))) if len(rows) else [])
    new.extras = col


def carry_text(old: TextIndex, new: TextIndex, store: ColumnStore, plan, rows: np.ndarray) -> None:
    """`new` (plan.schema's) keeps old's index of every text field kept and indexes the others
    over the live rows."""
    theirs = {f.name: f for f in old.fields}
    kept = set(plan.kept)
    for i, f in enumerate(new.fields):
        if f.name in kept and f.name in theirs:
            new.fields[i] = theirs[f.name]
        elif len(rows):
            f.add(rows, store.strings[f.name].get_many(rows))


def _short(v: Any) -> str:
    r = repr(v)
    return r if len(r) <= 60 else r[:57] + "..."
