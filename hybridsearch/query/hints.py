"""Hints for a call that mixes up find()'s arguments: a string where a vector goes, a vector
where text goes, a misspelt keyword. Each turns a Python error into a sentence that names the
spelling the caller most likely meant."""
from __future__ import annotations

import difflib
import inspect
from numbers import Real
from typing import Any

import numpy as np

from hybridsearch.errors import ConfigError


def looks_like_text(value: Any) -> bool:
    """A string given where a vector goes: find("blue phone")."""
    return isinstance(value, str)


def looks_like_vector(value: Any) -> bool:
    """Numbers given where text goes: find(text=[0.1, 0.2])."""
    if isinstance(value, np.ndarray):
        return value.dtype.kind in "fiu"
    return (isinstance(value, (list, tuple)) and bool(value)
            and all(isinstance(v, Real) and not isinstance(v, bool) for v in value))


def unknown_argument(method: str, unknown: dict, function) -> ConfigError:
    """The error of keyword names `method` does not take, with the nearest names it does."""
    valid = [p.name for p in inspect.signature(function).parameters.values()
             if p.kind is inspect.Parameter.KEYWORD_ONLY or p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD
             and p.name != "self"]
    parts = []
    for name in unknown:
        near = difflib.get_close_matches(str(name), valid, n=1, cutoff=0.5)
        parts.append(f"{method}() has no argument {name!r}" + (f": did you mean {near[0]}=?" if near else ""))
    return ConfigError("; ".join(parts) + f" (its arguments: {', '.join(valid)})")
