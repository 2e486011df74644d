"""Search results: hs.Results (a sequence of hs.Hit) with lazily loaded documents."""
from __future__ import annotations

from typing import Any, Callable, Generic, NamedTuple, Optional, Sequence, TypeVar

import numpy as np


class Hit(NamedTuple):
    """One result: the document id, its score (higher is better) and the document."""

    id: str
    score: float
    doc: Any


T = TypeVar("T")


class Results(Sequence, Generic[T]):
    """Hits sorted by descending score; `ids`, `scores` (float32) and lazily loaded `docs`.

    Documents are built only when read: `res.docs` loads every hit's, `res[i]` only
    hit i's. They are read by id at that moment, so a document changed since the
    search reads as it is now, and one deleted since reads as None."""

    __slots__ = ("_ids", "_scores", "_fetch", "_docs", "_total")

    def __init__(self, ids: list, scores: np.ndarray, fetch: Optional[Callable[[list], list]] = None,
                 docs: Optional[list] = None, total: Any = None) -> None:
        self._ids = list(ids)
        self._scores = np.asarray(scores, dtype=np.float32)
        self._fetch = fetch  # ids -> documents (None where absent)
        self._docs = docs
        self._total = total

    @property
    def total(self) -> Optional[int]:
        """Every document the query matches, whatever limit and offset cut (filter-only and
        text finds); None for vector and hybrid finds, which rank rather than match. Counted
        when first read (like the documents), so a find that never asks pays nothing for it."""
        if callable(self._total):
            self._total = self._total()
        return self._total

    @property
    def ids(self) -> list:
        """Document ids, best first."""
        return self._ids

    @property
    def scores(self) -> np.ndarray:
        """Scores as float32, best first."""
        return self._scores

    @property
    def docs(self) -> list[Optional[T]]:
        """The documents, loaded on first access."""
        if self._docs is None:
            self._docs = self._fetch(self._ids) if self._fetch is not None else [None] * len(self._ids)
        return self._docs

    def _doc(self, i: int):
        if self._docs is None and self._fetch is not None:
            return self._fetch([self._ids[i]])[0]
        return self.docs[i]

    def __len__(self) -> int:
        return len(self._ids)

    def __getitem__(self, i):
        if isinstance(i, slice):
            docs = self._docs[i] if self._docs is not None else None
            return Results(self._ids[i], self._scores[i], fetch=self._fetch, docs=docs, total=self._lazy_total())
        if not -len(self._ids) <= i < len(self._ids):
            raise IndexError("Results index out of range")
        return Hit(self._ids[i], float(self._scores[i]), self._doc(i))

    def __repr__(self) -> str:
        head = ", ".join(f"({i!r}, {s:.4f})" for i, s in zip(self._ids[:5], self._scores[:5]))
        more = ", ..." if len(self._ids) > 5 else ""
        return f"Results([{head}{more}], n={len(self._ids)})"

    def page(self, offset: int) -> "Results":
        """These results from position `offset` on (a page of a longer ranking)."""
        if offset == 0:
            return self
        docs = self._docs[offset:] if self._docs is not None else None
        return Results(self._ids[offset:], self._scores[offset:], self._fetch, docs, self._lazy_total())

    def _lazy_total(self):
        """The total or the call that counts it, for a Results cut from this one (counted once)."""
        if callable(self._total):
            return lambda: self.total
        return self._total

    def above(self, min_score: Optional[float]) -> "Results":
        """The hits scoring at least `min_score` (hits are best first, so a prefix)."""
        if min_score is None:
            return self
        n = int(np.count_nonzero(self._scores >= min_score))
        docs = self._docs[:n] if self._docs is not None else None
        return Results(self._ids[:n], self._scores[:n], self._fetch, docs, None)

    @classmethod
    def of_hits(cls, ids: list, scores: np.ndarray, fetch: Callable[[list], list]) -> "Results":
        """Results of a list of ids it may keep and a 1-d float32 array of scores, taken as they
        are (the native find path builds both): no copy, no conversion."""
        res = cls.__new__(cls)
        res._ids, res._scores, res._fetch, res._docs, res._total = ids, scores, fetch, None, None
        return res

    @classmethod
    def empty(cls, total: Optional[int] = None) -> "Results":
        return cls([], np.empty(0, dtype=np.float32), docs=[], total=total)
