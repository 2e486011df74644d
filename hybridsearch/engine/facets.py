"""Facet counts and sort orders over a ColumnStore's columns, for the rows a query matched.

Every function takes the matching rows as one int64 array and works on whole columns with
numpy (C loops), never per document in Python: a facet is one gather and one bincount or
unique, a sort one lexsort over dense ranks."""
from __future__ import annotations

from typing import Optional

import numpy as np

from hybridsearch.document import Kind


def _present(store, name: str, rows: np.ndarray) -> np.ndarray:
    """The rows among `rows` where the field has a value."""
    present = store.present.get(name)
    return rows if present is None else rows[present[rows] != 0]


def _python(spec, v):
    if spec.kind is Kind.BOOL:
        return bool(v)
    return int(v) if spec.kind is Kind.INT else float(v)


def value_counts(store, name: str, rows: np.ndarray, limit: int) -> list:
    """[(value, count)] of the field over `rows`: most frequent first, ties by value ascending
    (keywords by code point), zero counts left out, at most `limit`."""
    spec = store.schema.fields[name]
    if spec.kind is Kind.KEYWORD:
        codes = store.values[name][rows]
        counts = np.bincount(codes[codes >= 0], minlength=len(store.kw_dictionary[name]))
        have = np.flatnonzero(counts)
        words = store.kw_dictionary[name]
        pairs = [(words[c], int(counts[c])) for c in have.tolist()]
    else:
        vals, counts = np.unique(store.values[name][_present(store, name, rows)], return_counts=True)
        pairs = [(_python(spec, v), int(c)) for v, c in zip(vals.tolist(), counts.tolist())]
    pairs.sort(key=lambda p: (-p[1], p[0]))
    return pairs[:limit]


def range_counts(store, name: str, rows: np.ndarray, ranges: list) -> list:
    """[((lo, hi), count)] per range, lo inclusive, hi exclusive, None unbounded, in order."""
    vals = store.values[name][_present(store, name, rows)]
    out = []
    for lo, hi in ranges:
        keep = np.ones(len(vals), dtype=bool)
        if lo is not None:
            keep &= vals >= lo
        if hi is not None:
            keep &= vals < hi
        out.append(((lo, hi), int(np.count_nonzero(keep))))
    return out


def _ranks(store, name: str, rows: np.ndarray, descending: bool) -> np.ndarray:
    """Dense ranks of the field's values at `rows` in the asked direction; a missing value
    ranks after every value in both directions."""
    spec = store.schema.fields[name]
    if name == "id":
        keys = np.array(store.ids.get_many(rows), dtype=object)
        missing = np.zeros(len(rows), dtype=bool)
    elif spec.kind is Kind.KEYWORD:
        codes = store.values[name][rows]
        words = store.kw_dictionary[name]
        order = np.argsort(np.array(words, dtype=object), kind="stable") if words else np.zeros(0, np.int64)
        rank_of_code = np.empty(len(words) + 1, dtype=np.int64)
        rank_of_code[order] = np.arange(len(words))
        rank_of_code[-1] = len(words)  # code -1: missing
        keys = rank_of_code[codes]
        missing = codes < 0
    else:
        keys = store.values[name][rows]
        present = store.present.get(name)
        missing = present[rows] == 0 if present is not None else np.zeros(len(rows), dtype=bool)
    _, dense = np.unique(keys, return_inverse=True)
    dense = dense.astype(np.int64).reshape(-1)
    if descending:
        dense = dense.max(initial=0) - dense
    dense[missing] = len(rows) + 1
    return dense


def sort_order(store, rows: np.ndarray, keys: list, then: Optional[np.ndarray] = None) -> np.ndarray:
    """The permutation of `rows` that orders them by the (field, "asc" | "desc") keys, then by
    `then` ascending (if given), then by insertion order."""
    if len(rows) < 2:
        return np.arange(len(rows))
    columns = [store.seq[rows]] + ([then] if then is not None else [])
    columns += [_ranks(store, f, rows, d == "desc") for f, d in reversed(keys)]
    return np.lexsort(columns)
