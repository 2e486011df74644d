"""What a closed storage holds in place of its data: every use raises ClosedError.

close() drops a collection's RAM structures, so that the snapshot they map can be unmapped (and
its descriptor closed) at once instead of when the garbage collector runs; a late reader (a
Results fetching its documents after close(), a thread that got the storage before it) meets
this object and gets a typed error rather than an AttributeError or an empty answer.
"""
from __future__ import annotations

import gc
import logging
import mmap
from typing import Iterable

from hybridsearch.errors import ClosedError

log = logging.getLogger("hybridsearch")


class Released:
    """Stands for a structure that close() dropped; any attribute raises ClosedError."""

    def __init__(self, where: str) -> None:
        self._where = where

    def __getattr__(self, name: str):
        raise ClosedError(f"{self._where} is closed: its documents were released; open the collection "
                          "again to read them")


def unmap(mappings: Iterable[mmap.mmap], where: str) -> None:
    """Closes the mappings (each holds a descriptor of its file). A view still alive somewhere
    (a reference cycle) keeps one open: the cycle collector runs once, and a mapping that is
    still exported after it is left to the collector (logged)."""
    pending = []
    for m in mappings:
        try:
            m.close()
        except BufferError:
            pending.append(m)
    if not pending:
        return
    gc.collect()
    for m in pending:
        try:
            m.close()
        except BufferError:
            log.debug("%s: a mapped snapshot is still in use after close(); the collector unmaps it", where)
