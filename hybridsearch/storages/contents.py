"""What a collection held when it was last closed, checked when it is opened again.

The libraries we embed (qdrant-edge, AnnLite's RocksDB) can read damaged files as a smaller or
different collection without an error. So a clean close records, beside their files, in
`hybridsearch-contents.json`, how many documents the collection holds and a digest of their
ids in insertion order; the next open compares and raises BackendError naming the folder and
the file when they differ. The first write after an open removes the record (durably) before
it changes anything, so a crash never leaves a record that no longer describes the files: a
collection that was not closed cleanly is opened unchecked (its writes are all-or-nothing by
other means). Cost: reading every id once at open and at close.
"""
from __future__ import annotations

import hashlib
import json
import os
from typing import Callable, Iterable

from hybridsearch.engine.files import fsync_dir, read_if_present, write_durably
from hybridsearch.errors import BackendError

NAME = "hybridsearch-contents.json"


def digest(ids: Iterable[str]) -> str:
    """sha256 of the ids in order (each UTF-8, NUL-terminated)."""
    h = hashlib.sha256()
    for i in ids:
        h.update(i.encode("utf-8", "surrogatepass") + b"\0")
    return h.hexdigest()


def record(folder: str, ids: list) -> None:
    """Records the ids (in insertion order) a collection holds as it is closed."""
    write_durably(os.path.join(folder, NAME),
                  json.dumps({"documents": len(ids), "ids_sha256": digest(ids)}).encode("utf-8"))


def verify(folder: str, count: int, ids: Callable[[], list]) -> bool:
    """Compares what the collection reads now (`count`, and `ids()` in insertion order) with the
    record of its last close -> whether there was a record. BackendError when they differ."""
    target = os.path.join(folder, NAME)
    raw = read_if_present(target, "the record of the last close")
    if raw is None:
        return False
    try:
        stored = json.loads(raw.decode("utf-8"))
        n, want = stored["documents"], stored["ids_sha256"]
        if isinstance(n, bool) or not isinstance(n, int) or not isinstance(want, str):
            raise ValueError("not a count and a digest")
    except (ValueError, KeyError, TypeError) as e:  # UnicodeDecodeError and JSON errors are ValueErrors
        raise BackendError(f"{target} is damaged ({e}): what the collection in {folder} holds cannot be "
                           "checked") from None
    if count != n:
        raise BackendError(f"the collection in {folder} reads {count} documents, but it held {n} when it was last "
                           f"closed ({target}): its files are damaged")
    read = ids()
    if len(read) != n or digest(read) != want:
        raise BackendError(f"the collection in {folder} does not read back the documents it held when it was "
                           f"last closed ({target}: {n} documents; {len(read)} ids read, other ones): its files "
                           "are damaged")
    return True


def forget(folder: str) -> None:
    """Removes the record before the first write after an open (durably: see the module docstring)."""
    target = os.path.join(folder, NAME)
    if os.path.exists(target):
        os.remove(target)
        fsync_dir(folder)
