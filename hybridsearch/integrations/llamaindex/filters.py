"""LlamaIndex MetadataFilters -> hybridsearch's filter language, or an exact evaluation in Python.

A leaf on a declared metadata field (`metadata_fields=`) whose operator and value our filter
language can state with LlamaIndex's meaning is pushed down to the storage. Everything else (an
undeclared key, CONTAINS / ANY / ALL / TEXT_MATCH, a value of another type than the column) is
evaluated here over the stored metadata, with LlamaIndex's own leaf semantics
(`build_metadata_filter_fn`, what SimpleVectorStore runs), and comes back as the ids it keeps.
A filter is never ignored.

LlamaIndex's semantics that the translation keeps: a missing key (or None) matches only `!=` and
`nin`; `in` / `nin` test membership in a list; IS_EMPTY is "missing, None, '' or []"; NOT is
"none of the filters match"; an empty filter list matches everything.
"""
from __future__ import annotations

import math
from typing import Any, Callable, Optional

from llama_index.core.vector_stores.types import FilterCondition, FilterOperator, MetadataFilter, MetadataFilters
from llama_index.core.vector_stores.utils import build_metadata_filter_fn

from hybridsearch.errors import FilterError
from hybridsearch.integrations.collection import NOTHING

_COMPARE = {FilterOperator.EQ: "$eq", FilterOperator.NE: "$ne", FilterOperator.GT: "$gt",
            FilterOperator.GTE: "$gte", FilterOperator.LT: "$lt", FilterOperator.LTE: "$lte"}
_MEMBER = {FilterOperator.IN: "$in", FilterOperator.NIN: "$nin"}
_RANGE = (FilterOperator.GT, FilterOperator.GTE, FilterOperator.LT, FilterOperator.LTE)


def _fits(kind: str, value: Any) -> bool:
    """Whether a column of `kind` ("str", "int", "float", "bool") compares with `value` as Python
    compares the metadata value."""
    if kind == "str":
        return isinstance(value, str)
    if kind == "bool":
        return isinstance(value, bool)
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and math.isfinite(value))  # NaN / inf compare oddly in Python: leave them to it


def _leaf(f: MetadataFilter, declared: dict) -> Optional[dict]:
    """Our filter for one leaf, or None when only the Python evaluation gives its meaning."""
    kind = declared.get(f.key)
    if kind is None:
        return None
    op, value = f.operator, f.value
    if op == FilterOperator.IS_EMPTY:
        missing = {f.key: {"$exists": False}}
        return {"$or": [missing, {f.key: ""}]} if kind == "str" else missing
    if op in _COMPARE and _fits(kind, value) and not (kind == "bool" and op in _RANGE):
        return {f.key: {_COMPARE[op]: value}}
    if op in _MEMBER and isinstance(value, list) and all(_fits(kind, v) for v in value):
        return {f.key: {_MEMBER[op]: list(value)}}
    return None


def _condition(filters: MetadataFilters) -> FilterCondition:
    return filters.condition or FilterCondition.AND


def translate(node: Any, declared: dict) -> Optional[dict]:
    """The whole of `node` (a MetadataFilter or MetadataFilters) in our filter language, or None
    when some part of it is not expressible there. {} matches everything."""
    if isinstance(node, MetadataFilter):
        return _leaf(node, declared)
    parts = [translate(child, declared) for child in node.filters]
    if any(p is None for p in parts):
        return None
    if not parts:
        return {}  # LlamaIndex: no filters match everything, whatever the condition
    cond = _condition(node)
    if cond == FilterCondition.AND:
        parts = [p for p in parts if p]
        return {"$and": parts} if parts else {}
    if any(not p for p in parts):  # one part matches everything
        return {} if cond == FilterCondition.OR else NOTHING
    either = {"$or": parts}
    if cond == FilterCondition.OR:
        return either
    if cond == FilterCondition.NOT:
        return {"$not": either}
    raise FilterError(f"unknown filter condition {cond!r}; valid: and, or, not")


def split(filters: Optional[MetadataFilters], declared: dict) -> tuple:
    """(pushed, rest): `pushed` our filter for the part the storage can answer (None: no
    condition), `rest` the MetadataFilters left for Python (None: nothing left). The top-level
    AND is split per filter, so the declared part still narrows what Python reads."""
    if filters is None or not filters.filters:
        return None, None
    whole = translate(filters, declared)
    if whole is not None:
        return (whole or None), None
    if _condition(filters) != FilterCondition.AND:
        return None, filters
    pushed, rest = [], []
    for child in filters.filters:
        t = translate(child, declared)
        if t is None:
            rest.append(child)
        elif t:
            pushed.append(t)
    pushed_filter = None if not pushed else pushed[0] if len(pushed) == 1 else {"$and": pushed}
    return pushed_filter, MetadataFilters(filters=rest, condition=FilterCondition.AND)


def evaluator(filters: MetadataFilters) -> Callable[[dict], bool]:
    """metadata dict -> whether it passes `filters`, nested MetadataFilters included. Each leaf
    runs LlamaIndex's own build_metadata_filter_fn, so the answer is the one SimpleVectorStore
    gives; a comparison Python cannot make ("a" > 1) is an hs.FilterError."""
    current: list = [None]

    def compile_(node: Any) -> Callable[[], bool]:
        if isinstance(node, MetadataFilter):
            fn = build_metadata_filter_fn(lambda _: current[0], MetadataFilters(filters=[node]))
            return lambda: fn("")
        children = [compile_(child) for child in node.filters]
        if not children:
            return lambda: True
        cond = _condition(node)
        if cond == FilterCondition.AND:
            return lambda: all(c() for c in children)
        if cond == FilterCondition.OR:
            return lambda: any(c() for c in children)
        if cond == FilterCondition.NOT:
            return lambda: not any(c() for c in children)
        raise FilterError(f"unknown filter condition {cond!r}; valid: and, or, not")

    run = compile_(filters)

    def passes(metadata: dict) -> bool:
        current[0] = metadata
        try:
            return run()
        except (TypeError, ValueError) as e:  # LlamaIndex's own refusal, e.g. TEXT_MATCH on a number
            raise FilterError(f"metadata filter cannot be evaluated: {e}") from None
    return passes
