"""Durability for embedded storages with a `path`: snapshots plus a log of batches.

One collection lives in one directory:

    MANIFEST                the current generation g and the schema fingerprint
                            (written to MANIFEST.tmp, fsynced, renamed, directory fsynced)
    snap-<g>.hss            the snapshot of generation g (absent for a collection that has
                            never been snapshotted): live documents, their slots and insertion
                            sequence numbers, and opaque blobs such as the serialized graph
    log-<g>.hsl             batches logged since that snapshot, appended and fsynced one
                            record per call
    LOCK                    an exclusive flock against a second writer (in this or another process)

Every file is a fixed file header followed by records. A record is

    magic (4 bytes) | kind (u16) | flags (u16, 0) | payload length (u64)
    | crc32(the 16 bytes before it + payload) (u32) | crc32(the 20 bytes before it) (u32)
    | payload

all little-endian. The second CRC makes the length trustworthy before the payload is
read, so a record whose (verified) length runs past the end of the log is an
incomplete write, and no length is ever used unchecked: each is bounded by the bytes
left in the file before anything is read or allocated.

A batch of documents is encoded as: n, JSON length, number of vectors m (3 x u64);
the JSON of the non-vector fields as columns; n presence bytes for the vector field;
the m present vectors as one little-endian float32 (m, dim) block. No pickle: a file
from anywhere can be opened safely; a damaged one raises `hs.BackendError` naming it.

Recovery rules: a torn tail of the log (an incomplete last record, a last record
whose checksum fails, or bytes after the last good record in which no valid record
header starts, such as zero fill) is dropped and the log truncated to the last good
record; anything else that does not check out (a bad record followed by more records,
a bad snapshot or manifest, a file of another schema or generation) raises
`hs.BackendError` naming the file. Snapshot, manifest and new log are each written to
a .tmp file, fsynced and renamed, and the directory fsynced, before MANIFEST (written
the same way) names the new generation; only then are the old files removed. Stale
.tmp files and files of generations MANIFEST does not name are removed on open.

Every write of a document checks that it will read back (types, ids, finite vectors),
so what `log_upsert` / `snapshot` accept, `load` returns. Decoding builds documents
without re-validating them (the data is checksummed and type-checked per column):
several times faster than `model_validate`. They compare equal field by field to what was
written, with fields in declaration order and every field in `model_fields_set`; each
vector is its own read-only float32 array.

The LOCK is a BSD flock held by the open Journal: it refuses a second Journal on the same
directory, in this process as in another, with `hs.BackendError`.
"""
from __future__ import annotations

import contextlib
import errno
import gc
import hashlib
import json
import os
import re
import struct
import threading
import zlib
from dataclasses import dataclass
from typing import Optional

import numpy as np

from ..document import Document, Kind, Schema, _field_adapter, schema_of
from ..errors import BackendError, SchemaError
from .filelock import lock_exclusive, unlock

FORMAT = 1

# ----------------------------------------------------------------- framing
_MAGIC = b"\x93hsR"
_REC = struct.Struct("<4sHHQII")  # magic, kind, flags, length, crc(header16 + payload), crc(header20)
_FILE = struct.Struct("<8sQ16sI")  # file magic, generation, schema digest, crc of the 32 bytes before
_LOG_MAGIC = b"\x93hsLOG\x00\x01"
_SNAP_MAGIC = b"\x93hsSNP\x00\x01"
_MANIFEST_MAGIC = b"\x93hsMAN\x00\x01"

# record kinds
K_UPSERT, K_DELETE, K_UPDATE = 1, 2, 3
K_MANIFEST = 16
K_SNAP_META, K_SNAP_SLOTS, K_SNAP_DOCS, K_SNAP_EXTRA, K_SNAP_END = 32, 33, 34, 35, 36
_LOG_KINDS = {K_UPSERT: "upsert", K_DELETE: "delete", K_UPDATE: "update"}

_BATCH = struct.Struct("<QQQ")  # n docs, JSON length, vectors present
_SNAP_CHUNK = 65536  # documents per snapshot record

MANIFEST = "MANIFEST"
LOCK = "LOCK"
_OURS = re.compile(r"^(snap-\d{10}\.hss|log-\d{10}\.hsl|MANIFEST)(\.tmp)?$")


def _snap_name(gen: int) -> str:
    return f"snap-{gen:010d}.hss"


def _log_name(gen: int) -> str:
    return f"log-{gen:010d}.hsl"


def _record(kind: int, payload) -> tuple:
    """-> (24-byte header, payload) of one record."""
    head16 = struct.pack("<4sHHQ", _MAGIC, kind, 0, len(payload))
    crc = zlib.crc32(payload, zlib.crc32(head16))
    head20 = head16 + struct.pack("<I", crc)
    return head20 + struct.pack("<I", zlib.crc32(head20)), payload


