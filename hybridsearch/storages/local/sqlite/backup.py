"""Backup and restore of a sqlite collection: its whole database file, copied with SQLite's
online backup API.

The copy reads the database in one read transaction of a connection of its own: in WAL mode
(which the writer sets) that neither waits for the writer nor holds it up, so writers are never
held off, and the copy is the database as one commit left it. It is written under a temporary
name, switched to a self-contained file (rollback journal), checked (SQLite's integrity check,
the hybridsearch tables named in hs_meta), fsynced, then moved into place (engine/copydest.py):
dest either does not exist or holds the complete copy. Every table of the file is copied (a
file may hold several collections), each with its hs_meta row, so the copy opens with
storage="sqlite", path=dest and the same table.
"""
from __future__ import annotations

import json
import os
import sqlite3
import time
from urllib.parse import quote
from typing import Optional

from hybridsearch.engine.copydest import check_dest, discard, fsync_file, publish, temp_beside
from hybridsearch.errors import BackendError

META = "hs_meta"  # the table naming each collection's table and schema (storage.py writes it)


def fingerprint(schema) -> str:
    """The schema's fingerprint as hs_meta stores it."""
    return json.dumps(schema.fingerprint())


def _read_only(path: str, **kw) -> sqlite3.Connection:
    """A connection that cannot write the file (nor create it where it is missing)."""
    return sqlite3.connect(f"file:{quote(os.path.abspath(path))}?mode=ro", uri=True, **kw)


def _check(path: str, schema=None) -> dict:
    """SQLite's integrity check and the tables hs_meta names -> {table: rows}; BackendError if the
    file is damaged, holds no hybridsearch collection, or none of `schema`."""
    try:
        conn = _read_only(path)
    except sqlite3.Error as e:
        raise BackendError(f"{path}: cannot open the database: {e}") from None
    try:
        problems = [r[0] for r in conn.execute("PRAGMA integrity_check")]
        if problems != ["ok"]:
            raise BackendError(f"{path}: the database is damaged (SQLite's integrity check: {'; '.join(problems[:3])})")
        names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if META not in names:
            raise BackendError(f"{path}: not a hybridsearch database (no {META} table)")
        rows = conn.execute(f'SELECT name, fingerprint FROM "{META}"').fetchall()
        tables = {}
        for name, fp in rows:
            if name not in names:
                raise BackendError(f"{path}: {META} names table {name!r}, which is not in the file")
            tables[name] = (conn.execute(f'SELECT COUNT(*) FROM "{name}"').fetchone()[0], fp)
    except sqlite3.Error as e:
        raise BackendError(f"{path}: not a usable SQLite database: {e}") from None
    finally:
        conn.close()
    if schema is not None and fingerprint(schema) not in {fp for _, fp in tables.values()}:
        raise BackendError(f"{path}: no table of the file holds {schema.name}'s schema "
                           f"(tables: {', '.join(sorted(tables)) or 'none'})")
    return {name: n for name, (n, _) in tables.items()}


def copy_database(src: str, dest: str, what: str = "backup", schema=None) -> dict:
    """Copies the database file `src` to `dest` (checked by check_dest) -> {"bytes", "tables"}."""
    tmp = temp_beside(dest)
    try:
        source = _read_only(src, check_same_thread=False)
        try:
            copy = sqlite3.connect(tmp)
            try:
                source.backup(copy)  # all pages in one step: one read transaction, one state
                copy.execute("PRAGMA journal_mode=DELETE")  # one self-contained file, no -wal beside it
            finally:
                copy.close()
        finally:
            source.close()
        fsync_file(tmp)
        tables = _check(tmp, schema)
        size = os.path.getsize(tmp)
        publish(tmp, dest, what)
        return {"bytes": size, "tables": tables}
    except sqlite3.Error as e:
        raise BackendError(f"{src}: the {what} failed ({type(e).__name__}: {e}); nothing was written at {dest}") from None
    except OSError as e:
        raise BackendError(f"{dest}: the {what} failed: {e}; nothing was written there") from None
    finally:
        discard(tmp)


def backup(src: str, table: str, dest) -> dict:
    """SqliteStorage.backup: the database of the collection to `dest` -> its report."""
    dest = check_dest(dest, folder_ok=False)
    if os.path.abspath(dest) == os.path.abspath(src):
        raise BackendError(f"{dest} is the collection's own database")
    started = time.perf_counter()
    done = copy_database(src, dest)
    # no lock of ours is taken and SQLite's WAL lets the writer commit during the copy: writers
    # are not held off (benchmarks/bench_backup.py measures their latency meanwhile)
    return {"documents": done["tables"].get(table, 0), "bytes": done["bytes"],
            "seconds": time.perf_counter() - started, "stall_seconds": 0.0, "path": dest}


def restore(src: str, dest, schema: Optional[object] = None) -> dict:
    """hs.restore of a sqlite backup: `src` checked, copied to `dest` and checked again there."""
    started = time.perf_counter()
    dest = check_dest(dest, "restore", folder_ok=False)
    _check(src, schema)
    done = copy_database(src, dest, "restore", schema)
    return {"bytes": done["bytes"], "tables": done["tables"], "seconds": time.perf_counter() - started}
