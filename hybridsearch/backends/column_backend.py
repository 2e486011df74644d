"""The reads every ColumnStore-based storage answers the same way."""
from __future__ import annotations

from typing import Iterator, Optional

from ..filters import Node
from .base import Backend


class ColumnBackend(Backend):
    """A Backend whose documents live in `self.store` (a ColumnStore) under `self.lock` (an RWLock).

    Subclasses own the writes and the vector search; counting, lookups, listing
    and filter-only search read the columns directly, in insertion order."""

    store = None
    lock = None

    def count(self) -> int:
        return self.store.n_live

    def contains(self, id: str) -> bool:
        return id in self.store.row_of

    def get(self, ids: list) -> list:
        with self.lock.read():
            row_of, docs = self.store.row_of, self.store.docs
            return [docs[row_of[i]] if i in row_of else None for i in ids]

    def iter_ids(self) -> Iterator[str]:
        with self.lock.read():
            st = self.store
            ids = [st.ids[s] for s in st.rows_in_order(st.live_bits(), None)]
        return iter(ids)

    def search_filter(self, node: Node, limit: Optional[int]) -> tuple:
        with self.lock.read():
            st = self.store
            rows = st.rows_in_order(st.filter_bits(node), limit)
            return [st.ids[s] for s in rows], [st.docs[s] for s in rows]
