"""The value rules of the sparse and multi-vector field kinds (API.md section 10).

Pure Python and numpy, so that the schema (document.py) checks values without the compiled
core; the engine's SparseIndex and TokenStore check their input with the same functions.
"""
from __future__ import annotations

import numpy as np

from hybridsearch.errors import SchemaError

MAX_KEY = 2**31  # sparse keys are in [0, MAX_KEY)
MAX_ENTRIES = 65_536  # non-zero entries of one sparse vector
MAX_TOKENS = 4096  # rows of one multi-vector value
# the dense rules of API.md section 4: finite rows with a norm in [1e-15, 1e15]
NORM_MIN, NORM_MAX = 1e-15, 1e15

_F32_TINY = float(np.finfo(np.float32).smallest_subnormal)
_F32_MAX = float(np.finfo(np.float32).max)


def row_norms_sq(rows: np.ndarray) -> np.ndarray:
    """Squared norms of float32 rows, summed in float64 (NaN or inf for a row that is not finite)."""
    with np.errstate(over="ignore", invalid="ignore"):
        return np.einsum("ij,ij->i", rows, rows, dtype=np.float64)


def bad_norms(sq: np.ndarray) -> np.ndarray:
    """Mask of rows breaking the dense rules (NaN/inf elements make sq NaN or inf)."""
    return ~((sq >= NORM_MIN * NORM_MIN) & (sq <= NORM_MAX * NORM_MAX))


def token_block(block, d: int, what: str = "a multi-vector value") -> np.ndarray:
    """`block` as a C-contiguous float32 (n, d) array with 1 <= n <= 4096 finite rows of norm
    in [1e-15, 1e15], or SchemaError saying what is wrong."""
    try:
        arr = np.asarray(block)
    except (TypeError, ValueError):
        raise SchemaError(f"{what} must be a 2-d array of numbers of shape (n_tokens, {d})") from None
    if arr.dtype.kind not in "fiu" or arr.ndim != 2 or arr.shape[1] != d:
        raise SchemaError(f"{what} must be a 2-d array of numbers of shape (n_tokens, {d}); "
                          f"got shape {arr.shape} of {arr.dtype}")
    if not 1 <= arr.shape[0] <= MAX_TOKENS:
        raise SchemaError(f"{what} has {arr.shape[0]} rows; it needs 1 to {MAX_TOKENS}")
    with np.errstate(over="ignore", invalid="ignore"):
        arr = np.ascontiguousarray(arr, dtype=np.float32)
    bad = bad_norms(row_norms_sq(arr))
    if bad.any():
        i = int(np.argmax(bad))
        raise SchemaError(f"{what}: row {i} is not finite or its norm is outside [{NORM_MIN:g}, {NORM_MAX:g}]")
    return arr



