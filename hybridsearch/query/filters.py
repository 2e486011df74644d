"""The filter language (API.md section 5): dict -> typed AST, validated against the schema.

`parse_filter` runs before any data is read and raises `hs.FilterError` for an
unknown field or operator or a value of the wrong type. Each storage compiles
the AST where it runs: `hybridsearch.engine.program` into the bitset program of the C
filter kernel, the sqlite, annlite, Elasticsearch and Vespa storages into their own
query languages. This module holds no compiler.

Semantics shared by every compiler: comparisons are false where the field has
no value (None); `$ne` / `$nin` are the negation of `$eq` / `$in`, so they also
match documents without a value (as Elasticsearch `must_not` and MongoDB do).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Optional, Union

import numpy as np

from hybridsearch.document import INT64_MAX, INT64_MIN, Kind, Schema, is_valid_unicode
from hybridsearch.errors import FilterError

COMPARISONS = ("$eq", "$ne", "$gt", "$gte", "$lt", "$lte")
FIELD_OPERATORS = COMPARISONS + ("$in", "$nin", "$exists")
LOGIC_OPERATORS = ("$and", "$or", "$not")
RANGE_OPERATORS = ("$gt", "$gte", "$lt", "$lte")
MAX_DEPTH = 32  # nesting of $and / $or / $not; deeper filters are refused, never recursed into


@dataclass(frozen=True)
class Compare:
    """field <op> value, op in $eq $gt $gte $lt $lte ($ne is Not(Compare $eq))."""

    field: str
    op: str
    value: Any


@dataclass(frozen=True)
class In:
    """field value is one of `values` ($nin is Not(In))."""

    field: str
    values: tuple


@dataclass(frozen=True)
class Exists:
    """The field has a value (is not None)."""

    field: str


@dataclass(frozen=True)
class Junction:
    """A node over several children: And or Or."""

    children: tuple


class And(Junction):
    """Every child matches ($and, and the fields of one filter dict); no children: everything."""


class Or(Junction):
    """At least one child matches ($or); no children: nothing."""


@dataclass(frozen=True)
class Not:
    """The child does not match ($not, $ne, $nin); two-valued: a missing field does not match
    the child, so it matches the negation."""

    child: Any


@dataclass(frozen=True)
class MatchAll:
    """The empty filter."""


Node = Union[Compare, In, Exists, And, Or, Not, MatchAll]


def parse_filter(filter: Optional[dict], schema: Schema) -> Node:
    """Validates a filter dict against the schema and returns its AST."""
    if filter is None:
        return MatchAll()
    return _parse_dict(filter, schema, "filter", 0)


def _parse_dict(d: Any, schema: Schema, where: str, depth: int) -> Node:
    if not isinstance(d, dict):
        raise FilterError(f"{where} must be a dict, got {type(d).__name__} {_short(d)}")
    if depth > MAX_DEPTH:
        raise FilterError(f"the filter nests $and / $or / $not deeper than {MAX_DEPTH} levels")
    nodes = []
    for key, value in d.items():
        if not isinstance(key, str):
            raise FilterError(f"{where}: keys must be field names or operators, got {key!r}")
        if key.startswith("$"):
            nodes.append(_parse_logic(key, value, schema, where, depth))
        else:
            nodes.append(_parse_field(key, value, schema))
    if not nodes:
        return MatchAll()
    return nodes[0] if len(nodes) == 1 else And(tuple(nodes))


def _parse_logic(op: str, value: Any, schema: Schema, where: str, depth: int) -> Node:
    if op in ("$and", "$or"):
        if not isinstance(value, (list, tuple)) or not value:
            raise FilterError(f"{op} needs a non-empty list of filters, got {_short(value)}")
        children = tuple(_parse_dict(v, schema, f"{op}[{i}]", depth + 1) for i, v in enumerate(value))
        if len(children) == 1:
            return children[0]
        return And(children) if op == "$and" else Or(children)
    if op == "$not":
        return negate(_parse_dict(value, schema, "$not", depth + 1))
    if op in FIELD_OPERATORS:
        raise FilterError(f"{op} must be applied to a field, e.g. {{'price': {{'{op}': ...}}}}")
    raise FilterError(
        f"unknown operator {op!r} in {where}; logic operators are {', '.join(LOGIC_OPERATORS)}"
    )


def _parse_field(name: str, cond: Any, schema: Schema) -> Node:
    spec = schema.fields.get(name)
    if spec is None:
        raise FilterError(
            f"{schema.name} has no field {name!r}; filterable fields: "
            + ", ".join(f for f, s in schema.fields.items() if s.filterable)
        )
    if isinstance(cond, dict) and any(isinstance(k, str) and k.startswith("$") for k in cond):
        nodes = [_parse_operator(name, op, v, schema) for op, v in cond.items()]
        if not nodes:
            return MatchAll()
        return nodes[0] if len(nodes) == 1 else And(tuple(nodes))
    return _parse_operator(name, "$eq", cond, schema)


def _parse_operator(name: str, op: Any, value: Any, schema: Schema) -> Node:
    spec = schema.fields[name]
    if op not in FIELD_OPERATORS:
        raise FilterError(
            f"unknown operator {op!r} on field {name!r}; valid: {', '.join(FIELD_OPERATORS)}"
        )
    if op == "$exists":
        if not isinstance(value, bool):
            raise FilterError(f"{name}: $exists takes True or False, got {value!r}")
        return Exists(name) if value else negate(Exists(name))
    if not spec.filterable:
        raise FilterError(
            f"{name} is {_kind_words(spec.kind.value)} field: only $exists applies to it "
            "(compare on a Keyword, number or bool field instead)"
        )
    if spec.kind is Kind.BOOL and op in RANGE_OPERATORS:
        raise FilterError(f"{name} is a bool field: {op} does not apply (use $eq, $ne, $in, $nin)")
    if op in ("$in", "$nin"):
        if not isinstance(value, (list, tuple, set, frozenset)):
            raise FilterError(f"{name}: {op} takes a list of values, got {_short(value)}")
        values = tuple(_check_value(spec, v, op) for v in value)
        node: Node = In(name, values)
        return negate(node) if op == "$nin" else node
    value = _check_value(spec, value, op)
    if op == "$ne":
        return negate(Compare(name, "$eq", value))
    return Compare(name, op, value)


def negate(node: Node) -> Node:
    """Not(node), with a double negation removed: comparisons are false where a field has no
    value, so the logic is two-valued and Not(Not(x)) is x."""
    return node.child if isinstance(node, Not) else Not(node)


def _kind_words(kind: str) -> str:
    """'a text', 'a vector', 'an unindexed' (kind "other": a plain Python value, stored as is)."""
    word = "unindexed" if kind == "other" else kind
    return ("an " if word[:1] in "aeiou" else "a ") + word


def _short(v: Any) -> str:
    r = repr(v)
    return r if len(r) <= 80 else r[:77] + "..."


def _check_value(spec, value: Any, op: str) -> Any:
    kind = spec.kind
    if kind in (Kind.KEYWORD, Kind.ID):
        if not isinstance(value, str):
            raise FilterError(f"{spec.name} is a {kind.value} field: {op} needs a string, got {_short(value)}")
        if not is_valid_unicode(value):
            raise FilterError(f"{spec.name}: {op} compares with a string holding a lone surrogate, "
                              "which no stored value can hold")
        return value
    if kind is Kind.BOOL:
        if not isinstance(value, (bool, np.bool_)):
            raise FilterError(f"{spec.name} is a bool field: {op} needs True or False, got {value!r}")
        return bool(value)
    # numbers
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise FilterError(f"{spec.name} is a number field: {op} needs a number, got {_short(value)}")
    if isinstance(value, (float, np.floating)):
        if math.isnan(value):
            raise FilterError(f"{spec.name}: {op} cannot compare with NaN")
        return float(value)
    value = int(value)
    if kind is Kind.FLOAT and not INT64_MIN <= value <= INT64_MAX:
        # as a float (no compiler binds wider ints); beyond the float range it is beyond every value
        try:
            return float(value)
        except OverflowError:
            return math.inf if value > 0 else -math.inf
    return value  # an int field may be compared with any int: the compilers cut it to 64 bits exactly


def int_bound(op: str, v: float):
    """Rewrites `int_column <op> v` (a float, or an int of any size) as a comparison with an int64.

    Returns (op, int) or (None, True/False) when the result is "every row with a
    value" / "no row"."""
    if isinstance(v, int):
        if INT64_MIN <= v <= INT64_MAX:
            return op, v
        if op == "$eq":
            return None, False
        return (None, (v > 0) == (op in ("$lt", "$lte")))  # every int64 is below 2**63
    if op == "$eq":
        if not math.isfinite(v) or not v.is_integer() or not INT64_MIN <= v <= INT64_MAX:
            return None, False
        return "$eq", int(v)
    if math.isinf(v):
        below = v > 0  # every integer is below +inf
        if op in ("$lt", "$lte"):
            return None, below
        return None, not below
    if op == "$lt":
        b = math.ceil(v)  # x < 2.5  <=>  x < 3 ; x < 3.0 <=> x < 3
    elif op == "$lte":
        b = math.floor(v)
    elif op == "$gt":
        b = math.floor(v)
    else:  # $gte
        b = math.ceil(v)
    if b > INT64_MAX:
        return (None, True) if op in ("$lt", "$lte") else (None, False)
    if b < INT64_MIN:
        return (None, False) if op in ("$lt", "$lte") else (None, True)
    return op, b
