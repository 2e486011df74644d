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

import logging
import mmap
import os
import tempfile
from typing import Optional

import numpy as np

from hybridsearch.errors import BackendError

log = logging.getLogger("hybridsearch")


class VectorFile:
    """The file behind one dense field's block: `allocate` gives a (cap, dim) float32 array in it."""

    def __init__(self, directory: Optional[str], name: str) -> None:
        self.directory, self.name = directory, name
        self.where = directory  # where the file went (the system's temp dir after a fallback)
        self._file = None
        self._maps: list = []  # every mapping made, the last one the block's: close() unmaps them
        self._block: Optional[np.ndarray] = None

    def holds(self, block: np.ndarray) -> bool:
        """Whether `block` is the one this file gave last (writes into it reach the file)."""
        return self._block is not None and block is self._block

    def _open(self):
        if self._file is None:
            try:  # an unlinked file (O_TMPFILE where the system has it): nothing to clean after a crash
                self._file = tempfile.TemporaryFile(dir=self.directory, prefix=".vectors-")
            except OSError as e:  # e.g. a reader without write access to the directory
                self.where = tempfile.gettempdir()
                log.warning("vectors_on_disk: cannot create the vector file of %r in %s (%s); it goes to %s",
                            self.name, self.directory, e.strerror or e, self.where)
                try:
                    self._file = tempfile.TemporaryFile(prefix="hybridsearch-vectors-")
                except OSError as e2:
                    raise BackendError(f"cannot create the on-disk vector block of {self.name!r} in "
                                       f"{self.directory} nor in {self.where}: {e2.strerror or e2}") from None
        return self._file

    def allocate(self, cap: int, dim: int, old: np.ndarray, n: int) -> np.ndarray:
        """A (cap, dim) block in the file holding `old[:n]`. Growing the block this file gave last
        keeps its rows where they are (the file is extended, no copy). BackendError when the disk
        cannot hold it (nothing changed then)."""
        f = self._open()
        size = max(cap * dim * 4, mmap.PAGESIZE)
        same = self.holds(old)
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
                               f"in {self.where}: {e.strerror or e}") from None
        if hasattr(mmap, "MADV_RANDOM"):  # rescoring reads scattered rows: no read-ahead
            m.madvise(mmap.MADV_RANDOM)
        block = np.frombuffer(m, dtype=np.float32, count=cap * dim).reshape(cap, dim)
        if not same and n:
            block[:n] = old[:n]
        self._maps = [x for x in self._maps if not _try_close(x)] + [m]  # earlier ones whose views are gone
        self._block = block
        self.release()
        return block

    def release(self) -> None:
        """Drops the block's pages from this process (the page cache keeps them, written back
        by the kernel): what the next reads touch comes back, nothing else stays resident. Every
        mapping still open, not only the block's: an earlier one that a view still holds kept the
        pages written before a growth, and the same file pages then counted twice in RSS."""
        if hasattr(mmap, "MADV_DONTNEED"):
            for m in self._maps:
                m.madvise(mmap.MADV_DONTNEED)

    def close(self) -> None:
        """Unmaps the block (its views must be gone: the store dropped them) and closes the file,
        which the system then deletes; a mapping some view still holds goes with that view."""
        self._block = None
        for m in self._maps:
            _try_close(m)
        if self._file is not None:
            self._file.close()
        self._file, self._maps = None, []


def _try_close(m: mmap.mmap) -> bool:
    """Closes a mapping no array views any more; False (left to its last view) otherwise."""
    try:
        m.close()
        return True
    except BufferError:
        return False
