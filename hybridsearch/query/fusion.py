"""Hybrid fusion of a lexical and a vector result list, over (slots, scores) arrays.

"sum" adds BM25 and the vector score, so BM25 (unbounded, often 5-20) tends to
dominate a cosine in [-1, 1]; "rrf" uses ranks only and is scale-free
(LESSONS.md §7); "linear" min-max normalises each part over the candidates and
weights them (API.md section 8). Ties go to the lower slot.
"""
from __future__ import annotations

import numpy as np


def _best(slots: np.ndarray, scores: np.ndarray, k: int) -> tuple:
    """The k best (slot, score) pairs, best first, ties to the lower slot."""
    if len(scores) > 4 * k > 0:
        # sort only what can enter the top k: every score at least the k-th (ties kept whole)
        kth = np.partition(scores, len(scores) - k)[len(scores) - k]
        keep = np.flatnonzero(scores >= kth)
        slots, scores = slots[keep], scores[keep]
    order = np.lexsort((slots, -scores))[:k]
    return slots[order], scores[order].astype(np.float32)


def union_sorted(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Sorted unique int64 union of a (sorted, unique: the lexical matches) and b (any order,
    usually the short vector list): b is merged into a copy of a, with no sort of a."""
    a = np.asarray(a, dtype=np.int64)
    b = np.unique(np.asarray(b, dtype=np.int64))
    if not len(a):
        return b
    at = np.searchsorted(a, b)
    new = b[(at == len(a)) | (a[np.minimum(at, len(a) - 1)] != b)]
    return np.insert(a, np.searchsorted(a, new), new) if len(new) else a


def fuse_sum(slots: np.ndarray, bm25: np.ndarray, vector: np.ndarray, k: int) -> tuple:
    """Top-k of bm25 + vector score over the candidate slots (all arrays aligned)."""
    return _best(np.asarray(slots, dtype=np.int64), np.asarray(bm25, np.float64) + vector, k)


def fuse_rrf(lexical: np.ndarray, vector: np.ndarray, k: int, rrf_k: int = 60) -> tuple:
    """Top-k of sum(1 / (rrf_k + rank)), rank from 1, over two best-first slot lists."""
    total: dict = {}
    for ranked in (lexical, vector):
        for rank, s in enumerate(np.asarray(ranked).tolist(), start=1):
            total[s] = total.get(s, 0.0) + 1.0 / (rrf_k + rank)
    if not total:
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float32)
    slots = np.fromiter(total.keys(), dtype=np.int64, count=len(total))
    return _best(slots, np.fromiter(total.values(), dtype=np.float64, count=len(total)), k)


def _min_max(raw: np.ndarray) -> np.ndarray:
    """raw scaled to [0, 1] over the candidates; a constant part is 1 where nonzero, else 0."""
    raw = np.asarray(raw, dtype=np.float64)
    if not len(raw):
        return raw
    lo, hi = float(raw.min()), float(raw.max())
    if hi == lo:
        return (raw != 0).astype(np.float64)
    return (raw - lo) / (hi - lo)


def fuse_linear(slots: np.ndarray, bm25: np.ndarray, vector: np.ndarray, k: int, w_text: float,
                w_vector: float) -> tuple:
    """Top-k of w_text * minmax(bm25) + w_vector * minmax(vector score) over the candidates."""
    score = w_text * _min_max(bm25) + w_vector * _min_max(vector)
    return _best(np.asarray(slots, dtype=np.int64), score, k)
