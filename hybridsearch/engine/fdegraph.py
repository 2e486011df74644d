"""The candidate stage of multi-vector search on the hnsw storage: an HNSW graph over the
MUVERA fixed-dimensional encodings (engine/muvera.py) of one multi-vector field's documents.

The graph's inner product between a query's FDE and a document's FDE approximates their
MaxSim (dot product or cosine), so a walk gathers candidates that the caller rescores exactly
with TokenStore.maxsim_of (engine/fieldvectors.py MultiColumn.scores): the hits' scores are
always exact MaxSim, only which documents are found is approximate. l2 has no FDE: a field
with that metric is always searched exhaustively.

The encodings live in one float32 block by slot (the store's rows), grown by doubling, as the
graph reads its vectors from the caller's block. Writes are serialised by the collection's
lock like every other index.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from hybridsearch.engine import graph as G
from hybridsearch.engine.muvera import FdeParams, fde_documents, fde_query

# candidates walked per query before exact rescoring (at least the page asked for): at the
# default FDE parameters, 200 rescored candidates hold >= 0.95 of the exhaustive top-10
CANDIDATES = 200


def fde_metric_ok(metric: str) -> bool:
    """Whether an FDE approximates MaxSim under this metric (dot product and cosine do)."""
    return metric in ("ip", "cosine")


class FdeGraph:
    """An HNSW graph (inner product) over the FDEs of one multi-vector field's documents."""

    def __init__(self, dim: int, metric: str, m: int, ef_construct: int, seed: int, threads: int,
                 params: Optional[FdeParams] = None) -> None:
        self.params = params or FdeParams(dim=dim)
        self.metric = metric
        self.threads = threads
        self.graph = G.HnswGraph(self.params.out_dim, "ip", m, ef_construct, seed, "none")
        self.block = np.zeros((0, self.params.out_dim), dtype=np.float32)

    @property
    def size(self) -> int:
        return self.graph.size

    def _grow(self, rows: int) -> None:
        if rows <= len(self.block):
            return
        cap = max(1024, 2 * len(self.block))
        while cap < rows:
            cap *= 2
        block = np.zeros((cap, self.params.out_dim), dtype=np.float32)
        block[:len(self.block)] = self.block
        self.block = block

    def set(self, slots: np.ndarray, blocks: list) -> None:
        """Encodes and (re-)links the documents of these slots (blocks: their token arrays)."""
        slots = np.ascontiguousarray(slots, dtype=np.int64)
        if not len(slots):
            return
        self._grow(int(slots.max()) + 1)
        self.block[slots] = fde_documents(blocks, self.params, self.metric)
        self.graph.add(self.block, slots, self.threads)

    def remove(self, slots: np.ndarray) -> None:
        """Unlinks these slots (those that are not nodes are ignored)."""
        slots = np.ascontiguousarray(slots, dtype=np.int64)
        if len(slots) and len(self.block):
            self.graph.remove(self.block, slots[slots < len(self.block)], self.threads)

    def candidates(self, Q: np.ndarray, k: int, ef: int, bits: Optional[np.ndarray]) -> np.ndarray:
        """Up to k slots (int64) whose FDE scores best against the query's, among the slots set
        in `bits` (None: all)."""
        q = np.ascontiguousarray(fde_query(Q, self.params, self.metric).reshape(1, -1))
        if bits is not None and len(bits) * 64 < len(self.block):  # the graph wants every row covered
            wide = np.zeros((len(self.block) + 63) // 64, dtype=np.uint64)
            wide[:len(bits)] = bits
            bits = wide
        _, rows = self.graph.search(self.block, q, k, max(ef, k), bits, G.PLAIN)
        rows = rows[0]
        return rows[rows >= 0]
