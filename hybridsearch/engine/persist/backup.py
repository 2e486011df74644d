"""Online backup and restore of a journaled collection directory (persist/__init__.py).

The snapshot of a generation never changes once MANIFEST names it, and the log only grows by
appends, so a consistent copy needs the writers held off only while `pin` notes the generation,
the log's end offset and descriptors on both files (the storage calls it under its writer lock,
with no write in flight). The bytes are copied afterwards without any lock: the snapshot
whole, the log's [0, end). A snapshot the writer takes meanwhile removes the old files, but the
descriptors keep them readable. The small files others keep in the directory (the identity of
the embedding functions) are copied along. The copy gets a MANIFEST of its own naming the same
generation, written last, and is checked record by record before it is renamed into place (engine/copydest.py:
dest either does not exist or holds the complete copy, whatever kills the process).

`verify` checks a collection directory without its schema: MANIFEST, the file headers (magic,
generation, the digest of the schema MANIFEST records) and every record's checksums, strictly: a
backup ends on a record boundary, so a torn log tail, which an open would forgive, is refused
here. `restore` copies a backup directory and verifies the copy before publishing it.
"""
from __future__ import annotations

import contextlib
import json
import logging
import os
import time
import zlib
from dataclasses import dataclass
from typing import Optional

from hybridsearch.engine.copydest import check_dest, discard, publish, temp_beside
from hybridsearch.engine.files import fsync_dir, replace_file
from hybridsearch.engine.persist import records as R
from hybridsearch.errors import BackendError

_CHUNK = 1 << 22
log = logging.getLogger("hybridsearch")


@dataclass
class Pinned:
    """One state of a journal's files, held open: what a backup copies."""

    generation: int
    snap_fd: Optional[int]  # None: the generation has no snapshot
    snap_bytes: int
    log_fd: int
    log_end: int  # the copy takes the log's bytes [0, log_end)
    manifest: list  # the chunks of a MANIFEST naming this generation
    source: str  # the collection's directory (its side files are copied too)

    def close(self) -> None:
        for fd in (self.snap_fd, self.log_fd):
            if fd is not None:
                os.close(fd)
        self.snap_fd = self.log_fd = None


def pin(journal) -> Pinned:
    """The journal's current state, with descriptors of its own on the files; the caller holds
    the storage's writer lock with no write in flight, so the log's [0, end) is every write applied."""
    with journal._mutex:  # a friend of Journal: these fields change together under it
        journal._check_open()
        gen, has, size, end = journal.generation, journal.has_snapshot, journal._snap_bytes, journal._end
        snap_fd = None
        log_fd = os.dup(journal._fd)
        try:
            if has:
                snap_fd = (os.dup(journal._snap_fd) if journal._snap_fd is not None
                           else os.open(os.path.join(journal.path, R.snap_name(gen)), os.O_RDONLY))
        except OSError as e:
            os.close(log_fd)
            raise BackendError(f"{journal.path}: cannot open the snapshot to back it up: {e}") from None
        return Pinned(gen, snap_fd, size if has else 0, log_fd, end, journal.manifest_chunks(gen, has, size),
                      journal.path)


_SIDE_MAX = 1 << 20


def side_files(folder: str) -> dict:
    """name -> bytes of the small files others keep in a collection's directory beside the
    journal's (the identity of its embedding functions, embedding/identity.py): a copy carries
    them. Each is replaced whole by a rename when it changes, so one read sees one version."""
    found = {}
    try:
        names = os.listdir(folder)
    except OSError as e:
        raise BackendError(f"{folder}: cannot list the directory: {e}") from None
    for name in names:
        path = os.path.join(folder, name)
        if R.OURS.match(name) or name == R.LOCK or name.endswith(".tmp") or not os.path.isfile(path):
            continue
        try:
            with open(path, "rb") as f:
                data = f.read(_SIDE_MAX + 1)
        except OSError as e:
            raise BackendError(f"{path}: cannot read: {e}") from None
        if len(data) > _SIDE_MAX:  # not one of ours: someone else's file in the directory
            log.warning("%s: not copied by the backup (%d+ bytes, not a file of the collection)", path, len(data))
            continue
        found[name] = data
    return found


def _write_side_files(folder: str, files: dict) -> int:
    for name, data in files.items():
        replace_file(os.path.join(folder, name), [data])
    return sum(len(d) for d in files.values())


def _copy(src_fd: int, dst_fd: int, length: int, what: str) -> None:
    """Bytes [0, length) of src_fd to dst_fd (in the kernel where it can)."""
    pos = 0
    fast = hasattr(os, "copy_file_range")
    while pos < length:
        n = min(_CHUNK << 4, length - pos)
        k = 0
        if fast:
            try:
                k = os.copy_file_range(src_fd, dst_fd, n, pos, pos)
            except OSError:
                fast = False  # another filesystem or kernel: copy through user space
        if not fast:
            data = os.pread(src_fd, min(n, _CHUNK), pos)
            k = len(data)
            view = memoryview(data)
            off = pos
            while view:
                w = os.pwrite(dst_fd, view, off)
                view, off = view[w:], off + w
        if k <= 0:
            raise BackendError(f"{what}: the file ended at {pos} bytes, {length} were expected")
        pos += k


