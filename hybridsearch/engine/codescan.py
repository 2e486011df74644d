"""The RaBitQ codes of a ColumnStore's dense fields, and the exact scan that ranks on them
(storage="memory", quantization="rabitq1" | "rabitq4").

One RabitqCodes per dense field (engine/rabitq.py), row = the ColumnStore's slot, as the float32
block. The codes are derived data: they follow every write of the block (`written`, `deleted`,
with the compaction's renumbering) and are built again from the block when a collection is read
from its files (`rebuild`); nothing of them is saved. A field's codes are trained on the first
rows it gets (the centroid is their mean) and keep that centroid: the scan is exact whatever
the centroid, only the number of rows it must read again in float32 depends on it.

`search` answers exactly what ColumnStore.exact_search answers, ids, scores and tie order: the
codes' hard-bound scan gives each query's float32 top-`kk` (kk a little above the page), and
when the page's last score is clear of the kk-th by more than the float32 rounding of either
kernel, those kk rows hold every row of the float scan's page; the float scan then runs over
them alone (one bitset, the same kernel, so the same scores and ties). A query whose margin
is too thin (near-ties at the page's end, duplicates) widens kk, at worst to every row.
"""
from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from typing import Optional

import numpy as np

from hybridsearch.engine.columns import ColumnStore, popcount
from hybridsearch.engine.exact import row_norms2
from hybridsearch.engine.rabitq import RabitqCodes

QUANTIZATIONS = {"rabitq1": 1, "rabitq4": 4}
_PART = 8192  # rows encoded per call (a large batch: parts on several cores)
_TRAIN_MAX = 65536  # rows (evenly spaced) whose mean is the centroid
_EPS32 = float(np.finfo(np.float32).eps)


