"""The arguments of a query, checked once: sizes, beam widths, fusion.

`is_integer` is the one definition of "an integer argument" (any int or numpy integer,
never a bool); sizes of any magnitude are accepted and cut to SIZE_CAP, so nothing
larger than 64 bits ever reaches the native code.
"""
from __future__ import annotations

from typing import Any, Optional

import numpy as np

from hybridsearch.errors import ConfigError

FUSIONS = ("sum", "rrf")
SIZE_CAP = 2**40
EF_MAX = 1 << 20  # the largest ef a find accepts (documented in docs/storages/hnsw.md)


def is_integer(value: Any) -> bool:
    """An int or numpy integer, not a bool."""
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def check_size(value: Any, name: str, minimum: int) -> int:
    """A size argument (limit, candidates, ...) as an int >= minimum, cut to SIZE_CAP."""
    if not is_integer(value) or value < minimum:
        what = "a non-negative integer" if minimum == 0 else f"an integer >= {minimum}"
        raise ConfigError(f"{name} must be {what}, got {value!r}")
    return min(int(value), SIZE_CAP)


def check_ef(value: Any) -> Optional[int]:
    """A search-time beam width: None (the storage's) or an integer in [1, EF_MAX]."""
    if value is None:
        return None
    if not is_integer(value) or not 1 <= value <= EF_MAX:
        raise ConfigError(f"ef must be an integer between 1 and {EF_MAX}, got {value!r}")
    return int(value)


def check_fusion(value: Any) -> str:
    """The name of a fusion of lexical and vector scores."""
    if value not in FUSIONS:
        raise ConfigError(f"fusion must be one of {', '.join(FUSIONS)}, got {value!r}")
    return value
