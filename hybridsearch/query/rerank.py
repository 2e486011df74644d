"""Reranking: the top-N hits of a find re-scored by a reranker (API.md section 11).

The one home of reranking: query/executor.py calls `rerank` for `find(rerank=...)` and
DocumentArray.find_batched per row. A reranker is

- a callable `(query: str, documents: list) -> list[float]` (one score per document, higher is
  better): a user's function or `CrossEncoderReranker`;
- a fusion reranker (`RRFReranker`, `LinearReranker`): the executor's fusions
  (query/fusion.py) over the retrieval part scores of the N hits; it reads no documents.

Hits are ordered by the reranker's score, ties in retrieval order (fusion.best); the retrieval
part scores stay in `part_scores`, with the reranker's as the "rerank" part.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Optional, Sequence

import numpy as np

from hybridsearch.errors import ConfigError, RerankError
from hybridsearch.query import fusion
from hybridsearch.query.options import as_float, check_size, check_weights, is_number
from hybridsearch.results import Results

RERANK_TOP = 50  # hits re-scored by default, when limit + offset is smaller
PART = "rerank"  # its name in part_scores


class FusionReranker:
    """Base of the rerankers that fuse the retrieval part scores of the top hits (no documents
    read, no query text needed)."""

    def fuse(self, parts: dict) -> np.ndarray:  # pragma: no cover - each subclass has its own
        raise NotImplementedError


class RRFReranker(FusionReranker):
    """Reciprocal rank fusion over the top hits: each retrieval list ranks the hits it scored
    (NaN: not on that list) by its raw score, ties in retrieval order, and a hit scores the sum of
    1 / (k + rank), rank from 1 (fusion="rrf" of section 4, over the N hits)."""

    def __init__(self, k: int = 60) -> None:
        self.k = check_size(k, "RRFReranker k", 0)

    def fuse(self, parts: dict) -> np.ndarray:
        arrays = [np.asarray(p, dtype=np.float64) for p in parts.values()]
        n = len(arrays[0]) if arrays else 0
        ranked = []
        for part in arrays:
            scored = np.flatnonzero(~np.isnan(part))
            # stable: equal scores keep the retrieval order
            ranked.append(scored[np.argsort(-part[scored], kind="stable")])
        return fusion.rrf_scores(n, ranked, self.k)

    def __repr__(self) -> str:
        return f"RRFReranker(k={self.k})"


class LinearReranker(FusionReranker):
    """fusion="linear" over the top hits: each retrieval part min-max normalised over the N hits
    (a NaN part counts 0), weighted by `weights` (a dict naming the find's lists; every list
    equally by default; section 8)."""

    def __init__(self, weights: Optional[dict] = None) -> None:
        if weights is not None and not isinstance(weights, dict):
            raise ConfigError(f"LinearReranker weights must be a dict naming lists of the find, got {weights!r}")
        self.weights = weights

    def fuse(self, parts: dict) -> np.ndarray:
        labels = tuple(parts)
        weights = check_weights(self.weights, "linear", labels, labels)
        raw = [np.nan_to_num(np.asarray(p, dtype=np.float64), nan=0.0) for p in parts.values()]
        return fusion.linear_scores(raw, weights)

    def __repr__(self) -> str:
        return f"LinearReranker(weights={self.weights!r})"


class CrossEncoderReranker:
    """A sentence-transformers cross-encoder as a reranker: scores (query, document text) pairs.

    The document text is its `fields` (default: every hs.Text field of its schema) joined by
    newlines. sentence-transformers is imported when the reranker is made (ConfigError naming
    the extra when it is missing); the model loads on first use."""

    def __init__(self, model: str = "cross-encoder/ms-marco-MiniLM-L-6-v2", *, fields: Optional[Sequence[str]] = None,
                 batch_size: int = 32, **model_options: Any) -> None:
        try:
            from sentence_transformers import CrossEncoder
        except ImportError:
            raise ConfigError('CrossEncoderReranker needs sentence-transformers (not installed here): '
                              'pip install "hybridsearch[rerank]"') from None
        if not isinstance(model, str) or not model:
            raise ConfigError(f"CrossEncoderReranker model must be a model name or path, got {model!r}")
        if fields is not None and (isinstance(fields, str) or not all(isinstance(f, str) for f in fields)):
            raise ConfigError(f"CrossEncoderReranker fields must be a list of field names, got {fields!r}")
        self._make = lambda: CrossEncoder(model, **model_options)
        self._model: Any = None
        self.model_name = model
        self.fields = None if fields is None else tuple(fields)
        self.batch_size = check_size(batch_size, "batch_size", 1)

    def _text(self, doc: Any) -> str:
        from hybridsearch.document import schema_of
        names = self.fields or tuple(s.name for s in schema_of(type(doc)).texts)
        return "\n".join(str(getattr(doc, name, None) or "") for name in names)

    def __call__(self, query: str, documents: list) -> list:
        if self._model is None:
            self._model = self._make()
        pairs = [(query, self._text(doc)) for doc in documents]
        return self._model.predict(pairs, batch_size=self.batch_size)

    def __repr__(self) -> str:
        return f"CrossEncoderReranker({self.model_name!r})"


@dataclass(frozen=True, slots=True)
class Rerank:
    """The reranking of one find, checked: the reranker, how many retrieval hits it re-scores,
    and the query text it is given (None for a fusion reranker, which reads none)."""

    reranker: Any
    top: int
    query: Optional[str] = None


def check_rerank(reranker: Any, top: Any, query: Any, want: int, text: Any) -> Optional[Rerank]:
    """find()'s rerank=, rerank_top= and rerank_query=, checked (`want`: limit + offset, `text`:
    the find's text query). None without a reranker."""
    if reranker is None:
        if top is not None or query is not None:
            raise ConfigError("rerank_top and rerank_query apply with rerank=")
        return None
    if not (isinstance(reranker, FusionReranker) or callable(reranker)):
        raise ConfigError("rerank must be a callable (query, documents) -> scores, or a reranker such as "
                          f"hs.RRFReranker(), got {type(reranker).__name__}")
    top = max(want, RERANK_TOP) if top is None else check_size(top, "rerank_top", 1)
    if isinstance(reranker, FusionReranker):
        if query is not None:
            raise ConfigError(f"rerank_query: {reranker!r} fuses the retrieval scores and reads no query")
        return Rerank(reranker, top)
    if query is None:
        query = text
    if not isinstance(query, str):
        raise ConfigError("a reranker reads the query text: pass text= or rerank_query= (a string)"
                          if query is None else f"rerank_query must be a string, got {type(query).__name__}")
    return Rerank(reranker, top, query)


