"""The identity of a collection's embedding functions, kept beside its files.

A collection opened with path= records, per hs.embedded field, the identity of its function
(name, model, dimension, kind: base.identity_of). Reopening with another identity raises
ConfigError before the storage opens: vectors of another model would be silently compared
with the stored ones. Where it lives: `<path>/hybridsearch-embeddings.json` when path is a
folder (hnsw, annlite, qdrant), `<path>.hybridsearch-embeddings.json` beside a file (sqlite),
keyed by the table (sqlite's table=) so that collections sharing a file keep theirs apart.
Collections without path= (memory, remote engines) are not recorded: see API.md section 12.
"""
from __future__ import annotations

import json
import os
from typing import Any, Optional

from hybridsearch.document import Schema
from hybridsearch.embedding.base import identity_of
from hybridsearch.engine.files import read_if_present, write_durably
from hybridsearch.errors import BackendError, ConfigError

_NAME = "hybridsearch-embeddings.json"


def _record_path(path: str) -> str:
    return os.path.join(path, _NAME) if os.path.isdir(path) else f"{path}.{_NAME}"


def _key(config: Any) -> str:
    return str(getattr(config, "table", "") or "")


def _wanted(schema: Schema) -> dict:
    return {name: identity_of(marker.fn) for name, marker in schema.embedded.items()}


def _stored(path: str) -> Optional[dict]:
    raw = read_if_present(_record_path(path), "the identity of its embedding functions")
    if raw is None:
        return None
    try:
        data = json.loads(raw.decode("utf-8"))
        if not isinstance(data, dict):
            raise ValueError("not an object")
    except (UnicodeDecodeError, ValueError) as e:
        raise BackendError(f"{_record_path(path)}: unreadable record of embedding functions ({e})") from None
    return data


def check_identity(schema: Schema, config: Any) -> None:
    """ConfigError when the collection at config.path recorded another embedding function for a
    field than the schema now declares. Called before the storage opens, so a collection opened
    with a model of another dimension gets this error rather than a schema mismatch."""
    path = getattr(config, "path", None)
    if not schema.embedded or path is None or not os.path.exists(path):
        return  # a new collection (a record without its collection is a leftover: overwritten later)
    stored = (_stored(path) or {}).get(_key(config)) or {}
    for name, now in _wanted(schema).items():
        was = stored.get(name)
        if was is not None and was != now:
            raise ConfigError(f"{schema.name}.{name}: the collection at {path} was embedded with "
                              f"{_describe(was)}, the schema now declares {_describe(now)}; its stored vectors "
                              "would not be comparable with new ones. Open it with the same function, or "
                              "write a new collection")


def record_identity(schema: Schema, config: Any) -> None:
    """Writes the identities of the schema's embedding functions beside the opened collection
    (once: nothing is written when the record already says so)."""
    path = getattr(config, "path", None)
    if not schema.embedded or path is None or getattr(config, "read_only", False) or not os.path.exists(path):
        return
    data = _stored(path) or {}
    key = _key(config)
    entry = {**(data.get(key) or {}), **_wanted(schema)}
    if data.get(key) == entry:
        return
    data[key] = entry
    write_durably(_record_path(path), json.dumps(data, sort_keys=True).encode("utf-8"))


def _describe(identity: dict) -> str:
    return (f"{identity.get('name')} model {identity.get('model')!r} ({identity.get('kind')}, "
            f"dimension {identity.get('dimension')})")


def copy_record(src: Any, dest: str) -> None:
    """A backup of a collection that is one file (sqlite) carries the record beside its copy,
    once the copy is in place (a folder's record is copied with the folder's files)."""
    if src is None or os.path.isdir(dest):
        return
    raw = read_if_present(_record_path(os.fspath(src)), "the identity of its embedding functions")
    if raw is not None:
        write_durably(_record_path(dest), raw)