def _copy_file(src_fd: int, length: int, dst: str) -> None:
    fd = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        _copy(src_fd, fd, length, dst)
        os.ftruncate(fd, length)
        os.fsync(fd)
    finally:
        os.close(fd)


def write_copy(pinned: Pinned, dest: str) -> int:
    """Copies the pinned files to a new directory `dest` (checked by check_dest) -> bytes written."""
    with _building(dest) as tmp:
        os.mkdir(tmp)
        total = 0
        # the data files first, under their names: a directory holding them without MANIFEST is
        # refused by an open (persist/__init__.py), so a half copy never opens as a collection
        if pinned.snap_fd is not None:
            _copy_file(pinned.snap_fd, pinned.snap_bytes, os.path.join(tmp, R.snap_name(pinned.generation)))
            total += pinned.snap_bytes
        _copy_file(pinned.log_fd, pinned.log_end, os.path.join(tmp, R.log_name(pinned.generation)))
        total += pinned.log_end
        total += _write_side_files(tmp, side_files(pinned.source))
        fsync_dir(tmp)
        total += replace_file(os.path.join(tmp, R.MANIFEST), pinned.manifest)
        fsync_dir(tmp)
        verify(tmp)
        publish(tmp, dest)
        return total


def write_snapshot(schema, dest: str, meta: dict, arrays: dict) -> int:
    """A new collection directory `dest` holding one snapshot of (meta, arrays), as a storage's
    snapshot writes them (a storage without files backs up this way) -> bytes written."""
    from hybridsearch.engine.persist.journal import Journal

    with _building(dest) as tmp:
        journal = Journal(tmp, schema)
        try:
            journal.snapshot_arrays(meta, arrays)
            total = journal.snapshot_bytes + R.FILE.size
        finally:
            journal.close()
        os.remove(os.path.join(tmp, R.LOCK))  # a copy holds no lock: the next writer makes its own
        fsync_dir(tmp)
        publish(tmp, dest)
        return total


@contextlib.contextmanager
def _building(dest: str):
    """A temporary name beside `dest` to build the copy under; removed whatever happens (the copy
    is published by renaming it first), an OSError meanwhile -> BackendError."""
    tmp = temp_beside(dest)
    try:
        yield tmp
    except OSError as e:
        raise BackendError(f"{dest}: the backup failed: {e}; nothing was written there") from None
    finally:
        discard(tmp)


# --------------------------------------------------------------------- checking
def _read_manifest(path: str) -> dict:
    name = os.path.join(path, R.MANIFEST)
    try:
        with open(name, "rb") as f:
            data = f.read(1 << 20)
    except FileNotFoundError:
        raise BackendError(f"{path}: not a collection (no {R.MANIFEST}): an unfinished copy, or not a backup") from None
    except OSError as e:
        raise BackendError(f"{name}: cannot read: {e}") from None
    if len(data) < R.FILE.size + R.REC.size or data[:8] != R.MANIFEST_MAGIC:
        raise BackendError(f"{name}: not a hybridsearch manifest (bad magic or truncated)")
    _, gen, digest, crc = R.FILE.unpack_from(data)
    head = data[R.FILE.size:R.FILE.size + R.REC.size]
    parsed = R.parse_header(head)
    payload = data[R.FILE.size + R.REC.size:]
    if (zlib.crc32(data[:R.FILE.size - 4]) != crc or parsed is None or parsed[0] != R.K_MANIFEST
            or parsed[1] != len(payload) or not R.payload_ok(head, payload, parsed[2])):
        raise BackendError(f"{name}: corrupt (checksum mismatch or wrong length)")
    try:
        meta = json.loads(payload)
    except (ValueError, RecursionError):
        raise BackendError(f"{name}: corrupt (bad JSON)") from None
    if not isinstance(meta, dict) or meta.get("format") != R.FORMAT:
        found = meta.get("format") if isinstance(meta, dict) else None
        raise BackendError(f"{name}: written by an unsupported format {found!r}; this version reads format {R.FORMAT}")
    g, has, size, fp = meta.get("generation"), meta.get("snapshot"), meta.get("snapshot_bytes"), meta.get("schema")
    if (type(g) is not int or g != gen or type(has) is not bool or type(size) is not int or size < 0
            or not isinstance(fp, list)):
        raise BackendError(f"{name}: corrupt (bad fields)")
    try:
        ok = R.digest(fp) == digest
    except (TypeError, ValueError):
        ok = False
    if not ok:
        raise BackendError(f"{name}: corrupt (the schema digest does not match its fingerprint)")
    return {"generation": g, "snapshot": has, "snapshot_bytes": size, "digest": digest, "model": meta.get("model")}


