"""Storage registry: names -> backend classes, imported lazily."""
from __future__ import annotations

import importlib

from ..errors import ConfigError, UnsupportedError

# name -> "module:Class"; None marks a storage of the API contract that has not landed yet
REGISTRY = {
    "memory": "hybridsearch.backends.memory:MemoryBackend",
    "hnsw": "hybridsearch.backends.hnsw:HnswBackend",
    "sqlite": "hybridsearch.backends.sqlite:SqliteBackend",
    "hnswlib": "hybridsearch.backends.hnswlib_backend:HnswlibBackend",
    "annlite": None,
    "elasticsearch": None,
    "opensearch": None,
    "vespa": None,
}


def backend_class(name: str):
    """The backend class of a storage name (ConfigError / UnsupportedError otherwise)."""
    if name not in REGISTRY:
        raise ConfigError(f"unknown storage {name!r}; valid storages: {', '.join(REGISTRY)}")
    target = REGISTRY[name]
    if target is None:
        raise UnsupportedError(f"storage {name!r} is part of the API but not implemented in this version")
    module, cls = target.split(":")
    try:
        return getattr(importlib.import_module(module), cls)
    except ImportError as e:
        raise UnsupportedError(f"storage {name!r} needs a package that is not installed: {e}") from None


def available() -> list:
    """Names of the storages usable in this install."""
    out = []
    for name in REGISTRY:
        try:
            backend_class(name)
        except (ConfigError, UnsupportedError):
            continue
        out.append(name)
    return out
