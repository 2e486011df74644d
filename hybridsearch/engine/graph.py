"""The HNSW graph of the hnsw storage (kernels/hs_hnsw.c) as storages see it.

`HnswGraph` is the native index itself: node ids are ColumnStore slots, vectors stay in
the store's block (the graph keeps links and, with int8, its own codes). `search` takes a
batch of queries, an optional bitset of allowed slots and a walk mode: `PLAIN` walks the
graph and skips disallowed nodes in the results, `TWO_HOP` also expands through them
(filtered search at low selectivity)."""
from __future__ import annotations

from hybridsearch._native._kernels import HNSW_PLAIN as PLAIN
from hybridsearch._native._kernels import HNSW_TWOHOP as TWO_HOP
from hybridsearch._native._kernels import HnswIndex as HnswGraph

__all__ = ["HnswGraph", "PLAIN", "TWO_HOP"]
