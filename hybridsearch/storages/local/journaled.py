"""Durable writes for the storages that keep their documents in a ColumnStore (memory, hnsw).

With `path=`, a collection is a directory of engine/persist files: writes are appended to a
checksummed log and fsynced before they apply (GroupCommit shares fsyncs between concurrent
writers); a snapshot holds every column, the text index and the storage's own index (hnsw:
the graph) as arrays that the next open maps instead of parsing. Without `path=` the same write
path runs without the log. Subclasses apply writes to RAM (`_apply_upsert`, `_apply_delete`,
`_apply_update`) and, when they keep an index of their own, export and attach it
(`_export_index`, `_attach_index`, `_index_rows`).
"""
from __future__ import annotations

import logging
import os
import threading
import time
from typing import Optional

import numpy as np

from hybridsearch.batch import Batch, build_batch
from hybridsearch.engine.lexical import UnsupportedFormat
from hybridsearch.errors import BackendError, ConfigError
from hybridsearch.storages.columnar import ColumnarStorage
from hybridsearch.storages.released import Released, unmap

log = logging.getLogger("hybridsearch")

_SNAPSHOT_MIN_LOG_BYTES = 64 << 20  # compact the log into a snapshot past this size...
_SNAPSHOT_LOG_RATIO = 1.0           # ...and once it outgrows the snapshot


class _NothingToDo(Exception):
    """Raised by a write's append(): it changes nothing, so nothing is logged or applied."""


