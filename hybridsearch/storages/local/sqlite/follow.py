"""How a read_only=True sqlite opener follows the writer (issue 32 item 1, API.md section 2).

The writer's side is a change table beside each collection table, `<table>_hs_changes`
(ver INTEGER PRIMARY KEY, id, op): every write adds one row per row it inserts ('i'), updates
('u') or deletes ('d'), in the transaction that makes the write. The writer creates the table on
open when it is missing (a file written before change tracking gets it then), and prunes the
oldest rows once the table holds twice what it keeps: the newest max(KEEP_MIN, live documents)
rows. Versions only grow: the newest rows are never pruned, so the next rowid is always above
every version a reader has seen. (Triggers would also record other programs' writes, but an
AFTER INSERT trigger made a 100k-row extend several times slower on a table with indexes:
docs/storages/sqlite.md. A write made by another program's SQL is therefore not followed: a
reader sees it when it opens.)

The reader's side keeps its connection open. Before each read (follow=True) it asks SQLite
for `PRAGMA data_version`, which changes when another connection commits (a few µs); when it
changed, one read transaction takes the change rows after the last version the reader applied
and the current rows of those ids, which are then applied to the RAM mirror under the
exclusive lock: a find sees the state before them or after them, both committed states. Ids
that were inserted or deleted meanwhile leave the mirror first, so that a row inserted again
takes its new place in insertion order. A reader that fell behind the pruning (its last
version's row is gone), or whose file has no change table yet, reads the whole table in one
read transaction into a fresh mirror, swapped in under the exclusive lock.
"""
from __future__ import annotations

import sqlite3
import threading
from typing import Optional

from hybridsearch.batch import build_batch
from hybridsearch.engine.columns import ColumnStore
from hybridsearch.engine.lexical import TextIndex
from hybridsearch.errors import BackendError, ConfigError
from hybridsearch.storages.local import ram
from hybridsearch.storages.local.sqlite.backup import META

# the change rows a writer keeps at least (more when the collection holds more documents, so
# that a reader one whole rewrite behind still catches up by changes)
KEEP_MIN = 10_000


def changes_table(table: str) -> str:
    """The change table of a collection table."""
    return f"{table}_hs_changes"


def data_version(conn) -> int:
    """SQLite's counter of commits made by other connections to the file."""
    return conn.execute("PRAGMA data_version").fetchone()[0]


def _has_table(conn, name: str) -> bool:
    return conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (name,)).fetchone() is not None


class ChangeTracker:
    """The writer's side: the change table exists (created on open when missing); each write
    records its changed ids and prunes the table inside its transaction."""

    def __init__(self, conn, table: str) -> None:
        c = changes_table(table)
        with conn:
            conn.execute("BEGIN IMMEDIATE")
            conn.execute(f'CREATE TABLE IF NOT EXISTS "{c}" (ver INTEGER PRIMARY KEY, id TEXT NOT NULL, '
                         'op TEXT NOT NULL)')
            self.rows = conn.execute(f'SELECT COUNT(*) FROM "{c}"').fetchone()[0]
        self.table = c
        # bound one by one: an id is any string, and SQLite's JSON functions cut one at a NUL
        self._insert = f'INSERT INTO "{c}" (id, op) VALUES (?, ?)'

    def wrote(self, conn, changes: list, live: int) -> None:
        """Inside a write's transaction: its changes, (op, ids) pairs, recorded, and the oldest
        change rows pruned once there are twice as many as kept (`rows` is an estimate: a rolled
        back write only makes a prune come early or late)."""
        rows = [(id_, op) for op, ids in changes for id_ in ids]
        conn.executemany(self._insert, rows)
        n = len(rows)
        self.rows += n
        keep = max(KEEP_MIN, live + n)
        if self.rows > 2 * keep:
            conn.execute(f'DELETE FROM "{self.table}" WHERE ver <= (SELECT MAX(ver) FROM "{self.table}") - ?',
                         (keep,))
            self.rows = keep


