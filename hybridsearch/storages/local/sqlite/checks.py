"""How the sqlite storage tells a damaged or vanished file from a new one (never reading less).

SQLite itself keeps no checksum of page contents and happily creates an empty database where
a file was deleted, so three checks of our own sit around it:

- a marker: once the table exists, the writer's lock file beside the database says so; a
  database file or table that is gone while its marker remains was deleted, moved or truncated,
  and opening it as an empty collection would silently lose every document;
- `PRAGMA integrity_check` of the table and its indexes on open: the b-tree structure and every
  index entry against its row, so a lost or misplaced row is found (~3 ms per 1,000 rows);
- a CRC-32 per row (`_crc`) over the values it holds: a flipped bit inside a text, a vector or
  the JSON of the unindexed fields passes SQLite's checks and would read as different data.
"""
from __future__ import annotations

import os
import zlib
from typing import Optional

from hybridsearch.document import Kind
from hybridsearch.errors import BackendError

CRC_COLUMN = "_crc"
_MARKER = b"hybridsearch sqlite: this table was created; its database must exist\n"


def has_marker(lock_fd: Optional[int]) -> bool:
    """Whether the lock file (held open by the writer) records that the table was created."""
    if lock_fd is None:  # no locks on this platform, hence no marker either
        return False
    return os.pread(lock_fd, len(_MARKER), 0) == _MARKER


def write_marker(lock_fd: Optional[int], lock_path: str) -> None:
    """Records in the lock file that the table exists (durably: a crash must not lose it)."""
    if lock_fd is None or has_marker(lock_fd):
        return
    try:
        os.pwrite(lock_fd, _MARKER, 0)
        os.fsync(lock_fd)
    except OSError as e:
        raise BackendError(f"{lock_path}: cannot write the marker of the collection: {e}") from None


def vanished(path: str, table: str, lock_path: str, what: str) -> BackendError:
    """The error for a database file or table that the marker says existed."""
    return BackendError(f"{path}: {what}, but {lock_path} records that table {table!r} was created there: "
                        "the database was deleted, moved, replaced or truncated. Restore the file, or delete "
                        f"{lock_path} to start an empty collection at this path")


def check_integrity(conn, path: str, table: str) -> None:
    """PRAGMA integrity_check of the table and its indexes; BackendError naming the file if damaged."""
    problems = [r[0] for r in conn.execute(f'PRAGMA integrity_check("{table}")')]
    if problems != ["ok"]:
        raise BackendError(f"{path}: the database is damaged (SQLite's integrity check of table {table!r}: "
                           f"{'; '.join(problems[:3])})")


def row_checksum(kinds: list):
    """-> f(*values): the CRC-32 of one row's values, given in the order of `kinds`.

    The values are taken as SQLite hands them back (a REAL column returns a float even for a
    value stored as an integer, and no negative zero), so a checksum computed from the values
    written equals the one computed from the values read."""
    floats = [i for i, k in enumerate(kinds) if k is Kind.FLOAT]
    blobs = [i for i, k in enumerate(kinds) if k in (Kind.VECTOR, Kind.SPARSE, Kind.MULTI)]

    def crc(*values) -> int:
        plain = list(values)
        for i in floats:
            if plain[i] is not None:
                plain[i] = float(plain[i]) + 0.0  # + 0.0: -0.0 is stored, and read, as 0.0
        for i in blobs:
            if isinstance(plain[i], bytes):
                plain[i] = len(plain[i])  # the bytes themselves go to the CRC below, not through repr
        h = zlib.crc32(repr(plain).encode("utf-8", "surrogatepass"))
        for i in blobs:
            if isinstance(values[i], bytes):
                h = zlib.crc32(values[i], h)
        return h

    return crc
