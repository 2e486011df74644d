"""The plan of one find: its checked arguments, built once by DocumentArray.find and run by
query/executor.py on any storage.

A Plan holds no storage state and reads no data: it says which lists a find asks for
(mode), how long the ranking it cuts its page from is (`want`), and how the lists are fused.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

from hybridsearch.query.filters import Node

VECTOR, TEXT, HYBRID, FILTER, SORTED = "vector", "text", "hybrid", "filter", "sorted"
MODES = (VECTOR, TEXT, HYBRID, FILTER, SORTED)


@dataclass(frozen=True, slots=True)
class VectorList:
    """One vector list of a find (API.md section 10).

    - label: its name in `res.part_scores` and in `weights`: "vector" for `vector=<array>`,
      the field name for the dict form.
    - field: the dense field the storage searches, passed to storages with `named_vectors`;
      None for the others, which hold one dense field (the dict form naming it maps here).
    - query: (1, d) float32 (find) or (n, d) (find_batched), checked.
    """

    label: str
    field: Optional[str]
    query: np.ndarray

    @property
    def kwargs(self) -> dict:
        """The `field=` argument of a storage primitive: none for the one dense field."""
        return {} if self.field is None else {"field": self.field}


@dataclass(frozen=True, slots=True)
class Plan:
    """One find, checked (DocumentArray.find builds it after every argument check).

    - mode: "vector" (one vector list only), "text" (text only), "hybrid" (two lists or more:
      text and/or vector lists), "filter" (filter only, insertion order), "sorted" (filter or
      text ordered by `sort`).
    - vectors: the vector lists (VectorList), () for none; text: the text query (a str or a
      query.text.TextQuery) or None; node: the parsed filter or None.
    - want: the length of the ranking the page is cut from (limit + offset, capped at
      options.SIZE_CAP); None for every match (filter-only and sorted finds with limit=None).
    - offset: hits skipped from the front of that ranking.
    - candidates: each list's length in a hybrid find; fusion: "sum" | "rrf" | "linear";
      rrf_k: RRF's rank constant; weights: one per list of `labels` (text first) for "linear",
      else None.
    - exact: brute-force vector search (and, hybrid "sum"/"linear", every lexical match: the
      first edition); ef: the search-time beam, None for the storage's.
    - min_score: keep the hits scoring at least this (None: all); sort: [(field, "asc"|"desc")]
      of a sorted find, else None.
    - rerank: a query.rerank.Rerank (the top hits re-scored, then min_score and the page apply
      to the reranked ranking) or None.
    """

    mode: str
    vectors: tuple = ()
    text: Any = None
    node: Optional[Node] = None
    want: Optional[int] = 10
    offset: int = 0
    candidates: int = 100
    fusion: str = "sum"
    rrf_k: int = 60
    weights: Optional[tuple] = None
    exact: bool = False
    ef: Optional[int] = None
    min_score: Optional[float] = None
    sort: Optional[list] = None
    rerank: Any = None

    @property
    def vector(self) -> Optional[np.ndarray]:
        """The query of the one vector list (None without exactly one): storages that answer a
        text + vector plan whole (Storage.scored_pool) read it."""
        return self.vectors[0].query if len(self.vectors) == 1 else None

    @property
    def labels(self) -> tuple:
        """The lists' names, "text" first: the keys of part_scores and of weights."""
        return (("text",) if self.text is not None else ()) + tuple(v.label for v in self.vectors)

    @property
    def counts_total(self) -> bool:
        """Whether Results.total counts the matches (API.md section 7): filter-only and sorted
        finds, and text finds without min_score; vector and hybrid finds rank, they do not match."""
        if self.mode in (FILTER, SORTED):
            return True
        return self.mode == TEXT and self.min_score is None
