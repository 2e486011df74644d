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
    B = np.asarray(block, dtype=np.float32).astype(np.float64)  # the rows as written (float32)
    return float(sum(exact_scores(B, q, metric).max() for q in np.asarray(Q, dtype=np.float64)))


def field_scores(kind: str, metric: str, values: list, query) -> np.ndarray:
    """API.md's score of each stored value of one field for `query`, float64, NaN where a
    document holds no value (None) or an empty sparse vector (it matches nothing): `kind`
    "dense" (query (d,) or (1, d)), "sparse" (a checked (indices, values) query) or "multi" (an
    (m, d) query)."""
    out = np.full(len(values), np.nan)
    have = [i for i, v in enumerate(values) if v is not None and (kind != "sparse" or v)]
    if not have:
        return out
    if kind == "dense":
        X = np.array([values[i] for i in have], dtype=np.float32)
        out[have] = exact_scores(X, np.asarray(query, dtype=np.float32).reshape(-1), metric)
    elif kind == "sparse":
        out[have] = [sparse_dot(query, values[i]) for i in have]
    else:
        out[have] = [maxsim(values[i], query, metric) for i in have]
    return out
