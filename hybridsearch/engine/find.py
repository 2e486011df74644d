"""The native find path: a plain vector find (no filter, no text) in one native call.

`vector_hits` checks the query, searches the store (the HNSW walk, or the exact scan) without
the GIL and returns the hits ready for Results, so the Python around the kernel is a few
attribute reads. A query the native check does not take (a list, a non-contiguous or 2-d
array, NaN, inf, a norm outside the bounds, the zero vector) gives None: the general path then
checks it again and refuses it with its message, or runs it. The checks themselves are those of
DocumentArray._query_vectors; the bounds live here, once."""
from __future__ import annotations

from typing import Optional

from hybridsearch._native._kernels import find_vector
from hybridsearch.document import VECTOR_NORM_MAX, VECTOR_NORM_MIN

# squared norms strictly inside [VECTOR_NORM_MIN**2, VECTOR_NORM_MAX**2] with room for float32
# rounding of the dot product: a query inside passes every check of the general path; one
# outside (or the zero vector, or NaN) takes those checks and their messages
SQ_NORM_SAFE = (VECTOR_NORM_MIN ** 2 * 1.01, VECTOR_NORM_MAX ** 2 * 0.99)
_LO, _HI = SQ_NORM_SAFE


def vector_hits(query, store, k: int, graph=None, ef: int = 0, scan: bool = False) -> Optional[tuple]:
    """(ids list of str, scores float32, walk_ef) of the top-`k` rows of a ColumnStore for one
    query, best first; walk_ef is the beam of the HNSW walk made over `graph` (0: the exact scan
    ran; with `scan`, the exact scan of the graph's int8 codes). None when the query must take
    the general path. The caller holds the store's read lock and has checked that every live row has a vector (the scan covers the live rows)."""
    ids = store.ids
    live = store.live if store.n_live != store.n else None
    return find_vector(query, store.metric, _LO, _HI, graph, ef, store.vectors, store.n, store.dim,
                       store.aux, live, k, ids.data, ids.start, ids.length, scan)
