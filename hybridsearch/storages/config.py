"""Typed storage options: one frozen dataclass per storage, validated in one place.

A storage declares `Config`, a subclass of `StorageConfig` whose fields are its options
(default, check and a one-line meaning, via `option`). `StorageConfig.parse` is the only
code that turns the keyword arguments of `hs.DocumentArray(..., storage=name, **options)`
into a config: an unknown option, or a value its check refuses, is a ConfigError that
lists every option the storage takes with its default.
"""
from __future__ import annotations

import dataclasses
import os
from typing import Any, Callable, ClassVar, Optional, Union

import numpy as np

from hybridsearch.errors import ConfigError
from hybridsearch.query.options import is_integer

METRICS = ("cosine", "ip", "l2")
# the type of a path option: what `path_or_none` takes (typeshed's name for it)
StrPath = Union[str, "os.PathLike[str]"]


def option(default: Any, check: Optional[Callable[[Any], Any]] = None, doc: str = "",
           secret: bool = False) -> Any:
    """A config field: its default, the check that validates (and may normalise) a value,
    and what it means (shown in docs and errors). A secret never appears in a repr."""
    return dataclasses.field(default=default, repr=not secret,
                             metadata={"check": check, "doc": doc, "secret": secret})


# ---------------------------------------------------------------- checks
# Each check takes a value and returns it (normalised) or raises ValueError with the
# expectation in words; StorageConfig.parse turns that into a ConfigError naming the option.
def integer(low: int, high: Optional[int] = None, allow_none: bool = False) -> Callable[[Any], Any]:
    """An int (not a bool; numpy ints accepted) in [low, high]; None too when allowed."""
    def check(v):
        if v is None and allow_none:
            return None
        if not is_integer(v) or v < low or (
                high is not None and v > high):
            raise ValueError(f"an integer {'between ' + str(low) + ' and ' + str(high) if high is not None else '>= ' + str(low)}"
                             + (" or None" if allow_none else ""))
        return int(v)
    return check


def number(low: float, high: Optional[float] = None, allow_none: bool = False) -> Callable[[Any], Any]:
    """A real number (int or float, not a bool) in [low, high]; None too when allowed."""
    def check(v):
        if v is None and allow_none:
            return None
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.integer, np.floating)) or \
                not low <= v <= (high if high is not None else float("inf")):
            raise ValueError((f"a number between {low} and {high}" if high is not None else f"a number >= {low}")
                             + (" or None" if allow_none else ""))
        return float(v) if isinstance(v, (float, np.floating)) else v
    return check


def one_of(*choices) -> Callable[[Any], Any]:
    """One of the given values."""
    def check(v):
        for c in choices:
            if v is c or (type(v) is type(c) and v == c):
                return c
        raise ValueError("one of " + ", ".join(repr(c) for c in choices))
    return check


def boolean(v):
    """True or False."""
    if not isinstance(v, bool):
        raise ValueError("True or False")
    return v


def path_or_none(v):
    """A filesystem path (str or os.PathLike) or None."""
    if v is None:
        return None
    try:
        return os.fspath(v)
    except TypeError:
        raise ValueError("a path (str or os.PathLike) or None") from None


def text(v):
    """A non-empty string."""
    if not isinstance(v, str) or not v:
        raise ValueError("a non-empty string")
    return v


def text_or_none(v):
    """A non-empty string or None."""
    return None if v is None else text(v)


def metric_choice(v):
    """One metric for every dense field, or a dict field name -> metric (API.md section 10); the
    field names are checked against the schema when the storage opens (base.resolve_metrics)."""
    if isinstance(v, dict):
        for name, m in v.items():
            if not isinstance(name, str):
                raise ValueError(f"a dict of field name -> metric (a key {name!r} is not a field name)")
            if not isinstance(m, str) or m not in METRICS:
                raise ValueError(f"a dict of field name -> one of {', '.join(map(repr, METRICS))} "
                                 f"(field {name!r} has {m!r})")
        return dict(v)
    if isinstance(v, str) and v in METRICS:
        return v
    raise ValueError(f"one of {', '.join(map(repr, METRICS))}, or a dict field name -> metric")


def check_lock_timeout(config) -> None:
    """lock_timeout= is a writer's wait for the lock of a path: ConfigError where there is no such
    wait (no path, or read_only=True, which takes no lock)."""
    if not config.lock_timeout:
        return
    if getattr(config, "path", None) is None:
        raise ConfigError("lock_timeout= needs path= (it is how long a writer waits for the lock of the files)")
    if getattr(config, "read_only", False):
        raise ConfigError("lock_timeout= does not apply to read_only=True, which opens without the writer's lock")


@dataclasses.dataclass(frozen=True)
class StorageConfig:
    """Options every storage takes. Subclasses add theirs as `option(...)` fields."""

    storage: ClassVar[str] = ""
    metric: Any = option("cosine", metric_choice, "similarity of the vector fields: cosine, ip or l2, or a "
                                                  "dict field -> metric (fields not named: cosine)")

    @classmethod
    def parse(cls, storage: str, options: dict) -> "StorageConfig":
        """The config of `storage` from user keyword arguments, every value checked."""
        known = {f.name: f for f in dataclasses.fields(cls)}
        unknown = sorted(set(options) - set(known))
        if unknown:
            raise ConfigError(f"storage {storage!r} does not take option(s) {', '.join(unknown)}; "
                              f"valid options: {cls.describe()}")
        values = {}
        for name, f in known.items():
            v = options.get(name, f.default)
            check = f.metadata.get("check")
            if check is not None:
                try:
                    v = check(v)
                except ValueError as e:
                    shown = "(redacted)" if f.metadata.get("secret") else repr(v)
                    raise ConfigError(f"storage {storage!r} option {name} must be {e}, got {shown}") from None
            values[name] = v
        config = cls(**values)
        config.validate()
        return config

    @classmethod
    def describe(cls) -> str:
        """Every option with its default, as `name=default, ...` (for errors and docs)."""
        return ", ".join(f"{f.name}={f.default!r}" for f in dataclasses.fields(cls)) or "(none)"

    def validate(self) -> None:
        """Rules across options; raise ConfigError. Single values are checked by their fields."""

    def as_dict(self) -> dict:
        """The options as a plain dict."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    def as_public_dict(self) -> dict:
        """The options without the secret ones (credentials), for stats and logs."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if not f.metadata.get("secret")}


@dataclasses.dataclass(frozen=True)
class GraphConfig(StorageConfig):
    """Options of a storage that keeps an HNSW graph (its own, a library's or an engine's)."""

    m: int = option(16, integer(2), "links per node and layer (twice that on layer 0)")
    ef_construct: int = option(200, integer(1), "beam width while inserting")
    ef: int = option(64, integer(1), "beam width while searching (find(ef=...) overrides it)")
