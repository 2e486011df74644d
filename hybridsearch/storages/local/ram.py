"""The in-RAM state memory and sqlite keep alike: a ColumnStore and the TextIndex over its text
fields, changed together by one write.

Both storages own these objects (and the RWLock over them); this module holds the writes that
keep the two in step, so that each storage composes them instead of inheriting them. The
caller holds the write lock. (hnsw keeps a graph beside them and reuses slots, so it has
writes of its own.)
"""
from __future__ import annotations

import numpy as np

from hybridsearch.batch import Batch
from hybridsearch.engine.columns import ColumnStore
from hybridsearch.engine.lexical import TextIndex


def upsert(store: ColumnStore, text: TextIndex, batch: Batch) -> np.ndarray:
    """Writes the batch's rows and indexes their text; -> their slots."""
    slots = store.upsert(batch)
    if text:
        text.add(slots, batch.columns)
    return slots


def delete(store: ColumnStore, text: TextIndex, ids: list) -> int:
    """Deletes the ids that exist; -> how many."""
    layout = store.compactions
    slots = store.delete(ids)
    if text:
        if store.compactions != layout:  # the delete compacted the store: rows were renumbered
            rows = store.live_rows()
            text.rebuild(rows, store.field_values(rows, text.names))
        else:
            text.remove(slots)
    return len(slots)


def update(store: ColumnStore, text: TextIndex, slots, values: dict) -> None:
    """Sets the same values on one slot or an array of them, re-indexing the text fields named."""
    store.set_fields(slots, values)
    if text:
        text.update(slots, values)


class RamWrites:
    """The three writes of a storage whose documents live in `self.store` (a ColumnStore) and
    `self.text` (a TextIndex), kept in step by the functions above; the caller holds the write
    lock. Memory and sqlite (its RAM mirror) take them from here."""

    def _apply_upsert(self, batch: Batch) -> None:
        upsert(self.store, self.text, batch)

    def _apply_delete(self, ids: list) -> int:
        return delete(self.store, self.text, ids)

    def _apply_update(self, slots, values: dict) -> None:
        """A partial update of one slot or an array of them to the same values."""
        update(self.store, self.text, slots, values)
