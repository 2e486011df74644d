"""Exact top-k over a plain float32 matrix with the native kernel (ground truth, baselines)."""
from __future__ import annotations

from typing import Optional

import numpy as np

from hybridsearch._native import _kernels as K

METRICS = ("cosine", "ip", "l2")


def row_norms2(X: np.ndarray) -> tuple:
    """(squared norm of each row of a float32 block, summed in double; the first row holding a
    NaN or an inf, or -1): one native pass that both checks and measures a batch's vectors."""
    return K.rows_norm2(np.ascontiguousarray(X, dtype=np.float32))


def vector_aux(X: np.ndarray, metric: str, norms2: Optional[np.ndarray] = None) -> np.ndarray:
    """What the exact kernel needs per row beside the vector: the squared norm (l2) or the
    inverse norm (cosine; 0 for a zero vector, whose cosine is 0). float32. `norms2`: the rows'
    squared norms (row_norms2) when the caller measured them already."""
    if norms2 is None:
        norms2 = row_norms2(X)[0]
    sq = norms2.astype(np.float32)
    if metric == "l2":
        return sq
    norms = np.sqrt(sq)
    with np.errstate(divide="ignore"):
        return np.where(norms > 0, 1.0 / np.maximum(norms, 1e-38), 0.0).astype(np.float32)


def sum_squares(v: np.ndarray) -> float:
    """Sum of squares of a contiguous 1-D float32 or float64 array, in double; NaN or inf when
    an element is not finite (one native pass, no numpy warning)."""
    return K.sum_squares(v)


class ExactIndex:
    """A float32 matrix prepared for exact search: rows made contiguous and their norms (l2,
    cosine) computed once, so each search is one pass over the vectors, as in the storages."""

    def __init__(self, X: np.ndarray, metric: str) -> None:
        if metric not in METRICS:
            raise ValueError(f"metric must be one of {', '.join(METRICS)}, got {metric!r}")
        self.metric = metric
        self.X = np.ascontiguousarray(X, dtype=np.float32)
        self.aux = None if metric == "ip" else vector_aux(self.X, metric)

    def search(self, Q: np.ndarray, k: int, bits: Optional[np.ndarray] = None) -> tuple:
        """(scores float32 (nq, k), rows int64 (nq, k)) of the exact top-k rows for every query row
        of Q, best first, with API.md's scores (cosine, inner product, minus the euclidean
        distance for l2), padded with -inf / -1; `bits` (uint64 words) restricts the rows.
        One native call for the whole block, without the GIL."""
        return K.exact_search(self.X, len(self.X), self.aux, np.ascontiguousarray(Q, dtype=np.float32),
                              self.metric, bits, k)


def exact_topk(X: np.ndarray, Q: np.ndarray, k: int, metric: str,
               bits: Optional[np.ndarray] = None) -> tuple:
    """ExactIndex(X, metric).search(Q, k, bits) in one call (the norms are computed each time:
    keep an ExactIndex to search one matrix repeatedly)."""
    return ExactIndex(X, metric).search(Q, k, bits)


def simd_level() -> str:
    """The SIMD level the kernels dispatch to on this CPU (e.g. "avx2", "avx512", "neon", "scalar")."""
    return K.simd_level()


def simd_levels() -> tuple:
    """Every SIMD level this CPU can run, "scalar" first (each is accepted by force_simd)."""
    return K.simd_levels()


def force_simd(name: str) -> str:
    """Switches every kernel to the SIMD level `name` for this process (benchmarks and tests of
    the fallbacks); a level this CPU lacks falls back to its best. Returns the level in use."""
    return K.force_simd(name)


def stream_sum(x: np.ndarray) -> float:
    """Sum of a float32 array read by a streaming C loop with several accumulators: timed over a
    block larger than the caches, the machine's single-thread read bandwidth (the bound of a scan)."""
    return K.stream_sum(np.ascontiguousarray(x, dtype=np.float32).reshape(-1))


class Int8Scan:
    """Exact top-k over int8 codes (a quarter of the float32 bytes): q . c for every code row in
    one native pass, then the top k; the ranking of a uniformly scaled code block."""

    def __init__(self, codes: np.ndarray) -> None:
        if codes.dtype != np.int8 or codes.ndim != 2:
            raise ValueError("codes must be a 2-d int8 array")
        self.codes = np.ascontiguousarray(codes)

    def search(self, q: np.ndarray, k: int) -> tuple:
        """(scores, rows) of the k best rows for one float32 query, best first."""
        return K.topk(K.scores_rows_i8(self.codes, np.ascontiguousarray(q, dtype=np.float32)), k)
