"""Durability for embedded storages with a `path`: snapshots plus a log of batches.

One collection lives in one directory:

    MANIFEST                the current generation g, the schema fingerprint, the fields'
                            declaration order and the schema history (persist/evolve.py)
                            (written to MANIFEST.tmp, fsynced, renamed, directory fsynced)
    snap-<g>.hss            the snapshot of generation g (absent for a collection that has
                            never been snapshotted): JSON meta and named arrays (columns, text
                            index, graph), each 64-byte aligned so that opening maps it
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

A Journal opened with `evolve=True` (the storages open it so) on files of an earlier schema
that the schema may evolve from (persist/evolve.py) reads them under their own layout; the
storage carries the collection over and publishes it as the next generation under the new
schema (storages/local/evolve.py). Without it, and for a change evolve.py refuses, a file of
another schema is an error (`hs.BackendError`, or `hs.ConfigError` naming the field).

MANIFEST records the format number (records.FORMAT); files of any other format, and
snapshots of any other layout, are refused with `hs.BackendError` naming the format found and
the one this version reads: nothing is converted or guessed.

The LOCK is a BSD flock held by the open Journal: it refuses a second Journal on the same
directory, in this process as in another, with `hs.BackendError`, at once or after waiting up
to `lock_timeout` seconds for it. The files are read only once the lock is held, so a writer
that waited starts from everything the previous one acknowledged; a dead process's flock is
dropped by the kernel.

An online backup (backup.py) pins a generation's snapshot and the log up to its end offset under
the writer's lock, copies them without it into a new directory with a MANIFEST of its own, and
checks every record before renaming that directory into place; `verify` and `restore` check a
backup the same way without its schema.
"""
from hybridsearch.engine.persist.codec import DocCodec
from hybridsearch.engine.persist.commit import GroupCommit
from hybridsearch.engine.persist.journal import Journal, Op, Snapshot
from hybridsearch.engine.persist.records import FORMAT, fingerprint

__all__ = ["DocCodec", "FORMAT", "GroupCommit", "Journal", "Op", "Snapshot", "fingerprint"]