def _parse_header(buf: bytes) -> Optional[tuple]:
    """(kind, length, crc) of a record header, or None if it does not check out."""
    if len(buf) < _REC.size:
        return None
    magic, kind, flags, length, crc, hcrc = _REC.unpack_from(buf)
    if magic != _MAGIC or flags != 0 or zlib.crc32(buf[:20]) != hcrc:
        return None
    return kind, length, crc


def _payload_ok(header: bytes, payload: bytes, crc: int) -> bool:
    return zlib.crc32(payload, zlib.crc32(header[:16])) == crc


def _file_header(magic: bytes, gen: int, digest: bytes) -> bytes:
    head = struct.pack("<8sQ16s", magic, gen, digest)
    return head + struct.pack("<I", zlib.crc32(head))


# ------------------------------------------------------------- fingerprint
def fingerprint(schema: Schema) -> list:
    """What a file depends on: [name, kind, optional, dim] of every field, by name."""
    return sorted([s.name, s.kind.value, bool(s.optional), int(s.dim)] for s in schema.fields.values())


def _digest(fp: list) -> bytes:
    return hashlib.blake2b(json.dumps(fp).encode(), digest_size=16).digest()


def _describe_mismatch(stored: list, ours: list) -> str:
    a = {f[0]: f for f in stored if isinstance(f, list) and f}
    b = {f[0]: f for f in ours}
    parts = []
    for name in sorted(set(a) | set(b), key=str):
        if name not in b:
            parts.append(f"field {name!r} is in the files but not in the schema")
        elif name not in a:
            parts.append(f"field {name!r} is in the schema but not in the files")
        elif a[name] != b[name]:
            _, k1, o1, d1 = (list(a[name]) + [None] * 4)[:4]
            _, k2, o2, d2 = b[name]
            what = []
            if k1 != k2:
                what.append(f"kind {k1} there, {k2} here")
            if o1 != o2:
                what.append(f"{'optional' if o1 else 'required'} there, {'optional' if o2 else 'required'} here")
            if d1 != d2:
                what.append(f"dimension {d1} there, {d2} here")
            parts.append(f"field {name!r}: " + ", ".join(what))
    return "; ".join(parts) or "fingerprints differ"


# ---------------------------------------------------------------- document codec
class _Corrupt(Exception):
    """A payload that does not decode; turned into BackendError naming the file."""


_ALLOWED = {
    Kind.ID: {str},
    Kind.TEXT: {str, type(None)},
    Kind.KEYWORD: {str, type(None)},
    Kind.INT: {int, type(None)},
    Kind.FLOAT: {float, int, type(None)},  # an int default in a float field stays an int
    Kind.BOOL: {bool, type(None)},
    Kind.OTHER: {str},  # each value as its own pydantic JSON
}


