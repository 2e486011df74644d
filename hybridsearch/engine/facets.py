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


def _keyword_ranks(store, name: str) -> np.ndarray:
    """Rank (by code point) of every keyword code, with one extra slot at the end for -1."""
    words = store.kw_dictionary[name]
    order = np.argsort(np.array(words, dtype=object), kind="stable") if words else np.zeros(0, np.int64)
    rank_of_code = np.empty(len(words) + 1, dtype=np.int64)
    rank_of_code[order] = np.arange(len(words))
    rank_of_code[-1] = len(words)  # code -1: missing
    return rank_of_code


def _keys(store, name: str, rows: np.ndarray) -> tuple:
    """(comparable keys, missing mask) of the field at `rows`."""
    spec = store.schema.fields[name]
    if name == "id":
        return np.array(store.ids.get_many(rows), dtype=object), np.zeros(len(rows), dtype=bool)
    if spec.kind is Kind.KEYWORD:
        codes = store.values[name][rows]
        return _keyword_ranks(store, name)[codes], codes < 0
    present = store.present.get(name)
    missing = present[rows] == 0 if present is not None else np.zeros(len(rows), dtype=bool)
    return store.values[name][rows], missing


def _ranks(store, name: str, rows: np.ndarray, descending: bool) -> np.ndarray:
    """Dense ranks of the field's values at `rows` in the asked direction; a missing value
    ranks after every value in both directions."""
    keys, missing = _keys(store, name, rows)
    _, dense = np.unique(keys, return_inverse=True)
    dense = dense.astype(np.int64).reshape(-1)
    if descending:
        dense = dense.max(initial=0) - dense
    dense[missing] = len(rows) + 1
    return dense


def sort_order(store, rows: np.ndarray, keys: list, then: Optional[np.ndarray] = None,
               limit: Optional[int] = None) -> np.ndarray:
    """The permutation of `rows` that orders them by the (field, "asc" | "desc") keys, then by
    `then` ascending (if given), then by insertion order; with `limit`, its first `limit`."""
    if len(rows) < 2:
        return np.arange(len(rows))[:limit]
    field, direction = keys[0] if keys else (None, None)
    if limit is not None and limit < len(rows) // 4 and field not in (None, "id"):
        # a page: only rows whose first key reaches the limit-th value can be on it; select them
        # with a partition (linear) and sort those alone. The float keys are monotone in the
        # values, so the selection holds every row of the page (ties included).
        values, missing = _keys(store, field, rows)
        first = values.astype(np.float64) * (-1.0 if direction == "desc" else 1.0)
        first[missing] = np.inf
        kth = np.partition(first, max(limit - 1, 0))[max(limit - 1, 0)]
        picked = np.flatnonzero(first <= kth)
        sub = sort_order(store, rows[picked], keys, then[picked] if then is not None else None)
        return picked[sub][:limit]
    columns = [store.seq[rows]] + ([then] if then is not None else [])
    columns += [_ranks(store, f, rows, d == "desc") for f, d in reversed(keys)]
    return np.lexsort(columns)[:limit]
