"""Exact top-k over a plain float32 matrix with the native kernel (ground truth, baselines)."""
from __future__ import annotations

from typing import Optional

import numpy as np

from hybridsearch._native import _kernels as K

METRICS = ("cosine", "ip", "l2")


def exact_topk(X: np.ndarray, Q: np.ndarray, k: int, metric: str,
               bits: Optional[np.ndarray] = None) -> tuple:
    """(scores float32 (nq, k), rows int64 (nq, k)) of the exact top-k rows of X for every query
    row of Q, in API.md's score order (cosine / inner product / minus squared distance for l2),
    padded with -inf / -1; `bits` (uint64 words) restricts the rows. One native call."""
    if metric not in METRICS:
        raise ValueError(f"metric must be one of {', '.join(METRICS)}, got {metric!r}")
    X = np.ascontiguousarray(X, dtype=np.float32)
    sq = np.einsum("ij,ij->i", X, X, dtype=np.float32)
    aux = {"l2": sq, "cosine": (1.0 / np.maximum(np.sqrt(sq), 1e-30)).astype(np.float32), "ip": None}[metric]
    return K.exact_search(X, len(X), aux, np.ascontiguousarray(Q, dtype=np.float32), metric, bits, k)


def simd_level() -> str:
    """The SIMD level the kernels dispatch to on this CPU (e.g. "avx2", "avx512", "neon", "scalar")."""
    return K.simd_level()
