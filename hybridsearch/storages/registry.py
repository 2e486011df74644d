"""Storage registry: names -> Storage classes, imported lazily; hs.storages() lists the usable ones."""
from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import sys

from hybridsearch.errors import ConfigError, UnsupportedError, missing_extra

# name -> "module:Class"; None marks a storage of the API contract that has not landed yet
REGISTRY = {
    "memory": "hybridsearch.storages.local.memory:MemoryStorage",
    "hnsw": "hybridsearch.storages.local.hnsw:HnswStorage",
    "sqlite": "hybridsearch.storages.local.sqlite.storage:SqliteStorage",
    "hnswlib": "hybridsearch.storages.wrapped.hnswlib:HnswlibStorage",
    "annlite": "hybridsearch.storages.wrapped.annlite.storage:AnnliteStorage",
    "elasticsearch": "hybridsearch.storages.remote.elasticsearch.storage:ElasticsearchStorage",
    "opensearch": "hybridsearch.storages.remote.elasticsearch.opensearch:OpenSearchStorage",
    "vespa": "hybridsearch.storages.remote.vespa.storage:VespaStorage",
    "weaviate": "hybridsearch.storages.remote.weaviate.storage:WeaviateStorage",
    "qdrant": "hybridsearch.storages.remote.qdrant.storage:QdrantStorage",
}

# the public names of the storages' config dataclasses (hs.HnswConfig, ...): loaded on first use,
# since a wrapped storage's module imports its library (and annlite and hnswlib exclude each other)
CONFIG_NAMES = {"MemoryConfig": "memory", "HnswConfig": "hnsw", "SqliteConfig": "sqlite", "HnswlibConfig": "hnswlib",
                "AnnliteConfig": "annlite", "ElasticsearchConfig": "elasticsearch", "OpenSearchConfig": "opensearch",
                "VespaConfig": "vespa", "WeaviateConfig": "weaviate", "QdrantConfig": "qdrant"}

# third-party packages a storage imports: `available()` looks for them without importing
# them, because importing is not free and some cannot share a process (below)
REQUIRES = {"hnswlib": ("hnswlib",), "annlite": ("annlite",), "elasticsearch": ("elasticsearch",),
            "opensearch": ("opensearchpy",), "vespa": ("requests",),
            "weaviate": ("weaviate",),
            "qdrant": ("qdrant_edge",)}
# annlite and hnswlib both register a pybind11 class named "Index": whichever is
# imported second fails with ImportError, so one process can use only one of them
CONFLICTS = {"annlite": ("hnswlib",), "hnswlib": ("annlite",)}


def conflict(name: str):
    """The already-loaded module that stops storage `name` from loading in this process, or None."""
    for other in CONFLICTS.get(name, ()):
        if other in sys.modules:
            return other
    return None


def storage_class(name: str):
    """The Storage class of a storage name (ConfigError / UnsupportedError otherwise)."""
    if name not in REGISTRY:
        raise ConfigError(f"unknown storage {name!r}; valid storages: {', '.join(REGISTRY)}")
    target = REGISTRY[name]
    if target is None:
        raise UnsupportedError(f"storage {name!r} is part of the API but not implemented in this version")
    module, cls = target.split(":")
    blocker = conflict(name)
    if blocker is not None:
        raise UnsupportedError(
            f"storage {name!r} cannot be loaded in a process that has already loaded {blocker!r} "
            f"(both register a native class named 'Index'); use it in a separate process")
    try:
        return getattr(importlib.import_module(module), cls)
    except ImportError as e:
        raise missing_package(name, e) from None


def missing_package(name: str, error: ImportError) -> UnsupportedError:
    """The error for a storage whose client library is not installed, with the line that fixes it."""
    return missing_extra(f"storage {name!r}", getattr(error, "name", None) or str(error), name)


def available() -> list:
    """Names of the storages usable in this install."""
    out = []
    for name, target in REGISTRY.items():
        if target is None or conflict(name) is not None:
            continue
        if all(importlib.util.find_spec(pkg) is not None for pkg in REQUIRES.get(name, ())):
            out.append(name)
    return out


def storage_config(name: str, cls, config, options: dict):
    """The checked config of storage `name` from `config=` (one of its config dataclasses, or
    None) and the keyword options: an option given both ways must agree; every value is checked
    as if it were given as a keyword (a dataclass built by hand has not been checked)."""
    if config is None:
        return cls.Config.parse(name, options)
    if type(config) is not cls.Config:
        mine = next((k for k, v in CONFIG_NAMES.items() if v == name), cls.Config.__name__)
        raise ConfigError(f"config= for storage {name!r} takes a hs.{mine}, got {type(config).__name__}")
    given = config.as_dict()
    # an option the config leaves at its default may be set by keyword; one it sets must agree
    defaults = {f.name: f.default for f in dataclasses.fields(config)}
    clash = sorted(k for k, v in options.items()
                   if k in given and not _same(given[k], defaults[k]) and not _same(given[k], v))
    if clash:
        shown = ", ".join(f"{k} (config has {given[k]!r}, keyword {options[k]!r})" for k in clash)
        raise ConfigError(f"storage {name!r}: config= and keyword options disagree on {shown}; give each once")
    return cls.Config.parse(name, {**given, **options})


def _same(a, b) -> bool:
    try:
        return a is b or bool(a == b)
    except Exception:  # noqa: BLE001 -- values that do not compare (arrays) are not the same
        return False