class DocCodec:
    """Batches of documents of one schema <-> bytes (JSON columns + one float32 block)."""

    def __init__(self, schema: Schema) -> None:
        self.schema = schema
        self.model = schema.model
        self.specs = sorted((s for s in schema.fields.values() if s.kind is not Kind.VECTOR),
                            key=lambda s: s.name)
        self.names = [s.name for s in self.specs]
        self.vec = schema.vector
        self.dim = self.vec.dim if self.vec is not None else 0
        self.adapters = {s.name: _field_adapter(schema, s.name) for s in self.specs if s.kind is Kind.OTHER}
        self.all_names = self.names + ([self.vec.name] if self.vec is not None else [])
        self.all_set = frozenset(self.all_names)
        model = self.model
        # documents are built with their fields in declaration order, as validation leaves them
        self.declared = list(model.model_fields)
        self.order = [self.all_names.index(f) for f in self.declared] if set(self.declared) == self.all_set else None
        # plain models are built directly (what model_construct does, minus its per-field
        # alias handling); anything with private attributes or post-init hooks goes the long way
        self.fast = (not getattr(model, "__private_attributes__", None)
                     and getattr(model, "__pydantic_post_init__", None) is None
                     and model.model_config.get("extra") != "allow"
                     and self.order is not None)

    # ------------------------------------------------------------ encode
    def encode(self, docs: list, unique_ids: bool = True) -> bytes:
        n = len(docs)
        for d in docs:
            if not isinstance(d, self.model):
                raise SchemaError(f"expected {self.model.__name__} documents, got {type(d).__name__}")
        columns = []
        for spec in self.specs:
            name = spec.name
            values = [getattr(d, name) for d in docs]
            if spec.kind is Kind.OTHER:
                adapter = self.adapters[name]
                try:
                    values = [adapter.dump_json(v).decode() for v in values]
                    for v in values:  # what is written must read back
                        adapter.validate_json(v)
                except Exception as e:
                    raise SchemaError(f"{self.model.__name__}.{name}: cannot be stored: {e}") from None
            elif not set(map(type, values)) <= _ALLOWED[spec.kind]:
                values = [_exact(spec, v, self.model.__name__) for v in values]
            columns.append(values)
        ids = columns[self.names.index("id")]
        if not all(ids):
            raise SchemaError(f"{self.model.__name__}.id: empty id")
        if unique_ids and len(set(ids)) != n:
            raise SchemaError(f"{self.model.__name__}: repeated id in one batch")
        try:
            js = json.dumps({"f": self.names, "c": columns}, separators=(",", ":")).encode("ascii")
        except ValueError as e:  # an int too long to print
            raise SchemaError(f"{self.model.__name__}: cannot be stored: {e}") from None
        parts = [b"", js]
        m = 0
        if self.vec is not None:
            vecs = [getattr(d, self.vec.name) for d in docs]
            mask = bytes([v is not None for v in vecs])
            present = [v for v in vecs if v is not None]
            m = len(present)
            block = np.empty((0, self.dim), dtype="<f4")
            if m:
                try:
                    block = np.ascontiguousarray(np.stack(present), dtype="<f4")
                except (ValueError, TypeError) as e:
                    raise SchemaError(f"{self.model.__name__}.{self.vec.name}: {e}") from None
            if block.shape != (m, self.dim):
                raise SchemaError(f"{self.model.__name__}.{self.vec.name}: expected {self.dim} dimensions")
            if not np.isfinite(block).all():
                raise SchemaError(f"{self.model.__name__}.{self.vec.name}: contains NaN or inf")
            parts += [mask, block.tobytes()]
        parts[0] = _BATCH.pack(n, len(js), m)
        return b"".join(parts)

    # ------------------------------------------------------------ decode
    def decode(self, payload) -> list:
        # hundreds of thousands of new objects: the cyclic GC would rescan them all repeatedly
        with _gc_paused():
            return self._decode(payload)

    def _decode(self, payload) -> list:
        size = len(payload)
        if size < _BATCH.size:
            raise _Corrupt("batch header cut short")
        n, jlen, m = _BATCH.unpack_from(payload)
        pos = _BATCH.size
        if jlen > size - pos:
            raise _Corrupt("JSON length runs past the record")
        js = bytes(payload[pos:pos + jlen])
        pos += jlen
        if self.vec is not None:
            if n > size - pos:
                raise _Corrupt("presence mask runs past the record")
            mask = np.frombuffer(payload, dtype=np.uint8, count=n, offset=pos)
            pos += n
            if m > n or (size - pos) != m * self.dim * 4:
                raise _Corrupt("vector block size does not match")
            if n and (mask.max() > 1 or int(np.count_nonzero(mask)) != m):
                raise _Corrupt("bad vector presence mask")
            block = np.frombuffer(payload, dtype="<f4", count=m * self.dim, offset=pos)
            block = block.reshape(m, self.dim)
            if not np.isfinite(block).all():
                raise _Corrupt("vector contains NaN or inf")
        elif m != 0 or pos != size:
            raise _Corrupt("unexpected bytes after the JSON")
        try:
            obj = json.loads(js)
        except (ValueError, RecursionError) as e:
            raise _Corrupt(f"bad JSON: {e}") from None
        if not isinstance(obj, dict) or obj.get("f") != self.names:
            raise _Corrupt("fields do not match the schema")
        columns = obj.get("c")
        if (not isinstance(columns, list) or len(columns) != len(self.names)
                or not all(isinstance(c, list) and len(c) == n for c in columns)):
            raise _Corrupt("columns do not match the document count")
        for spec, col in zip(self.specs, columns):
            if not set(map(type, col)) <= _ALLOWED[spec.kind]:
                raise _Corrupt(f"field {spec.name!r} holds a value of the wrong type")
            if spec.kind is Kind.ID and not all(col):
                raise _Corrupt("empty id")
            if spec.kind is Kind.OTHER:
                adapter = self.adapters[spec.name]
                try:
                    columns[self.names.index(spec.name)] = [adapter.validate_json(v) for v in col]
                except Exception as e:
                    raise _Corrupt(f"field {spec.name!r}: {e}") from None
        if self.vec is not None:
            vectors = []
            it = iter(block)
            for present in mask.tolist():
                if present:
                    v = next(it).copy()  # each document owns its vector, as after validation
                    v.flags.writeable = False
                    vectors.append(v)
                else:
                    vectors.append(None)
            if block.dtype != np.float32:  # a big-endian host
                vectors = [None if v is None else _native_ro(v) for v in vectors]
            columns = columns + [vectors]
        return self._build(columns, n)

    def _build(self, columns: list, n: int) -> list:
        """Documents from columns in `all_names` order."""
        model = self.model
        if not n:
            return []
        names = self.all_names
        if self.order is not None:
            names = self.declared
            columns = [columns[i] for i in self.order]
        rows = zip(*columns)
        if self.fast:
            new = model.__new__
            setattr_ = object.__setattr__
            all_set = self.all_set
            out = []
            for row in rows:
                d = new(model)
                setattr_(d, "__dict__", dict(zip(names, row)))
                setattr_(d, "__pydantic_fields_set__", set(all_set))
                setattr_(d, "__pydantic_extra__", None)
                setattr_(d, "__pydantic_private__", None)
                out.append(d)
            return out
        construct = model.model_construct
        return [construct(**dict(zip(names, row))) for row in rows]


