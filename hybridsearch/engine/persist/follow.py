"""A read-only Journal following its writer (API.md section 2, readers that follow).

The log only grows by appends, and MANIFEST is replaced (by rename) only to name a new
generation, after which the old log is unlinked. So a read-only opener that remembers the
offset it has read to, the log's (size, mtime) at that look and MANIFEST's identity knows, from
two stats, whether anything happened since: the log grew or was rewritten past a torn tail (its
size or mtime moved), or a snapshot replaced it (MANIFEST's identity changed, or the log it holds
open has no name left). The new records are read from the remembered offset; a record still
being written (short, or failing its checksum at the end) is left for the next look.

The offset moves only once the caller has applied the records (`advance`): until then the log
still looks grown to every other look, which then waits for that caller instead of reading the
state before the records.
"""
from __future__ import annotations

import os
from typing import Optional

from hybridsearch.engine.persist import records as R
from hybridsearch.engine.persist.codec import Corrupt


class Following:
    """The Journal's methods for a read-only opener that follows the writer."""

    def _manifest_identity(self) -> Optional[tuple]:
        try:
            st = os.stat(self._file(R.MANIFEST))
        except OSError:
            return None
        return st.st_ino, st.st_mtime_ns, st.st_size

    def changed(self) -> bool:
        """Read-only: whether the writer logged a write or named a new generation since the last
        look (two stats, no read). A closed journal (a refresh swapped in a new one) has changed."""
        fd = self._fd
        if fd is None:
            return self._closed
        try:
            st = os.fstat(fd)
            return ((st.st_size, st.st_mtime_ns) != self._seen or st.st_nlink == 0
                    or self._manifest_identity() != self._manifest_id)
        except OSError:
            return True

    def read_new(self) -> Optional[tuple]:
        """Read-only: (the operations the writer logged since the last look, in order, the mark to
        `advance` to once they are applied), or None when the generation changed (open the files
        again). A damaged record followed by more raises BackendError, as on open."""
        with self._mutex:
            self._check_open()
            if os.fstat(self._fd).st_nlink == 0 or self._manifest_identity() != self._manifest_id:
                return None
            name = R.log_name(self.generation)
            records, end = self._scan_log(self._fd, name, self._end)
            ops = []
            for kind, payload, pos in records:
                try:
                    ops.append(self._decode_op(kind, payload))
                except Corrupt as e:
                    raise self._error(name, f"record at offset {pos}: {e}") from None
            return ops, (end, self._scan_seen)

    def advance(self, mark: tuple) -> None:
        """The records read_new gave are applied: the next look starts after them."""
        with self._mutex:
            self._end, self._seen = mark
