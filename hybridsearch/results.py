"""Search results: hs.Results (a sequence of hs.Hit) with lazily loaded documents."""
from __future__ import annotations

from typing import Any, Callable, Generic, NamedTuple, Optional, Sequence, TypeVar

import numpy as np

from hybridsearch.errors import HybridSearchError


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

    __slots__ = ("_ids", "_scores", "_fetch", "_docs", "_total", "_parts")

    def __init__(self, ids: list, scores: np.ndarray, fetch: Optional[Callable[[list], list]] = None,
                 docs: Optional[list] = None, total: Any = None, parts: Any = None) -> None:
        self._ids = list(ids)
        self._scores = np.asarray(scores, dtype=np.float32)
        self._fetch = fetch  # ids -> documents (None where absent)
        self._docs = docs
        self._total = total
        # list name -> float32 array aligned with the hits, or a call that gives (or refuses) it
        self._parts = parts if parts is not None else {}

    @property
    def total(self) -> Optional[int]:
        """Every document the query matches, whatever limit and offset cut (filter-only and
        text finds); None for vector and hybrid finds, which rank rather than match. Counted
        when first read (like the documents), so a find that never asks pays nothing for it."""
        if callable(self._total):
            self._total = self._total()
        return self._total

    @property
    def part_scores(self) -> dict:
        """Each list's raw score of each hit: {"text": float32 array, "vector": float32 array}
        aligned with `ids` (NaN where the hit was not scored on that list, as an rrf hit found by
        one list only). A text find has {"text": ...}, a vector find {"vector": ...}, a
        filter-only find {}. A new dict each time; the arrays are the results' own."""
        if callable(self._parts):
            self._parts = self._parts()
        return dict(self._parts)

    def _cut_parts(self, cut: slice):
        """The part scores of hits[cut] (a refusal stays a refusal)."""
        if callable(self._parts):
            return self._parts
        return {name: a[cut] for name, a in self._parts.items()}

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
            return Results(self._ids[i], self._scores[i], fetch=self._fetch, docs=docs, total=self._lazy_total(),
                           parts=self._cut_parts(i))
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
        return Results(self._ids[offset:], self._scores[offset:], self._fetch, docs, self._lazy_total(),
                       self._cut_parts(slice(offset, None)))

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
        return Results(self._ids[:n], self._scores[:n], self._fetch, docs, None, self._cut_parts(slice(0, n)))

    def reordered(self, positions: np.ndarray, scores: np.ndarray, part: str) -> "Results":
        """The hits at `positions` (in that order) with new `scores`, kept as the part `part`
        beside the other part scores (a reranking, query/rerank.py)."""
        at = np.asarray(positions, dtype=np.int64)
        scores = np.asarray(scores, dtype=np.float32)
        docs = [self._docs[i] for i in at.tolist()] if self._docs is not None else None
        parts = self._parts
        if not callable(parts):
            parts = {name: a[at] for name, a in parts.items()}
            parts[part] = scores
        return Results([self._ids[i] for i in at.tolist()], scores, self._fetch, docs, self._lazy_total(), parts)

    # ------------------------------------------------------------ out as rows and frames
    def _rows(self) -> tuple:
        """(schema or None, columns): "id", the documents' fields (None for a hit deleted since
        the search), "_score" and "_score_<list>" per part_scores list. Field names cannot start
        with "_" (pydantic keeps those private), so the score columns never meet a field."""
        docs = self.docs
        model = next((type(d) for d in docs if d is not None), None)
        schema = model.__hs_schema__ if model is not None else None
        columns: dict = {"id": list(self._ids)}
        if schema is not None:
            for name in schema.fields:
                if name != "id":
                    columns[name] = [None if d is None else getattr(d, name) for d in docs]
        columns["_score"] = self._scores.astype(np.float64)
        try:
            parts = self.part_scores
        except HybridSearchError:  # a storage that cannot give them: the rows go without
            parts = {}
        for name, part in parts.items():
            columns[f"_score_{name}"] = np.asarray(part, dtype=np.float64)
        return schema, columns

    def to_list(self) -> list[dict]:
        """The hits as dicts, best first: "id", every field of the document (None where the
        document was deleted since the search), "_score" and one "_score_<list>" per list of
        part_scores ("_score_text", "_score_vector", ...; NaN where that list did not score the hit)."""
        _, columns = self._rows()
        names = list(columns)
        out = []
        for i in range(len(self._ids)):
            row = {n: columns[n][i] for n in names}
            for n in names:
                if n.startswith("_score"):
                    row[n] = float(row[n])
            out.append(row)
        return out

    def to_pandas(self):
        """to_list() as a pandas DataFrame, one row per hit (needs pandas: pip install
        "hybridsearch[pandas]"); a vector cell holds a numpy row. Without hits the frame has the
        id and score columns only (the document fields come from the hits)."""
        from hybridsearch.frames import to_pandas
        _, columns = self._rows()
        return to_pandas(columns)

    def to_arrow(self):
        """to_list() as a pyarrow Table (needs pyarrow: pip install "hybridsearch[arrow]"), the
        document fields typed as DocumentArray.to_arrow() types them, the scores float64."""
        from hybridsearch.frames import to_arrow
        schema, columns = self._rows()
        fields = {n: c for n, c in columns.items() if n != "id" and not n.startswith("_score")}
        if schema is None:
            try:
                import pyarrow as pa
            except ImportError:
                from hybridsearch.errors import missing_extra
                raise missing_extra("to_arrow", "pyarrow", "arrow") from None
            return pa.table({n: pa.array(c, pa.string() if n == "id" else pa.float64())
                             for n, c in columns.items()})
        table = to_arrow({"id": columns["id"], **fields}, schema)
        for n, c in columns.items():
            if n.startswith("_score"):
                table = table.append_column(n, _float_column(c))
        return table

    @classmethod
    def of_hits(cls, ids: list, scores: np.ndarray, fetch: Callable[[list], list], parts: dict) -> "Results":
        """Results of a list of ids it may keep, a 1-d float32 array of scores and the part
        scores, taken as they are (the native find path builds them): no copy, no conversion."""
        res = cls.__new__(cls)
        res._ids, res._scores, res._fetch, res._docs, res._total, res._parts = ids, scores, fetch, None, None, parts
        return res

    @classmethod
    def empty(cls, total: Optional[int] = None, parts: tuple = ()) -> "Results":
        """No hits; `parts` names the lists of the find (each an empty part_scores array)."""
        return cls([], np.empty(0, dtype=np.float32), docs=[], total=total,
                   parts={name: np.empty(0, dtype=np.float32) for name in parts})


def _float_column(values):
    import pyarrow as pa
    return pa.array(np.asarray(values, dtype=np.float64), pa.float64())
