"""RaBitQ-style vector codes (1 or 4 bits per dimension) with error-bounded estimates and an
exact scan that rescores on float32 rows only where a bound leaves a row in doubt.

The maths and the memory layout are in kernels/hs_rabitq.h and docs/rabitq.md. This module
holds one collection's codes (row = slot, like the storages' float32 blocks), checks every
argument (typed errors from hybridsearch.errors, nothing stored on a bad call) and hands
contiguous arrays to one native call per batch.

Conventions shared with engine/exact.py: rows and queries are passed raw; under "cosine" the
codes are built from unit-length rows and queries (a zero vector scores 0), and the float32
rescoring divides by the norms as the exact kernel does. Scores are higher-is-better: cosine
similarity, inner product, or minus the euclidean distance.
"""
from __future__ import annotations

import math
from typing import Optional

import numpy as np

from hybridsearch._native import _kernels as K
from hybridsearch.errors import ConfigError, SchemaError

METRICS = ("l2", "ip", "cosine")
BITS = (1, 4)
BOUNDS = ("prob", "hard")
EPS0 = 1.9  # RaBitQ's default confidence parameter of the probabilistic bound


def _matrix(X, dim: int, what: str) -> np.ndarray:
    """X as a contiguous float32 (n, dim) matrix of finite values, else SchemaError."""
    A = np.asarray(X)
    if A.ndim == 1:
        A = A[None, :]
    if A.ndim != 2 or A.shape[1] != dim:
        raise SchemaError(f"{what} must have dimension {dim}, got shape {tuple(np.shape(X))}")
    if not np.issubdtype(A.dtype, np.number) or np.issubdtype(A.dtype, np.complexfloating):
        raise SchemaError(f"{what} must be real numbers, got dtype {A.dtype}")
    A = np.ascontiguousarray(A, dtype=np.float32)
    if A.size and not np.isfinite(A).all():
        raise SchemaError(f"{what} contain NaN or infinity (or values beyond float32)")
    return A


def _slots(slots, n: int) -> np.ndarray:
    s = np.asarray(slots)
    if s.ndim != 1 or len(s) != n or (n and not np.issubdtype(s.dtype, np.integer)):
        raise SchemaError(f"slots must be {n} integers, one per row")
    s = np.ascontiguousarray(s, dtype=np.int64)
    if n and s.min() < 0:
        raise SchemaError("slots must be >= 0")
    if len(np.unique(s)) != n:
        raise SchemaError("slots repeat within one call")
    return s


def _bitset(mask: np.ndarray) -> np.ndarray:
    """A boolean mask as uint64 words, bit i of word i // 64 little-endian (the kernels' bitset)."""
    pad = np.r_[mask, np.zeros(-len(mask) % 64, dtype=bool)]
    return np.packbits(pad, bitorder="little").view(np.uint64) if len(pad) else np.zeros(0, np.uint64)


