"""Journal: the snapshot + log files of one collection directory, and their recovery rules
(persist/__init__.py)."""
from __future__ import annotations

import json
import logging
import mmap
import os
import struct
import threading
import zlib
from dataclasses import dataclass
from typing import Optional

import numpy as np

from hybridsearch.document import Document, schema_of
from hybridsearch.engine.files import fsync_dir, lock_exclusive, pwrite_all, replace_file, unlock
from hybridsearch.engine.persist import evolve as E
from hybridsearch.engine.persist import records as R
from hybridsearch.engine.persist.codec import Corrupt, DocCodec
from hybridsearch.engine.persist.follow import Following
from hybridsearch.errors import BackendError, ConfigError, SchemaError


log = logging.getLogger("hybridsearch")


@dataclass
class Snapshot:
    """A snapshot as written: JSON `meta` and named arrays, each a view of the file mapped
    copy-on-write (`mapping`)."""

    meta: dict
    arrays: dict
    mapping: Optional[mmap.mmap] = None

    def release(self) -> None:
        """Drops the mapped pages this process has read (checksums, checks): they come back from
        the page cache when a query touches them, so a reopened collection starts small."""
        if self.mapping is not None and hasattr(mmap, "MADV_DONTNEED"):
            # safe only before any copy-on-write page exists: called at the end of the open
            self.mapping.madvise(mmap.MADV_DONTNEED)


def _record_header(f, pos: int, size: int) -> tuple:
    """(header bytes, kind, length, crc) of the snapshot record at `pos` (f is there), its length
    checked against the bytes left in the file."""
    hdr = f.read(R.REC.size)
    parsed = R.parse_header(hdr)
    if parsed is None:
        raise Corrupt(f"bad record header at offset {pos}")
    kind, length, crc = parsed
    if length > size - pos - R.REC.size:
        raise Corrupt(f"record at offset {pos} runs past the end of the file")
    return hdr, kind, length, crc


_ARRAY_DTYPES = {"<i8", "<i4", "<f4", "<f8", "|u1", "|i1", "<u8", "<u4"}


Op = tuple  # ("upsert", docs) | ("delete", ids) | ("update", doc, fields) | ("update_many", ids, doc, fields)