def check_sparse(value, what: str = "sparse vector") -> tuple:
    """A sparse vector as (indices int32 ascending and distinct, values float32 > 0).

    Takes a dict {int key: weight} or an (indices, values) pair of sequences or 1-d arrays.
    Keys must be ints in [0, 2**31); weights real, finite and >= 0, zeros dropped; at most
    65,536 non-zero entries. Anything else raises SchemaError naming the entry at fault."""
    if isinstance(value, dict):
        keys, weights = list(value), list(value.values())
        for k in keys:
            if isinstance(k, bool) or not isinstance(k, (int, np.integer)):
                raise SchemaError(f"{what}: key {k!r} is not an int (keys are ints in [0, 2**31))")
            if not 0 <= k < MAX_KEY:
                raise SchemaError(f"{what}: key {k} is outside [0, 2**31)")
        for k, w in zip(keys, weights):
            if isinstance(w, bool) or not isinstance(w, (int, float, np.integer, np.floating)):
                raise SchemaError(f"{what}: the weight of key {k} is {w!r}, not a number")
        idx = np.array(keys, dtype=np.int64)
        try:
            val = np.array(weights, dtype=np.float64)
        except OverflowError:
            raise SchemaError(f"{what}: a weight is too large for a float") from None
    elif isinstance(value, (tuple, list)) and len(value) == 2:
        idx, val = _pair_arrays(value, what)
    else:
        raise SchemaError(f"{what}: expected a dict {{int key: weight}} or an (indices, values) pair, "
                          f"not {type(value).__name__}")
    bad = ~np.isfinite(val) | (val < 0)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise SchemaError(f"{what}: the weight of key {int(idx[i])} is {float(val[i])!r}; weights must be finite and >= 0")
    keep = val != 0
    idx, val = idx[keep], val[keep]
    if len(idx) > MAX_ENTRIES:
        raise SchemaError(f"{what}: {len(idx)} non-zero entries; at most {MAX_ENTRIES} are allowed")
    # a weight float32 cannot hold would be stored as inf or dropped as 0: refuse it instead
    out = (val > _F32_MAX) | (val < _F32_TINY / 2)
    if out.any():
        i = int(np.flatnonzero(out)[0])
        raise SchemaError(f"{what}: the weight {float(val[i])!r} of key {int(idx[i])} is outside float32's range")
    order = np.argsort(idx, kind="stable")
    return idx[order].astype(np.int32), val[order].astype(np.float32)


def _pair_arrays(value, what: str) -> tuple:
    """(indices int64, values float64) of an (indices, values) pair, types and keys checked."""
    try:
        idx, val = np.asarray(value[0]), np.asarray(value[1])
    except (ValueError, TypeError) as e:
        raise SchemaError(f"{what}: the (indices, values) pair does not make two arrays: {e}") from None
    if idx.ndim != 1 or val.ndim != 1 or len(idx) != len(val):
        raise SchemaError(f"{what}: indices and values must be 1-d and of one length, not of shapes "
                          f"{idx.shape} and {val.shape}")
    if len(idx) == 0:  # [] makes a float64 array: no key to be of the wrong type
        return np.empty(0, np.int64), np.empty(0, np.float64)
    if idx.dtype.kind not in "iu":
        if idx.dtype == object and all(isinstance(k, (int, np.integer)) and not isinstance(k, bool) for k in idx):
            if any(not 0 <= k < MAX_KEY for k in idx):
                raise SchemaError(f"{what}: a key is outside [0, 2**31)")
            idx = idx.astype(np.int64)
        else:
            raise SchemaError(f"{what}: indices must be ints, not {idx.dtype}")
    if val.dtype.kind not in "iuf":
        raise SchemaError(f"{what}: values must be real numbers, not {val.dtype}")
    if idx.dtype.kind == "u" and int(idx.max()) >= MAX_KEY or idx.dtype.kind == "i" and (
            int(idx.min()) < 0 or int(idx.max()) >= MAX_KEY):
        raise SchemaError(f"{what}: a key is outside [0, 2**31)")
    idx = idx.astype(np.int64)
    if len(np.unique(idx)) != len(idx):
        raise SchemaError(f"{what}: a key occurs twice in indices")
    return idx, val.astype(np.float64)




def field_queries(dim, value, what: str, batched: bool) -> list:
    """The checked queries of a sparse field (dim None: each an (indices, values) pair as
    check_sparse gives) or a multi-vector field of dimension dim (each an (m, dim) float32
    block): one for find, a sequence of them for find_batched. SchemaError names `what`."""
    one = (lambda q, w: check_sparse(q, w)) if dim is None else (lambda q, w: token_block(q, dim, w))
    if not batched:
        return [one(value, what)]
    if isinstance(value, (dict, str, bytes)) or not isinstance(value, (list, tuple, np.ndarray)):
        kind = "sparse vectors" if dim is None else f"(m, {dim}) token blocks"
        raise SchemaError(f"{what}: find_batched takes a list of {kind}, one per query, "
                          f"not {type(value).__name__}")
    return [one(q, f"{what}[{i}]") for i, q in enumerate(value)]
