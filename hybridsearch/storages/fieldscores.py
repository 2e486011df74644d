"""API.md section 10's exact scores of sparse and multi-vector values, in numpy, for storages
whose engine reports other numbers or no score at all (a remote engine's MaxSim over squared
distances, its float32 dot products): they rank their candidates again with these. Native
storages score through engine/fieldvectors.py instead."""
from __future__ import annotations

from typing import Optional

import numpy as np

from hybridsearch.storages.base import exact_scores


def sparse_dot(query: tuple, value: Optional[dict]) -> float:
    """The dot product of a checked sparse query ((indices, values), as vector_rules.check_sparse
    gives) with a stored value {key: weight}, in float64; NaN for no value (None)."""
    if value is None:
        return float("nan")
    idx, val = query
    return float(sum(float(w) * float(value.get(int(k), 0.0)) for k, w in zip(idx.tolist(), val.tolist())))


def maxsim(block, Q: np.ndarray, metric: str) -> float:
    """MaxSim of a stored (n, d) token block for the (m, d) query Q: per query row the best
    exact_scores (cosine, ip, minus the l2 distance) over the block's rows, summed, in float64;
    NaN for no value (None)."""
    if block is None:
        return float("nan")
    B = np.asarray(block, dtype=np.float64)
    return float(sum(exact_scores(B, q, metric).max() for q in np.asarray(Q, dtype=np.float64)))
