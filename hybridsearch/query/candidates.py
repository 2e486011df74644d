"""What a storage's retrieval primitive returns (storages/base.py): documents by key, each with
its score on one list and its place in insertion order."""
from __future__ import annotations

from typing import NamedTuple, Optional

import numpy as np


class Candidates(NamedTuple):
    """Aligned arrays of one list of documents.

    - keys: what names a document inside one read (`Storage.reading`): int64 rows on the
      column-store storages, str ids (an object array) on the others.
    - scores: float32, the list's score of each (a top-k list is best first).
    - order: int64, the documents' insertion order (smaller: inserted earlier); equal fused
      scores go to the smaller (API.md: the earlier-inserted document).
    - docs: the documents, aligned with keys, where the storage already holds them from the
      same answer (remote engines return sources with hits); None otherwise.
    """

    keys: np.ndarray
    scores: np.ndarray
    order: np.ndarray
    docs: Optional[list] = None

    @classmethod
    def empty(cls, keys_dtype=np.int64) -> "Candidates":
        return cls(np.empty(0, dtype=keys_dtype), np.empty(0, dtype=np.float32), np.empty(0, dtype=np.int64))


class ScoredPool(NamedTuple):
    """The candidates of a hybrid "sum" or "linear" find with both raw parts, as one engine answer
    gives them (Storage.scored_pool): keys, order and docs as in Candidates; text: each one's
    BM25 (0 without a query term), vector: its exact similarity, both float32 and aligned."""

    keys: np.ndarray
    order: np.ndarray
    docs: Optional[list]
    text: np.ndarray
    vector: np.ndarray
