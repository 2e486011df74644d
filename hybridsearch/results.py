"""Search results: hs.Results (a sequence of hs.Hit) with lazily loaded documents."""
from __future__ import annotations

from typing import Any, Callable, NamedTuple, Optional, Sequence

import numpy as np


class Hit(NamedTuple):
    """One result: the document id, its score (higher is better) and the document."""

    id: str
    score: float
    doc: Any


class Results(Sequence):
    """Hits sorted by descending score; `ids`, `scores` (float32) and lazily loaded `docs`.

    Documents are built only when read: `res.docs` loads every hit's, `res[i]` only
    hit i's. They are read by id at that moment, so a document changed since the
    search reads as it is now, and one deleted since reads as None."""

    __slots__ = ("_ids", "_scores", "_fetch", "_docs")

    def __init__(self, ids: list, scores: np.ndarray, fetch: Optional[Callable[[list], list]] = None,
                 docs: Optional[list] = None) -> None:
        self._ids = list(ids)
        self._scores = np.asarray(scores, dtype=np.float32)
        self._fetch = fetch  # ids -> documents (None where absent)
        self._docs = docs

    @property
    def ids(self) -> list:
        """Document ids, best first."""
        return self._ids

    @property
    def scores(self) -> np.ndarray:
        """Scores as float32, best first."""
        return self._scores

    @property
    def docs(self) -> list:
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
            return Results(self._ids[i], self._scores[i], fetch=self._fetch, docs=docs)
        if not -len(self._ids) <= i < len(self._ids):
            raise IndexError("Results index out of range")
        return Hit(self._ids[i], float(self._scores[i]), self._doc(i))

    def __repr__(self) -> str:
        head = ", ".join(f"({i!r}, {s:.4f})" for i, s in zip(self._ids[:5], self._scores[:5]))
        more = ", ..." if len(self._ids) > 5 else ""
        return f"Results([{head}{more}], n={len(self._ids)})"

    @classmethod
    def empty(cls) -> "Results":
        return cls([], np.empty(0, dtype=np.float32), docs=[])