class JournaledStorage(ColumnarStorage):
    """A ColumnarStorage whose writes go through one write path, logged when it has files."""

    # upsert reads a batch's columns only (the journal encodes them too): extend() may hand it a
    # batch that keeps no documents (array.py _extend_in_parts)
    builds_from_columns = True

    journal = None

    def _init_writes(self) -> None:
        """Call from __init__ once `store`, `lock` and `text` exist."""
        self.writer = threading.Lock()  # one writer at a time, outside the readers' lock
        self.journal = None
        self._snapshot_bytes = 0
        # an index built at open that the snapshot lacks (hnsw: an FDE graph rebuilt from the
        # tokens): close() saves it even without logged writes, or every open would build it again
        self.snapshot_due = False
        self.closed = False  # set by close() under `writer`: a write reaching the log after it is refused
        self._mappings: list = []  # the snapshots this collection maps (its arrays are views of them)
        # a read-only opener's refreshes that found something, the logged writes they applied and
        # the new generations they opened (stats()["follow"])
        self.follow_counts = {"refreshes": 0, "writes_applied": 0, "generations_opened": 0}
        self._view_broken = False  # a refresh failed half-way: the next one opens the files again

    def _open_files(self, path, read_only: bool, lock_timeout: float = 0) -> None:
        """Opens (or creates) the collection under `path`: snapshot, then the log's writes. A
        writer waits up to `lock_timeout` seconds for another writer's lock, and reads the files
        only once it holds it (so it starts from everything that writer acknowledged)."""
        from hybridsearch.engine.persist import GroupCommit, Journal

        started = time.perf_counter()
        try:
            self.journal = Journal(path, self.schema, read_only=read_only, lock_timeout=lock_timeout, evolve=True)
            self.commit = GroupCommit(self.writer, self.journal.sync, self.lock, self._maybe_snapshot)
            snapshot, ops = self.journal.load()
            if self.journal.evolution is not None:  # files of an earlier schema (storages/local/evolve.py)
                from hybridsearch.storages.local.evolve import evolve

                evolve(self, snapshot, ops, os.fspath(path))
            else:
                self._load_state(snapshot, ops, os.fspath(path))
            log.info("%s storage opened %s%s: %d documents, snapshot of %d bytes, %d logged writes replayed "
                     "in %.3f s", self.name, os.fspath(path), " read-only" if read_only else "",
                     self.store.n_live, self.journal.snapshot_bytes, len(ops), time.perf_counter() - started)
        except BaseException:  # a refused open leaves the files unlocked for the next one
            if self.journal is not None:
                self.journal.close()
                log.info("%s storage closed %s", self.name, self.journal.path)
                self.journal = None
            raise

    def _load_state(self, snapshot, ops: list, where: str) -> None:
        """The collection as the files hold it: the snapshot (or None), then the log's writes."""
        if snapshot is not None:
            if snapshot.mapping is not None:
                self._mappings.append(snapshot.mapping)
            self._restore(snapshot, where)
            snapshot.release()  # before the log's writes: it must not drop a page they copy
        self._apply_ops(ops)
        if self.journal is not None:
            self._snapshot_bytes = self.journal.snapshot_bytes

    def _apply_ops(self, ops: list) -> None:
        """Applies logged writes to RAM in log order, as the writer applied them (an update of an
        id that is gone by then is skipped, as it was there)."""
        for op in ops:
            if op[0] == "upsert":
                self._apply_upsert(build_batch(self.schema, op[1]))
            elif op[0] == "delete":
                self._apply_delete(op[1])
            elif op[0] == "update":
                doc, fields = op[1], op[2]
                slot = self.store.row_of.get(doc.id)
                if slot is not None:
                    self._apply_update(slot, {f: getattr(doc, f) for f in fields})
            elif op[0] == "update_many":
                ids, doc, fields = op[1], op[2], op[3]
                self._apply_update_many(ids, {f: getattr(doc, f) for f in fields})

    # ------------------------------------------------------------ following
    # A read_only=True opener follows the writer through the files: the log only grows by
    # appends, so the records past the offset it read to are the writes since, applied in log
    # order under the exclusive lock (a find sees the state before them or after them, each an
    # acknowledged state); a snapshot the writer took meanwhile (MANIFEST names a new generation)
    # is opened as at start, beside the current view, which it then replaces at once.
    def catch_up(self) -> None:
        journal = self.journal
        if journal is not None and journal.read_only and journal.changed():
            self.refresh()

    def refresh(self) -> int:
        """The writer's writes since the last look applied -> how many (a new generation opened
        counts 1 more); 0 for a writer or a collection without files."""
        journal = self.journal
        if journal is None or not journal.read_only:
            return 0
        with self.writer:  # one refresh at a time: the others then find nothing new
            journal = self.journal  # the one of now: another thread may have opened a new generation
            if self.closed or journal is None:
                return 0
            got = None if self._view_broken else journal.read_new()
            if got is None:
                return self._reopen_files()
            ops, mark = got
            if ops:
                try:
                    with self.lock.write():
                        self._apply_ops(ops)
                except BaseException:  # applied in part: the next look opens the files again
                    self._view_broken = True
                    raise
                self.follow_counts["refreshes"] += 1
                self.follow_counts["writes_applied"] += len(ops)
            # only now: until they are applied, other threads' looks see the log as grown, and
            # wait on `writer` for this refresh rather than read the state before it
            journal.advance(mark)
            return len(ops)

    def _reopen_files(self) -> int:
        """The writer named a new generation: the collection opened again beside this view (the
        same storage, read-only), then swapped in under the exclusive lock; the old view's
        snapshot is unmapped then (a document a caller still holds from it keeps its pages until
        the collector frees it). The caller holds `writer`."""
        from hybridsearch.engine.persist import GroupCommit

        fresh = type(self)(self.schema, self.config)
        old, old_maps, old_store = self.journal, self._mappings, self.store
        with self.lock.write():
            # kept: what readers and other refreshes hold, the counts, and closed (release() sets
            # it without `writer`)
            keep = {"lock", "writer", "follow_counts", "closed"}
            self.__dict__.update({k: v for k, v in fresh.__dict__.items() if k not in keep})
            self.commit = GroupCommit(self.writer, self.journal.sync, self.lock, self._maybe_snapshot)
            self._view_broken = False
        fresh.__dict__.clear()  # its commit's bound method would keep the new view alive twice
        where = f"the collection {old.path}"
        old.close()
        old_store.close_files()  # an on-disk vector block's file (its views went with the old view)
        unmap(old_maps, where)
        self.follow_counts["refreshes"] += 1
        self.follow_counts["generations_opened"] += 1
        log.info("%s storage %s: opened generation %d written by the writer", self.name, old.path,
                 self.journal.generation)
        if self.closed:  # released meanwhile (release() does not take `writer`): its files go back
            self.journal.close()
        return 1

    def stats(self) -> dict:
        """Adds "schema_history" with `path=`: the schema versions of the collection, oldest
        first, each {"version", "at" (ISO time, None before history was kept), "added",
        "removed", "changed", "fields" (the fingerprint [name, kind, optional, dim] per field)};
        a read-only opener adds "follow": whether it follows (follow=), its refreshes that found
        something, the logged writes they applied and the new generations (snapshots the writer
        took) they opened."""
        out = super().stats()
        journal = self.journal
        if journal is not None:
            out["schema_history"] = journal.schema_history
            if journal.read_only:
                out["follow"] = {"follow": bool(self.config.follow), **self.follow_counts}
        return out

    # ------------------------------------------------------------ snapshots
    def _restore(self, snap, where: str) -> None:
        meta, arrays = snap.meta, snap.arrays

        def part(prefix: str) -> dict:
            return {k[len(prefix):]: v for k, v in arrays.items() if k.startswith(prefix)}

        try:
            self.store.restore(meta.get("columns") or {}, part("col/"))
            rows = self.store.live_rows()
            if self.text:
                if meta.get("text") is None:
                    raise ValueError("it holds no text index")
                self.text.restore(meta["text"], part("text/"))
            if meta.get("index") is not None:
                self._attach_index(meta["index"], part("index/"), where)
            elif len(rows):  # an empty graph is saved as none (see hnsw._export_index)
                self._index_rows(rows)
        except UnsupportedFormat as e:
            raise BackendError(f"the snapshot under {where}: {e}") from None
        except ValueError as e:
            raise BackendError(f"the snapshot under {where} is damaged: {e}") from None
        self._check_index(where)

    def _export_index(self) -> Optional[tuple]:
        """(meta, arrays) of the storage's own index for a snapshot, or None (the caller holds the
        write lock)."""
        return None

    def _attach_index(self, meta: dict, arrays: dict, where: str) -> None:
        """Takes back what _export_index gave (arrays mapped from the file)."""
        raise BackendError(f"the snapshot under {where} holds an index this storage does not keep")

    def _index_rows(self, rows: np.ndarray) -> None:
        """Builds the storage's index over restored rows whose snapshot holds none."""

    def _check_index(self, where: str) -> None:
        """Raises BackendError if the restored index does not match the documents."""

    # whether the storage's own index depends on each vector field's metric (hnsw: the graph was
    # built for it), so that a schema evolution refuses a metric change rather than carry it over
    index_metric_bound = False

    def _adopt_index(self, old: "JournaledStorage", plan) -> None:
        """Schema evolution (storages/local/evolve.py): takes the index of `old` (the collection
        as stored, same slots) for the fields plan.schema keeps."""

    def _maybe_snapshot(self) -> None:
        """Compacts the log into a snapshot once it has grown; the caller holds `self.writer` and no
        write is queued (GroupCommit runs it then)."""
        if self.journal is None:
            return
        if self.journal.log_bytes > max(_SNAPSHOT_MIN_LOG_BYTES, _SNAPSHOT_LOG_RATIO * self._snapshot_bytes):
            with self.lock.write():  # an index may be repaired in place
                self._snapshot()

    def _snapshot(self) -> None:
        """Every column, the text index and the storage's index as arrays the next open maps back."""
        meta, arrays = self._snapshot_parts()
        started = time.perf_counter()
        self.journal.snapshot_arrays(meta, arrays)
        del meta, arrays
        # writing read every row of an on-disk vector block: its pages leave the process again
        self.store.release_vectors()
        self.snapshot_due = False
        self._snapshot_bytes = self.journal.snapshot_bytes
        log.info("%s storage wrote a snapshot of %s: %d documents, %d bytes in %.3f s", self.name,
                 self.journal.path, self.store.n_live, self._snapshot_bytes, time.perf_counter() - started)

    def _snapshot_parts(self) -> tuple:
        """(meta, arrays) of a snapshot: views of the live data (the caller holds the write lock
        until they are written)."""
        meta, arrays = {}, {}
        meta["columns"], cols = self.store.export()
        arrays.update({f"col/{k}": v for k, v in cols.items()})
        if self.text:
            meta["text"], parts = self.text.export()
            arrays.update({f"text/{k}": v for k, v in parts.items()})
        index = self._export_index()
        if index is not None:
            meta["index"], parts = index
            arrays.update({f"index/{k}": v for k, v in parts.items()})
        return meta, arrays

    # With files, a write goes through GroupCommit (engine/persist/commit.py): appended to the log
    # under `self.writer` (the log's order), made durable by one fsync shared with the writes queued
    # beside it, then applied in RAM under the exclusive lock, in log order. Searches go on during
    # the fsync, and a write is visible only once durable. Without files: `writer`, then apply.
    #
    # Serializable: every write takes effect at its place in the log's order. RAM, which append()
    # reads, holds the writes applied so far: a prefix of the log, without the writes queued or
    # being applied. So a write may decide there only what holds whatever those do:
    # - that it changes nothing (an id absent, no match): it returns at once, logging nothing,
    #   placed where RAM stands (every write that returned before it is applied, and those in
    #   flight have not returned, so it may come before them);
    # - which ids it names (delete and update by id): apply() looks them up when it runs, in log
    #   order, and replaying the log does the same;
    # - which documents a filter matches (delete_where, update_where): only with nothing in
    #   flight, so these are submitted `alone` (GroupCommit waits for the writes before them).
    # append() raises KeyError / SchemaError before anything is logged; apply() changes RAM.
    # A write that began before close() and reaches `writer` after it does not take place
    # (ConfigError): applied to RAM alone it would return, and be missing after reopening.
    def _write(self, append, apply, alone: bool = False):
        def logged():
            if self.closed:
                raise ConfigError("this DocumentArray is closed")
            append()

        if self.journal is None:
            with self.writer:
                logged()
                with self.lock.write():
                    return apply()
        return self.commit.submit(logged, apply, alone)

    def upsert(self, batch: Batch) -> None:
        def append():
            st = self.store
            if st.disk_vectors and st.n + len(batch) > st.cap:  # a full disk refuses before the log
                with self.lock.write():
                    st.reserve(st.n + len(batch))
            if self.journal is not None:
                self.journal.log_batch(batch, sync=False)

        self._write(append, lambda: self._apply_upsert(batch))

    def delete(self, ids: list) -> int:
        def append():
            with self.lock.read():
                if not any(i in self.store.row_of for i in ids):
                    raise _NothingToDo  # none exists where RAM stands: nothing to log or apply
            if self.journal is not None:
                # every id: a write in flight may add one that RAM does not hold yet
                self.journal.log_delete(ids, sync=False)

        try:
            return self._write(append, lambda: self._apply_delete(ids))
        except _NothingToDo:
            return 0

    def update_fields(self, id: str, values: dict) -> None:
        def append():
            with self.lock.read():
                slot = self._slot_to_update(id, values)  # KeyError before anything is logged
                doc = self._updated_doc(slot, values) if slot is not None and self.journal is not None else None
            if doc is not None:
                self.journal.log_update(doc, list(values), sync=False)  # carries only `values`

        def apply():
            # by id at apply time, in log order: a write in flight before this one may have moved
            # or removed the document (replaying the log skips it then too)
            slot = self.store.row_of.get(id)
            if slot is None:
                raise KeyError(id)
            if values:
                self._apply_update(slot, values)

        self._write(append, apply)

    def delete_where(self, node) -> int:
        present: list = []

        def append():
            with self.lock.read():
                st = self.store
                present.extend(st.ids.get_many(st.slots_matching(node)))
            if present and self.journal is not None:
                self.journal.log_delete(present, sync=False)

        return self._write(append, lambda: self._apply_delete(present) if present else 0, alone=True)

    def update_where(self, node, values: dict) -> int:
        """Sets the same values on every document matching `node`: one log record, one apply."""
        chosen: list = []

        def append():
            with self.lock.read():
                st = self.store
                slots = st.slots_matching(node)
                chosen.extend(st.ids.get_many(slots))
                carrier = (self._updated_doc(int(slots[0]), values)
                           if len(slots) and values and self.journal is not None else None)
            if carrier is not None:
                self.journal.log_update_many(chosen, carrier, list(values), sync=False)

        def apply():
            if values:
                self._apply_update_many(chosen, values)
            return len(chosen)

        return self._write(append, apply, alone=True)

    def _apply_update_many(self, ids: list, values: dict) -> None:
        # by id at apply time: a write queued before this one may have moved or removed some
        slots = self.store.slots_of(ids)
        slots = slots[slots >= 0]
        if len(slots):
            self._apply_update(slots, values)

    # ------------------------------------------------------------ backup
    def backup(self, dest) -> dict:
        """Copies the collection to the new directory `dest`, which opens as a collection (with
        `path=dest`) holding the state after some prefix of the writes: every write acknowledged
        before the call, perhaps some made during it. With files, writers wait only while the
        state is pinned (engine/persist/backup.py); without, while the RAM is written as one
        snapshot. -> {"documents", "bytes", "seconds", "stall_seconds", "path"}."""
        from hybridsearch.engine import copydest
        from hybridsearch.engine.persist import backup as B

        dest = copydest.check_dest(dest)
        started = time.perf_counter()
        journal = self.journal  # close() may drop it during the copy
        where = journal.path if journal is not None else "(RAM)"
        pinned: list = []
        held: list = []

        def note() -> None:  # under `writer`, nothing in flight: RAM is the log's [0, end)
            if self.closed:
                raise ConfigError("this DocumentArray is closed")
            with self.lock.read():  # the journal of now: a follower may have opened a new generation
                pinned.append((B.pin(self.journal), self.store.n_live))
            held.append(time.perf_counter())

        if journal is None:
            with self.writer:
                if self.closed:
                    raise ConfigError("this DocumentArray is closed")
                with self.lock.write():  # the snapshot's arrays are views of the live data
                    meta, arrays = self._snapshot_parts()
                    count = self.store.n_live
                    size = B.write_snapshot(self.schema, dest, meta, arrays)
            stall = time.perf_counter() - started
        else:
            try:
                if journal.read_only:  # no writer here: the state this opener reads
                    with self.writer:
                        note()
                else:  # new writes wait while the ones in flight apply and the state is pinned
                    self.commit.submit(note, lambda: None, alone=True)
                stall = held[0] - started
                state, count = pinned[0]
                size = B.write_copy(state, dest)
            finally:
                for state, _ in pinned:  # also when the group's fsync failed after note()
                    state.close()
        seconds = time.perf_counter() - started
        log.info("%s storage backed up %s to %s: %d documents, %d bytes in %.3f s; writers waited %.6f s",
                 self.name, where, dest, count, size, seconds, stall)
        return {"documents": count, "bytes": size, "seconds": seconds, "stall_seconds": stall, "path": dest}

    def _fsyncs(self) -> int:
        return self.commit.fsyncs if self.journal is not None else 0

    @property
    def writer_path(self):
        journal = self.journal
        return journal.path if journal is not None and not journal.read_only else None

    def release(self) -> None:
        """The log and the lock given back without a snapshot: the log holds every acknowledged
        write, and the next open replays it. RAM stays (a Results may still fetch from it).

        An on-disk vector block's scratch file (vectors_on_disk) goes too: its descriptors, and
        its disk space once no view maps it (the block's current mapping stays while the store's
        arrays view it, so a Results can still read the rows). Left to the collector, it would
        stay open as long as the storage's cycles live, then be reported as an unclosed file."""
        self.closed = True
        journal = self.journal
        if journal is not None:
            journal.close()
            log.info("%s storage released %s (not closed)", self.name, journal.path)
        store = self.__dict__.get("store")
        if store is not None and not isinstance(store, Released):
            store.close_files()

    def close(self) -> None:
        with self.writer:  # first: writers still arriving would keep drain() from ever returning
            self.closed = True
        if self.journal is not None:
            self.commit.drain()
        with self.writer, self.lock.write():
            if self.journal is not None:
                if (self.journal.log_bytes or self.snapshot_due) and not self.journal.read_only:
                    self._snapshot()
                self.journal.close()
                log.info("%s storage closed %s", self.name, self.journal.path)
                where = f"the collection {self.journal.path}"
                self.journal = None
                self._drop_data(where)

    def _drop_data(self, where: str) -> None:
        """After close() of a collection with files: the columns, text index and the storage's
        index go, and with them the last views of the mapped snapshots, which are unmapped now
        (their descriptors closed) rather than when the collector gets to them."""
        self.store.close_files()  # an on-disk vector block's file (engine/vectorfile.py)
        self.store = Released(where)
        self.text = Released(where)
        self._drop_index()
        mappings, self._mappings = self._mappings, []
        unmap(mappings, where)

    def _drop_index(self) -> None:
        """Drops the storage's own index structures (close(), see _drop_data)."""
