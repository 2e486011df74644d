"""storage="sqlite": one real SQLite file, a table per collection, mirrored in RAM for search.

The file is the truth: one row per document (a column per field, vectors as
float32 BLOBs, fields that are not columns as JSON), WAL journal, one
transaction per batch. On open the rows are loaded into the same columns,
vector block and inverted indexes the memory storage uses (storages/local/ram.py keeps them in
step for both), and every write goes to the file (committed) before it changes them, so vector
and text search run on the core kernels while filter-only queries are answered by SQL.

A `read_only=True` opener loads the table in one read transaction and then answers everything,
filter-only finds included, from that RAM mirror; it keeps its connection to follow the writer
(follow.py): the changes the writer committed since are applied to the mirror before a read
(follow=True) or by refresh(), each read seeing one committed state. Files that are missing or damaged raise
BackendError on open (checks.py): the writer's marker, SQLite's integrity check, a CRC per row.

A filtered vector, text or hybrid search is pre-filtered either by the bitset
the C filter kernel computes over the in-RAM columns (`prefilter="columns"`,
the default) or by the ids the SQL `WHERE` returns (`prefilter="sql"`). Both
give the same set (tested); the columns are much faster because they avoid
turning every matching id back into a slot (benchmarks/bench_sqlite.py).
"""
from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import operator
import os
import sqlite3
import threading
import time
from typing import Optional

import numpy as np
import sqlite_utils

from hybridsearch.batch import build_batch
from hybridsearch.document import Kind
from hybridsearch.engine.columns import ColumnStore
from hybridsearch.engine.files import lock_exclusive, unlock
from hybridsearch.engine.lexical import TextIndex
from hybridsearch.engine.rwlock import RWLock
from hybridsearch.errors import BackendError, ConfigError
from hybridsearch.query.filters import Node
from hybridsearch.storages.columnar import ColumnarStorage
from hybridsearch.storages.config import (StorageConfig, boolean, check_lock_timeout, number, one_of, option,
                                          path_or_none, StrPath)
from hybridsearch.storages.local import ram
from hybridsearch.storages.local.sqlite import backup, checks, evolve
from hybridsearch.storages.local.sqlite.backup import META as _META, fingerprint
from hybridsearch.storages.local.sqlite.follow import ChangeTracker, Follower, data_version
from hybridsearch.storages.local.sqlite.sql import to_sql

_SQL_TYPES = {Kind.ID: str, Kind.TEXT: str, Kind.KEYWORD: str, Kind.INT: int, Kind.BOOL: int,
              Kind.FLOAT: float, Kind.VECTOR: bytes, Kind.SPARSE: bytes, Kind.MULTI: bytes}

log = logging.getLogger("hybridsearch")


def sparse_blob(value: dict) -> bytes:
    """A sparse value as a blob: its keys (int32) then its weights (float32), little-endian."""
    return (np.fromiter(value, dtype="<i4", count=len(value)).tobytes()
            + np.fromiter(value.values(), dtype="<f4", count=len(value)).tobytes())


def sparse_of_blob(blob: bytes, path: str, id_: str) -> tuple:
    """sparse_blob's (indices, values), for the schema's validation to check."""
    if len(blob) % 8:
        raise BackendError(f"{path}: the sparse vector of {id_!r} is not pairs of int32 keys and float32 weights")
    n = len(blob) // 8
    return np.frombuffer(blob, dtype="<i4", count=n).astype(np.int64), np.frombuffer(blob, dtype="<f4", offset=4 * n)


def _identifier(v):
    if not isinstance(v, str) or not v.isidentifier():
        raise ValueError("an identifier (letters, digits, _)")
    return v


