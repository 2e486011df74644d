"""The HNSW graph of the hnsw storage (kernels/hs_hnsw.c) as storages see it.

`HnswGraph` is the native index itself: node ids are ColumnStore slots, vectors stay in
the store's block (the graph keeps links and, quantized, its own codes: int8, or RaBitQ 1-/4-bit
with the candidates of a walk rescored on float32). `search` takes a
batch of queries, an optional bitset of allowed slots and a walk mode: `PLAIN` walks the
graph and skips disallowed nodes in the results, `TWO_HOP` also expands through them
(filtered search at low selectivity)."""
from __future__ import annotations

from typing import Optional

from hybridsearch._native._kernels import HNSW_PLAIN as PLAIN
from hybridsearch._native._kernels import HNSW_RESCORE_EPS
from hybridsearch._native._kernels import QUANTIZATIONS
from hybridsearch._native._kernels import HNSW_TWOHOP as TWO_HOP
from hybridsearch._native._kernels import HnswIndex as HnswGraph

__all__ = ["HNSW_RESCORE_EPS", "HnswGraph", "PLAIN", "QUANTIZATIONS", "TWO_HOP", "quantization_of"]


def quantization_of(meta) -> Optional[str]:
    """The quantization a snapshot's graph meta names ("none", "int8", "rabitq1", "rabitq4"),
    None when it names none of them."""
    q = meta.get("quant") if isinstance(meta, dict) else None
    if isinstance(q, bool) or not isinstance(q, int) or not 0 <= q < len(QUANTIZATIONS):
        return None
    return QUANTIZATIONS[q]
