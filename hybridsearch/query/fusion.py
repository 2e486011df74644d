"""Fusion of any number of result lists (text and vector fields), over aligned arrays: the one
home of "sum", "rrf" and "linear" (query/executor.py runs them for every storage).

"sum" adds BM25 and the vector score, so BM25 (unbounded, often 5-20) tends to
dominate a cosine in [-1, 1]; "rrf" uses ranks only and is scale-free
(LESSONS.md §7); "linear" min-max normalises each part over the candidates and
weights them (API.md section 8). Ties go to the smaller `order`: the insertion order.
"""
from __future__ import annotations

import numpy as np


def best(scores: np.ndarray, k: int, order: np.ndarray) -> tuple:
    """(positions, scores float32) of the k best of `scores`, best first, equal scores to the
    smaller `order` (the earlier-inserted document)."""
    scores = np.asarray(scores, dtype=np.float64)
    order = np.asarray(order, dtype=np.int64)
    at = np.arange(len(scores), dtype=np.int64)
    if len(scores) > 4 * k > 0:
        # sort only what can enter the top k: every score at least the k-th (ties kept whole)
        kth = np.partition(scores, len(scores) - k)[len(scores) - k]
        at = np.flatnonzero(scores >= kth)
    ranked = at[np.lexsort((order[at], -scores[at]))[:k]]
    return ranked, scores[ranked].astype(np.float32)


def sum_scores(parts: list) -> np.ndarray:
    """fusion="sum": the sum of every part's raw score per candidate (BM25 + each vector
    score), float64; each part aligned with the candidates, 0 where a candidate does not match it."""
    out = np.zeros(len(parts[0]) if parts else 0, dtype=np.float64)
    for part in parts:
        out += np.asarray(part, dtype=np.float64)
    return out


def linear_scores(parts: list, weights) -> np.ndarray:
    """fusion="linear": sum of weight * minmax(part) over the parts, each min-max normalised over
    the candidates (API.md section 8)."""
    out = np.zeros(len(parts[0]) if parts else 0, dtype=np.float64)
    for part, w in zip(parts, weights):
        out += w * _min_max(part)
    return out


def rrf_scores(n: int, ranked: list, rrf_k: int) -> np.ndarray:
    """fusion="rrf" over n candidates: sum of 1 / (rrf_k + rank), rank from 1, over each list of
    `ranked` (each an array of candidate positions, best first)."""
    out = np.zeros(n, dtype=np.float64)
    for positions in ranked:
        out[positions] += 1.0 / (rrf_k + np.arange(1, len(positions) + 1, dtype=np.float64))
    return out


def _min_max(raw: np.ndarray) -> np.ndarray:
    """raw scaled to [0, 1] over the candidates; a constant part is 1 where nonzero, else 0."""
    raw = np.asarray(raw, dtype=np.float64)
    if not len(raw):
        return raw
    lo, hi = float(raw.min()), float(raw.max())
    if hi == lo:
        return (raw != 0).astype(np.float64)
    return (raw - lo) / (hi - lo)
