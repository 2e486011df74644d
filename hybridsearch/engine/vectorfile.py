"""VectorFile: a dense field's float32 block kept in a file instead of anonymous memory.

With `vectors_on_disk=True` (storage="hnsw" with path=) the walk runs on the graph's codes and
reads a float32 row only to rescore a final candidate, so the block need not stay resident. It
lives in a shared mapping of an unlinked scratch file in the collection's directory: the page
cache holds what was read or written lately, the kernel writes it back and evicts it under
pressure, and `release()` drops the pages from this process after each write, so the process's
resident memory is the codes, the graph and the columns.

The scratch file is not part of the collection's durable state (the journal and snapshots are,
unchanged): it has no name (unlinked at creation, so a crash leaves nothing behind) and is
rebuilt from the snapshot's block on the first growth after an open. The disk needs room for it
beside the snapshot: one more copy of the float32 block.
"""
from __future__ import annotations

import mmap
import os
import tempfile
from typing import Optional

import numpy as np

from hybridsearch.errors import BackendError


class VectorFile:
    """The file behind one dense field's block: `allocate` gives a (cap, dim) float32 array in it."""

    def __init__(self, directory: Optional[str], name: str) -> None:
        self.directory, self.name = directory, name
        self._file = None
        self._map: Optional[mmap.mmap] = None
        self._block: Optional[np.ndarray] = None

    def _open(self):
        if self._file is None:
            try:  # an unlinked file (O_TMPFILE where the system has it): nothing to clean after a crash
                self._file = tempfile.TemporaryFile(dir=self.directory, prefix=".vectors-")
            except OSError:  # a reader without write access to the directory: the system's temp dir
                self._file = tempfile.TemporaryFile(prefix="hybridsearch-vectors-")
        return self._file

    def allocate(self, cap: int, dim: int, old: np.ndarray, n: int) -> np.ndarray:
        """A (cap, dim) block in the file holding `old[:n]`; rows past n are zero. Growing the
        block this file gave last keeps its rows where they are (the file is extended, no copy)."""
        f = self._open()
        size = max(cap * dim * 4, mmap.PAGESIZE)
        same = self._block is not None and old is self._block
        try:
            # blocks reserved now: a write into a mapped hole of a full disk would be SIGBUS
            # (macOS has no posix_fallocate: the file is only extended there)
            if hasattr(os, "posix_fallocate"):
                os.posix_fallocate(f.fileno(), 0, size)
            else:
                os.ftruncate(f.fileno(), size)
            m = mmap.mmap(f.fileno(), size, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ | mmap.PROT_WRITE)
        except OSError as e:
            raise BackendError(f"cannot grow the on-disk vector block of {self.name!r} to {size:,} bytes "
                               f"in {self.directory or tempfile.gettempdir()}: {e.strerror or e}") from None
        if hasattr(mmap, "MADV_RANDOM"):  # rescoring reads scattered rows: no read-ahead
            m.madvise(mmap.MADV_RANDOM)
        block = np.frombuffer(m, dtype=np.float32, count=cap * dim).reshape(cap, dim)
        if not same and n:
            block[:n] = old[:n]
        # the previous mapping closes when its last view goes (a reader may still hold one)
        self._map, self._block = m, block
        self.release()
        return block

    def release(self) -> None:
        """Drops the block's pages from this process (the page cache keeps them, written back
        by the kernel): what the next reads touch comes back, nothing else stays resident."""
        if self._map is not None and hasattr(mmap, "MADV_DONTNEED"):
            self._map.madvise(mmap.MADV_DONTNEED)

    def close(self) -> None:
        """Forgets the file (it is deleted when the last mapping of it goes)."""
        if self._file is not None:
            self._file.close()
        self._file = self._map = self._block = None
