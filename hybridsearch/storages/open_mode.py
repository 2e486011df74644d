"""DocumentArray(..., mode=): create a new collection, open an existing one, or either
(the default), as LanceDB's exist_ok does. Checked before the storage opens, so a refused call
creates nothing and leaves what exists untouched."""
from __future__ import annotations

import os

from hybridsearch.errors import ConfigError, UnsupportedError

MODES = ("either", "create", "open")


def check_mode(mode, storage: str, config) -> None:
    """Raise if `mode` refuses the collection `config` names: ConfigError for "create" where one
    exists or "open" where none does; UnsupportedError where existence cannot be told yet."""
    if not isinstance(mode, str) or mode not in MODES:
        raise ConfigError(f"mode must be one of {', '.join(map(repr, MODES))}, got {mode!r}")
    if mode == "either":
        return
    if getattr(config, "url", None) is not None or getattr(config, "hosts", None) is not None:
        raise UnsupportedError(f"mode={mode!r} is not available on a remote collection (storage {storage!r}) "
                               "yet; it applies to collections in a path=")
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
