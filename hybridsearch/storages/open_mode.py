"""DocumentArray(..., mode=): create a new collection, open an existing one, or either
(the default), as LanceDB's exist_ok does. Checked before the storage opens, so a refused call
creates nothing and leaves what exists untouched.

A collection in a path= is judged here from its files (`check_mode`). A remote one only its
engine can judge: DocumentArray opens the storage inside `requested(mode)`, and a storage that
declares `remote_modes` calls `settle(exists, what)` once it has asked its engine whether the
index / collection exists and before it creates anything."""
from __future__ import annotations

import contextlib
import contextvars
import os
from typing import Iterator

from hybridsearch.errors import ConfigError, UnsupportedError

MODES = ("either", "create", "open")


# the mode of the DocumentArray whose storage this thread is opening ("either" otherwise)
_REQUESTED: contextvars.ContextVar = contextvars.ContextVar("hybridsearch_open_mode", default="either")


def check_mode(mode, storage: str, config, cls=None) -> None:
    """Raise if `mode` refuses the collection `config` names: ConfigError for "create" where one
    exists or "open" where none does; UnsupportedError where existence cannot be told. A remote
    collection of a storage class declaring `remote_modes` passes here: it settles when it opens."""
    if not isinstance(mode, str) or mode not in MODES:
        raise ConfigError(f"mode must be one of {', '.join(map(repr, MODES))}, got {mode!r}")
    if mode == "either":
        return
    if getattr(config, "url", None) is not None or getattr(config, "hosts", None) is not None:
        if getattr(cls, "remote_modes", False):
            return
        raise UnsupportedError(f"mode={mode!r} is not available on storage {storage!r}: "
                               f"{getattr(cls, 'remote_modes_why', 'it cannot tell whether a collection exists')}")
    path = getattr(config, "path", None)
    if path is None:  # in memory: every collection is new
        if mode == "open":
            raise ConfigError(f"mode='open' needs path=: storage {storage!r} without a path starts empty, "
                              "there is nothing to open")
        return
    exists = exists_at(os.fspath(path))
    if mode == "create" and exists:
        raise ConfigError(f"mode='create': a collection already exists at {os.fspath(path)}; "
                          "open it with mode='open' (or 'either'), or choose another path")
    if mode == "open" and not exists:
        raise ConfigError(f"mode='open': no collection at {os.fspath(path)}; "
                          "create one with mode='create' (or 'either')")


def exists_at(path: str) -> bool:
    """A collection's files are at `path`: a file, or a directory that is not empty."""
    if os.path.isdir(path):
        return any(True for _ in os.scandir(path))
    return os.path.exists(path)


@contextlib.contextmanager
def requested(mode: str) -> Iterator[None]:
    """The storage opened inside answers `settle` with this mode."""
    token = _REQUESTED.set(mode)
    try:
        yield
    finally:
        _REQUESTED.reset(token)


def settle(exists: bool, what: str) -> None:
    """Called by a remote storage with whether its index / collection (`what`, e.g. "Elasticsearch
    index 'products'") exists, before it creates or writes anything: ConfigError when the mode
    being opened refuses it."""
    mode = _REQUESTED.get()
    if mode == "create" and exists:
        raise ConfigError(f"mode='create': the {what} already exists; open it with mode='open' (or 'either'), "
                          "or choose another name")
    if mode == "open" and not exists:
        raise ConfigError(f"mode='open': the {what} does not exist; create it with mode='create' (or 'either')")
