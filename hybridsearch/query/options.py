"""The arguments of a query, checked once: sizes, beam widths, fusion.

`is_integer` is the one definition of "an integer argument" (any int or numpy integer,
never a bool); sizes of any magnitude are accepted and cut to SIZE_CAP, so nothing
larger than 64 bits ever reaches the native code.
"""
from __future__ import annotations

from typing import Any, Optional

import numpy as np

from hybridsearch.errors import ConfigError

FUSIONS = ("sum", "rrf", "linear")
SIZE_CAP = 2**40
EF_MAX = 1 << 20  # the largest ef a find accepts (documented in docs/storages/hnsw.md)
# a weight scales float32 scores: beyond this bound a weighted score (a part in [0, 1], a BM25 of
# a few hundred at most) would overflow float32 (3.4e38) or vanish below its smallest normal
WEIGHT_MIN, WEIGHT_MAX = 1e-30, 1e30
_INT64_MIN, _INT64_MAX = -2**63, 2**63 - 1


def is_number(value: Any) -> bool:
    """An int, float or numpy number, not a bool (of any magnitude: 10**400 is a number)."""
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_))


def as_float(value: Any) -> float:
    """A number as a Python float; an int beyond float64 becomes +-inf (never OverflowError)."""
    try:
        return float(value)
    except OverflowError:
        return float("inf") if value > 0 else float("-inf")


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


_SORTABLE = ("INT", "FLOAT", "BOOL", "KEYWORD", "ID")
_FACETABLE = ("INT", "BOOL", "KEYWORD")


def check_sort(value: Any, schema) -> list:
    """A sort argument: a list of (field, "asc" | "desc") over numbers, bools, keywords and id."""
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)) or not value:
        raise ConfigError(f'sort must be a non-empty list of (field, "asc" | "desc"), got {value!r}')
    keys = []
    for item in value:
        if not isinstance(item, (list, tuple)) or len(item) != 2 or item[1] not in ("asc", "desc"):
            raise ConfigError(f'each sort key is (field, "asc" | "desc"), got {item!r}')
        spec = schema.fields.get(item[0]) if isinstance(item[0], str) else None
        if spec is None:
            raise ConfigError(f"sort: {schema.name} has no field {item[0]!r}")
        if spec.kind.name not in _SORTABLE:
            raise ConfigError(f"sort: {item[0]!r} is a {spec.kind.name.lower()} field; sort takes int, float, "
                              "bool, keyword fields and id")
        keys.append((item[0], item[1]))
    return keys


def check_facet(field: Any, ranges: Any, schema) -> Optional[list]:
    """The field of a facet count and its ranges, checked: ranges as [(lo, hi)] of numbers or None."""
    spec = schema.fields.get(field) if isinstance(field, str) else None
    if spec is None:
        raise ConfigError(f"facets: {schema.name} has no field {field!r}")
    if ranges is None:
        if spec.kind.name not in _FACETABLE:
            raise ConfigError(f"facets: {field!r} is a {spec.kind.name.lower()} field; facets count keyword, bool "
                              "and int fields (and int or float fields by ranges)")
        return None
    if spec.kind.name not in ("INT", "FLOAT"):
        raise ConfigError(f"facets: ranges need an int or float field, {field!r} is {spec.kind.name.lower()}")
    if isinstance(ranges, (str, bytes)) or not isinstance(ranges, (list, tuple)):
        raise ConfigError(f"facets: ranges must be a list of (lo, hi), got {ranges!r}")
    out = []
    for r in ranges:
        ok = isinstance(r, (list, tuple)) and len(r) == 2 and all(
            v is None or (is_number(v) and (is_integer(v) or np.isfinite(v))) for v in r)
        if not ok:
            raise ConfigError(f"facets: each range is (lo, hi) of finite numbers or None, got {r!r}")
        out.append((r[0], r[1]))
    return out


