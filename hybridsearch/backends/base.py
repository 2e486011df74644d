"""The Backend interface every storage implements: batch-first private methods."""
from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Iterator, Optional

import numpy as np

from ..batch import Batch
from ..document import Schema
from ..errors import ConfigError, UnsupportedError
from ..filters import Node

METRICS = ("cosine", "ip", "l2")


def exact_scores(X: np.ndarray, q: np.ndarray, metric: str) -> np.ndarray:
    """API.md's scores of the rows of X for query q, in float64: cosine similarity (0 for a zero
    vector), inner product, or minus the euclidean distance. Wrapped libraries and remote engines
    report transformed distances; their storages recompute the scores with this."""
    X = np.asarray(X, dtype=np.float64)
    q = np.asarray(q, dtype=np.float64)
    if metric == "ip":
        return X @ q
    if metric == "l2":
        return -np.linalg.norm(X - q, axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.nan_to_num((X @ q) / (np.linalg.norm(X, axis=1) * np.linalg.norm(q)), nan=0.0)


class Backend(ABC):
    """A storage. DocumentArray validates and converts; a backend stores and searches.

    OPTIONS maps each accepted option to its default; unknown options are a
    ConfigError raised by `resolve_options`.
    """

    name: str = ""
    OPTIONS: dict = {}

    def __init__(self, schema: Schema, **options) -> None:
        self.schema = schema
        self.options = options

    @classmethod
    def resolve_options(cls, options: dict) -> dict:
        unknown = sorted(set(options) - set(cls.OPTIONS))
        if unknown:
            raise ConfigError(
                f"storage {cls.name!r} does not take option(s) {', '.join(unknown)}; "
                f"valid options: {', '.join(sorted(cls.OPTIONS)) or '(none)'}"
            )
        resolved = {**cls.OPTIONS, **options}
        if "metric" in resolved and resolved["metric"] not in METRICS:
            raise ConfigError(f"metric must be one of {', '.join(METRICS)}, got {resolved['metric']!r}")
        return resolved

    # writes: each call is one batch and is atomic
    @abstractmethod
    def upsert(self, batch: Batch) -> None:
        """Inserts or overwrites the batch's documents."""

    @abstractmethod
    def delete(self, ids: list) -> int:
        """Deletes the ids that exist; returns how many."""

    @abstractmethod
    def update_fields(self, id: str, values: dict) -> None:
        """Partial update: writes only the named (validated) fields; KeyError if the id is absent."""

    # reads
    @abstractmethod
    def count(self) -> int: ...

    @abstractmethod
    def contains(self, id: str) -> bool: ...

    @abstractmethod
    def get(self, ids: list) -> list:
        """The stored documents of the ids (None where absent)."""

    @abstractmethod
    def iter_ids(self) -> Iterator[str]:
        """Ids in insertion order."""

    @abstractmethod
    def search_vectors(self, queries: np.ndarray, limit: int, node: Optional[Node], exact: bool,
                       ef: Optional[int]) -> list:
        """Top-`limit` per query row -> list of (ids, scores float32, docs)."""

    @abstractmethod
    def search_filter(self, node: Node, limit: Optional[int]) -> tuple:
        """Matching documents in insertion order -> (ids, docs)."""

    def search_text(self, *args, **kwargs):
        raise UnsupportedError(
            f"text search is not available on storage {self.name!r} yet: "
            "this storage has no lexical engine yet"
        )

    def close(self) -> None:
        """Releases resources; persistent storages flush here."""