def rerank(res: Results, spec: Rerank) -> Results:
    """The retrieval hits `res` (best first, at most spec.top) re-scored by the reranker and
    ordered by its score, ties in retrieval order; part_scores keeps the retrieval parts and adds
    the "rerank" part. A reranker that fails or gives a wrong number of scores, or a score that is
    not a finite number, raises RerankError."""
    if len(res) == 0:
        return res.reordered(np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float32), PART)
    if isinstance(spec.reranker, FusionReranker):
        keep = np.arange(len(res), dtype=np.int64)
        raw = spec.reranker.fuse(res.part_scores)
    else:
        docs = res.docs
        # a hit deleted since retrieval reads as None: it is no longer a hit
        keep = np.array([i for i, d in enumerate(docs) if d is not None], dtype=np.int64)
        raw = _call(spec.reranker, spec.query, [docs[i] for i in keep.tolist()])
    scores = _checked(raw, len(keep))
    chosen, best = fusion.best(scores, len(scores), keep)  # ties: the smaller retrieval position
    return res.reordered(keep[chosen], best, PART)


def _call(reranker: Any, query: Optional[str], docs: list) -> Any:
    if not docs:
        return []
    try:
        return reranker(query, docs)
    except Exception as e:  # a user's function: whatever it raises becomes one typed error
        raise RerankError(f"the reranker {_name(reranker)} failed: {type(e).__name__}: {e}") from e


def _checked(raw: Any, n: int) -> np.ndarray:
    """The reranker's scores as float64 (n,), or RerankError saying what is wrong with them."""
    if isinstance(raw, (str, bytes, dict)) or raw is None:
        raise RerankError(f"a reranker must return one number per document, got {type(raw).__name__}")
    try:
        values = list(raw)
    except TypeError:
        raise RerankError(f"a reranker must return one number per document, got {type(raw).__name__}") from None
    if len(values) != n:
        raise RerankError(f"the reranker returned {len(values)} scores for {n} documents")
    out = np.empty(n, dtype=np.float64)
    for i, v in enumerate(values):
        if isinstance(v, np.ndarray) and v.shape == ():
            v = v.item()
        if not is_number(v):
            raise RerankError(f"reranker score {i} is not a number: {v!r}")
        f = as_float(v)
        if not math.isfinite(f):
            raise RerankError(f"reranker score {i} is {f} (scores must be finite numbers)")
        out[i] = f
    return out


def _name(reranker: Any) -> str:
    return getattr(reranker, "__qualname__", None) or repr(reranker)