def _walk(f, name: str, size: int, kinds) -> list:
    """Every record after the file header, checksums verified -> [(kind, length)]; BackendError
    on anything that is not a whole, checked record."""
    pos = R.FILE.size
    found = []
    while pos < size:
        f.seek(pos)
        hdr = f.read(R.REC.size)
        parsed = R.parse_header(hdr)
        if parsed is None:
            raise BackendError(f"{name}: bad record header at offset {pos}")
        kind, length, crc = parsed
        if length > size - pos - R.REC.size:
            raise BackendError(f"{name}: the record at offset {pos} runs past the end of the file (cut short)")
        if kind not in kinds:
            raise BackendError(f"{name}: unexpected record kind {kind} at offset {pos}")
        c, left = zlib.crc32(hdr[:16]), length
        while left:
            data = f.read(min(left, _CHUNK))
            if not data:
                raise BackendError(f"{name}: short read at offset {pos}")
            c = zlib.crc32(data, c)
            left -= len(data)
        if c != crc:
            raise BackendError(f"{name}: checksum mismatch in the record at offset {pos}")
        found.append((kind, length))
        pos += R.REC.size + length
    return found


def _check_file(path: str, fname: str, magic: bytes, man: dict, kinds) -> tuple:
    name = os.path.join(path, fname)
    try:
        with open(name, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if f.read(R.FILE.size) != R.file_header(magic, man["generation"], man["digest"]):
                raise BackendError(f"{name}: bad header (not this collection's generation and schema, or damaged)")
            return size, _walk(f, name, size, kinds)
    except FileNotFoundError:
        raise BackendError(f"{name}: missing; {R.MANIFEST} names it") from None
    except OSError as e:
        raise BackendError(f"{name}: cannot read: {e}") from None


def verify(path) -> dict:
    """Checks the collection directory `path` (see the module docstring) -> {"generation",
    "bytes", "log_records", "model"}; BackendError naming the file that does not check out."""
    path = os.fspath(path)
    man = _read_manifest(path)
    total = 0
    if man["snapshot"]:
        size, recs = _check_file(path, R.snap_name(man["generation"]), R.SNAP_MAGIC, man,
                                 {R.K_SNAP_META, R.K_SNAP_ARRAY, R.K_SNAP_END})
        name = os.path.join(path, R.snap_name(man["generation"]))
        if size != man["snapshot_bytes"]:
            raise BackendError(f"{name}: snapshot is {size} bytes, {R.MANIFEST} says {man['snapshot_bytes']}")
        if (not recs or recs[0][0] != R.K_SNAP_META or recs[-1] != (R.K_SNAP_END, 0)
                or any(k == R.K_SNAP_END for k, _ in recs[:-1])):
            raise BackendError(f"{name}: incomplete snapshot (no header or end record)")
        total += size
    size, recs = _check_file(path, R.log_name(man["generation"]), R.LOG_MAGIC, man, set(R.LOG_KINDS))
    total += size
    return {"generation": man["generation"], "bytes": total, "log_records": len(recs), "model": man["model"]}


def restore(src, dest, schema=None) -> dict:
    """Copies the backup directory `src` to `dest` (which must not exist, or be an empty folder):
    the files MANIFEST names, checked by `verify` in the copy before it is renamed into place;
    with `schema` every document is also decoded against it. -> {"bytes", "generation", "seconds"}."""
    started = time.perf_counter()
    src = os.path.abspath(os.fspath(src))
    dest = check_dest(dest, "restore")
    man = _read_manifest(src)
    names = ([R.snap_name(man["generation"])] if man["snapshot"] else []) + [R.log_name(man["generation"]), R.MANIFEST]
    tmp = temp_beside(dest)
    try:
        os.mkdir(tmp)
        _write_side_files(tmp, side_files(src))
        for fname in names:
            try:
                fd = os.open(os.path.join(src, fname), os.O_RDONLY)
            except FileNotFoundError:
                raise BackendError(f"{os.path.join(src, fname)}: missing (or {src} changed while it was read: "
                                   "back up a collection in use with DocumentArray.backup)") from None
            try:
                _copy_file(fd, os.fstat(fd).st_size, os.path.join(tmp, fname))
            finally:
                os.close(fd)
        fsync_dir(tmp)
        info = verify(tmp)
        if info["generation"] != man["generation"]:
            raise BackendError(f"{src} changed while it was read: back up a collection in use with DocumentArray.backup")
        if schema is not None:
            _decode_all(tmp, schema)
        publish(tmp, dest, "restore")
    except OSError as e:
        raise BackendError(f"{dest}: the restore failed: {e}; nothing was written there") from None
    finally:
        discard(tmp)
    return {"bytes": info["bytes"], "generation": info["generation"], "seconds": time.perf_counter() - started}


def _decode_all(path: str, schema) -> None:
    """Opens the copy read-only with `schema` and decodes every record (BackendError if it does
    not fit: another schema, a document that does not read back)."""
    from hybridsearch.engine.persist.journal import Journal

    with Journal(path, schema, read_only=True) as journal:
        snapshot, _ = journal.load()
        if snapshot is not None and snapshot.mapping is not None:
            snapshot.arrays.clear()
            try:
                snapshot.mapping.close()
            except BufferError:  # a view still alive: the collector unmaps it
                pass
