"""Haystack 2 filters -> hybridsearch's filter language, with the rest answered exactly in Python.

A Haystack filter is a tree of logic nodes (``{"operator": "AND" | "OR" | "NOT", "conditions":
[...]}``) over comparisons (``{"field": "meta.year", "operator": ">=", "value": 2020}``).
A comparison on a *declared* metadata field (a typed column of the collection) whose value
the column can compare exactly as Haystack does is pushed down to the storage. Every other
comparison (undeclared keys, ISO-date strings, ``content``, mixed types such as ``True == 1``)
is evaluated in Python over the stored documents with Haystack's own filter semantics
(``haystack.utils.filters.document_matches_filter``), and enters the pushed-down filter as
``{"id": {"$in": matching ids}}``: nothing is ignored or approximated, declared fields are only
faster.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from haystack.errors import FilterError as _HaystackFilterError
from haystack.utils.filters import document_matches_filter

import hybridsearch as hs
from hybridsearch.document import Kind
from hybridsearch.integrations.collection import EXACT_FLOAT_INT, NOTHING

LOGIC = ("AND", "OR", "NOT")
COMPARISONS = ("==", "!=", ">", ">=", "<", "<=", "in", "not in")
_ORDER = {">": "$gt", ">=": "$gte", "<": "$lt", "<=": "$lte"}
# Haystack Document attributes: a bare field name other than these means a metadata key
DOCUMENT_FIELDS = ("id", "content", "blob", "meta", "score", "embedding", "sparse_embedding")
# logic nesting a filter may have: a NOT of several conditions becomes two levels of
# hybridsearch's language, which takes 32 (query/filters.py MAX_DEPTH)
MAX_DEPTH = 16


class FilterError(_HaystackFilterError, hs.FilterError):
    """A malformed or uncomparable Haystack filter: both Haystack's FilterError (what its
    components and test suite catch) and hybridsearch's (a ValueError)."""


@dataclass
class Compiled:
    """A filter split into what the storage answers and what Python must.

    ``tree`` is the hybridsearch filter with placeholders ``("py", i)`` standing for
    ``leaves[i]``, the comparisons evaluated in Python."""

    tree: Any
    leaves: list = field(default_factory=list)


def meta_key(name: str) -> Optional[str]:
    """The metadata key a Haystack field name reads (``meta.x`` or a bare legacy ``x``), or None
    for a Document attribute or a nested path (``meta.a.b``)."""
    if name.startswith("meta."):
        key = name[len("meta."):]
        return key if key and "." not in key else None
    if "." in name or name in DOCUMENT_FIELDS:
        return None
    return name


def check(filters: Any, depth: int = 0) -> None:
    """Raise FilterError for a filter whose shape Haystack refuses, before any data is read."""
    if depth > MAX_DEPTH:
        raise FilterError(f"the filter nests AND / OR / NOT deeper than {MAX_DEPTH} levels")
    if not isinstance(filters, dict):
        raise FilterError(f"a Haystack filter is a dict, got {type(filters).__name__} {filters!r}")
    if "field" in filters:
        for key in ("operator", "value"):
            if key not in filters:
                raise FilterError(f"'{key}' key missing in {filters}")
        op, value = filters["operator"], filters["value"]
        if not isinstance(filters["field"], str):
            raise FilterError(f"'field' must be a string, got {filters['field']!r}")
        if op not in COMPARISONS:
            raise FilterError(f"Unknown comparison operator {op!r}. Valid operators are: {list(COMPARISONS)}")
        if op in ("in", "not in") and not isinstance(value, list):
            raise FilterError(f"Filter value must be a `list` when using operator {op!r}, "
                              f"received type {type(value).__name__!r}")
        if op in _ORDER and isinstance(value, list):
            raise FilterError(f"Filter value can't be of type list using operators '>', '>=', '<', '<='")
        return
    if "operator" not in filters:
        raise FilterError(f"'operator' key missing in {filters}")
    if "conditions" not in filters:
        raise FilterError(f"'conditions' key missing in {filters}")
    if filters["operator"] not in LOGIC:
        raise FilterError(f"Unknown logical operator {filters['operator']!r}. Valid operators are: {list(LOGIC)}")
    if not isinstance(filters["conditions"], list):
        raise FilterError(f"'conditions' must be a list, got {type(filters['conditions']).__name__}")
    for condition in filters["conditions"]:
        check(condition, depth + 1)


def _looks_like_date(value: str) -> bool:
    """Conservatively: could Haystack read this string as an ISO date (then `==` compares instants,
    which a string column cannot)? A leading digit is enough to keep it in Python."""
    return value[:1].isdigit()