@contextlib.contextmanager
def _gc_paused():
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _exact(spec, v, model: str):
    """A value of a subclass of the stored type (a str Enum, an IntEnum) as the exact type."""
    allowed = _ALLOWED[spec.kind]
    if type(v) in allowed:
        return v
    for t in (bool, int, float, str):
        if t in allowed and isinstance(v, t) and not (t is int and isinstance(v, bool)):
            return t(v)
    raise SchemaError(f"{model}.{spec.name}: cannot store a value of type {type(v).__name__} "
                      f"in a {spec.kind.value} field")


def _native_ro(v: np.ndarray) -> np.ndarray:
    out = v.astype(np.float32)
    out.flags.writeable = False
    return out


# ------------------------------------------------------------------ public
@dataclass
class Snapshot:
    slots: np.ndarray  # int64, one per document
    seqs: np.ndarray  # int64 insertion sequence numbers, one per document
    docs: list
    extras: dict  # name -> bytes


Op = tuple  # ("upsert", docs) | ("delete", ids) | ("update", doc, fields)


def _fsync_dir(path: str) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory fds
        return
    try:
        os.fsync(fd)
    except OSError as e:
        if e.errno != errno.EINVAL:  # EINVAL: this filesystem cannot sync directories
            raise
    finally:
        os.close(fd)


def _pwrite_all(fd: int, data, offset: int) -> None:
    view = memoryview(data)
    while view:
        k = os.pwrite(fd, view, offset)
        if k <= 0:  # pragma: no cover
            raise OSError("short write")
        view = view[k:]
        offset += k