class Follower:
    """The reader's side: the last change version applied to the mirror, and the data_version
    seen when it was read. `storage` is the read-only SqliteStorage; its connection stays open."""

    def __init__(self, storage, seen: int, version: Optional[int]) -> None:
        self.storage = storage
        self.fingerprint = storage._fingerprint()  # hs_meta's record of the reader's fields
        self.seen = seen  # data_version before the read transaction of the state applied
        self.version = version  # None: no change table when last read (any commit reloads)
        self.mutex = threading.Lock()  # one refresh at a time, and the connection used by one thread
        self.refreshes = self.changes_applied = self.reloads = 0

    @staticmethod
    def last_version(conn, table: str) -> Optional[int]:
        """The newest change version (0 for none), None when the file has no change table; the
        caller holds the read transaction of the rows it loaded."""
        c = changes_table(table)
        if not _has_table(conn, c):
            return None
        return conn.execute(f'SELECT MAX(ver) FROM "{c}"').fetchone()[0] or 0

    def catch_up(self) -> None:
        with self.mutex:
            conn = self.storage.conn
            try:
                if conn is not None and data_version(conn) != self.seen:
                    self._refresh(conn)
            except sqlite3.Error as e:
                raise self._failed(e) from None

    def refresh(self) -> int:
        with self.mutex:
            conn = self.storage.conn
            try:
                if conn is None or data_version(conn) == self.seen:  # no other connection committed
                    return 0
                return self._refresh(conn)
            except sqlite3.Error as e:
                raise self._failed(e) from None

    def _failed(self, e: Exception) -> BackendError:
        return BackendError(f"{self.storage.path}: could not read the writer's changes of table "
                            f"{self.storage.table_name!r} ({type(e).__name__}: {e}); this reader's view is "
                            "unchanged")

    def stats(self) -> dict:
        return {"refreshes": self.refreshes, "changes_applied": self.changes_applied, "reloads": self.reloads}

    # ------------------------------------------------------------ internals
    def _refresh(self, conn) -> int:
        st = self.storage
        seen = data_version(conn)  # before the transaction: a commit after it is found next time
        conn.execute("BEGIN")  # outside the try: a failed BEGIN leaves no transaction to end
        try:
            self._check_fields(conn)
            if self._behind(conn):
                version = self.last_version(conn, st.table_name)
                store, text = self._fresh_mirror(st.db[st.table_name].rows_where(order_by="_seq"))
                ids = docs = None
            else:
                version, ids, fresh, docs = self._changes(conn)
        finally:
            conn.execute("COMMIT")
        if ids is None:
            with st.lock.write():
                st.store, st.text = store, text
            self.reloads += 1
            applied = 1
        else:
            if ids:
                self._apply(ids, fresh, docs)
            applied = len(ids)
        if applied:
            self.refreshes += 1
            self.changes_applied += applied if ids is not None else 0
        self.seen, self.version = seen, version
        return applied

    def _check_fields(self, conn) -> None:
        """ConfigError when a writer changed the table's fields (schema evolution rewrites the
        columns and every row's checksum): rows of another Document class cannot be followed."""
        st = self.storage
        row = conn.execute(f'SELECT fingerprint FROM "{META}" WHERE name = ?', (st.table_name,)).fetchone()
        if row is None or row[0] != self.fingerprint:
            raise ConfigError(f"{st.path}: a writer changed the fields of table {st.table_name!r} to another "
                              f"Document class than this reader's {st.schema.name}; a reader cannot follow that "
                              "change: open a new read-only DocumentArray with the writer's Document class "
                              "(this reader's view stays as it was)")

    def _behind(self, conn) -> bool:
        """Whether the changes since the last version applied are not all in the change table:
        no table (then or now), or pruned past that version. The caller holds a read transaction."""
        v = self.version
        c = changes_table(self.storage.table_name)
        if v is None or not _has_table(conn, c):
            return True
        if v == 0:  # versions start at 1: a first row above it was pruned
            first = conn.execute(f'SELECT MIN(ver) FROM "{c}"').fetchone()[0]
            return first is not None and first > 1
        return conn.execute(f'SELECT 1 FROM "{c}" WHERE ver = ?', (v,)).fetchone() is None

    def _changes(self, conn) -> tuple:
        """(newest version, changed ids in change order, the ids inserted or deleted meanwhile,
        their current documents in insertion order); the caller holds a read transaction."""
        st = self.storage
        c = changes_table(st.table_name)
        rows = conn.execute(f'SELECT ver, id, op FROM "{c}" WHERE ver > ? ORDER BY ver', (self.version,)).fetchall()
        if not rows:
            return self.version, [], set(), []
        ids = list(dict.fromkeys(r[1] for r in rows))
        fresh = {r[1] for r in rows if r[2] != "u"}
        # the ids from the change table itself (not sent back as parameters: any string is an id)
        current = st.db[st.table_name].rows_where(f'id IN (SELECT id FROM "{c}" WHERE ver > ?)', [self.version],
                                                  order_by="_seq")
        return rows[-1][0], ids, fresh, st.read_docs(current)

    def _apply(self, ids: list, fresh: set, docs: list) -> None:
        """The changed ids' current documents put in the mirror under the exclusive lock."""
        st = self.storage
        present = {d.id for d in docs}
        batch = build_batch(st.schema, docs) if docs else None  # built before readers wait
        with st.lock.write():
            row_of = st.store.row_of
            gone = [i for i in ids if i in row_of and (i in fresh or i not in present)]
            if gone:
                st._apply_delete(gone)
            if batch is not None:
                st._apply_upsert(batch)

    def _fresh_mirror(self, rows) -> tuple:
        """A new ColumnStore and TextIndex holding these rows (the whole table)."""
        st = self.storage
        store, text = ColumnStore(st.schema, st.metrics), TextIndex(st.schema)
        docs = st.read_docs(rows)
        if docs:
            ram.upsert(store, text, build_batch(st.schema, docs))
        return store, text
