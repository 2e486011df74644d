"""DenseColumn: one hs.Vector[d] field of a ColumnStore, by slot.

A contiguous (capacity, d) float32 block and, beside it, what the exact kernel needs per row
for the field's metric (engine/exact.py vector_aux: the squared norm for l2, the inverse norm
for cosine). A schema may declare several dense fields, each with its own dimension and metric:
the store keeps one DenseColumn per field, so every search, score and snapshot names its field.
"""
from __future__ import annotations

import logging
from typing import Optional

import numpy as np

from hybridsearch._native import _kernels as K
from hybridsearch.document import FieldSpec
from hybridsearch.engine.exact import vector_aux
from hybridsearch.engine.vectorfile import VectorFile
from hybridsearch.errors import BackendError

log = logging.getLogger("hybridsearch")


class DenseColumn:
    """The vectors of one dense field: `vectors` (rows, d) float32 and `aux` (rows,) float32."""

    def __init__(self, spec: FieldSpec, metric: str) -> None:
        self.spec = spec
        self.name = spec.name
        self.metric = metric
        self.dim = spec.dim
        self.vectors = np.zeros((0, self.dim), dtype=np.float32)
        self.aux = np.zeros(0, dtype=np.float32)
        self.backing: Optional[VectorFile] = None  # vectors_on_disk: the block's file
        self.in_ram = False  # on disk, but a full disk left the block in RAM (grow)

    def keep_on_disk(self, directory: Optional[str]) -> None:
        """From the next growth on, the block lives in a file in `directory` (engine/vectorfile.py)."""
        if self.backing is None:
            self.backing = VectorFile(directory, self.name)

    def release(self) -> None:
        """After a write: an on-disk block's pages leave this process (no-op in RAM)."""
        if self.backing is not None:
            self.backing.release()

    def close(self) -> None:
        if self.backing is not None:
            self.backing.close()

    def grow(self, cap: int, n: int, strict: bool = False) -> None:
        """Room for `cap` rows, keeping the first `n`. An on-disk block whose disk cannot hold it:
        BackendError when `strict` (before a write is logged, ColumnStore.reserve), else the rows
        go to RAM with a warning (a logged write must be applied)."""
        vectors = None
        if self.backing is not None:
            try:
                vectors = self.backing.allocate(cap, self.dim, self.vectors, n)
            except BackendError as e:
                if strict:
                    raise
                log.warning("%s; the vectors of %r stay in RAM until the next growth", e, self.name)
        self.in_ram = vectors is None and self.backing is not None  # a fallback: not retried per write
        if vectors is None:
            vectors = np.zeros((cap, self.dim), dtype=np.float32)
            vectors[:n] = self.vectors[:n]
        aux = np.zeros(cap, dtype=np.float32)
        aux[:n] = self.aux[:n]
        self.vectors, self.aux = vectors, aux

    def set(self, slots: np.ndarray, block: np.ndarray, norms2: Optional[np.ndarray] = None) -> None:
        """Writes the rows of `block` ((len(slots), d) float32, zeros for a missing vector) at `slots`.
        `norms2`: the rows' squared norms when validation measured them (not measured again)."""
        aux = vector_aux(block, self.metric, norms2)
        n = len(slots)
        if n and int(slots[-1]) - int(slots[0]) == n - 1 and (n == 1 or (np.diff(slots) == 1).all()):
            at = slice(int(slots[0]), int(slots[0]) + n)  # consecutive slots (an append): one memcpy
        else:
            at = slots
        self._into_file()
        self.vectors[at] = block
        self.aux[at] = aux

    def _into_file(self) -> None:
        """Before a write in place: an on-disk block still read from the snapshot (a copy-on-write
        mapping, whose written pages would stay in RAM) moves into its file first."""
        if (self.backing is not None and not self.in_ram and len(self.vectors)
                and not self.backing.holds(self.vectors)):
            self.grow(len(self.vectors), len(self.vectors))

    def take(self, keep: np.ndarray, m: int) -> None:
        """Compaction: rows `keep` become rows [0, m)."""
        self._into_file()
        self.vectors[:m] = self.vectors[keep]
        self.aux[:m] = self.aux[keep]

    @property
    def nbytes(self) -> int:
        """Bytes in RAM: an on-disk block counts only its per-row numbers (see disk_nbytes)."""
        return int(self.aux.nbytes + (0 if self.backing is not None else self.vectors.nbytes))

    @property
    def disk_nbytes(self) -> int:
        """Bytes of the block kept on disk (0 in RAM)."""
        return int(self.vectors.nbytes) if self.backing is not None else 0

    # ------------------------------------------------------------ snapshots
    def export(self, n: int) -> dict:
        return {"vectors": self.vectors[:n], "aux": self.aux[:n]}

    def restore(self, vectors: np.ndarray, aux: np.ndarray, metric: Optional[str]) -> None:
        """Takes back the arrays export() gave (views of a mapped file). `metric` is the one the
        snapshot was written with (None: not recorded): with another metric than this field's,
        the per-row numbers are computed again from the vectors, so scores stay this metric's."""
        if metric != self.metric:
            aux = vector_aux(np.asarray(vectors), self.metric)
        self.vectors, self.aux = vectors, aux

    # --------------------------------------------------------------- search
    def block(self, n: int) -> np.ndarray:
        return self.vectors[:n]

    def aux_block(self, n: int) -> Optional[np.ndarray]:
        return None if self.metric == "ip" else self.aux[:n]

    def exact_search(self, queries: np.ndarray, n: int, limit: int, bits: np.ndarray) -> tuple:
        """(scores, rows) of the exact top-`limit` rows among `bits` for every query row."""
        return K.exact_search(self.block(n), n, self.aux_block(n), queries, self.metric, bits, limit)

    def scores(self, q: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """The user-facing similarity (API.md) of query q to the given rows, exact, in float64."""
        if len(rows) == 0:
            return np.empty(0, dtype=np.float64)
        rows = np.ascontiguousarray(rows, dtype=np.int64)
        # the rows (checked against the block by the kernel's wrapper) are read where they are
        # (prefetched by the kernel), not gathered into a copy
        raw = K.scores_rows_at(self.vectors, rows, np.ascontiguousarray(q, dtype=np.float32),
                               self.metric).astype(np.float64)
        if self.metric == "ip":
            return raw
        if self.metric == "l2":
            return -np.sqrt(np.maximum(raw, 0.0))
        qn = float(np.linalg.norm(q))
        return raw * self.aux[rows] / qn if qn > 0 else np.zeros(len(rows))
