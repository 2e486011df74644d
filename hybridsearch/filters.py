"""The filter language (API.md section 5): dict -> typed AST, validated against the schema.

`parse_filter` runs before any data is read and raises `hs.FilterError` for an
unknown field or operator or a value of the wrong type. Each storage compiles
the AST: `to_program` (here) turns it into the postfix program the C filter
kernel evaluates into a bitset; SQL, Elasticsearch and Vespa compilers consume
the same nodes.

Semantics shared by every compiler: comparisons are false where the field has
no value (None); `$ne` / `$nin` are the negation of `$eq` / `$in`, so they also
match documents without a value (as Elasticsearch `must_not` and MongoDB do).
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any, Callable, Optional, Union

import numpy as np

from .document import INT64_MAX, INT64_MIN, Kind, Schema, is_valid_unicode
from .errors import FilterError

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
class And:
    children: tuple


@dataclass(frozen=True)
class Or:
    children: tuple


@dataclass(frozen=True)
class Not:
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
            f"{name} is a {spec.kind.value} field: only $exists applies to it "
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


# --------------------------------------------------------------------------
# Compilation to the native filter program (bitset over typed columns)

# comparison codes of kernels/hs_filter.h
CMP = {"$eq": 0, "$ne": 1, "$lt": 2, "$lte": 3, "$gt": 4, "$gte": 5}


@dataclass
class Column:
    """What the bitset compiler needs to know about one column of a storage."""

    kind: Kind
    values: Optional[np.ndarray]  # int64 / float64 / int32 codes; None for non-columnar fields
    present: Optional[np.ndarray]  # uint8, None when every row has a value
    dictionary: Optional[list] = None  # code -> string, for keywords
    codes: Optional[dict] = None  # string -> code, for keywords


class ProgramBuilder:
    """Compiles an AST into the postfix program of kernels/hs_filter.h.

    `column(name)` gives the storage's Column; `id_rows(pred)` returns a
    bitset of the rows whose id satisfies the predicate (ids are not a column).
    """

    def __init__(self, ops, column: Callable[[str], Column], id_bits: Callable[[Node], np.ndarray]):
        self.ops = ops
        self.column = column
        self.id_bits = id_bits
        self.program: list[tuple] = []

    def _emit(self, op, cmp=0, nargs=0, col=None, present=None, ival=0, fval=0.0, table=None, bits=None):
        self.program.append((op, cmp, nargs, col, present, ival, fval, table, bits))

    def build(self, node: Node) -> list[tuple]:
        self._node(node)
        return self.program

    def _node(self, node: Node) -> None:
        o = self.ops
        if isinstance(node, MatchAll):
            self._emit(o.F_ALL)
        elif isinstance(node, (And, Or)):
            for c in node.children:
                self._node(c)
            self._emit(o.F_AND if isinstance(node, And) else o.F_OR, nargs=len(node.children))
        elif isinstance(node, Not):
            self._node(node.child)
            self._emit(o.F_NOT)
        elif node.field == "id":
            self._emit(o.F_BITS, bits=self.id_bits(node))
        elif isinstance(node, Exists):
            col = self.column(node.field)
            if col.present is None:
                self._emit(o.F_ALL)
            else:
                self._emit(o.F_PRESENT, present=col.present)
        elif isinstance(node, In):
            self._leaf_in(node)
        else:
            self._leaf_compare(node)

    def _leaf_in(self, node: In) -> None:
        col = self.column(node.field)
        if col.kind is Kind.KEYWORD:
            wanted = set(node.values)
            self._keyword(col, wanted.__contains__)
            return
        if not node.values:
            self._emit(self.ops.F_NONE)
            return
        for v in node.values:
            self._leaf_compare(Compare(node.field, "$eq", v))
        if len(node.values) > 1:
            self._emit(self.ops.F_OR, nargs=len(node.values))

    def _keyword(self, col: Column, pred: Callable[[str], bool]) -> None:
        table = np.fromiter((bool(pred(s)) for s in col.dictionary), dtype=np.uint8, count=len(col.dictionary))
        self._emit(self.ops.F_CODE, col=col.values, present=col.present, table=table)

    def _leaf_compare(self, node: Compare) -> None:
        o = self.ops
        col = self.column(node.field)
        v, op = node.value, node.op
        if col.kind is Kind.KEYWORD:
            if op == "$eq":
                code = col.codes.get(v)
                table = np.zeros(len(col.dictionary), dtype=np.uint8)
                if code is not None:
                    table[code] = 1
                self._emit(o.F_CODE, col=col.values, present=col.present, table=table)
            else:
                self._keyword(col, _string_predicate(op, v))
        elif col.kind is Kind.FLOAT:
            self._emit(o.F_F64, cmp=CMP[op], col=col.values, present=col.present, fval=float(v))
        else:  # INT and BOOL live in int64 columns
            if isinstance(v, bool):
                v = int(v)
            if isinstance(v, float) or not INT64_MIN <= v <= INT64_MAX:
                op, v = _int_bound(op, v)
                if op is None:  # v says whether every row with a value matches
                    if not v:
                        self._emit(o.F_NONE)
                    elif col.present is None:
                        self._emit(o.F_ALL)
                    else:
                        self._emit(o.F_PRESENT, present=col.present)
                    return
            self._emit(o.F_I64, cmp=CMP[op], col=col.values, present=col.present, ival=v)


def _string_predicate(op: str, v: str) -> Callable[[str], bool]:
    return {
        "$gt": lambda s: s > v,
        "$gte": lambda s: s >= v,
        "$lt": lambda s: s < v,
        "$lte": lambda s: s <= v,
        "$eq": lambda s: s == v,
    }[op]


def _int_bound(op: str, v: float):
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


def to_sql(node: Node) -> tuple:
    """The AST as a parameterised SQL condition -> (sql, params); values are never pasted.

    Column names are the schema's field names (Python identifiers), double-quoted.
    SQL comparisons with NULL are unknown, i.e. false, as ours are. Negations are pushed
    down to the leaves (De Morgan; our logic is two-valued), where NOT COALESCE(x, 0)
    also matches documents without a value: SQLite's parser pays dearly for every nested
    NOT COALESCE, and only AND/OR nesting remains."""
    return _sql(node, False)


def _sql(node: Node, negated: bool) -> tuple:
    if isinstance(node, Not):
        return _sql(node.child, not negated)
    if isinstance(node, (And, Or)):
        if not node.children:
            return ("1" if isinstance(node, And) != negated else "0"), []
        conj = isinstance(node, And) != negated  # De Morgan: NOT (a AND b) = NOT a OR NOT b
        return _balanced([_sql(c, negated) for c in node.children], " AND " if conj else " OR ")
    sql, params = _sql_leaf(node)
    return (f"NOT COALESCE(({sql}), 0)", params) if negated else (sql, params)


def _sql_leaf(node: Node) -> tuple:
    if isinstance(node, MatchAll):
        return "1", []
    if isinstance(node, Compare):
        value = int(node.value) if isinstance(node.value, bool) else node.value
        if type(value) is int and not INT64_MIN <= value <= INT64_MAX:  # SQLite binds 64-bit ints only
            _, every = _int_bound(node.op, value)
            return (f'"{node.field}" IS NOT NULL', []) if every else ("0", [])
        op = {"$eq": "=", "$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="}[node.op]
        return f'"{node.field}" {op} ?', [value]
    if isinstance(node, In):
        values = [int(v) if isinstance(v, bool) else v for v in node.values
                  if not (type(v) is int and not INT64_MIN <= v <= INT64_MAX)]  # such ints equal no value
        if not values:
            return "0", []
        if len(values) > _SQL_IN_MAX:  # one JSON parameter instead of more than SQLite takes
            return f'"{node.field}" IN (SELECT value FROM json_each(?))', [json.dumps(values)]
        return f'"{node.field}" IN ({", ".join("?" * len(values))})', values
    if isinstance(node, Exists):
        return f'"{node.field}" IS NOT NULL', []
    raise FilterError(f"cannot compile {node!r} to SQL")


_SQL_IN_MAX = 256  # longer $in lists travel as one JSON array (SQLite limits bound variables)


def _balanced(parts: list, joiner: str) -> tuple:
    """Joins conditions as a balanced tree: a 1,000-way $or stays ~10 levels deep, within
    SQLite's expression-depth and parser-stack limits (a flat chain is 1,000 deep)."""
    if len(parts) == 1:
        return parts[0]
    if len(parts) > 8:
        half = len(parts) // 2
        parts = [_balanced(parts[:half], joiner), _balanced(parts[half:], joiner)]
    return joiner.join(f"({s})" for s, _ in parts), [p for _, ps in parts for p in ps]