class Journal(Following):
    """Files of one collection in directory `path` (see the module docstring)."""

    def __init__(self, path, schema, read_only: bool = False, lock_timeout: float = 0,
                 evolve: bool = False) -> None:
        """`evolve=True`: files of another schema that the schema may evolve from (persist/evolve.py)
        open under their stored layout with `evolution` set to the plan (load() decodes them so);
        the caller carries the collection over and calls finish_evolution() before snapshotting.
        Without it, files of another schema are a BackendError."""
        self.read_only = read_only
        self.evolve = evolve
        self.evolution: Optional[E.Plan] = None  # set while files of another schema are opened to evolve
        self._target: Optional[tuple] = None  # (schema, codec, fp, digest) the evolution leads to
        self.history: list = []  # the schema versions MANIFEST records (persist/evolve.py)
        self.lock_timeout = lock_timeout  # seconds a writer waits for another writer's lock
        self._snap_fd: Optional[int] = None  # read-only: the snapshot, held open against a writer's cleanup
        if isinstance(schema, type) and issubclass(schema, Document):
            schema = schema_of(schema)
        self.path = os.fspath(path)
        self.schema = schema
        self.codec = DocCodec(schema)
        self.fp = R.fingerprint(schema)
        self.digest = R.digest(self.fp)
        self._mutex = threading.Lock()
        self._fd: Optional[int] = None
        self._lock_fd: Optional[int] = None
        self._broken: Optional[str] = None  # set after a failure that makes further writes unsafe
        self._closed = False
        self._pending: Optional[list] = None  # log records read at open, handed to the first load()
        self.generation = 0
        self.has_snapshot = False
        self._snap_bytes = 0
        # read-only: the MANIFEST as last read (a writer replaces it, by rename, only to name a new
        # generation) and the log's (size, mtime) at the last look: changed() costs two stats
        self._manifest_id: Optional[tuple] = None
        self._seen: tuple = (0, 0)
        self._scan_seen: tuple = (0, 0)
        try:
            self._open()
        except BaseException:
            self._close_fds()
            raise

    # -------------------------------------------------------------- opening
    def _file(self, name: str) -> str:
        return os.path.join(self.path, name)

    def _error(self, name: str, what: str) -> BackendError:
        return BackendError(f"{self._file(name)}: {what}")

    def _open(self) -> None:
        if self.read_only:
            self._open_read_only()
            return
        try:
            os.makedirs(self.path, exist_ok=True)
        except OSError as e:
            raise BackendError(f"{self.path}: cannot create the directory: {e}") from None
        if not os.path.isdir(self.path):
            raise BackendError(f"{self.path}: not a directory")
        self._lock()
        try:
            names = os.listdir(self.path)
        except OSError as e:
            raise BackendError(f"{self.path}: cannot list the directory: {e}") from None
        if R.MANIFEST in names:
            self._read_manifest()
        else:
            self._create(names)
        self._check_snapshot_file()
        self._open_log()
        self._clean(names)

    def _open_read_only(self) -> None:
        """Opens the files R.MANIFEST names without the lock and without changing anything.

        A writer may replace the generation meanwhile and remove its files; the snapshot and
        log are opened together and held open, and the manifest is read again if one is gone."""
        if not os.path.isfile(self._file(R.MANIFEST)):
            raise BackendError(f"{self.path}: no collection to open read-only (no MANIFEST)")
        for _ in range(50):
            self._manifest_id = self._manifest_identity()  # before reading it: a later change is seen
            self._read_manifest()
            snap = R.snap_name(self.generation) if self.has_snapshot else None
            try:
                snap_fd = os.open(self._file(snap), os.O_RDONLY) if snap else None
            except FileNotFoundError:
                continue
            try:
                log_fd = os.open(self._file(R.log_name(self.generation)), os.O_RDONLY)
            except FileNotFoundError:
                if snap_fd is not None:
                    os.close(snap_fd)
                continue
            self._snap_fd, self._fd = snap_fd, log_fd
            break
        else:
            raise BackendError(f"{self.path}: the collection kept changing while it was opened read-only")
        if snap_fd is not None and os.fstat(snap_fd).st_size != self._snap_bytes:
            raise self._error(snap, f"snapshot is {os.fstat(snap_fd).st_size} bytes, MANIFEST says {self._snap_bytes}")
        self._pending, self._end = self._scan_log(self._fd, R.log_name(self.generation))
        self._seen = self._scan_seen  # the log as the scan found it: a record appended since is news

    def _lock(self) -> None:
        # before anything is read: the files are then the ones the previous writer left
        self._lock_fd = lock_exclusive(self._file(R.LOCK), f"the collection {self.path}", self.lock_timeout)

    def _create(self, names: list) -> None:
        """A directory without R.MANIFEST: new, or left by a crash while it was being created."""
        log0 = R.log_name(0)
        for name in names:
            if not R.OURS.match(name) or name.endswith(".tmp"):
                continue
            if name == log0:
                try:
                    size = os.path.getsize(self._file(name))
                except OSError as e:
                    raise self._error(name, f"cannot read: {e}") from None
                if size <= R.FILE.size:  # created, never written to: a crash before R.MANIFEST
                    continue
            raise self._error(R.MANIFEST, f"missing, but the directory holds data files ({name}); "
                                        "refusing to start an empty collection over them")
        self.generation = 0
        self.has_snapshot = False
        self._snap_bytes = 0
        self.history = [E.first_version(self.fp, E.now())]
        try:
            self._write_new_log(0)
            fsync_dir(self.path)
            self._write_manifest(0, False, 0)
            fsync_dir(self.path)
        except OSError as e:
            raise BackendError(f"{self.path}: cannot create the collection: {e}") from None

    def _read_manifest(self) -> None:
        name = R.MANIFEST
        try:
            with open(self._file(name), "rb") as f:
                data = f.read(1 << 20)
                if f.read(1):
                    raise self._error(name, "too large to be a manifest")
        except OSError as e:
            raise self._error(name, f"cannot read: {e}") from None
        if len(data) < R.FILE.size or data[:8] != R.MANIFEST_MAGIC:
            raise self._error(name, "not a hybridsearch manifest (bad magic or truncated)")
        magic, gen, digest, crc = R.FILE.unpack_from(data)
        if zlib.crc32(data[:R.FILE.size - 4]) != crc:
            raise self._error(name, "corrupt (header checksum mismatch)")
        head = data[R.FILE.size:R.FILE.size + R.REC.size]
        parsed = R.parse_header(head)
        if parsed is None or parsed[0] != R.K_MANIFEST:
            raise self._error(name, "corrupt (bad record header)")
        _, length, rcrc = parsed
        payload = data[R.FILE.size + R.REC.size:]
        if length != len(payload) or not R.payload_ok(head, payload, rcrc):
            raise self._error(name, "corrupt (checksum mismatch or wrong length)")
        try:
            meta = json.loads(payload)
        except (ValueError, RecursionError):
            raise self._error(name, "corrupt (bad JSON)") from None
        if not isinstance(meta, dict):
            raise self._error(name, "corrupt (bad JSON)")
        if meta.get("format") != R.FORMAT:
            raise self._error(name, f"written by an unsupported format {meta.get('format')!r}; "
                                    f"this version reads format {R.FORMAT}")
        g, has, size = meta.get("generation"), meta.get("snapshot"), meta.get("snapshot_bytes")
        if (type(g) is not int or g != gen or g < 0 or g >= 10**10 or type(has) is not bool
                or type(size) is not int or size < 0):
            raise self._error(name, "corrupt (bad fields)")
        stored = meta.get("schema")
        # the fingerprint is sorted by name, but unindexed values are stored in declaration order:
        # the same fields declared in another order are a change too (their values would swap)
        declared = meta.get("declared")
        reordered = isinstance(declared, list) and declared != list(self.schema.fields)
        if stored != self.fp or digest != self.digest or reordered:
            if self.evolve and isinstance(stored, list) and R.digest(stored) == digest:
                self._plan_evolution(stored, meta)
            else:
                detail = R.describe_mismatch(stored if isinstance(stored, list) else [], self.fp)
                raise self._error(name, f"written for a different schema than {self.schema.name}: {detail}")
        self.history = E.valid_history(meta.get("history")) or [E.first_version(stored, None)]
        self.generation, self.has_snapshot, self._snap_bytes = g, has, size

    def _plan_evolution(self, stored: list, meta: dict) -> None:
        """Files of another schema: ConfigError unless this schema may evolve from theirs (and the
        opener is a writer); else the files are read under their own layout (persist/evolve.py)."""
        if self.read_only and any(isinstance(h, dict) and h.get("fields") == self.fp
                                  for h in (E.valid_history(meta.get("history")) or [])[:-1]):
            # this class is an earlier version: a writer changed the fields since (a follower of it)
            raise ConfigError(f"{self.path}: a writer changed the fields of this collection since {self.schema.name} "
                              "was its schema; open a new read-only DocumentArray with the writer's Document class")
        plan = E.plan(stored, self.schema)  # ConfigError naming the field that cannot change
        if self.read_only:
            raise ConfigError(f"{self.path} holds {self.schema.name} as it was before a change of its fields "
                              f"({plan.describe()}); a read-only opener cannot apply it: open the collection "
                              "once as a writer with the new schema first")
        old = E.old_schema(plan, meta.get("declared"))
        self._target = (self.schema, self.codec, self.fp, self.digest)
        self.schema, self.codec, self.fp, self.digest = old, DocCodec(old), stored, R.digest(stored)
        self.evolution = plan

    def finish_evolution(self) -> None:
        """After the caller carried the collection over to the new schema: from here on the files
        written (the next snapshot, log and MANIFEST) are the new schema's, and the history
        records the change."""
        with self._mutex:
            plan, target = self.evolution, self._target
            self.schema, self.codec, self.fp, self.digest = target
            self.history = E.next_version(self.history, plan, self.fp)
            self.evolution = self._target = None

    @property
    def schema_history(self) -> list:
        """The schema versions of the collection, oldest first (persist/evolve.py)."""
        return [dict(h) for h in self.history]

    def _check_snapshot_file(self) -> None:
        if not self.has_snapshot:
            return
        name = R.snap_name(self.generation)
        try:
            size = os.path.getsize(self._file(name))
        except OSError as e:
            raise self._error(name, f"snapshot named by MANIFEST cannot be read: {e}") from None
        if size != self._snap_bytes:
            raise self._error(name, f"snapshot is {size} bytes, MANIFEST says {self._snap_bytes}")

    def _open_log(self) -> None:
        name = R.log_name(self.generation)
        try:
            fd = os.open(self._file(name), os.O_RDWR)
        except OSError as e:
            raise self._error(name, f"log named by MANIFEST cannot be opened: {e}") from None
        self._fd = fd
        self._pending, self._end = self._scan_log(fd, name)

    def _scan_log(self, fd: int, name: str, start: int = 0) -> tuple:
        """-> (records [(kind, payload)], end of the last good record); truncates a torn tail.
        From `start` (a record boundary past the header, read-only): the records after it, an
        incomplete or unchecked last one left alone (the writer may be writing it)."""
        expected = R.file_header(R.LOG_MAGIC, self.generation, self.digest)
        try:
            st = os.fstat(fd)
            size, self._scan_seen = st.st_size, (st.st_size, st.st_mtime_ns)
            f = os.fdopen(os.dup(fd), "rb")
            f.seek(0)
        except OSError as e:
            raise self._error(name, f"cannot read: {e}") from None
        records = []
        following = start > 0
        with f:
            try:
                if following:
                    f.seek(start)
                head = expected if following else f.read(R.FILE.size)
                if len(head) < R.FILE.size:
                    # the header is written before the rename that publishes the log: no crash
                    # leaves it short, so the writes logged since the snapshot are lost
                    raise self._error(name, f"shorter ({len(head)} bytes) than its own header: the log "
                                            "was cut, and the writes since the last snapshot are gone")
                if head != expected:
                    if head[:8] != R.LOG_MAGIC:
                        raise self._error(name, "not a hybridsearch log (bad magic)")
                    if zlib.crc32(head[:R.FILE.size - 4]) != R.FILE.unpack(head)[3]:
                        raise self._error(name, "corrupt log header (checksum mismatch)")
                    raise self._error(name, "log of another generation or schema than MANIFEST")
                pos = start if following else R.FILE.size
                end = None
                while pos < size:
                    left = size - pos
                    hdr = f.read(min(R.REC.size, left))
                    if len(hdr) < R.REC.size:
                        end = pos  # incomplete header: torn tail
                        break
                    parsed = R.parse_header(hdr)
                    if parsed is None:
                        if self._only_junk_after(f, pos, size):
                            end = pos
                            break
                        raise self._error(name, f"corrupt record header at offset {pos}, followed by more records")
                    kind, length, crc = parsed
                    if length > left - R.REC.size:
                        end = pos  # the verified length runs past the end: an incomplete last record
                        break
                    payload = f.read(length)
                    if len(payload) != length:
                        raise self._error(name, f"short read at offset {pos}")
                    if not R.payload_ok(hdr, payload, crc):
                        if pos + R.REC.size + length == size:
                            end = pos  # the last record does not check out: torn
                            break
                        raise self._error(name, f"checksum mismatch in the record at offset {pos}, "
                                                "followed by more data")
                    if kind not in R.LOG_KINDS:
                        raise self._error(name, f"unknown record kind {kind} at offset {pos}")
                    records.append((kind, payload, pos))
                    pos += R.REC.size + length
            except OSError as e:
                raise self._error(name, f"cannot read: {e}") from None
        if end is not None:
            if not following:
                self._truncate(fd, name, end)
            pos = end
        return records, pos

    def _only_junk_after(self, f, pos: int, size: int) -> bool:
        """Whether nothing after `pos` looks like a valid record header (so it is a torn tail)."""
        f.seek(pos + 1)
        rest = f.read(size - pos - 1)
        i = rest.find(R.MAGIC)
        while i >= 0:
            if R.parse_header(rest[i:i + R.REC.size]) is not None:
                return False
            i = rest.find(R.MAGIC, i + 1)
        return True

    def _truncate(self, fd: int, name: str, end: int) -> None:
        if self.read_only:  # skipped, and left for the writer to drop: it may be a write in progress
            log.debug("%s: an incomplete last record at offset %d is not read yet", self._file(name), end)
            return
        log.warning("%s: a torn last write (an incomplete or unchecked record at offset %d) is dropped",
                    self._file(name), end)
        try:
            os.ftruncate(fd, end)
            os.fsync(fd)
        except OSError as e:
            raise self._error(name, f"cannot truncate the torn tail: {e}") from None

    def _clean(self, names: list) -> None:
        """Removes temp files and files of generations the manifest no longer names."""
        keep = {R.MANIFEST, R.log_name(self.generation)}
        if self.has_snapshot:
            keep.add(R.snap_name(self.generation))
        removed = False
        for name in names:
            if R.OURS.match(name) and name not in keep:
                try:
                    os.remove(self._file(name))
                    removed = True
                except OSError:
                    pass  # harmless: a later snapshot replaces or the next open retries
        if removed:
            fsync_dir(self.path)

    # ---------------------------------------------------------------- writing helpers
    def _write_file(self, name: str, chunks) -> int:
        """Writes name.tmp from an iterable of bytes, fsyncs it, renames it to name; -> size."""
        try:
            return replace_file(self._file(name), chunks)
        except OSError as e:
            raise self._error(name, f"cannot write: {e}") from None

    def _write_new_log(self, gen: int) -> None:
        self._write_file(R.log_name(gen), [R.file_header(R.LOG_MAGIC, gen, self.digest)])

    def _write_manifest(self, gen: int, has_snapshot: bool, snap_bytes: int) -> None:
        """R.MANIFEST.tmp, fsync, rename (the caller syncs the directory)."""
        self._write_file(R.MANIFEST, self.manifest_chunks(gen, has_snapshot, snap_bytes))

    def manifest_chunks(self, gen: int, has_snapshot: bool, snap_bytes: int) -> list:
        """The bytes of a R.MANIFEST naming generation `gen` (a backup writes one for its copy)."""
        payload = json.dumps({"format": R.FORMAT, "generation": gen, "schema": self.fp,
                              "snapshot": has_snapshot, "snapshot_bytes": snap_bytes,
                              "model": self.schema.name,
                              # the field order (the layout of unindexed fields and vector blocks)
                              # and the schema versions, for a later evolution (persist/evolve.py)
                              "declared": list(self.schema.fields), "history": self.history}).encode()
        return [R.file_header(R.MANIFEST_MAGIC, gen, self.digest), *R.record(R.K_MANIFEST, payload)]

    # ----------------------------------------------------------------- reading
    def load(self) -> tuple:
        """The last snapshot (or None) and the operations logged after it, in order."""
        with self._mutex:
            self._check_open()
            snapshot = self._load_snapshot() if self.has_snapshot else None
            records = self._pending
            self._pending = None
            name = R.log_name(self.generation)
            if records is None:
                records, end = self._scan_log(self._fd, name)
                self._end = end
            return snapshot, self._decode_ops(records, name)

    def _decode_ops(self, records: list, name: str) -> list:
        """The operations of the log `name`'s records, in order; a record that does not decode
        raises BackendError naming its offset."""
        ops = []
        for kind, payload, pos in records:
            try:
                ops.append(self._decode_op(kind, payload))
            except Corrupt as e:
                raise self._error(name, f"record at offset {pos}: {e}") from None
        return ops

    def _decode_op(self, kind: int, payload: bytes) -> tuple:
        if kind == R.K_UPSERT:
            docs = self.codec.decode(payload)
            if len({d.id for d in docs}) != len(docs):
                raise Corrupt("repeated id in one batch")
            return ("upsert", docs)
        if kind == R.K_DELETE:
            try:
                ids = json.loads(payload)
            except (ValueError, RecursionError):
                raise Corrupt("bad JSON") from None
            if not isinstance(ids, list) or not all(type(i) is str for i in ids):
                raise Corrupt("bad id list")
            return ("delete", ids)
        # R.K_UPDATE: u64 length + JSON field list + a one-document batch; R.K_UPDATE_MANY: the same
        # with u64 length + JSON id list before the batch (the document carries the values for all)
        view = memoryview(payload)
        fields, view = self._json_part(view, "field list")
        if (not isinstance(fields, list) or not all(type(f) is str for f in fields)
                or not set(fields) <= self.codec.all_set or "id" in fields):
            raise Corrupt("bad field list")
        ids = None
        if kind == R.K_UPDATE_MANY:
            ids, view = self._json_part(view, "id list")
            if not isinstance(ids, list) or not all(type(i) is str for i in ids):
                raise Corrupt("bad id list")
        docs = self.codec.decode(view)
        if len(docs) != 1:
            raise Corrupt("an update holds one document")
        return ("update", docs[0], fields) if ids is None else ("update_many", ids, docs[0], fields)

    @staticmethod
    def _json_part(view: memoryview, what: str) -> tuple:
        """(value, rest) of a u64 length + JSON prefix of a record's payload."""
        if len(view) < 8:
            raise Corrupt(f"{what} cut short")
        (n,) = struct.unpack_from("<Q", view)
        if n > len(view) - 8:
            raise Corrupt(f"{what} runs past the record")
        try:
            return json.loads(bytes(view[8:8 + n])), view[8 + n:]
        except (ValueError, RecursionError, UnicodeDecodeError):
            raise Corrupt("bad JSON") from None

    def _load_snapshot(self) -> Snapshot:
        name = R.snap_name(self.generation)
        path = self._file(name)
        try:
            f = os.fdopen(os.dup(self._snap_fd), "rb") if self._snap_fd is not None else open(path, "rb")
        except OSError as e:
            raise self._error(name, f"cannot open: {e}") from None
        with f:
            try:
                f.seek(0)
                size = os.fstat(f.fileno()).st_size
                if size != self._snap_bytes:
                    raise self._error(name, f"snapshot is {size} bytes, MANIFEST says {self._snap_bytes}")
                return self._read_snapshot(f, size, name)
            except OSError as e:
                raise self._error(name, f"cannot read: {e}") from None
            except Corrupt as e:
                raise self._error(name, f"corrupt snapshot: {e}") from None

    def _read_snapshot(self, f, size: int, name: str) -> Snapshot:
        head = f.read(R.FILE.size)
        if head != R.file_header(R.SNAP_MAGIC, self.generation, self.digest):
            if head[:8] != R.SNAP_MAGIC:
                raise Corrupt("not a hybridsearch snapshot (bad magic)")
            raise Corrupt("bad header (checksum, generation or schema)")
        pos = R.FILE.size
        hdr, kind, length, crc = _record_header(f, pos, size)
        payload = f.read(length)
        if len(payload) != length or not R.payload_ok(hdr, payload, crc):
            raise Corrupt(f"checksum mismatch in the record at offset {pos}")
        pos += R.REC.size + length
        if kind != R.K_SNAP_META:
            raise Corrupt("first record is not the snapshot header")
        try:
            meta = json.loads(payload)
        except (ValueError, RecursionError):
            raise Corrupt("bad JSON in the snapshot header") from None
        if not isinstance(meta, dict):
            raise Corrupt("bad snapshot header")
        if meta.get("layout") != "arrays":  # a checksummed header of another layout: not damage
            raise self._error(name, f"written by an unsupported format (snapshot layout "
                                    f"{meta.get('layout')!r}); this version reads format {R.FORMAT}")
        return self._read_arrays(f, size, pos, meta)

    def _read_arrays(self, f, size: int, pos: int, meta: dict) -> Snapshot:
        """Every record's checksum verified by streaming it through a small buffer (so
        the check costs no resident memory), then each array is a view of the file mapped
        copy-on-write: opening costs a pass over the bytes, never a parse or a copy."""
        count = meta.get("arrays")
        if type(count) is not int or count < 0 or not isinstance(meta.get("meta"), dict):
            raise Corrupt("bad snapshot header")
        buf = memoryview(bytearray(1 << 22))
        spans = []
        for _ in range(count + 1):
            f.seek(pos)
            hdr, kind, length, crc = _record_header(f, pos, size)
            c, left = zlib.crc32(hdr[:16]), length
            while left:
                got = f.readinto(buf[:min(left, len(buf))])
                if not got:
                    raise Corrupt(f"short read in the record at offset {pos}")
                c = zlib.crc32(buf[:got], c)
                left -= got
            if c != crc:
                raise Corrupt(f"checksum mismatch in the record at offset {pos}")
            spans.append((kind, pos + R.REC.size, length))
            pos += R.REC.size + length
        if spans[-1][0] != R.K_SNAP_END or spans[-1][2] or pos != size:
            raise Corrupt("missing end record or trailing bytes")
        mapping = mmap.mmap(f.fileno(), size, access=mmap.ACCESS_COPY)
        arrays = {}
        for kind, start, length in spans[:-1]:
            if kind != R.K_SNAP_ARRAY or length < 4:
                raise Corrupt(f"expected an array record at offset {start - R.REC.size}")
            (hlen,) = struct.unpack_from("<I", mapping, start)
            try:
                head = json.loads(mapping[start + 4:start + 4 + min(hlen, length - 4)])
                name, dtype, shape = head["name"], head["dtype"], tuple(head["shape"])
            except (ValueError, RecursionError, KeyError, TypeError):
                raise Corrupt(f"bad array header at offset {start}") from None
            if (not isinstance(name, str) or name in arrays or dtype not in _ARRAY_DTYPES
                    or not all(type(x) is int and x >= 0 for x in shape) or len(shape) > 2):
                raise Corrupt(f"bad array header at offset {start}")
            items = int(np.prod(shape, dtype=np.int64))
            data = start + 4 + hlen
            data += -data % R.ALIGN
            if data + items * np.dtype(dtype).itemsize != start + length:
                raise Corrupt(f"array {name!r} does not fill its record")
            arrays[name] = (np.frombuffer(mapping, dtype=dtype, count=items, offset=data).reshape(shape)
                            if items else np.zeros(shape, dtype=dtype))
        return Snapshot(meta=meta["meta"], arrays=arrays, mapping=mapping)

    # ---------------------------------------------------------------- logging
    @property
    def snapshot_bytes(self) -> int:
        """Size of the current snapshot file (0 without one)."""
        return self._snap_bytes if self.has_snapshot else 0

    @property
    def log_bytes(self) -> int:
        """Bytes of records in the log since the last snapshot."""
        return self._end - R.FILE.size if self._fd is not None else 0

    # Each log_* appends one record and, with sync=True, fsyncs it; sync=False leaves the fsync to
    # a later sync() that covers every record appended before it (group commit, persist/commit.py).
    def log_upsert(self, docs: list, sync: bool = True) -> None:
        self._append(R.K_UPSERT, self.codec.encode(list(docs)), sync)

    def log_batch(self, batch, sync: bool = True) -> None:
        """log_upsert of a Batch, encoded from its columns (no document is built)."""
        self._append(R.K_UPSERT, self.codec.encode_batch(batch), sync)

    def log_delete(self, ids: list, sync: bool = True) -> None:
        ids = list(ids)
        if not all(isinstance(i, str) for i in ids):
            raise SchemaError("ids must be strings")
        self._append(R.K_DELETE, json.dumps([str(i) for i in ids]).encode("ascii"), sync)

    def log_update(self, doc, fields: list, sync: bool = True) -> None:
        self._append(R.K_UPDATE, self._update_payload(doc, fields, None), sync)

    def log_update_many(self, ids: list, doc, fields: list, sync: bool = True) -> None:
        """One record setting `fields` to doc's values on every id (update_many: one write)."""
        ids = list(ids)
        if not all(isinstance(i, str) for i in ids):
            raise SchemaError("ids must be strings")
        self._append(R.K_UPDATE_MANY, self._update_payload(doc, fields, ids), sync)

    def _update_payload(self, doc, fields: list, ids: Optional[list]) -> bytes:
        fields = list(fields)
        unknown = [f for f in fields if f not in self.codec.all_set or f == "id"]
        if unknown:
            raise SchemaError(f"{self.schema.name} has no updatable field {unknown[0]!r}")
        parts = [json.dumps(fields).encode("ascii")]
        if ids is not None:
            parts.append(json.dumps(ids).encode("utf-8"))
        return b"".join([*(struct.pack("<Q", len(p)) + p for p in parts), self.codec.encode([doc])])

    def sync(self) -> None:
        """Makes every record appended so far durable (one fsync)."""
        with self._mutex:
            self._check_writable()
            fd, name = self._fd, R.log_name(self.generation)
        self._fsync(fd, name)

    def _fsync(self, fd: int, name: str) -> None:
        try:
            os.fsync(fd)
        except OSError as e:
            # after a failed fsync the kernel may have dropped dirty pages: do not go on
            self._broken = f"{self._file(name)}: fsync failed ({e}); reopen the collection"
            raise self._error(name, f"cannot fsync: {e}") from None

    def _append(self, kind: int, payload: bytes, sync: bool = True) -> None:
        head, payload = R.record(kind, payload)
        with self._mutex:
            self._check_writable()
            name = R.log_name(self.generation)
            end = self._end
            try:
                pwrite_all(self._fd, head, end)
                pwrite_all(self._fd, payload, end + len(head))
            except OSError as e:
                try:  # take the partial record back so later appends do not follow garbage
                    os.ftruncate(self._fd, end)
                except OSError:
                    self._broken = f"{self._file(name)}: a failed write could not be undone ({e})"
                raise self._error(name, f"cannot append: {e}") from None
            if sync:
                self._fsync(self._fd, name)
            self._end = end + len(head) + len(payload)
            self._pending = None  # load() reads the log again

    # ---------------------------------------------------------------- snapshot
    def snapshot_arrays(self, meta: dict, arrays: dict) -> None:
        """Atomically replaces the snapshot with named arrays (numbers, 1-D or 2-D,
        each starting 64-byte aligned in the file so that load() maps it) and JSON `meta`."""
        items = []
        for name, a in arrays.items():
            a = np.ascontiguousarray(a)
            if not isinstance(name, str) or a.dtype.str not in _ARRAY_DTYPES or a.ndim > 2:
                raise ValueError(f"snapshot: array {name!r} ({a.dtype}, {a.ndim}-d) cannot be saved")
            items.append((json.dumps({"name": name, "dtype": a.dtype.str, "shape": list(a.shape)}).encode(),
                          memoryview(a).cast("B") if a.size else b""))
        head = json.dumps({"layout": "arrays", "arrays": len(items), "meta": meta}).encode()  # fails early

        def body(new):
            pos = 0
            first = [R.file_header(R.SNAP_MAGIC, new, self.digest), *R.record(R.K_SNAP_META, head)]
            for chunk in first:
                pos += len(chunk)
                yield chunk
            for h, data in items:
                lead = pos + R.REC.size + 4 + len(h)
                for chunk in R.record_parts(R.K_SNAP_ARRAY, [struct.pack("<I", len(h)), h,
                                                             bytes(-lead % R.ALIGN), data]):
                    pos += len(chunk)
                    yield chunk
            yield from R.record(R.K_SNAP_END, b"")

        self._publish(body)

    def _publish(self, body) -> None:
        """Writes snap and log of the next generation (body(gen) yields the snapshot's bytes),
        then R.MANIFEST naming them; the old generation's files go last."""
        with self._mutex:
            self._check_writable()
            new = self.generation + 1
            snap, log = R.snap_name(new), R.log_name(new)
            try:
                size = self._write_file(snap, body(new))
                self._write_new_log(new)
                fsync_dir(self.path)  # both renames are durable before R.MANIFEST names them
                self._write_manifest(new, True, size)
            except Exception as e:
                # R.MANIFEST still names the old generation: drop what was written of the new one
                for name in (snap, log):
                    try:
                        os.remove(self._file(name))
                    except OSError:
                        pass
                if isinstance(e, OSError):
                    raise BackendError(f"{self.path}: snapshot failed: {e}") from None
                raise
            # committed: R.MANIFEST names the new generation
            old_gen, old_had = self.generation, self.has_snapshot
            self.generation, self.has_snapshot, self._snap_bytes = new, True, size
            self._switch_log(old_gen, old_had, log)
            try:
                fsync_dir(self.path)
            except OSError as e:
                self._broken = f"{self.path}: cannot sync the directory after a snapshot ({e})"
                raise BackendError(self._broken) from None

    def _switch_log(self, old_gen: int, old_had_snapshot: bool, log: str) -> None:
        """After R.MANIFEST names the new generation: use its log, drop the old files."""
        old_fd = self._fd
        self._pending = None
        self._end = R.FILE.size
        try:
            self._fd = os.open(self._file(log), os.O_RDWR)
        except OSError as e:
            self._fd = None
            self._broken = f"{self._file(log)}: cannot open the new log ({e}); reopen the collection"
        if old_fd is not None:
            os.close(old_fd)
        for name in ([R.snap_name(old_gen)] if old_had_snapshot else []) + [R.log_name(old_gen)]:
            try:
                os.remove(self._file(name))
            except OSError:
                pass  # removed on the next open

    # ------------------------------------------------------------------ closing
    def _check_open(self) -> None:
        if self._closed:
            raise BackendError(f"{self.path}: the journal is closed")
        if self._fd is None:
            raise BackendError(self._broken or f"{self.path}: the log is not open")

    def _check_writable(self) -> None:
        self._check_open()
        if self.read_only:
            raise BackendError(f"{self.path}: opened read-only")
        if self._broken is not None:
            raise BackendError(self._broken)
        if self.evolution is not None:  # the files are still the old schema's: nothing is logged to them
            raise BackendError(f"{self.path}: the collection is being carried over to its new schema")

    def _close_fds(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        if self._snap_fd is not None:
            os.close(self._snap_fd)
            self._snap_fd = None
        if self._lock_fd is not None:
            unlock(self._lock_fd)
            self._lock_fd = None

    def close(self) -> None:
        """Closes the log and releases the lock; idempotent."""
        with self._mutex:
            self._pending = None
            self._closed = True
            self._close_fds()

    def __enter__(self) -> "Journal":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:  # pragma: no cover - best effort
        try:
            self._close_fds()
        except Exception:
            pass
