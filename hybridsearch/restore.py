"""hs.restore: copies a backup (DocumentArray.backup) to a new place, checked before it lands."""
from __future__ import annotations

import os
from typing import Any, Optional

from hybridsearch.errors import BackendError, ConfigError


def restore(src: Any, dest: Any, schema: Optional[type] = None) -> dict:
    """Copies the backup `src` to `dest` (a path that does not exist yet, or an empty folder: never
    overwritten, ConfigError otherwise) and returns {"bytes", "seconds", ...}.

    A directory (a memory or hnsw backup) is copied file by file and the copy checked before it
    is renamed into place: MANIFEST, each file's header and every record's checksum; a file (a
    sqlite backup) is copied with SQLite's backup API and checked with its integrity check and
    the hybridsearch table list (`hs_meta`). With `schema` (the Document class), the copy must
    also hold that schema's collection: every logged document is decoded against it (a
    directory), or one of the tables was written for it (sqlite). A backup that does not check
    out raises BackendError naming the file, and nothing is written at dest. Either way the
    result opens as `DocumentArray(schema, storage=..., path=dest)`, as the backup itself does.
    """
    from hybridsearch.document import schema_of

    if not isinstance(src, (str, os.PathLike)):
        raise ConfigError(f"restore: src must be a path (str or os.PathLike), got {type(src).__name__}")
    checked = schema_of(schema) if schema is not None else None
    src = os.fspath(src)
    if os.path.isdir(src):
        from hybridsearch.engine.persist import backup
        return backup.restore(src, dest, checked)
    if os.path.isfile(src):
        from hybridsearch.embedding.identity import copy_record
        from hybridsearch.storages.local.sqlite import backup as sqlite_backup
        report = sqlite_backup.restore(src, dest, checked)
        copy_record(src, os.path.abspath(os.fspath(dest)))
        return report
    raise BackendError(f"restore: {src} does not exist (neither a backup directory nor a SQLite file)")
