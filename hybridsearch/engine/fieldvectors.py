"""The sparse and multi-vector fields of a ColumnStore (API.md section 10), behind one interface.

`SparseColumn` wraps a SparseIndex (engine/sparse.py) and `MultiColumn` a TokenStore
(engine/multivector.py); both hold one field's values by slot (the store's rows), so the
store writes, deletes, compacts, snapshots and searches them alike:

- set(slots, values): the field's validated values (a dict / an (n, d) array; `{}` / None:
  absent) for these slots; remove(slots); renumber(keep) after a compaction;
- values(rows): the documents' values ({} / None where absent);
- search(queries, k, bits) -> (scores (nq, k) float32, rows (nq, k) int64) padded with -inf /
  -1 after the hits: exact top-k of each query among the slots set in `bits` (None: all);
- scores(query, rows): exact scores, NaN where a row holds no value (never a hit of the list);
- export() / restore(): the snapshot arrays.

A query is what vector_rules.field_queries makes of the user's value: (indices, values) for a
sparse field, an (m, d) float32 block for a multi-vector field.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from hybridsearch.document import FieldSpec, Kind
from hybridsearch.engine.multivector import TokenStore, check_metric
from hybridsearch.engine.sparse import SparseIndex

_NAN = np.float32("nan")


def _padded(results: list, k: int) -> tuple:
    scores = np.full((len(results), k), -np.inf, dtype=np.float32)
    rows = np.full((len(results), k), -1, dtype=np.int64)
    for i, (s, r) in enumerate(results):
        scores[i, :len(s)], rows[i, :len(r)] = s, r
    return scores, rows


def _remap(old_slots: np.ndarray, keep: np.ndarray, n: int) -> np.ndarray:
    """New slot of each old slot after a compaction keeping `keep` (ascending), in order."""
    lookup = np.full(max(n, int(old_slots.max()) + 1 if len(old_slots) else 0), -1, dtype=np.int64)
    lookup[keep] = np.arange(len(keep))
    return lookup[old_slots]


class SparseColumn:
    """One hs.SparseVector field: an inverted index over the store's slots."""

    kind = Kind.SPARSE

    def __init__(self, spec: FieldSpec) -> None:
        self.spec = spec
        self.index = SparseIndex()

    def set(self, slots: np.ndarray, values: list) -> None:
        lengths = [len(v) if v else 0 for v in values]
        indptr = np.zeros(len(values) + 1, dtype=np.int64)
        np.cumsum(lengths, out=indptr[1:])
        indices = np.fromiter((k for v in values if v for k in v), dtype=np.int32, count=int(indptr[-1]))
        weights = np.fromiter((w for v in values if v for w in v.values()), dtype=np.float32, count=int(indptr[-1]))
        self.index.add(np.asarray(slots, dtype=np.int64), indptr, indices, weights)  # no entries: removed

    def remove(self, slots: np.ndarray) -> None:
        self.index.remove(slots)

    def present_mask(self, n: int) -> np.ndarray:
        """uint8 per slot in [0, n): 1 where the document holds at least one entry."""
        mask = np.zeros(n, dtype=np.uint8)
        slots = self.index.to_arrays()["slots"]
        mask[slots[slots < n]] = 1
        return mask

    def values(self, rows) -> list:
        out = []
        for r in np.asarray(rows, dtype=np.int64).tolist():
            idx, val = self.index.get(r)
            out.append(dict(zip(idx.tolist(), val.tolist())))
        return out

    def search(self, queries: list, k: int, bits: Optional[np.ndarray]) -> tuple:
        if len(queries) == 1:
            return _padded([self.index.top_k(*queries[0], k, bits)], k)
        return self.index.top_k_batch(queries, k, bits)

    def scores(self, query, rows: np.ndarray) -> np.ndarray:
        rows = np.asarray(rows, dtype=np.int64)
        out = np.asarray(self.index.scores_of(rows, *query), dtype=np.float32).copy()
        absent = np.array([len(self.index.get(r)[0]) == 0 for r in rows.tolist()], dtype=bool)
        out[absent] = _NAN
        return out

    def renumber(self, keep: np.ndarray, n: int) -> None:
        a = self.index.to_arrays()
        a["slots"] = _remap(a["slots"], keep, n)
        self.index = SparseIndex.from_arrays(a)

    def export(self) -> tuple:
        return {}, self.index.to_arrays()

    def restore(self, meta: dict, arrays: dict, n: int) -> None:
        index = SparseIndex.from_arrays(arrays)
        slots = arrays["slots"]
        if len(slots) and int(slots[-1]) >= n:
            raise ValueError(f"columns: sparse field {self.spec.name} has a slot beyond the store")
        self.index = index


class MultiColumn:
    """One hs.MultiVector[d] field: token blocks by slot, exact MaxSim with the field's metric."""

    kind = Kind.MULTI

    def __init__(self, spec: FieldSpec, metric: str) -> None:
        self.spec = spec
        self.metric = check_metric(metric)
        self.tokens = TokenStore(spec.dim)

    def set(self, slots: np.ndarray, values: list) -> None:
        slots = np.asarray(slots, dtype=np.int64)
        given = [i for i, v in enumerate(values) if v is not None]
        if len(given) < len(values):
            self.tokens.remove(slots[[i for i, v in enumerate(values) if v is None]])
        if given:
            self.tokens.set_many(slots[given], [values[i] for i in given])

    def remove(self, slots: np.ndarray) -> None:
        self.tokens.remove(slots)

    def values(self, rows) -> list:
        out = []
        for r in np.asarray(rows, dtype=np.int64).tolist():
            block = self.tokens.get(r)
            if block is not None:
                block.flags.writeable = False  # as documents hold arrays
            out.append(block)
        return out

    def search(self, queries: list, k: int, bits: Optional[np.ndarray]) -> tuple:
        return _padded([self.tokens.maxsim_top_k(Q, k, self.metric, bits) for Q in queries], k)

    def scores(self, query, rows: np.ndarray) -> np.ndarray:
        return np.asarray(self.tokens.maxsim_of(np.asarray(rows, dtype=np.int64), query, self.metric),
                          dtype=np.float32)

    def renumber(self, keep: np.ndarray, n: int) -> None:
        meta, arrays = self.tokens.export()
        arrays = {"slots": _remap(arrays["slots"], keep, n), "counts": arrays["counts"].copy(),
                  "rows": arrays["rows"].copy()}
        meta = {**meta, "slots_end": int(arrays["slots"][-1]) + 1 if len(arrays["slots"]) else 0}
        self.tokens = TokenStore.attached(meta, arrays, self.spec.dim)

    def export(self) -> tuple:
        return self.tokens.export()

    def restore(self, meta: dict, arrays: dict, n: int) -> None:
        self.tokens = TokenStore.attached(meta, arrays, self.spec.dim, slot_limit=n)


def field_columns(schema, metrics: dict) -> dict:
    """field -> SparseColumn / MultiColumn of every sparse and multi-vector field of a schema
    (`metrics`: multi-vector field -> metric, "cosine" when not named)."""
    out: dict = {name: SparseColumn(spec) for name, spec in schema.sparse.items()}
    out.update({name: MultiColumn(spec, metrics.get(name, "cosine")) for name, spec in schema.multi.items()})
    return out
