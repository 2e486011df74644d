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
    """Hits sorted by descending score; `ids`, `scores` (float32) and lazily loaded `docs`."""

    __slots__ = ("_ids", "_scores", "_loader", "_docs")

    def __init__(self, ids: list, scores: np.ndarray, loader: Optional[Callable[[], list]] = None,
                 docs: Optional[list] = None) -> None:
        self._ids = list(ids)
        self._scores = np.asarray(scores, dtype=np.float32)
        self._loader = loader
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
            self._docs = self._loader() if self._loader is not None else []
            self._loader = None
        return self._docs

    def __len__(self) -> int:
        return len(self._ids)

    def __getitem__(self, i):
        if isinstance(i, slice):
            docs = self.docs[i]
            return Results(self._ids[i], self._scores[i], docs=docs)
        return Hit(self._ids[i], float(self._scores[i]), self.docs[i])

    def __repr__(self) -> str:
        head = ", ".join(f"({i!r}, {s:.4f})" for i, s in zip(self._ids[:5], self._scores[:5]))
        more = ", ..." if len(self._ids) > 5 else ""
        return f"Results([{head}{more}], n={len(self._ids)})"

    @classmethod
    def empty(cls) -> "Results":
        return cls([], np.empty(0, dtype=np.float32), docs=[])