def _fits(kind: Kind, value: Any) -> bool:
    """Whether a typed column compares `value` (==, !=, in) exactly as Python compares the metadata value."""
    K = Kind
    if kind is K.KEYWORD:
        return type(value) is str and not _looks_like_date(value)
    if kind is K.BOOL:
        return type(value) is bool
    if kind is K.INT:
        return type(value) is int and -(2 ** 63) <= value < 2 ** 63
    if kind is K.FLOAT:
        if type(value) is int:
            return abs(value) <= EXACT_FLOAT_INT  # beyond, compared against a float column they stay in Python
        return type(value) is float and math.isfinite(value)
    return False


def _comparison(cond: dict, declared: dict) -> Any:
    """The pushed-down form of one comparison, or None when Python must evaluate it."""
    name, op, value = cond["field"], cond["operator"], cond["value"]
    if name == "id":
        if op in ("==", "!=") and type(value) is str and not _looks_like_date(value):
            return {"id": {"$eq" if op == "==" else "$ne": value}}
        if op in ("in", "not in") and all(type(v) is str and not _looks_like_date(v) for v in value):
            return {"id": {"$in" if op == "in" else "$nin": list(value)}}
        return None
    key = meta_key(name)
    kind = declared.get(key) if key is not None else None
    if kind is None:
        return None
    if value is None:  # Haystack: == None matches a missing value, orderings never match None
        if op == "==":
            return {key: {"$exists": False}}
        if op == "!=":
            return {key: {"$exists": True}}
        return NOTHING if op in _ORDER else None
    if op in ("==", "!="):
        return {key: {"$eq" if op == "==" else "$ne": value}} if _fits(kind, value) else None
    if op in ("in", "not in"):
        if all(v is not None and _fits(kind, v) for v in value):
            return {key: {"$in" if op == "in" else "$nin": list(value)}}
        return None
    # orderings: numbers against numeric columns only (strings are dates in Haystack)
    K = Kind
    if kind in (K.INT, K.FLOAT) and _fits(K.FLOAT if kind is K.FLOAT else K.INT, value):
        return {key: {_ORDER[op]: value}}
    return None


def compile_filter(filters: Optional[dict], declared: dict) -> Compiled:
    """Split a checked Haystack filter into a pushed-down tree and Python leaves.

    `declared` maps metadata keys to the Kind of their typed column."""
    compiled = Compiled(tree={})
    if filters is None or isinstance(filters, dict) and not filters:  # no filter: every document
        return compiled
    check(filters)

    def walk(node: dict) -> Any:
        if "field" in node:
            pushed = _comparison(node, declared)
            if pushed is not None:
                return pushed
            compiled.leaves.append(node)
            return ("py", len(compiled.leaves) - 1)
        parts = [walk(c) for c in node["conditions"]]
        op = node["operator"]
        if op == "OR":
            return ("or", parts)
        both = ("and", parts)
        return ("not", both) if op == "NOT" else both

    compiled.tree = walk(filters)
    return compiled


def render(tree: Any, ids_of_leaf: Callable[[int], list]) -> dict:
    """The hybridsearch filter of a compiled tree, each Python leaf replaced by its matching ids."""
    if isinstance(tree, dict):
        return tree
    tag, arg = tree
    if tag == "py":
        return {"id": {"$in": ids_of_leaf(arg)}}
    if tag == "not":
        inner = render(arg, ids_of_leaf)
        return NOTHING if inner == {} else {} if inner == NOTHING else {"$not": inner}
    parts = [render(p, ids_of_leaf) for p in arg]
    if not parts:  # Haystack: AND of nothing holds, OR of nothing does not
        return {} if tag == "and" else NOTHING
    if len(parts) == 1:
        return parts[0]
    return {"$and" if tag == "and" else "$or": parts}


def evaluate(leaves: list, documents: list) -> list:
    """For each leaf, the ids of the Haystack documents it matches (Haystack's own semantics:
    a comparison it cannot make raises FilterError)."""
    out = []
    for leaf in leaves:
        try:
            out.append([d.id for d in documents if document_matches_filter(leaf, d)])
        except _HaystackFilterError as e:
            raise FilterError(str(e)) from None
    return out


def leaf_fields(leaves: list) -> set:
    """The Document attributes the Python leaves read (beyond id and meta)."""
    need = set()
    for leaf in leaves:
        root = leaf["field"].split(".", 1)[0]
        if root in DOCUMENT_FIELDS and root not in ("id", "meta"):
            need.add(root)
    return need
