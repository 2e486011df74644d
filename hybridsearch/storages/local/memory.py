"""storage="memory": exact search in RAM over the native kernels; with `path=`, durable files
(the log and mapped snapshots of storages/local/journaled.py)."""
from __future__ import annotations

import dataclasses
from typing import Optional

import numpy as np

from hybridsearch.engine.codescan import StoreCodes
from hybridsearch.engine.columns import ColumnStore
from hybridsearch.engine.lexical import TextIndex
from hybridsearch.engine.rwlock import RWLock
from hybridsearch.errors import ConfigError
from hybridsearch.query.filters import Node
from hybridsearch.storages.config import (StorageConfig, boolean, check_lock_timeout, integer, number, one_of,
                                          option, path_or_none, StrPath)
from hybridsearch.storages.local import ram
from hybridsearch.storages.local.journaled import JournaledStorage


@dataclasses.dataclass(frozen=True)
class MemoryConfig(StorageConfig):
    """Options of storage="memory"."""

    path: Optional[StrPath] = option(None, path_or_none, "directory of the collection's files; None keeps it in RAM")
    read_only: bool = option(False, boolean, "with path: open without the writer's lock; writes refused")
    follow: bool = option(True, boolean, "read_only: apply the writer's new writes before each read; False keeps "
                                         "the view of the open until refresh()")
    lock_timeout: float = option(0, number(0, 86400), "with path: seconds a writer waits for another writer's "
                                                      "lock before BackendError; 0 refuses at once")
    threads: Optional[int] = option(None, integer(1, allow_none=True),
                                    "text fields a large batch indexes at once; None = every core")
    quantization: Optional[str] = option(None, one_of(None, "none", "rabitq1", "rabitq4"),
                                         '"rabitq4" / "rabitq1": the exact scan ranks 4-bit / 1-bit RaBitQ codes '
                                         "of the vectors first and reads in float32 only the rows they leave in "
                                         "doubt (same results; codes kept in RAM beside the vectors, rebuilt at "
                                         "open); None: it reads every float32 vector")

    def validate(self) -> None:
        if self.read_only and self.path is None:
            raise ConfigError("read_only=True needs path= (the collection to open)")
        check_lock_timeout(self)


class MemoryStorage(ram.RamWrites, JournaledStorage):
    """Columns and one vector block in RAM; every vector search is exact (brute force)."""

    name = "memory"
    Config = MemoryConfig
    named_vectors = True
    vector_kinds = frozenset({"sparse", "multi"})

    def __init__(self, schema, config: MemoryConfig) -> None:
        super().__init__(schema, config)
        self.store = ColumnStore(schema, self.metrics)
        self.lock = RWLock()
        self.text = TextIndex(schema, config.threads)
        self._init_writes()
        self.quantization = "none" if config.quantization is None else config.quantization
        self.codes: Optional[StoreCodes] = None  # the RaBitQ codes (engine/codescan.py), built after the files
        if config.path is not None:
            self._open_files(config.path, config.read_only, config.lock_timeout)
        if self.quantization != "none":
            try:
                codes = StoreCodes(self.store, self.quantization, config.threads)
                codes.rebuild()
            except BaseException:  # a refused open leaves the files unlocked, as _open_files does
                if self.journal is not None:
                    self.journal.close()
                    self.journal = None
                raise
            self.codes = codes

    # the writes of ram.RamWrites, and the codes' with them (the caller holds the write lock)
    def _apply_upsert(self, batch) -> None:
        slots = ram.upsert(self.store, self.text, batch)
        if self.codes is not None:
            self.codes.written(slots, self.store.dense)

    def _apply_delete(self, ids: list) -> int:
        if self.codes is None:
            return super()._apply_delete(ids)
        st = self.store
        slots = st.slots_of(ids)
        slots = np.unique(slots[slots >= 0])
        layout, live = st.compactions, st.live_bits().copy()
        count = super()._apply_delete(ids)
        # a compaction renumbered the rows: the codes move as the live rows of before did
        self.codes.deleted(slots, live if st.compactions != layout else None)
        return count

    def _apply_update(self, slots, values: dict) -> None:
        super()._apply_update(slots, values)
        if self.codes is not None:
            self.codes.written(slots, [name for name in values if name in self.store.dense])

    def _load_state(self, snapshot, ops: list, where: str) -> None:
        """The files' state, then the codes built again from the vectors (not written meanwhile)."""
        codes, self.codes = self.codes, None
        try:
            super()._load_state(snapshot, ops, where)
        finally:
            self.codes = codes
        if codes is not None:
            codes.rebuild()

    def _drop_index(self) -> None:
        self.codes = None

    def _vectors(self, queries: np.ndarray, limit: int, node: Optional[Node], exact: bool,
                 ef: Optional[int], field: Optional[str] = None) -> tuple:
        bits = self._prefilter_bits(node, True, field)
        if self.codes is not None:
            return self.codes.search(queries, limit, bits, field)
        return self.store.exact_search(queries, limit, bits, field)

    def _find_natively(self, query, k: int, ef: Optional[int], exact: bool) -> Optional[tuple]:
        # with codes, the general path: its scan reads them (_vectors)
        return None if self.codes is not None else super()._find_natively(query, k, ef, exact)

    def stats(self) -> dict:
        """Adds "fsyncs": fsyncs made by writes since the collection was opened (with `path=`),
        "quantization" ("none", "rabitq1" or "rabitq4") and, with codes, "codes" in "bytes" (the
        codes, their per-row factors and centroids)."""
        out = {**super().stats(), "fsyncs": self._fsyncs(), "quantization": self.quantization}
        codes = self.codes
        if codes is not None:
            with self.lock.read():
                out["bytes"]["codes"] = codes.nbytes
        return out