class RabitqCodes:
    """One collection's RaBitQ codes: a centroid, a rotation fixed by (seed, dim), and per slot a
    code of dim rounded up to 64 bits (bits=1) or nibbles (bits=4) plus four float32 factors.

    train(sample) sets the centroid; encode(X, slots) codes rows; estimate(Q, slots) gives each
    (query, slot) an unbiased estimate with two error bounds; scan(X, Q, k) is an exact top-k
    (bound="hard") or a bounded approximate one (bound="prob") over the coded slots."""

    def __init__(self, dim: int, metric: str = "l2", bits: int = 1, seed: int = 0) -> None:
        if not isinstance(dim, (int, np.integer)) or isinstance(dim, bool) or dim < 1:
            raise ConfigError(f"dim must be an int >= 1, not {dim!r}")
        if metric not in METRICS:
            raise ConfigError(f"metric must be one of {', '.join(METRICS)}, not {metric!r}")
        if bits not in BITS or isinstance(bits, bool):
            raise ConfigError(f"bits must be 1 or 4, not {bits!r}")
        if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool) or not 0 <= seed < 2 ** 64:
            raise ConfigError(f"seed must be an int in [0, 2**64), not {seed!r}")
        self.dim, self.metric, self.bits, self.seed = int(dim), metric, int(bits), int(seed)
        self.padded_dim = K.rq_dp(self.dim)
        self.code_bytes = K.rq_code_bytes(self.dim, self.bits)
        self.centroid: Optional[np.ndarray] = None
        self._codes = np.zeros((0, self.code_bytes), dtype=np.uint8)
        self._factors = np.zeros((0, K.RQ_NFACT), dtype=np.float32)
        self._filled = np.zeros(0, dtype=bool)
        self._n = 0  # 1 + the highest slot coded

    # ------------------------------------------------------------ building

    def train(self, X) -> np.ndarray:
        """Sets the centroid to the mean of the sample (of its unit-length rows under cosine,
        zero rows left out) and returns it. Only before the first encode: codes depend on it."""
        if self._filled.any():
            raise ConfigError("train() after encode(): the codes depend on the centroid; start a new RabitqCodes")
        A = _matrix(X, self.dim, "training rows").astype(np.float64)
        if self.metric == "cosine":
            norms = np.linalg.norm(A, axis=1)
            A = A[norms > 0] / norms[norms > 0, None]
        c = A.mean(axis=0) if len(A) else np.zeros(self.dim)
        self.centroid = np.ascontiguousarray(c, dtype=np.float32)
        return self.centroid.copy()

    def encode(self, X, slots) -> None:
        """Codes the rows of X at the given slots (replacing what a slot held)."""
        if self.centroid is None:
            raise ConfigError("encode() before train(): the codes need the centroid")
        A = _matrix(X, self.dim, "rows")
        s = _slots(slots, len(A))
        if not len(A):
            return
        codes, factors = K.rq_encode(self.dim, self.bits, self.metric, self.seed, self.centroid, A)
        top = int(s.max()) + 1
        if top > len(self._filled):
            cap = max(top, 2 * len(self._filled), 64)
            self._codes = np.concatenate([self._codes, np.zeros((cap - len(self._codes), self.code_bytes), np.uint8)])
            self._factors = np.concatenate([self._factors, np.zeros((cap - len(self._factors), K.RQ_NFACT), np.float32)])
            self._filled = np.concatenate([self._filled, np.zeros(cap - len(self._filled), bool)])
        self._codes[s], self._factors[s], self._filled[s] = codes, factors, True
        self._n = max(self._n, top)

    def remove(self, slots) -> None:
        """Forgets the codes of these slots (scan skips them; estimate refuses them)."""
        s = np.asarray(slots, dtype=np.int64).reshape(-1)
        s = s[(s >= 0) & (s < self._n)]
        self._filled[s] = False

    # ------------------------------------------------------------ queries

    def _queries(self, Q) -> np.ndarray:
        if self.centroid is None:
            raise ConfigError("no codes yet: train() and encode() first")
        return _matrix(Q, self.dim, "queries")

    @staticmethod
    def _eps0(eps0) -> float:
        if isinstance(eps0, bool) or not isinstance(eps0, (int, float, np.floating, np.integer)) \
                or not math.isfinite(eps0) or eps0 <= 0:
            raise ConfigError(f"eps0 must be a finite number > 0, not {eps0!r}")
        return float(eps0)

    def estimate(self, Q, slots=None, eps0: float = EPS0) -> tuple:
        """(est, bound_prob, bound_hard), float32 (nq, len(slots)) (slots None: every coded slot,
        ascending): the estimated squared euclidean distance (l2) or inner product (ip; cosine
        similarity under cosine) and the half-widths of the intervals around it that hold the
        true value: always for bound_hard, with high probability for bound_prob (eps0)."""
        Qm, e = self._queries(Q), self._eps0(eps0)
        if slots is None:
            s = np.flatnonzero(self._filled[: self._n]).astype(np.int64)
        else:
            s = np.ascontiguousarray(np.asarray(slots).reshape(-1))
            if s.size and not np.issubdtype(s.dtype, np.integer):
                raise SchemaError("slots must be integers")
            s = s.astype(np.int64)
            bad = s[(s < 0) | (s >= self._n)]
            if not len(bad):
                bad = s[~self._filled[s]]
            if len(bad):
                raise SchemaError(f"slot {int(bad[0])} holds no code")
        return K.rq_estimate(self.dim, self.bits, self.metric, self.seed, self.centroid,
                             self._codes[: self._n], self._factors[: self._n], s, Qm, e)

    def _allowed(self, allowed) -> Optional[np.ndarray]:
        """The bitset of the slots to scan (None: every slot below _n, the kernel's contiguous
        pass, which streams the codes instead of gathering them)."""
        filled = self._filled[: self._n]
        if allowed is None and filled.all():
            return None
        bits = _bitset(filled)
        if allowed is None:
            return bits
        a = np.asarray(allowed)
        if a.dtype != np.uint64 or a.ndim != 1:
            raise SchemaError("allowed must be a 1-d uint64 bitset (bit i of word i // 64 = slot i)")
        words = np.zeros(len(bits), dtype=np.uint64)
        m = min(len(a), len(bits))
        words[:m] = a[:m]
        return bits & words

    def _k(self, k) -> int:
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 0:
            raise ConfigError(f"k must be an int >= 0, not {k!r}")
        return int(k)

    def scan(self, X, Q, k: int, allowed=None, bound: str = "prob", eps0: float = EPS0) -> tuple:
        """Top-k of every query over the coded slots (and the `allowed` bitset, if given):
        (scores float32 (nq, k), slots int64 (nq, k), rescored int64 (nq,)), best first, ties to
        the lower slot, padded with -inf / -1. Rows are ranked on the codes and every row whose
        bound lets it beat the k-th best is rescored on X (float32, row = slot, the block the
        codes were made from); `rescored` counts them. bound="hard": the float32 top-k exactly.
        bound="prob": rows outside the probabilistic bound are not rescored (recall < 1 possible)."""
        if bound not in BOUNDS:
            raise ConfigError(f"bound must be 'prob' or 'hard', not {bound!r}")
        Qm, e, k = self._queries(Q), self._eps0(eps0), self._k(k)
        Xa = np.asarray(X)
        if Xa.ndim != 2 or Xa.shape[1] != self.dim or len(Xa) < self._n:
            raise SchemaError(f"X must be the float32 block of the coded rows: at least {self._n} rows of dimension {self.dim}")
        Xa = np.ascontiguousarray(Xa, dtype=np.float32)
        return K.rq_scan(self.dim, self.bits, self.metric, self.seed, self.centroid,
                         self._codes[: self._n], self._factors[: self._n], Xa,
                         self._allowed(allowed), Qm, k, bound == "hard", e)

    def scan_estimates(self, Q, k: int, allowed=None) -> tuple:
        """(scores, slots) of the top-k by the estimate alone (no float32 row read): the pass
        scan() starts with, an approximate search on the codes."""
        Qm, k = self._queries(Q), self._k(k)
        s, i, _ = K.rq_scan(self.dim, self.bits, self.metric, self.seed, self.centroid,
                            self._codes[: self._n], self._factors[: self._n], None,
                            self._allowed(allowed), Qm, k, True, EPS0)
        return s, i

    def rotate(self, X) -> np.ndarray:
        """The rotation P applied to rows of X (zero-padded to padded_dim), float64: orthogonal
        and fixed by (seed, dim)."""
        return K.rq_rotate(self.dim, self.seed, _matrix(X, self.dim, "rows"))

    # ------------------------------------------------------------ size, persistence

    @property
    def count(self) -> int:
        """Slots holding a code."""
        return int(self._filled[: self._n].sum())

    @property
    def nbytes(self) -> int:
        """Bytes of the codes, their factors and the centroid (the slots up to the highest coded)."""
        return int(self._n * (self.code_bytes + 4 * K.RQ_NFACT) + 4 * self.dim)

    def state(self) -> dict:
        """Arrays (and the parameters) that from_state() restores exactly: codes, factors,
        filled (bool per slot), centroid, seed, bits, dim, metric."""
        return {"codes": self._codes[: self._n].copy(), "factors": self._factors[: self._n].copy(),
                "filled": self._filled[: self._n].copy(),
                "centroid": None if self.centroid is None else self.centroid.copy(),
                "seed": self.seed, "bits": self.bits, "dim": self.dim, "metric": self.metric}

    @classmethod
    def from_state(cls, state: dict) -> "RabitqCodes":
        """The RabitqCodes that state() described (arrays checked against the parameters)."""
        rq = cls(int(state["dim"]), str(state["metric"]), int(state["bits"]), int(state["seed"]))
        codes = np.ascontiguousarray(state["codes"], dtype=np.uint8)
        factors = np.ascontiguousarray(state["factors"], dtype=np.float32)
        filled = np.ascontiguousarray(state["filled"], dtype=bool)
        n = len(filled)
        if codes.shape != (n, rq.code_bytes) or factors.shape != (n, K.RQ_NFACT):
            raise SchemaError("saved codes do not match their parameters (shapes differ)")
        if state["centroid"] is not None:
            rq.centroid = _matrix(state["centroid"], rq.dim, "centroid")[0].copy()
        elif filled.any():
            raise SchemaError("saved codes without their centroid")
        rq._codes, rq._factors, rq._filled, rq._n = codes, factors, filled, n
        return rq