def facet_bounds(ranges: list, kind: str) -> list:
    """The ranges as every storage can compare them, one per range, None for a range no stored
    value can fall in. A bound beyond what the field holds (int64 for an int field, float64 for
    a float field) is cut to None (unbounded) or makes the range empty, so that 2**64 or -2**70
    count right instead of overflowing a comparison."""
    if kind == "INT":
        low, high = _INT64_MIN, _INT64_MAX
    else:
        low, high = float("-inf"), float("inf")
        ranges = [tuple(None if b is None else as_float(b) for b in r) for r in ranges]
    out = []
    for lo, hi in ranges:
        if (lo is not None and (lo > high or lo == float("inf"))) or (hi is not None and hi <= low):
            out.append(None)  # above every value the field can hold, or below every one
            continue
        out.append((None if lo is None or lo <= low else lo, None if hi is None or hi > high else hi))
    return out


def check_weights(weights: Any, fusion: str, labels: tuple = ("text", "vector"),
                  known: tuple = ("text", "vector")) -> Optional[tuple]:
    """The weights of fusion="linear", one per list of `labels` (every list equally by default:
    0.5 / 0.5 for two); None for another fusion. Keys must be among `known` ("text", "vector"
    and the schema's vector field names; a hybrid find passes its own lists, so that a weight
    for a list it does not run is an error, not lost); a list without a key weighs 0."""
    if fusion != "linear":
        if weights is not None:
            raise ConfigError(f'weights apply to fusion="linear", not to fusion={fusion!r}')
        return None
    if weights is None:
        return tuple(1.0 / len(labels) for _ in labels) if labels else ()
    names = ", ".join(f'"{k}"' for k in known)
    if not isinstance(weights, dict) or not set(weights) <= set(known):
        raise ConfigError(f"weights must be a dict naming lists of the find ({names}), got {weights!r}")
    for key, w in weights.items():
        if not is_number(w) or not 0 <= as_float(w) <= WEIGHT_MAX:
            raise ConfigError(f"weights[{key!r}] must be a number between 0 and {WEIGHT_MAX:g}, got {w!r}")
    out = tuple(float(weights.get(label, 0.0)) for label in labels)
    if out and max(out) < WEIGHT_MIN:  # a tiny weight beside a normal one is fine: its part just counts little
        raise ConfigError(f"weights must not all be 0 (the largest must be at least {WEIGHT_MIN:g}), got {weights!r}")
    return out


def check_text_fields(value: Any, schema) -> tuple:
    """text_fields as ((hs.Text field, weight > 0), ...)."""
    if not isinstance(value, dict) or not value:
        raise ConfigError(f"text_fields must be a non-empty dict of hs.Text field -> weight, got {value!r}")
    out = []
    for name, w in value.items():
        spec = schema.fields.get(name) if isinstance(name, str) else None
        if spec is None or spec.kind.name != "TEXT":
            raise ConfigError(f"text_fields: {name!r} is not an hs.Text field of {schema.name}")
        if not is_number(w) or not WEIGHT_MIN <= as_float(w) <= WEIGHT_MAX:
            raise ConfigError(f"text_fields[{name!r}] must be a number between {WEIGHT_MIN:g} and {WEIGHT_MAX:g}, "
                              f"got {w!r}")
        out.append((name, float(w)))
    return tuple(out)


def check_min_score(value: Any) -> Optional[float]:
    if value is None:
        return None
    if not is_number(value) or np.isnan(as_float(value)):
        raise ConfigError(f"min_score must be a number, got {value!r}")
    return as_float(value)  # 10**400 keeps nothing, as it should: no score reaches it


def check_exact(value: Any) -> bool:
    """exact= of a find: True or False (a numpy bool, or the integers 1 and 0, too); anything
    else would be read as one of them by its truth value, so it is refused."""
    if value is True or value is False or isinstance(value, np.bool_) or (is_integer(value) and value in (0, 1)):
        return bool(value)
    raise ConfigError(f"exact must be True or False, got {value!r}")


def check_fusion(value: Any) -> str:
    """The name of a fusion of lexical and vector scores."""
    if value not in FUSIONS:
        raise ConfigError(f"fusion must be one of {', '.join(FUSIONS)}, got {value!r}")
    return value


def check_operator(value: Any) -> str:
    """operator= of a text query: "or" (a document needs one clause) or "and" (every clause
    without a sign is required)."""
    if not isinstance(value, str) or value not in ("or", "and"):
        raise ConfigError(f'operator must be "or" or "and", got {value!r}')
    return value