class Journal:
    """Files of one collection in directory `path` (see the module docstring)."""

    def __init__(self, path, schema, read_only: bool = False) -> None:
        self.read_only = read_only
        self._snap_fd: Optional[int] = None  # read-only: the snapshot, held open against a writer's cleanup
        if isinstance(schema, type) and issubclass(schema, Document):
            schema = schema_of(schema)
        self.path = os.fspath(path)
        self.schema = schema
        self.codec = DocCodec(schema)
        self.fp = fingerprint(schema)
        self.digest = _digest(self.fp)
        self._mutex = threading.Lock()
        self._fd: Optional[int] = None
        self._lock_fd: Optional[int] = None
        self._broken: Optional[str] = None  # set after a failure that makes further writes unsafe
        self._closed = False
        self._pending: Optional[list] = None  # log records read at open, handed to the first load()
        self.generation = 0
        self.has_snapshot = False
        self._snap_bytes = 0
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
        if MANIFEST in names:
            self._read_manifest()
        else:
            self._create(names)
        self._check_snapshot_file()
        self._open_log()
        self._clean(names)

    def _open_read_only(self) -> None:
        """Opens the files MANIFEST names without the lock and without changing anything.

        A writer may replace the generation meanwhile and remove its files; the snapshot and
        log are opened together and held open, and the manifest is read again if one is gone."""
        if not os.path.isfile(self._file(MANIFEST)):
            raise BackendError(f"{self.path}: no collection to open read-only (no MANIFEST)")
        for _ in range(50):
            self._read_manifest()
            snap = _snap_name(self.generation) if self.has_snapshot else None
            try:
                snap_fd = os.open(self._file(snap), os.O_RDONLY) if snap else None
            except FileNotFoundError:
                continue
            try:
                log_fd = os.open(self._file(_log_name(self.generation)), os.O_RDONLY)
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
        self._pending, self._end = self._scan_log(self._fd, _log_name(self.generation))

    def _lock(self) -> None:
        self._lock_fd = lock_exclusive(self._file(LOCK), f"the collection {self.path}")

    def _create(self, names: list) -> None:
        """A directory without MANIFEST: new, or left by a crash while it was being created."""
        log0 = _log_name(0)
        for name in names:
            if not _OURS.match(name) or name.endswith(".tmp"):
                continue
            if name == log0:
                try:
                    size = os.path.getsize(self._file(name))
                except OSError as e:
                    raise self._error(name, f"cannot read: {e}") from None
                if size <= _FILE.size:  # created, never written to: a crash before MANIFEST
                    continue
            raise self._error(MANIFEST, f"missing, but the directory holds data files ({name}); "
                                        "refusing to start an empty collection over them")
        self.generation = 0
        self.has_snapshot = False
        self._snap_bytes = 0
        try:
            self._write_new_log(0)
            _fsync_dir(self.path)
            self._write_manifest(0, False, 0)
            _fsync_dir(self.path)
        except OSError as e:
            raise BackendError(f"{self.path}: cannot create the collection: {e}") from None

    def _read_manifest(self) -> None:
        name = MANIFEST
        try:
            with open(self._file(name), "rb") as f:
                data = f.read(1 << 20)
                if f.read(1):
                    raise self._error(name, "too large to be a manifest")
        except OSError as e:
            raise self._error(name, f"cannot read: {e}") from None
        if len(data) < _FILE.size or data[:8] != _MANIFEST_MAGIC:
            raise self._error(name, "not a hybridsearch manifest (bad magic or truncated)")
        magic, gen, digest, crc = _FILE.unpack_from(data)
        if zlib.crc32(data[:_FILE.size - 4]) != crc:
            raise self._error(name, "corrupt (header checksum mismatch)")
        head = data[_FILE.size:_FILE.size + _REC.size]
        parsed = _parse_header(head)
        if parsed is None or parsed[0] != K_MANIFEST:
            raise self._error(name, "corrupt (bad record header)")
        _, length, rcrc = parsed
        payload = data[_FILE.size + _REC.size:]
        if length != len(payload) or not _payload_ok(head, payload, rcrc):
            raise self._error(name, "corrupt (checksum mismatch or wrong length)")
        try:
            meta = json.loads(payload)
        except (ValueError, RecursionError):
            raise self._error(name, "corrupt (bad JSON)") from None
        if not isinstance(meta, dict):
            raise self._error(name, "corrupt (bad JSON)")
        if meta.get("format") != FORMAT:
            raise self._error(name, f"written by an unknown format version {meta.get('format')!r}")
        g, has, size = meta.get("generation"), meta.get("snapshot"), meta.get("snapshot_bytes")
        if (type(g) is not int or g != gen or g < 0 or g >= 10**10 or type(has) is not bool
                or type(size) is not int or size < 0):
            raise self._error(name, "corrupt (bad fields)")
        if meta.get("schema") != self.fp or digest != self.digest:
            stored = meta.get("schema")
            detail = _describe_mismatch(stored if isinstance(stored, list) else [], self.fp)
            raise self._error(name, f"written for a different schema than {self.schema.name}: {detail}")
        self.generation, self.has_snapshot, self._snap_bytes = g, has, size

    def _check_snapshot_file(self) -> None:
        if not self.has_snapshot:
            return
        name = _snap_name(self.generation)
        try:
            size = os.path.getsize(self._file(name))
        except OSError as e:
            raise self._error(name, f"snapshot named by MANIFEST cannot be read: {e}") from None
        if size != self._snap_bytes:
            raise self._error(name, f"snapshot is {size} bytes, MANIFEST says {self._snap_bytes}")

    def _open_log(self) -> None:
        name = _log_name(self.generation)
        try:
            fd = os.open(self._file(name), os.O_RDWR)
        except OSError as e:
            raise self._error(name, f"log named by MANIFEST cannot be opened: {e}") from None
        self._fd = fd
        self._pending, self._end = self._scan_log(fd, name)

    def _scan_log(self, fd: int, name: str) -> tuple:
        """-> (records [(kind, payload)], end of the last good record); truncates a torn tail."""
        expected = _file_header(_LOG_MAGIC, self.generation, self.digest)
        try:
            size = os.fstat(fd).st_size
            f = os.fdopen(os.dup(fd), "rb")
            f.seek(0)
        except OSError as e:
            raise self._error(name, f"cannot read: {e}") from None
        records = []
        with f:
            try:
                head = f.read(_FILE.size)
                if len(head) < _FILE.size:
                    # the header is written before the rename that publishes the log: no crash
                    # leaves it short, so the writes logged since the snapshot are lost
                    raise self._error(name, f"shorter ({len(head)} bytes) than its own header: the log "
                                            "was cut, and the writes since the last snapshot are gone")
                if head != expected:
                    if head[:8] != _LOG_MAGIC:
                        raise self._error(name, "not a hybridsearch log (bad magic)")
                    if zlib.crc32(head[:_FILE.size - 4]) != _FILE.unpack(head)[3]:
                        raise self._error(name, "corrupt log header (checksum mismatch)")
                    raise self._error(name, "log of another generation or schema than MANIFEST")
                pos = _FILE.size
                end = None
                while pos < size:
                    left = size - pos
                    hdr = f.read(min(_REC.size, left))
                    if len(hdr) < _REC.size:
                        end = pos  # incomplete header: torn tail
                        break
                    parsed = _parse_header(hdr)
                    if parsed is None:
                        if self._only_junk_after(f, pos, size):
                            end = pos
                            break
                        raise self._error(name, f"corrupt record header at offset {pos}, followed by more records")
                    kind, length, crc = parsed
                    if length > left - _REC.size:
                        end = pos  # the verified length runs past the end: an incomplete last record
                        break
                    payload = f.read(length)
                    if len(payload) != length:
                        raise self._error(name, f"short read at offset {pos}")
                    if not _payload_ok(hdr, payload, crc):
                        if pos + _REC.size + length == size:
                            end = pos  # the last record does not check out: torn
                            break
                        raise self._error(name, f"checksum mismatch in the record at offset {pos}, "
                                                "followed by more data")
                    if kind not in _LOG_KINDS:
                        raise self._error(name, f"unknown record kind {kind} at offset {pos}")
                    records.append((kind, payload, pos))
                    pos += _REC.size + length
            except OSError as e:
                raise self._error(name, f"cannot read: {e}") from None
        if end is not None:
            self._truncate(fd, name, end)
            pos = end
        return records, pos

    def _only_junk_after(self, f, pos: int, size: int) -> bool:
        """Whether nothing after `pos` looks like a valid record header (so it is a torn tail)."""
        f.seek(pos + 1)
        rest = f.read(size - pos - 1)
        i = rest.find(_MAGIC)
        while i >= 0:
            if _parse_header(rest[i:i + _REC.size]) is not None:
                return False
            i = rest.find(_MAGIC, i + 1)
        return True

    def _truncate(self, fd: int, name: str, end: int) -> None:
        if self.read_only:  # a torn tail is skipped, and left for the writer to drop
            return
        try:
            os.ftruncate(fd, end)
            os.fsync(fd)
        except OSError as e:
            raise self._error(name, f"cannot truncate the torn tail: {e}") from None

    def _clean(self, names: list) -> None:
        """Removes temp files and files of generations the manifest no longer names."""
        keep = {MANIFEST, _log_name(self.generation)}
        if self.has_snapshot:
            keep.add(_snap_name(self.generation))
        removed = False
        for name in names:
            if _OURS.match(name) and name not in keep:
                try:
                    os.remove(self._file(name))
                    removed = True
                except OSError:
                    pass  # harmless: a later snapshot replaces or the next open retries
        if removed:
            _fsync_dir(self.path)

    # ---------------------------------------------------------------- writing helpers
    def _write_file(self, name: str, chunks) -> int:
        """Writes name.tmp from an iterable of bytes, fsyncs it, renames it to name; -> size."""
        tmp = self._file(name + ".tmp")
        size = 0
        try:
            with open(tmp, "wb") as f:
                for chunk in chunks:
                    f.write(chunk)
                    size += len(chunk)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self._file(name))
        except BaseException as e:
            if isinstance(e, Exception):
                try:
                    os.remove(tmp)
                except OSError:
                    pass
                if isinstance(e, OSError):
                    raise self._error(name, f"cannot write: {e}") from None
            raise
        return size

    def _write_new_log(self, gen: int) -> None:
        self._write_file(_log_name(gen), [_file_header(_LOG_MAGIC, gen, self.digest)])

    def _write_manifest(self, gen: int, has_snapshot: bool, snap_bytes: int) -> None:
        """MANIFEST.tmp, fsync, rename (the caller syncs the directory)."""
        payload = json.dumps({"format": FORMAT, "generation": gen, "schema": self.fp,
                              "snapshot": has_snapshot, "snapshot_bytes": snap_bytes,
                              "model": self.schema.name}).encode()
        head = _file_header(_MANIFEST_MAGIC, gen, self.digest)
        self._write_file(MANIFEST, [head, *_record(K_MANIFEST, payload)])

    # ----------------------------------------------------------------- reading
    def load(self) -> tuple:
        """The last snapshot (or None) and the operations logged after it, in order."""
        with self._mutex:
            self._check_open()
            snapshot = self._load_snapshot() if self.has_snapshot else None
            records = self._pending
            self._pending = None
            name = _log_name(self.generation)
            if records is None:
                records, end = self._scan_log(self._fd, name)
                self._end = end
            ops = []
            for kind, payload, pos in records:
                try:
                    ops.append(self._decode_op(kind, payload))
                except _Corrupt as e:
                    raise self._error(name, f"record at offset {pos}: {e}") from None
            return snapshot, ops

    def _decode_op(self, kind: int, payload: bytes) -> tuple:
        if kind == K_UPSERT:
            docs = self.codec.decode(payload)
            if len({d.id for d in docs}) != len(docs):
                raise _Corrupt("repeated id in one batch")
            return ("upsert", docs)
        if kind == K_DELETE:
            try:
                ids = json.loads(payload)
            except (ValueError, RecursionError):
                raise _Corrupt("bad JSON") from None
            if not isinstance(ids, list) or not all(type(i) is str for i in ids):
                raise _Corrupt("bad id list")
            return ("delete", ids)
        # K_UPDATE: u64 length + JSON field list + a one-document batch
        if len(payload) < 8:
            raise _Corrupt("update record cut short")
        (flen,) = struct.unpack_from("<Q", payload)
        if flen > len(payload) - 8:
            raise _Corrupt("field list runs past the record")
        try:
            fields = json.loads(payload[8:8 + flen])
        except (ValueError, RecursionError):
            raise _Corrupt("bad JSON") from None
        if (not isinstance(fields, list) or not all(type(f) is str for f in fields)
                or not set(fields) <= self.codec.all_set or "id" in fields):
            raise _Corrupt("bad field list")
        docs = self.codec.decode(memoryview(payload)[8 + flen:])
        if len(docs) != 1:
            raise _Corrupt("an update holds one document")
        return ("update", docs[0], fields)

    def _load_snapshot(self) -> Snapshot:
        name = _snap_name(self.generation)
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
            except _Corrupt as e:
                raise self._error(name, f"corrupt snapshot: {e}") from None

    def _read_snapshot(self, f, size: int, name: str) -> Snapshot:
        head = f.read(_FILE.size)
        if head != _file_header(_SNAP_MAGIC, self.generation, self.digest):
            if head[:8] != _SNAP_MAGIC:
                raise _Corrupt("not a hybridsearch snapshot (bad magic)")
            raise _Corrupt("bad header (checksum, generation or schema)")
        pos = _FILE.size

        def record() -> tuple:
            nonlocal pos
            hdr = f.read(_REC.size)
            parsed = _parse_header(hdr)
            if parsed is None:
                raise _Corrupt(f"bad record header at offset {pos}")
            kind, length, crc = parsed
            if length > size - pos - _REC.size:
                raise _Corrupt(f"record at offset {pos} runs past the end of the file")
            payload = f.read(length)
            if len(payload) != length or not _payload_ok(hdr, payload, crc):
                raise _Corrupt(f"checksum mismatch in the record at offset {pos}")
            pos += _REC.size + length
            return kind, payload

        kind, payload = record()
        if kind != K_SNAP_META:
            raise _Corrupt("first record is not the snapshot header")
        try:
            meta = json.loads(payload)
        except (ValueError, RecursionError):
            raise _Corrupt("bad JSON in the snapshot header") from None
        if not isinstance(meta, dict):
            raise _Corrupt("bad snapshot header")
        count, chunks, extras_n = meta.get("count"), meta.get("chunks"), meta.get("extras")
        if not all(type(x) is int and x >= 0 for x in (count, chunks, extras_n)):
            raise _Corrupt("bad snapshot header")
        kind, payload = record()
        if kind != K_SNAP_SLOTS or len(payload) != 16 * count:
            raise _Corrupt("bad slot record")
        slots = np.frombuffer(payload, dtype="<i8", count=count).astype(np.int64)
        seqs = np.frombuffer(payload, dtype="<i8", count=count, offset=8 * count).astype(np.int64)
        docs: list = []
        for _ in range(chunks):
            kind, payload = record()
            if kind != K_SNAP_DOCS:
                raise _Corrupt("expected a document record")
            docs.extend(self.codec.decode(payload))
            del payload
        if len(docs) != count:
            raise _Corrupt(f"holds {len(docs)} documents, its header says {count}")
        if len({d.id for d in docs}) != count:
            raise _Corrupt("repeated id")
        extras = {}
        for _ in range(extras_n):
            kind, payload = record()
            if kind != K_SNAP_EXTRA or len(payload) < 4:
                raise _Corrupt("expected an extra record")
            (nlen,) = struct.unpack_from("<I", payload)
            if nlen > len(payload) - 4:
                raise _Corrupt("bad extra record")
            try:
                key = payload[4:4 + nlen].decode("utf-8")
            except UnicodeDecodeError:
                raise _Corrupt("bad extra name") from None
            if key in extras:
                raise _Corrupt("repeated extra name")
            extras[key] = payload[4 + nlen:]
        kind, payload = record()
        if kind != K_SNAP_END or payload or pos != size:
            raise _Corrupt("missing end record or trailing bytes")
        return Snapshot(slots=slots, seqs=seqs, docs=docs, extras=extras)

    # ---------------------------------------------------------------- logging
    @property
    def log_bytes(self) -> int:
        """Bytes of records in the log since the last snapshot."""
        return self._end - _FILE.size if self._fd is not None else 0

    def log_upsert(self, docs: list) -> None:
        self._append(K_UPSERT, self.codec.encode(list(docs)))

    def log_delete(self, ids: list) -> None:
        ids = list(ids)
        if not all(isinstance(i, str) for i in ids):
            raise SchemaError("ids must be strings")
        self._append(K_DELETE, json.dumps([str(i) for i in ids]).encode("ascii"))

    def log_update(self, doc, fields: list) -> None:
        fields = list(fields)
        unknown = [f for f in fields if f not in self.codec.all_set or f == "id"]
        if unknown:
            raise SchemaError(f"{self.schema.name} has no updatable field {unknown[0]!r}")
        fjs = json.dumps(fields).encode("ascii")
        self._append(K_UPDATE, b"".join([struct.pack("<Q", len(fjs)), fjs, self.codec.encode([doc])]))

    def _append(self, kind: int, payload: bytes) -> None:
        head, payload = _record(kind, payload)
        with self._mutex:
            self._check_writable()
            name = _log_name(self.generation)
            end = self._end
            try:
                _pwrite_all(self._fd, head, end)
                _pwrite_all(self._fd, payload, end + len(head))
            except OSError as e:
                try:  # take the partial record back so later appends do not follow garbage
                    os.ftruncate(self._fd, end)
                except OSError:
                    self._broken = f"{self._file(name)}: a failed write could not be undone ({e})"
                raise self._error(name, f"cannot append: {e}") from None
            try:
                os.fsync(self._fd)
            except OSError as e:
                # after a failed fsync the kernel may have dropped dirty pages: do not go on
                self._broken = f"{self._file(name)}: fsync failed ({e}); reopen the collection"
                raise self._error(name, f"cannot fsync: {e}") from None
            self._end = end + len(head) + len(payload)
            self._pending = None  # load() reads the log again

    # ---------------------------------------------------------------- snapshot
    def snapshot(self, slots, seqs, docs: list, extras: dict) -> None:
        """Atomically replaces the snapshot and starts an empty log (see the module docstring)."""
        docs = list(docs)
        n = len(docs)
        slots = np.ascontiguousarray(slots, dtype="<i8").reshape(-1)
        seqs = np.ascontiguousarray(seqs, dtype="<i8").reshape(-1)
        if len(slots) != n or len(seqs) != n:
            raise ValueError(f"snapshot: {n} documents but {len(slots)} slots and {len(seqs)} seqs")
        items = []
        for key, blob in (extras or {}).items():
            if not isinstance(key, str):
                raise ValueError(f"snapshot: extra names are strings, got {key!r}")
            try:
                items.append((key.encode("utf-8"), memoryview(blob).cast("B")))
            except (UnicodeEncodeError, TypeError) as e:
                raise ValueError(f"snapshot: extra {key!r}: {e}") from None
        if len({getattr(d, "id", None) for d in docs}) != n:
            raise SchemaError("snapshot: repeated id")
        codec = self.codec
        # encode the first chunk up front so a bad document fails before any file is touched
        chunks = [docs[i:i + _SNAP_CHUNK] for i in range(0, n, _SNAP_CHUNK)]
        first = codec.encode(chunks[0]) if chunks else None

        with self._mutex:
            self._check_writable()
            new = self.generation + 1

            def body():
                yield _file_header(_SNAP_MAGIC, new, self.digest)
                meta = json.dumps({"count": n, "chunks": len(chunks), "extras": len(items)}).encode()
                yield from _record(K_SNAP_META, meta)
                yield from _record(K_SNAP_SLOTS, slots.tobytes() + seqs.tobytes())
                for i, chunk in enumerate(chunks):
                    yield from _record(K_SNAP_DOCS, first if i == 0 else codec.encode(chunk))
                for key, blob in items:
                    yield from _record(K_SNAP_EXTRA, b"".join([struct.pack("<I", len(key)), key, blob]))
                yield from _record(K_SNAP_END, b"")

            snap, log = _snap_name(new), _log_name(new)
            try:
                size = self._write_file(snap, body())
                self._write_new_log(new)
                _fsync_dir(self.path)  # both renames are durable before MANIFEST names them
                self._write_manifest(new, True, size)
            except Exception as e:
                # MANIFEST still names the old generation: drop what was written of the new one
                for name in (snap, log):
                    try:
                        os.remove(self._file(name))
                    except OSError:
                        pass
                if isinstance(e, OSError):
                    raise BackendError(f"{self.path}: snapshot failed: {e}") from None
                raise
            # committed: MANIFEST names the new generation
            old_gen, old_had = self.generation, self.has_snapshot
            self.generation, self.has_snapshot, self._snap_bytes = new, True, size
            self._switch_log(old_gen, old_had, log)
            try:
                _fsync_dir(self.path)
            except OSError as e:
                self._broken = f"{self.path}: cannot sync the directory after a snapshot ({e})"
                raise BackendError(self._broken) from None

    def _switch_log(self, old_gen: int, old_had_snapshot: bool, log: str) -> None:
        """After MANIFEST names the new generation: use its log, drop the old files."""
        old_fd = self._fd
        self._pending = None
        self._end = _FILE.size
        try:
            self._fd = os.open(self._file(log), os.O_RDWR)
        except OSError as e:
            self._fd = None
            self._broken = f"{self._file(log)}: cannot open the new log ({e}); reopen the collection"
        if old_fd is not None:
            os.close(old_fd)
        for name in ([_snap_name(old_gen)] if old_had_snapshot else []) + [_log_name(old_gen)]:
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
