"""The redo record of a write larger than one Qdrant operation (embedded shards, `path=`).

Qdrant applies one update operation whole (its write-ahead log), but a batch of more than CHUNK
points is several operations: a crash between two of them would leave the batch half applied.
So such a write first records every point it will upsert in `hybridsearch-intent.json` beside
the shard (written to a .tmp file, fsynced, renamed, the folder fsynced), then sends the
chunks, then removes the record (the removal fsynced too: a record left behind would be redone
over later writes). Opening a shard that holds a record redoes it (an upsert of the same points
is idempotent) and removes it: after a kill -9 the write in flight is absent (killed before the
rename) or whole (after it). A record that does not read back whole is a BackendError naming
it, and nothing is opened.

    {"format": "hybridsearch-qdrant-intent", "version": 1,
     "points": [[<point uuid>, {<vector name>: [floats]}, {<payload>}], ...]}

Payloads and vectors are plain JSON (floats written by repr, read back exactly).
"""
from __future__ import annotations

import json
import os

from hybridsearch.engine.files import fsync_dir, read_if_present, write_durably
from hybridsearch.errors import BackendError, SchemaError

NAME = "hybridsearch-intent.json"
FORMAT = "hybridsearch-qdrant-intent"
TMP = ".tmp"


def path_of(folder: str) -> str:
    return os.path.join(folder, NAME)


def encode(points: list) -> bytes:
    """The record of `points` ((uuid, vectors, payload) each); SchemaError for a value JSON cannot hold."""
    try:
        return json.dumps({"format": FORMAT, "version": 1, "points": [list(p) for p in points]},
                          allow_nan=False, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    except (TypeError, ValueError) as e:  # UnicodeEncodeError is a ValueError
        raise SchemaError(f"storage 'qdrant' cannot record this batch: {type(e).__name__}: {e}") from None


def write(folder: str, points: list) -> None:
    write_durably(path_of(folder), encode(points))


def remove(folder: str) -> None:
    os.remove(path_of(folder))
    fsync_dir(folder)


def clear_tmp(folder: str) -> None:
    """A record interrupted before its rename was never a write: it goes."""
    tmp = path_of(folder) + TMP
    if os.path.exists(tmp):
        os.remove(tmp)


def read(folder: str):
    """The points of the record left in `folder`, or None when there is none."""
    target = path_of(folder)
    raw = read_if_present(target, "the record of an interrupted write")
    if raw is None:
        return None

    def damaged(why: str) -> BackendError:
        return BackendError(f"{target} (the record of a write interrupted by a crash) is damaged: {why}; "
                            "the collection is not opened")
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise damaged(str(e)) from None
    if not isinstance(data, dict) or data.get("format") != FORMAT or data.get("version") != 1:
        raise damaged(f'not a {{"format": "{FORMAT}", "version": 1, ...}} object')
    points = data.get("points")
    if not isinstance(points, list):
        raise damaged('"points" is not a list')
    for k, p in enumerate(points):
        if (not isinstance(p, list) or len(p) != 3 or not isinstance(p[0], str) or not isinstance(p[1], dict)
                or not isinstance(p[2], dict)):
            raise damaged(f'"points"[{k}] is not [uuid, vectors, payload]')
    return [tuple(p) for p in points]
