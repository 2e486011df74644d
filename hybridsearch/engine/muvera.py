"""MUVERA fixed-dimensional encodings (FDE) of token blocks (Dhulipala et al., 2024).

One float32 vector per block whose dot product with a query's FDE approximates the
block's MaxSim (dot-product / cosine similarity), so a dense index (a graph, or an exact
scan) over FDEs gathers MaxSim candidates that TokenStore.maxsim_of then rescores exactly.

Per repetition r (of `reps`):
- SimHash: `k_sim` Gaussian directions split the space into B = 2**k_sim partitions; a
  token's partition is the bit pattern of the signs of its projections.
- Inner projection: a random +-1/sqrt(d_proj) matrix maps each token to d_proj dimensions
  (d_proj = None keeps the d dimensions).
- A document's part for partition b is the average of its projected tokens that fall in
  b; an empty partition takes the token whose bit pattern is nearest to b in Hamming
  distance (ties to the earlier token), so no part of a document is left blank.
- A query's part for b is the sum of its projected tokens in b (no filling).
The parts are concatenated (reps * B * d_proj dimensions), and optionally reduced to
`final_dim` by a count sketch (each coordinate added, with a random sign, into one of
final_dim buckets). Everything random is drawn from `seed`, so equal parameters give
equal encodings in every process.

Defaults (FdeParams): k_sim=4, d_proj=16, reps=20, no final projection: 5120 dimensions.
On clustered ColBERT-like data (tests/engine/test_maxsim.py) the exact top-200 by FDE
dot product, rescored by exact MaxSim, holds >= 0.95 of the exhaustive MaxSim top-10.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from numbers import Integral
from typing import Optional

import numpy as np

from hybridsearch.engine.multivector import check_metric, token_block
from hybridsearch.errors import ConfigError

_CHUNK = 512  # documents encoded at once


@dataclass(frozen=True)
class FdeParams:
    """The encoding's parameters; the output has reps * 2**k_sim * (d_proj or dim) dimensions,
    or final_dim when set."""

    dim: int                          # token dimension d
    k_sim: int = 4                    # SimHash bits per repetition (2**k_sim partitions), 0..10
    d_proj: Optional[int] = 16        # inner projection per partition; None keeps dim
    reps: int = 20                    # independent repetitions, concatenated
    final_dim: Optional[int] = None   # count-sketch output size; None keeps the concatenation
    seed: int = 0

    def __post_init__(self) -> None:
        def whole(name, v, lo, hi=None, optional=False):
            if v is None and optional:
                return
            if not isinstance(v, Integral) or isinstance(v, bool) or v < lo or (hi is not None and v > hi):
                rng = f"in [{lo}, {hi}]" if hi is not None else f">= {lo}"
                raise ConfigError(f"FDE parameter {name} must be an int {rng}, not {v!r}")
        whole("dim", self.dim, 1)
        whole("k_sim", self.k_sim, 0, 10)
        whole("d_proj", self.d_proj, 1, optional=True)
        whole("reps", self.reps, 1)
        whole("final_dim", self.final_dim, 1, optional=True)
        whole("seed", self.seed, 0)

    @property
    def concat_dim(self) -> int:
        """Dimensions before the final projection."""
        return self.reps * (1 << self.k_sim) * (self.d_proj or self.dim)

    @property
    def out_dim(self) -> int:
        """Dimensions of an encoding."""
        return self.final_dim or self.concat_dim


class Fde:
    """The encoder of one FdeParams: its random matrices drawn once."""

    def __init__(self, params: FdeParams) -> None:
        p = self.params = params
        rng = np.random.default_rng(p.seed)
        dp = p.d_proj or p.dim
        # all repetitions at once: one (d, reps * k_sim) SimHash matrix and one
        # (d, reps * dp) projection, so a batch is two matrix products
        self.simhash = rng.standard_normal((p.dim, p.reps * p.k_sim)).astype(np.float32)
        self.simhash64 = self.simhash.astype(np.float64)  # the sign test's (_codes_and_projections)
        if p.d_proj is None:
            self.proj = None
        else:
            signs = rng.integers(0, 2, size=(p.dim, p.reps * dp)) * 2 - 1
            self.proj = (signs / np.sqrt(dp)).astype(np.float32)
        if p.final_dim is None:
            self.sketch = None
        else:
            self.sketch = (rng.integers(0, p.final_dim, size=p.concat_dim),
                           (rng.integers(0, 2, size=p.concat_dim) * 2 - 1).astype(np.float32))
        self.B = 1 << p.k_sim
        self.dp = dp

    def _tokens(self, blocks, metric: str) -> tuple:
        """Concatenated float32 tokens (unit rows for cosine) and the start of each block."""
        arrs = [token_block(b, self.params.dim) for b in blocks]
        counts = np.fromiter((len(a) for a in arrs), dtype=np.int64, count=len(arrs))
        T = np.concatenate(arrs) if arrs else np.zeros((0, self.params.dim), dtype=np.float32)
        if check_metric(metric) == "cosine":
            T = T / np.linalg.norm(T, axis=1, keepdims=True).astype(np.float32)
        starts = np.concatenate(([0], np.cumsum(counts)[:-1])) if len(counts) else counts
        return T, starts, counts

    def _codes_and_projections(self, T: np.ndarray) -> tuple:
        """Partition per (token, repetition) (n, reps) and projected tokens (n, reps, dp)."""
        p = self.params
        # the signs in float64: a float32 product's rounding depends on the batch's shape (BLAS
        # blocking), and a token near a hyperplane would change partition with the company it
        # is encoded in; float32 x float32 products are exact in float64, so only the sums round,
        # ~1e9 times closer to the true sign. A snapshot's saved encodings (fdegraph.py) are then
        # what encoding the same document again gives
        bits = (T.astype(np.float64) @ self.simhash64 > 0).reshape(len(T), p.reps, p.k_sim)
        codes = (bits.astype(np.int64) << np.arange(p.k_sim, dtype=np.int64)).sum(axis=2)
        P = (T @ self.proj) if self.proj is not None else np.tile(T, (1, p.reps))
        return codes, P.reshape(len(T), p.reps, self.dp)

    def _sums(self, codes, P, owner, n) -> tuple:
        """Per (block, repetition, partition): the sum of projected tokens and their number."""
        p, B = self.params, self.B
        key = (owner[:, None] * p.reps + np.arange(p.reps)) * B + codes  # (tokens, reps)
        key = key.ravel()
        size = n * p.reps * B
        count = np.bincount(key, minlength=size)
        flat = P.reshape(-1, self.dp)
        sums = np.empty((size, self.dp), dtype=np.float64)
        for j in range(self.dp):
            sums[:, j] = np.bincount(key, weights=flat[:, j], minlength=size)
        return sums, count

    def _finish(self, out: np.ndarray) -> np.ndarray:
        if self.sketch is None:
            return np.ascontiguousarray(out, dtype=np.float32)
        where, sign = self.sketch
        res = np.zeros((len(out), self.params.final_dim), dtype=np.float64)
        # count sketch as a sum over columns: sort the columns by their bucket once
        order = np.argsort(where, kind="stable")
        signed = out[:, order] * sign[order]
        buckets, starts = np.unique(where[order], return_index=True)
        res[:, buckets] = np.add.reduceat(signed, starts, axis=1)
        return res.astype(np.float32)

    def documents(self, blocks, metric: str = "cosine") -> np.ndarray:
        """Encodings (len(blocks), out_dim) float32 of document blocks (each (n_i, dim))."""
        blocks = list(blocks)
        out = np.empty((len(blocks), self.params.out_dim), dtype=np.float32)
        # in chunks: the per-partition sums of a chunk are float64 (chunk, reps * B, dp)
        for i in range(0, len(blocks), _CHUNK):
            out[i:i + _CHUNK] = self._documents(blocks[i:i + _CHUNK], metric)
        return out

    def _documents(self, blocks, metric: str) -> np.ndarray:
        p, B = self.params, self.B
        T, starts, counts = self._tokens(blocks, metric)
        n = len(counts)
        owner = np.repeat(np.arange(n), counts)
        codes, P = self._codes_and_projections(T)
        sums, count = self._sums(codes, P, owner, n)
        with np.errstate(invalid="ignore", divide="ignore"):
            avg = (sums / count[:, None]).reshape(n, p.reps, B, self.dp)
        empty = (count == 0).reshape(n, p.reps, B)
        parts = np.arange(B, dtype=np.int32)
        local = (np.arange(len(T)) - np.repeat(starts, counts)).astype(np.int32)
        for r in range(p.reps):
            er = empty[:, r, :]
            if not er.any():
                continue
            # Hamming distance of every token's pattern to every partition; the nearest token
            # of each block (ties to the earlier one) by a segment minimum over its rows
            x = codes[:, r, None].astype(np.int32) ^ parts
            ham = np.zeros(x.shape, dtype=np.int32)
            for b in range(p.k_sim):
                ham += (x >> b) & 1
            key = ham * (1 << 13) + local[:, None]   # local < 4096 < 2**13
            best = np.minimum.reduceat(key, starts, axis=0)  # (n, B)
            tok = starts[:, None] + (best & ((1 << 13) - 1))
            avg[:, r][er] = P[tok, r][er]
        return self._finish(avg.reshape(n, -1))

    def queries(self, blocks, metric: str = "cosine") -> np.ndarray:
        """Encodings (len(blocks), out_dim) float32 of query blocks (each (m_i, dim))."""
        T, starts, counts = self._tokens(blocks, metric)
        n = len(counts)
        if n == 0:
            return np.zeros((0, self.params.out_dim), dtype=np.float32)
        codes, P = self._codes_and_projections(T)
        sums, _ = self._sums(codes, P, np.repeat(np.arange(n), counts), n)
        return self._finish(sums.reshape(n, -1))

    def query(self, Q, metric: str = "cosine") -> np.ndarray:
        """The encoding (out_dim,) float32 of one query block (m, dim)."""
        return self.queries([Q], metric)[0]


@lru_cache(maxsize=16)
def encoder(params: FdeParams) -> Fde:
    """The (cached) encoder of these parameters."""
    return Fde(params)


def fde_documents(blocks, params: FdeParams, metric: str = "cosine") -> np.ndarray:
    """FDEs (n, params.out_dim) float32 of document token blocks; see the module doc."""
    return encoder(params).documents(blocks, metric)


def fde_query(Q, params: FdeParams, metric: str = "cosine") -> np.ndarray:
    """The FDE (params.out_dim,) float32 of a query token block; see the module doc."""
    return encoder(params).query(Q, metric)
