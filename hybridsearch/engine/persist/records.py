"""The framing of the hnsw storage's files: file headers, checksummed records, names, and
the schema fingerprint a file is bound to (the format is described in persist/__init__.py)."""
from __future__ import annotations

import hashlib
import json
import re
import struct
import zlib
from typing import Optional

from hybridsearch.document import Schema

FORMAT = 2  # the files' layout, recorded in MANIFEST: a file of any other number is refused
ALIGN = 64  # file offset of every array's first byte: a mapped view is aligned for any kernel

# ----------------------------------------------------------------- framing
MAGIC = b"\x93hsR"
REC = struct.Struct("<4sHHQII")  # magic, kind, flags, length, crc(header16 + payload), crc(header20)
FILE = struct.Struct("<8sQ16sI")  # file magic, generation, schema digest, crc of the 32 bytes before
LOG_MAGIC = b"\x93hsLOG\x00\x01"
SNAP_MAGIC = b"\x93hsSNP\x00\x01"
MANIFEST_MAGIC = b"\x93hsMAN\x00\x01"

# record kinds
K_UPSERT, K_DELETE, K_UPDATE, K_UPDATE_MANY = 1, 2, 3, 4
K_MANIFEST = 16
K_SNAP_META, K_SNAP_END, K_SNAP_ARRAY = 32, 36, 37
LOG_KINDS = {K_UPSERT: "upsert", K_DELETE: "delete", K_UPDATE: "update", K_UPDATE_MANY: "update_many"}

BATCH = struct.Struct("<QQQ")  # n docs, JSON length, vectors present

MANIFEST = "MANIFEST"
LOCK = "LOCK"
OURS = re.compile(r"^(snap-\d{10}\.hss|log-\d{10}\.hsl|MANIFEST)(\.tmp)?$")


def snap_name(gen: int) -> str:
    return f"snap-{gen:010d}.hss"


def log_name(gen: int) -> str:
    return f"log-{gen:010d}.hsl"


def record(kind: int, payload) -> tuple:
    """-> (24-byte header, payload) of one record."""
    head16 = struct.pack("<4sHHQ", MAGIC, kind, 0, len(payload))
    crc = zlib.crc32(payload, zlib.crc32(head16))
    head20 = head16 + struct.pack("<I", crc)
    return head20 + struct.pack("<I", zlib.crc32(head20)), payload


def record_parts(kind: int, parts: list) -> list:
    """[24-byte header, *parts] of one record whose payload is the parts end to end (large
    arrays are checksummed and written without being joined into one bytes object)."""
    head16 = struct.pack("<4sHHQ", MAGIC, kind, 0, sum(len(p) for p in parts))
    crc = zlib.crc32(head16)
    for p in parts:
        crc = zlib.crc32(p, crc)
    head20 = head16 + struct.pack("<I", crc)
    return [head20 + struct.pack("<I", zlib.crc32(head20)), *parts]


def parse_header(buf: bytes) -> Optional[tuple]:
    """(kind, length, crc) of a record header, or None if it does not check out."""
    if len(buf) < REC.size:
        return None
    magic, kind, flags, length, crc, hcrc = REC.unpack_from(buf)
    if magic != MAGIC or flags != 0 or zlib.crc32(buf[:20]) != hcrc:
        return None
    return kind, length, crc


def payload_ok(header: bytes, payload: bytes, crc: int) -> bool:
    return zlib.crc32(payload, zlib.crc32(header[:16])) == crc


def file_header(magic: bytes, gen: int, digest: bytes) -> bytes:
    head = struct.pack("<8sQ16s", magic, gen, digest)
    return head + struct.pack("<I", zlib.crc32(head))


# ------------------------------------------------------------- fingerprint
def fingerprint(schema: Schema) -> list:
    """What a file depends on: the schema's fingerprint, sorted by field name (the format of
    every file written so far)."""
    return sorted(schema.fingerprint())


def digest(fp: list) -> bytes:
    return hashlib.blake2b(json.dumps(fp).encode(), digest_size=16).digest()


def describe_mismatch(stored: list, ours: list) -> str:
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
