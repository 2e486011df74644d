"""storage="memory": exact search in RAM over the native kernels."""
from __future__ import annotations

from typing import Optional

import numpy as np

from .._native import _kernels as K
from .._rwlock import RWLock
from ..batch import Batch
from ..filters import Node
from .column_backend import ColumnBackend
from .columns import ColumnStore


class MemoryBackend(ColumnBackend):
    """Columns and one vector block in RAM; every vector search is exact (brute force)."""

    name = "memory"
    OPTIONS = {"metric": "cosine"}

    def __init__(self, schema, **options) -> None:
        super().__init__(schema, **options)
        self.metric = options["metric"]
        self.store = ColumnStore(schema, self.metric)
        self.lock = RWLock()

    def upsert(self, batch: Batch) -> None:
        with self.lock.write():
            self.store.upsert(batch)

    def delete(self, ids: list) -> int:
        with self.lock.write():
            return self.store.delete(ids)

    def update_fields(self, id: str, values: dict) -> None:
        with self.lock.write():
            slot = self.store.row_of.get(id)
            if slot is None:
                raise KeyError(id)
            if values:
                # a new document object: results already handed out keep the old one
                self.store.set_fields(slot, values, self.store.docs[slot].model_copy(update=values))

    def search_vectors(self, queries: np.ndarray, limit: int, node: Optional[Node], exact: bool,
                       ef: Optional[int]) -> list:
        with self.lock.read():
            st = self.store
            bits = st.vector_bits(node)
            scores, rows = K.exact_search(st.vector_block(), st.n, st.aux_block(), queries,
                                          self.metric, bits, limit)
            out = []
            ids, docs = st.ids, st.docs
            for qs, qr in zip(scores, rows):
                kept = int(np.count_nonzero(qr >= 0))
                r = qr[:kept].tolist()
                out.append(([ids[s] for s in r], qs[:kept], [docs[s] for s in r]))
            return out

    def search_filter(self, node: Node, limit: Optional[int]) -> tuple:
        with self.lock.read():
            st = self.store
            bits = st.filter_bits(node)
            rows = st.rows_in_order(bits, limit)
            return [st.ids[s] for s in rows], [st.docs[s] for s in rows]