def _bits_of(slots: np.ndarray, n: int) -> np.ndarray:
    """A bitset (uint64 words, the kernels' layout) of n rows with `slots` set."""
    bits = np.zeros(max((n + 63) // 64, 1), dtype=np.uint64)
    if len(slots):
        np.bitwise_or.at(bits, slots >> 6, np.left_shift(np.uint64(1), (slots & 63).astype(np.uint64)))
    return bits


def _sample(slots: np.ndarray) -> np.ndarray:
    """At most _TRAIN_MAX of `slots` (ascending), evenly spaced."""
    if len(slots) <= _TRAIN_MAX:
        return slots
    return np.unique(slots[np.linspace(0, len(slots) - 1, _TRAIN_MAX).astype(np.int64)])


class StoreCodes:
    """The codes of every dense field of `store`, kept by slot beside its float32 blocks."""

    def __init__(self, store: ColumnStore, quantization: str, threads: Optional[int] = None) -> None:
        self.store = store
        self.threads = threads or os.cpu_count() or 1  # cores a large batch is coded on
        self.quantization = quantization
        self.bits = QUANTIZATIONS[quantization]
        self.codes: dict = {name: None for name in store.dense}  # field -> RabitqCodes, once trained
        self.max_norm: dict = {name: 0.0 for name in store.dense}  # an upper bound of the rows' norms
        self.widened = 0  # searches whose first candidate count left a margin too thin (a figure for benchmarks)

    # ------------------------------------------------------------ writes
    def _rows_with_vectors(self, name: str, slots: np.ndarray) -> tuple:
        """(slots holding a vector in `name`, slots not holding one) among `slots`."""
        has = self.store.has_vector(slots, name)
        if has is None:
            return slots, slots[:0]
        return slots[has], slots[~has]

    def _encode(self, name: str, slots: np.ndarray) -> None:
        """Codes the rows `slots` (ascending) of field `name` as the float32 block holds them now.
        A large batch is coded in parts on every core (the kernel runs without the GIL): the
        part with the highest slots first, alone, so that the codes' arrays have grown before
        the other parts write their own rows of them in parallel."""
        col = self.store.dense[name]
        if self.codes[name] is None:  # the first rows of the field: their mean is the centroid, kept
            rq = RabitqCodes(col.dim, col.metric, self.bits)
            rq.train(col.vectors[_sample(slots)])
            self.codes[name] = rq
        rq = self.codes[name]

        def part(at: int) -> float:
            rows = slots[at: at + _PART]
            block = col.vectors[rows]
            rq.encode(block, rows)
            return float(row_norms2(block)[0].max())

        starts = list(range(0, len(slots), _PART))
        norms2 = [part(starts.pop())] if starts else []
        if len(starts) > 1 and self.threads > 1:
            with ThreadPoolExecutor(min(self.threads, len(starts))) as pool:
                norms2.extend(pool.map(part, starts))
        else:
            norms2.extend(map(part, starts))
        if norms2:
            self.max_norm[name] = max(self.max_norm[name], float(np.sqrt(max(norms2))))

    def written(self, slots, names) -> None:
        """Rows `slots` were written in the dense fields `names` (upsert: every field; a partial
        update: the fields it sets): coded again, or forgotten where the row holds no vector."""
        slots = np.unique(np.atleast_1d(np.asarray(slots, dtype=np.int64)))
        for name in names:
            if name not in self.codes or not len(slots):
                continue
            coded, empty = self._rows_with_vectors(name, slots)
            if len(empty) and self.codes[name] is not None:
                self.codes[name].remove(empty)
            if len(coded):
                self._encode(name, coded)

    def deleted(self, slots: np.ndarray, live_before: Optional[np.ndarray]) -> None:
        """Rows `slots` were deleted; `live_before` (the live bitset before the delete) when it
        compacted the store: the rows left, ascending, became rows 0, 1, ... (ColumnStore.compact),
        and the codes move with them."""
        for rq in self.codes.values():
            if rq is not None:
                rq.remove(slots)
        if live_before is None:
            return
        live = np.flatnonzero(np.unpackbits(live_before.view(np.uint8), bitorder="little"))
        keep = np.setdiff1d(live, slots).astype(np.int64)
        for name, rq in self.codes.items():
            if rq is None:
                continue
            state = rq.state()
            have = len(state["filled"])
            take = keep[keep < have]  # rows past the codes' end hold none
            for key in ("codes", "factors", "filled"):
                state[key] = state[key][take]
            self.codes[name] = RabitqCodes.from_state(state)

    def rebuild(self) -> None:
        """The codes of every live row's vectors, from the float32 blocks (a collection read from
        its files: the snapshot and the log's writes are in the blocks already)."""
        st = self.store
        rows = st.live_rows().astype(np.int64)
        for name in self.codes:
            self.codes[name], self.max_norm[name] = None, 0.0
            coded, _ = self._rows_with_vectors(name, rows)
            if not len(coded):
                continue
            self._encode(name, coded)

    # ------------------------------------------------------------ search
    def _margin(self, name: str, metric: str, dim: int, qnorm: np.ndarray) -> np.ndarray:
        """Per query: how far apart two rows' scores must be (in the space `_keys` gives) for
        every float32 kernel to rank them alike. Each kernel's key is within gamma times the
        size of its terms of the true value (gamma = (d + 4) eps32, as hs_rabitq.c bounds the
        rescoring's rounding, a few eps more for the norms cosine divides by): two rows, two
        kernels, so four times that, and twice again for safety."""
        gamma = (dim + 4) * _EPS32
        m = self.max_norm[name]
        if metric == "cosine":
            return np.full(len(qnorm), 8 * 1.1 * gamma)
        if metric == "ip":
            return 8 * gamma * qnorm * m
        return 8 * gamma * (qnorm + m) ** 2  # squared distances, every term bounded by (|q| + |x|)^2

    @staticmethod
    def _keys(scores: np.ndarray, metric: str) -> np.ndarray:
        """Scores as keys that are higher for better rows and where rounding is bounded
        additively: minus the squared distance for l2, the score itself otherwise."""
        s = scores.astype(np.float64)
        return -(s * s) if metric == "l2" else s

    def search(self, queries: np.ndarray, limit: int, bits: Optional[np.ndarray],
               field: Optional[str] = None) -> tuple:
        """ColumnStore.exact_search(queries, limit, bits, field), read through the codes: the
        same (scores, rows)."""
        st = self.store
        col = st.column_of(field)
        rq = self.codes[col.name]
        if rq is None:  # no vector was ever written to the field
            return st.exact_search(queries, limit, bits, field)
        allowed = rq.count if bits is None else popcount(bits)
        Q = np.ascontiguousarray(queries, dtype=np.float32)
        X = col.block(st.n)
        qnorm = np.sqrt(np.einsum("ij,ij->i", Q.astype(np.float64), Q.astype(np.float64)))
        margin = self._margin(col.name, col.metric, col.dim, qnorm)
        pending = np.arange(len(Q))
        kk = 2 * limit + 8
        found = []
        while len(pending) and kk < allowed:
            scores, slots, _ = rq.scan(X, Q[pending], kk, bits, bound="hard")
            keys = self._keys(scores, col.metric)
            # kk < allowed: a short answer would mean rows without codes, so it is not trusted
            clear = (slots[:, kk - 1] >= 0) & (keys[:, limit - 1] - keys[:, kk - 1] > margin[pending])
            found.append(slots[clear].reshape(-1))
            pending = pending[~clear]
            if len(pending):
                self.widened += 1
            kk *= 4
        if len(pending):  # near-ties down to every row: the float scan over them all
            return st.exact_search(queries, limit, bits, field)
        return st.exact_search(queries, limit, _bits_of(np.concatenate(found), st.n), field)

    # ------------------------------------------------------------ size
    @property
    def nbytes(self) -> int:
        """Bytes of the codes, their factors and centroids."""
        return int(sum(rq.nbytes for rq in self.codes.values() if rq is not None))