@dataclasses.dataclass(frozen=True)
class SqliteConfig(StorageConfig):
    """Options of storage="sqlite"."""

    path: Optional[StrPath] = option(None, path_or_none, "the database file (required)")
    table: str = option("documents", _identifier, "the table of this collection")
    prefilter: str = option("columns", one_of("columns", "sql"),
                            "who evaluates filters: the RAM columns, or SQLite (then the RAM columns if SQL fails)")
    read_only: bool = option(False, boolean, "open without the writer's lock; writes refused")
    follow: bool = option(True, boolean, "read_only: apply the writer's new writes before each read; False keeps "
                                         "the view of the open until refresh()")
    lock_timeout: float = option(0, number(0, 86400), "seconds a writer waits for another writer's lock "
                                                      "before BackendError; 0 refuses at once")

    def validate(self) -> None:
        if self.path is None:
            raise ConfigError("storage 'sqlite' needs path= (the database file)")
        check_lock_timeout(self)


class SqliteStorage(ram.RamWrites, ColumnarStorage):
    """A durable SQLite table, mirrored in RAM columns (as the memory storage keeps them) for search."""

    name = "sqlite"
    Config = SqliteConfig
    named_vectors = True
    vector_kinds = frozenset({"sparse", "multi"})

    def __init__(self, schema, config: SqliteConfig) -> None:
        super().__init__(schema, config)
        self.store = ColumnStore(schema, self.metrics)
        self.lock = RWLock()
        self.text = TextIndex(schema)  # its text fields indexed one per core
        self.path = config.path
        self.table_name = config.table
        self.prefilter = config.prefilter
        self.columns = [s for s in schema.fields.values() if s.kind in _SQL_TYPES and s.kind is not Kind.ID]
        self.extra = [s.name for s in schema.fields.values() if s.kind is Kind.OTHER]
        # the values each row's checksum covers, in this order; _seq is covered by its index
        self.crc_names = ["id"] + [s.name for s in self.columns] + (["_extra"] if self.extra else [])
        self._crc = checks.row_checksum([Kind.ID] + [s.kind for s in self.columns]
                                        + ([Kind.OTHER] if self.extra else []))
        get = operator.itemgetter(*self.crc_names)  # a row dict -> those values
        self._crc_values = get if len(self.crc_names) > 1 else (lambda row: (get(row),))  # one: not a tuple
        self.conn = None
        self.schema_history: list = []  # the schema versions hs_meta records (evolve.py)
        self.changes = None  # the writer's change tracking (follow.py)
        self.follower = None  # a read-only opener's following of the writer (follow.py)
        # SQL WHERE queries run for filters, for stats(); readers share the lock, so it has its own
        self.sql_filter_queries = 0
        self.write_transactions = 0  # committed by this handle (the writes hold the write lock)
        self._count_lock = threading.Lock()
        # one writer per table: a second opener (here or in another process) would keep a RAM
        # mirror of its own and the two would drift apart. The lock is a file of its own, as
        # SQLite's POSIX locks on the database are dropped by closing any descriptor of it.
        self.read_only = config.read_only
        self._lock_fd = None
        self._lock_path = f"{self.path}-{self.table_name}.hslock"
        if self.read_only:
            if not os.path.isfile(self.path):
                raise BackendError(f"{self.path}: no database to open read-only")
        else:
            # before the file is read: a writer that waited reads what the previous one committed
            self._lock_fd = lock_exclusive(self._lock_path, f"table {self.table_name!r} of {self.path}",
                                           config.lock_timeout)
        started = time.perf_counter()
        try:
            if checks.has_marker(self._lock_fd) and not os.path.isfile(self.path):
                raise checks.vanished(self.path, self.table_name, self._lock_path, "the database file is gone")
            self.conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
            self.conn.create_function("hs_crc", len(self.crc_names), self._crc, deterministic=True)
            if not self.read_only:
                self.conn.execute("PRAGMA journal_mode=WAL")
                self.conn.execute("PRAGMA synchronous=NORMAL")
            self.db = sqlite_utils.Database(self.conn)
            self._create_or_check()
            if not self.read_only:
                self.changes = ChangeTracker(self.conn, self.table_name)
            # a commit after this is seen by the first catch_up (found before the transaction)
            seen = data_version(self.conn) if self.read_only else None
            # one read transaction: the check and the rows are one state of the file, even
            # while a writer commits beside a read-only opener
            self.conn.execute("BEGIN")
            checks.check_integrity(self.conn, self.path, self.table_name)
            self._load()
            version = Follower.last_version(self.conn, self.table_name) if self.read_only else None
            self.conn.execute("COMMIT")
            if self.read_only:  # every read is answered by the mirror; the file only tells what changed
                self.follower = Follower(self, seen, version)
            log.info("sqlite storage opened table %r of %s%s: %d documents loaded in %.3f s", self.table_name,
                     self.path, " read-only" if self.read_only else "", self.store.n_live,
                     time.perf_counter() - started)
        except BaseException as e:
            self.close()
            if isinstance(e, sqlite3.Error):
                raise BackendError(f"{self.path} is not a usable hybridsearch SQLite database: {e}") from None
            raise

    # ---------------------------------------------------------------- file
    def _fingerprint(self) -> str:
        return fingerprint(self.schema)

    def _create_or_check(self) -> None:
        db, t = self.db, self.table_name
        meta = db[_META]
        if t in db.table_names():
            rows = list(meta.rows_where("name = ?", [t])) if _META in db.table_names() else []
            if not rows:
                raise BackendError(f"{self.path}: table {t!r} was not written by hybridsearch")
            if checks.CRC_COLUMN not in db[t].columns_dict:  # nothing converted: read as it is, it would go unchecked
                raise BackendError(f"{self.path}: table {t!r} was written by an unsupported format (rows without "
                                   f"the {checks.CRC_COLUMN} checksum column); this version reads tables with it")
            if rows[0]["fingerprint"] != self._fingerprint():
                try:
                    stored = json.loads(rows[0]["fingerprint"])
                except ValueError:
                    raise BackendError(f"{self.path}: table {t!r} holds another schema ({rows[0]['fingerprint']})") from None
                evolve.evolve_table(self, stored, _SQL_TYPES)  # ConfigError when the change is not allowed
            self.schema_history = evolve.history(self.conn, t, self.schema.fingerprint())
            checks.write_marker(self._lock_fd, self._lock_path)  # its lock file was removed: record the table again
            return
        if checks.has_marker(self._lock_fd):
            raise checks.vanished(self.path, t, self._lock_path, f"table {t!r} is not in the file")
        if self.read_only:
            raise BackendError(f"{self.path}: no table {t!r} to open read-only")
        cols = {"id": str, "_seq": int}
        cols.update({s.name: _SQL_TYPES[s.kind] for s in self.columns})
        if self.extra:
            cols["_extra"] = str
        cols[checks.CRC_COLUMN] = int
        with self.conn:
            self.conn.execute("BEGIN")
            db[t].create(cols, pk="id")
            for s in self.columns:
                if s.kind in (Kind.KEYWORD, Kind.INT, Kind.FLOAT, Kind.BOOL):
                    db[t].create_index([s.name])
            db[t].create_index(["_seq"])
            meta.insert({"name": t, "fingerprint": self._fingerprint()}, pk="name", replace=True)
            self.schema_history = [evolve.E.first_version(self.schema.fingerprint(), evolve.E.now())]
            evolve.save_history(self.conn, t, self.schema_history)
        checks.write_marker(self._lock_fd, self._lock_path)

    def _row(self, doc, seq: Optional[int]) -> dict:
        row = {"id": doc.id}
        if seq is not None:
            row["_seq"] = seq
        for s in self.columns:
            v = getattr(doc, s.name)
            if v is not None and s.kind in (Kind.VECTOR, Kind.MULTI):
                v = np.ascontiguousarray(v, dtype="<f4").tobytes()
            elif v is not None and s.kind is Kind.SPARSE:
                v = sparse_blob(v) if v else None  # absent is NULL, as SQL filters ($exists) read it
            elif isinstance(v, bool):
                v = int(v)
            row[s.name] = v
        if self.extra:
            row["_extra"] = doc.model_dump_json(include=set(self.extra))
        row[checks.CRC_COLUMN] = self._crc(*self._crc_values(row))
        return row

    def _doc(self, row: dict):
        data = {"id": row["id"]}
        for s in self.columns:
            if s.name not in row:  # a field new to the table, being filled with its default (evolve.py)
                continue
            v = row[s.name]
            if v is not None and s.kind is Kind.VECTOR:
                v = np.frombuffer(v, dtype="<f4")
                if len(v) != s.dim:
                    raise BackendError(f"{self.path}: vector of {row['id']!r} has {len(v)} dimensions, not {s.dim}")
            elif v is not None and s.kind is Kind.MULTI:
                if len(v) % (4 * s.dim):
                    raise BackendError(f"{self.path}: the token vectors of {row['id']!r} are not rows of {s.dim} "
                                       "float32 values")
                v = np.frombuffer(v, dtype="<f4").reshape(-1, s.dim)
            elif s.kind is Kind.SPARSE:
                v = sparse_of_blob(v, self.path, row["id"]) if v is not None else None if s.optional else {}
            elif s.kind is Kind.BOOL and v is not None:
                v = bool(v)
            data[s.name] = v
        if self.extra:
            data.update(json.loads(row["_extra"]))
        return self.schema.model.model_validate(data)

    def _checked(self, row: dict) -> dict:
        """The row, if its checksum holds. A NULL checksum marks a row another program wrote
        (SQL INSERT or UPDATE of its own): it is read unchecked."""
        want = row.get(checks.CRC_COLUMN)
        if want is not None and want != self._crc(*self._crc_values(row)):
            raise BackendError(f"{self.path}: row {row['id']!r} of table {self.table_name!r} fails its checksum: the "
                               "file is damaged, or another program changed the row (set its _crc to NULL to "
                               "accept such a change)")
        return row

    def read_docs(self, rows) -> list:
        """The documents of these table rows, checked (BackendError for a row that fails)."""
        try:
            return [self._doc(self._checked(r)) for r in rows]
        except (ValueError, TypeError, KeyError) as e:  # SchemaError and JSON errors are ValueErrors
            raise BackendError(f"{self.path}: table {self.table_name!r} holds a row this schema cannot "
                               f"read: {e}") from None

    def _load(self) -> None:
        docs = self.read_docs(self.db[self.table_name].rows_where(order_by="_seq"))
        if docs:
            self._apply_upsert(build_batch(self.schema, docs))
        cur = self.conn.execute(f'SELECT MAX(_seq) FROM "{self.table_name}"').fetchone()
        self.next_seq = (cur[0] or 0) + 1

    def _sql_write(self, sql: str, rows: list, changes: list) -> None:
        """One transaction: committed (WAL) before the call returns; rolled back on any error,
        which is raised as BackendError (disk full, a lock held by another program...). `changes`
        are the (op, ids) it records for the readers that follow (follow.py)."""
        if self.conn is None:
            raise BackendError(f"{self.path}: the collection is closed")
        try:
            with self.conn:
                self.conn.execute("BEGIN IMMEDIATE")
                self.conn.executemany(sql, rows)
                if self.changes is not None:
                    self.changes.wrote(self.conn, changes, self.store.n_live)
            self.write_transactions += 1
        except sqlite3.Error as e:
            raise BackendError(f"{self.path}: the write was not made ({type(e).__name__}: {e}); "
                               "the collection is unchanged") from None

    # -------------------------------------------------------------- writes
    # each write commits its transaction, then changes the RAM mirror (ram.RamWrites)
    def upsert(self, batch) -> None:
        t = self.table_name
        names = ["id", "_seq"] + self.crc_names[1:] + [checks.CRC_COLUMN]
        updates = ", ".join(f'"{n}" = excluded."{n}"' for n in names if n not in ("id", "_seq"))
        sql = (f'INSERT INTO "{t}" ({", ".join(chr(34) + n + chr(34) for n in names)}) '
               f'VALUES ({", ".join("?" * len(names))}) '
               f'ON CONFLICT(id) DO {"UPDATE SET " + updates if updates else "NOTHING"}')
        rows = []
        for doc in batch.docs:
            row = self._row(doc, 0)  # its number is given under the lock
            rows.append([row[n] for n in names])
        with self.lock.write():  # numbered here: concurrent batches must not share insertion numbers
            row_of = self.store.row_of
            changes = {"i": [], "u": []}  # new ids, replaced ones
            for i, row in enumerate(rows):
                row[1] = self.next_seq + i  # names[1] is "_seq"
                changes["u" if row[0] in row_of else "i"].append(row[0])
            self._sql_write(sql, rows, list(changes.items()))
            self.next_seq += len(rows)
            self._apply_upsert(batch)

    def delete(self, ids: list) -> int:
        with self.lock.write():  # the ids present where the delete takes place (serializable)
            present = [i for i in ids if i in self.store.row_of]
            if not present:
                return 0
            self._sql_write(f'DELETE FROM "{self.table_name}" WHERE id = ?', [[i] for i in present],
                            [("d", present)])
            return self._apply_delete(present)

    def update_fields(self, id: str, values: dict) -> None:
        with self.lock.write():
            slot = self._slot_to_update(id, values)
            if slot is None:
                return
            self._sql_update(np.array([slot]), [id], values)
            self._apply_update(slot, values)

    def update_where(self, node: Node, values: dict) -> int:
        """One SQL transaction over every matching row, then the RAM columns."""
        with self.lock.write():
            st = self.store
            slots = st.slots_matching(node)
            ids = st.ids.get_many(slots)
            if ids and values:
                self._sql_update(slots, ids, values)
                self._apply_update(slots, values)
            return len(ids)

    def delete_where(self, node: Node) -> int:
        with self.lock.write():
            st = self.store
            ids = st.ids.get_many(st.slots_matching(node))
            if not ids:
                return 0
            self._sql_write(f'DELETE FROM "{self.table_name}" WHERE id = ?', [[i] for i in ids],
                            [("d", ids)])
            return self._apply_delete(ids)

    def _sql_update(self, slots: np.ndarray, ids: list, values: dict) -> None:
        """UPDATE of the named columns of these rows (the caller holds the write lock); the
        unindexed fields live in one JSON column, so a change to one of them rewrites each row's."""
        extras = bool(self.extra and set(values) & set(self.extra))
        docs = [d.model_copy(update=values) for d in self.store.documents(slots[:len(slots) if extras else 1])]
        rows = [self._row(d, None) for d in docs]
        names = [n for n in values if n in rows[0]] + (["_extra"] if extras else [])
        if not names:
            return
        sets = ", ".join(f'"{n}" = ?{i + 1}' for i, n in enumerate(names))
        # the row's new checksum, from the new values and the columns left as they were
        new = {n: f"?{i + 1}" for i, n in enumerate(names)}
        crc = f'hs_crc({", ".join(new.get(n, chr(34) + n + chr(34)) for n in self.crc_names)})'
        params = [[rows[i if extras else 0][n] for n in names] + [id_] for i, id_ in enumerate(ids)]
        self._sql_write(f'UPDATE "{self.table_name}" SET {sets}, "{checks.CRC_COLUMN}" = {crc} '
                        f'WHERE id = ?{len(names) + 1}', params, [("u", list(ids))])

    # --------------------------------------------------------------- reads
    def _vectors(self, queries: np.ndarray, limit: int, node: Optional[Node], exact: bool,
                 ef: Optional[int], field: Optional[str] = None) -> tuple:
        return self.store.exact_search(queries, limit, self._prefilter_bits(node, True, field), field)

    def _sql_ids(self, node: Node, limit: Optional[int] = None) -> Optional[list]:
        """Ids matching the filter in insertion order, from a parameterised SQL WHERE; None when
        SQLite cannot run it (a filter past its parser's limits, an I/O error): the caller then
        answers from the RAM columns, which hold the same rows (tested equal)."""
        with self._count_lock:
            self.sql_filter_queries += 1
        where, params = to_sql(node)
        sql = f'SELECT id FROM "{self.table_name}" WHERE {where} ORDER BY _seq'
        if limit is not None:
            sql += " LIMIT ?"
            params = params + [limit]
        try:
            return [r[0] for r in self.conn.execute(sql, params)]
        except sqlite3.Error:
            return None

    def _prefilter_bits(self, node: Optional[Node], vectors: bool,
                        field: Optional[str] = None) -> Optional[np.ndarray]:
        # a read-only opener's file is the writer's, live: only its mirror holds its snapshot
        sql = node is not None and self.prefilter == "sql" and not self.read_only
        ids = self._sql_ids(node) if sql else None
        if ids is None:
            return super()._prefilter_bits(node, vectors, field)
        st = self.store
        flags = np.zeros(-(-max(st.n, 1) // 64) * 64, dtype=bool)
        flags[st.slots_of(ids)] = True
        bits = np.packbits(flags, bitorder="little").view("<u8")
        if vectors:  # documents without a vector are never vector hits
            has = super()._prefilter_bits(None, True, field)
            if has is not None:
                bits &= has
        return bits

    def stats(self) -> dict:
        """Adds "sql_filter_queries": how many SQL WHERE queries this handle has run to answer
        filters (every filter-only find; with prefilter="sql" also the pre-filter of each filtered
        vector, text or hybrid search, two for a hybrid one; always 0 read-only);
        "write_transactions": the write transactions this handle committed to the file, one per
        write call (an update_many or a delete by filter is one however many rows it changes);
        a read-only opener adds "follow": whether it follows (follow=), its refreshes that found
        changes of this table, the changed ids they applied and the whole-table reloads among them
        (follow.py)."""
        with self._count_lock:
            out = {**super().stats(), "sql_filter_queries": self.sql_filter_queries,
                   "write_transactions": self.write_transactions,
                   "schema_history": [dict(h) for h in self.schema_history]}
        if self.follower is not None:
            out["follow"] = {"follow": bool(self.config.follow), **self.follower.stats()}
        return out

    def catch_up(self) -> None:
        if self.follower is not None:
            self.follower.catch_up()

    def refresh(self) -> int:
        """The changes the writer committed since the last look applied to the mirror -> how many
        ids changed (a whole-table reload counts 1); 0 for a writer."""
        return self.follower.refresh() if self.follower is not None else 0

    def search_filter(self, node: Node, limit: Optional[int]) -> tuple:
        with self.lock.read():
            st = self.store
            if limit is not None:
                limit = min(limit, st.n_live)
            ids = None if self.read_only else self._sql_ids(node, limit)
            if ids is None:
                rows = st.rows_in_order(st.filter_bits(node), limit)
                return st.ids.get_many(rows), None
            return ids, None

    def backup(self, dest) -> dict:
        """The database file copied to `dest` with SQLite's online backup API (backup.py):
        writers go on meanwhile. -> {"documents", "bytes", "seconds", "stall_seconds", "path"}."""
        if self.conn is None and not self.read_only:
            raise BackendError(f"{self.path}: the collection is closed")
        report = backup.backup(self.path, self.table_name, dest)
        log.info("sqlite storage backed up %s to %s: %d documents, %d bytes in %.3f s", self.path,
                 report["path"], report["documents"], report["bytes"], report["seconds"])
        return report

    @property
    def writer_path(self):
        return self.path if self._lock_fd is not None else None

    def release(self) -> None:
        """The connection and the lock given back (every write is committed already); the RAM
        mirror stays for a Results that still fetches from it."""
        with self._following():
            conn, self.conn = self.conn, None
        if conn is not None:
            conn.close()
            log.info("sqlite storage released table %r of %s (not closed)", self.table_name, self.path)
        fd, self._lock_fd = self._lock_fd, None
        unlock(fd)

    def _following(self):
        """A follower's mutex (no refresh uses the connection while it goes), else nothing."""
        return self.follower.mutex if self.follower is not None else contextlib.nullcontext()

    def close(self) -> None:
        with self._following(), self.lock.write():
            if self.conn is not None:
                self.conn.close()
                self.conn = None
                log.info("sqlite storage closed table %r of %s", self.table_name, self.path)
            unlock(self._lock_fd)  # after the connection: its POSIX locks are not ours to drop
            self._lock_fd = None
