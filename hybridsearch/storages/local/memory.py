"""storage="memory": exact search in RAM over the native kernels."""
from __future__ import annotations

from typing import Optional

import numpy as np

from hybridsearch.batch import Batch
from hybridsearch.engine.columns import ColumnStore
from hybridsearch.engine.lexical import TextIndex
from hybridsearch.engine.rwlock import RWLock
from hybridsearch.query.filters import Node
from hybridsearch.storages.columnar import ColumnarStorage
from hybridsearch.storages.config import StorageConfig


class MemoryStorage(ColumnarStorage):
    """Columns and one vector block in RAM; every vector search is exact (brute force)."""

    name = "memory"
    Config = StorageConfig  # metric only

    def __init__(self, schema, config: StorageConfig) -> None:
        super().__init__(schema, config)
        self.store = ColumnStore(schema, self.metric)
        self.lock = RWLock()
        self.text = TextIndex(schema)

    def upsert(self, batch: Batch) -> None:
        with self.lock.write():
            self._apply_upsert(batch)

    def delete(self, ids: list) -> int:
        with self.lock.write():
            return self._apply_delete(ids)

    def update_fields(self, id: str, values: dict) -> None:
        with self.lock.write():
            slot = self._slot_to_update(id, values)
            if slot is not None:
                self._apply_update(slot, values)

    # the writes themselves; the caller holds the write lock
    def _apply_upsert(self, batch: Batch) -> None:
        slots = self.store.upsert(batch)
        if self.text:
            self.text.add(slots, batch.columns)

    def _apply_delete(self, ids: list) -> int:
        st = self.store
        layout = st.compactions
        slots = st.delete(ids)
        if self.text:
            if st.compactions != layout:  # rows were renumbered
                rows = st.live_rows()
                self.text.rebuild(rows, st.field_values(rows, self.text.names))
            else:
                self.text.remove(slots)
        return len(slots)

    def _apply_update(self, slot: int, values: dict) -> None:
        self.store.set_fields(slot, values)
        if self.text:
            self.text.update(slot, values)

    def _vectors(self, queries: np.ndarray, limit: int, node: Optional[Node], exact: bool,
                 ef: Optional[int]) -> tuple:
        return self.store.exact_search(queries, limit, self._prefilter_bits(node, True))
