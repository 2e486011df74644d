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

In a snapshot (export / attached) the graph is its links, as the dense graphs are saved, plus
the encoding block and the FdeParams it was encoded with; the next open maps them back instead
of encoding and linking every document again.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from hybridsearch.engine import graph as G
from hybridsearch.engine.muvera import FdeParams, encoder, fde_documents
from hybridsearch.errors import ConfigError

# candidates walked per query before exact rescoring (at least the page asked for): at the
# default FDE parameters, 200 rescored candidates hold >= 0.95 of the exhaustive top-10
CANDIDATES = 200

# documents whose encoding an attach recomputes and compares with the saved one: a cheap
# check that the block belongs to these tokens and parameters (a few ms at any size); a
# mismatch rebuilds the graph from the tokens
_SPOT_CHECKS = 8


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
        rows = self.candidates_batch([Q], k, ef, bits)[0]
        return rows[rows >= 0]

    def candidates_batch(self, queries: list, k: int, ef: int, bits: Optional[np.ndarray]) -> np.ndarray:
        """(len(queries), k) int64 slots, per query the best by FDE first, -1 padded: the
        queries encoded together and walked in one native call."""
        q = np.ascontiguousarray(encoder(self.params).queries(queries, self.metric))
        if bits is not None and len(bits) * 64 < len(self.block):  # the graph wants every row covered
            wide = np.zeros((len(self.block) + 63) // 64, dtype=np.uint64)
            wide[:len(bits)] = bits
            bits = wide
        _, rows = self.graph.search(self.block, q, k, max(ef, k), bits, G.PLAIN)
        return rows

    # ------------------------------------------------------------ snapshots
    def export(self) -> tuple:
        """(meta, arrays) for a snapshot: the graph's links (removals repaired first: the caller
        holds the write lock) under "graph/", and "block", the encodings of slots [0, n). The
        arrays are views valid until the next write."""
        self.graph.repair(self.block, self.threads)
        gmeta, parts = self.graph.export()
        p = self.params
        meta = {"params": {"dim": p.dim, "k_sim": p.k_sim, "d_proj": p.d_proj, "reps": p.reps,
                           "final_dim": p.final_dim, "seed": p.seed},
                "metric": self.metric, "graph": gmeta}
        arrays = {f"graph/{k}": v for k, v in parts.items()}
        arrays["block"] = self.block[:gmeta["n"]]
        return meta, arrays

    @classmethod
    def attached(cls, meta: dict, arrays: dict, tokens, dim: int, metric: str, m: int,
                 ef_construct: int, seed: int, threads: int) -> Optional["FdeGraph"]:
        """The graph export() gave, over arrays mapped from a file (used in place), for the
        documents of `tokens` (the field's TokenStore, restored before).

        None when the graph is sound but not this one's to use: saved for another metric or
        another m, or a few documents' encodings recomputed differ from the saved ones (an
        encoder whose rounding changed, another CPU's BLAS). The caller builds it again from
        the tokens: it is derived data, and refusing would leave a healthy collection unopenable.
        ValueError for structural damage: the header, the parameters (unreadable, or for
        another token dimension), every array's type and shape, every link (the native attach),
        the nodes being exactly the documents holding tokens."""
        if not isinstance(meta, dict) or not isinstance(meta.get("params"), dict):
            raise ValueError("FDE graph: bad snapshot header")
        if meta.get("metric") != metric:
            return None
        try:
            params = FdeParams(**meta["params"])
        except (ConfigError, TypeError):
            raise ValueError("FDE graph: bad encoding parameters") from None
        if params.dim != dim:
            raise ValueError(f"FDE graph: encodes {params.dim}-d tokens, the field has {dim}")
        block = arrays.get("block")
        n = meta.get("graph", {}).get("n") if isinstance(meta.get("graph"), dict) else None
        if (not isinstance(block, np.ndarray) or block.dtype != np.float32 or block.ndim != 2
                or block.shape != (n, params.out_dim) or not block.flags.c_contiguous
                or not block.flags.writeable):
            raise ValueError("FDE graph: the encoding block is missing or has the wrong type or shape")
        parts = {k[len("graph/"):]: v for k, v in arrays.items() if k.startswith("graph/")}
        saved_m = meta["graph"].get("m")
        if isinstance(saved_m, int) and not isinstance(saved_m, bool) and saved_m != m:
            return None  # linked for another m: the collection is opened with this one
        fg = cls(dim, metric, m, ef_construct, seed, threads, params)  # its shapes checked first
        fg.graph = G.HnswGraph.attach(meta["graph"], parts, params.out_dim, "ip", m, ef_construct, "none")
        fg.block = block
        nodes = np.flatnonzero(parts["level"] >= 0)
        slots = tokens.slots()
        if len(nodes) != len(slots) or not np.array_equal(nodes, slots):
            raise ValueError("FDE graph: its nodes are not the documents holding the field")
        if len(slots):
            probe = slots[np.linspace(0, len(slots) - 1, min(_SPOT_CHECKS, len(slots))).astype(np.int64)]
            again = fde_documents([tokens.get(s) for s in probe.tolist()], params, metric)
            if not np.allclose(again, block[probe], rtol=1e-4, atol=1e-5):
                return None
        return fg

    @property
    def nbytes(self) -> int:
        """Bytes of the links and of the encoding block (capacity included)."""
        return int(self.graph.nbytes + self.block.nbytes)
