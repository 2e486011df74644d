"""storage="memory": exact search in RAM over the native kernels; with `path=`, durable files
(the log and mapped snapshots of storages/local/journaled.py)."""
from __future__ import annotations

import dataclasses
from typing import Optional

import numpy as np

from hybridsearch.engine.columns import ColumnStore
from hybridsearch.engine.lexical import TextIndex
from hybridsearch.engine.rwlock import RWLock
from hybridsearch.errors import ConfigError
from hybridsearch.query.filters import Node
from hybridsearch.storages.config import (StorageConfig, boolean, check_lock_timeout, integer, number, option,
                                          path_or_none, StrPath)
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
        if config.path is not None:
            self._open_files(config.path, config.read_only, config.lock_timeout)

    def _vectors(self, queries: np.ndarray, limit: int, node: Optional[Node], exact: bool,
                 ef: Optional[int], field: Optional[str] = None) -> tuple:
        return self.store.exact_search(queries, limit, self._prefilter_bits(node, True, field), field)

    def stats(self) -> dict:
        """Adds "fsyncs": fsyncs made by writes since the collection was opened (with `path=`)."""
        return {**super().stats(), "fsyncs": self._fsyncs()}
