"""Filter AST -> Vespa YQL, and the YQL of vector, text and hybrid queries (pure text).

Values are always YQL literals written here: strings double-quoted with `\\` and `"`
escaped (and control characters as \\uXXXX), integers plain within 32 bits and with the
`L` suffix within 64 (Vespa's parser reads a plain integer as a Java int), floats from
Python's repr, booleans as true / false. A comparison whose argument the attribute cannot
hold exactly is rewritten to one it can (price > 2.5 on a long -> price >= 3; an integer
no double equals, on a double -> the nearest double with the bound adjusted), so Vespa
never rounds the argument; bounds beyond every stored value are decided here. Query text
is compiled to terms by lexical.py. Field names come from the schema and are checked
identifiers (app.check_name). Also here: the `sorting` parameter of sorted finds and the
grouping expressions of facets.

Semantics kept: a comparison is false where the field has no value and a negation
matches documents without one (Vespa's `!` over an attribute search does exactly
that); `$exists` reads the `hs_present` array (required fields always exist, except that a
sparse field's {} is no value, so sparse fields always ask hs_present). A bool
attribute is one bit per document, so a document without the value reads as false:
`= false` on an optional bool also asks `hs_present`.
Vespa has no range comparison on strings: `$gt`/`$lt`... on a keyword field raise
UnsupportedError naming the operator. Every negation is written `true and !(...)`
because Vespa needs a positive term beside a negative one.
"""
from __future__ import annotations

import math

from hybridsearch.document import Kind, Schema
from hybridsearch.errors import UnsupportedError
from hybridsearch.query.filters import And, Compare, Exists, In, MatchAll, Node, Not, Or
from hybridsearch.storages.remote.base import ID_FIELD, PRESENT_FIELD, SEQ_FIELD

_OPS = {"$eq": "=", "$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="}
_INT32, _INT64 = 2 ** 31, 2 ** 63


def string_literal(s: str) -> str:
    """A YQL double-quoted string literal holding exactly s."""
    out = []
    for ch in s:
        if ch in ('"', "\\"):
            out.append("\\" + ch)
        elif ord(ch) < 0x20 or ord(ch) == 0x7f:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def number_literal(v) -> str:
    """A YQL numeric literal. Vespa reads a plain integer as a 32-bit int (Integer.valueOf in
    its YQL parser), so integers beyond that range carry the LONG_INT suffix `L`; integers
    beyond 64 bits become doubles (the FLOAT token accepts Python's repr)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return repr(v)
    v = int(v)
    if -_INT32 <= v < _INT32:
        return str(v)
    return f"{v}L" if -_INT64 <= v < _INT64 else repr(float(v))


class _Inexact(float):
    """An integer argument of a double field that no double equals: the float value is the
    nearest double, `exact` the integer (Vespa would compare against the rounded value)."""

    def __new__(cls, exact: int):
        obj = super().__new__(cls, float(exact))
        obj.exact = exact
        return obj

    def rewrite(self, op: str) -> tuple:
        """(op, double) selecting exactly the doubles x with `x op exact`: no double lies
        strictly between `exact` and its nearest double, so the bound moves onto it."""
        d = float(self)
        if op == "$eq":
            return None, None
        if op in ("$gt", "$gte"):
            return ("$gte", d) if d > self.exact else ("$gt", d)
        return ("$lte", d) if d < self.exact else ("$lt", d)


def _as_double(v: int):
    """An integer argument of a double field: a float when the conversion is exact (or the
    integer is beyond every double), else an _Inexact."""
    try:
        d = float(v)
    except OverflowError:
        return math.inf if v > 0 else -math.inf
    return d if d == v else _Inexact(v)


def _on_integers(op: str, v: float) -> tuple:
    """(op, int) on a long attribute meaning the same as `x op v` for a float v."""
    if v == math.floor(v):
        return op, int(v)
    if op == "$eq":
        return None, None
    return ("$gte", math.ceil(v)) if op in ("$gt", "$gte") else ("$lte", math.floor(v))


class ConditionCompiler:
    """The boolean walk of a filter AST shared by the YQL filter and the document selection:
    the two languages differ only in their leaves, negation and the error for what they cannot
    say, which the subclasses give."""

    def compare(self, field: str, op: str, v) -> str:
        """One comparison leaf ("false" when no stored value can satisfy it)."""
        raise NotImplementedError

    def exists(self, field: str) -> str:
        """The leaf of {"$exists": true}."""
        raise NotImplementedError

    def negate(self, condition: str) -> str:
        """The negation of an already compiled condition."""
        raise NotImplementedError

    def cannot(self, node: Node) -> Exception:
        """The error for a node the language cannot express."""
        raise NotImplementedError

    def compile(self, node: Node) -> str:
        """The condition meaning the same as `node`."""
        if isinstance(node, MatchAll):
            return "true"
        if isinstance(node, Compare):
            return self.compare(node.field, node.op, node.value)
        if isinstance(node, In):
            parts = [p for p in (self.compare(node.field, "$eq", v) for v in node.values) if p != "false"]
            return "false" if not parts else parts[0] if len(parts) == 1 else "(" + " or ".join(parts) + ")"
        if isinstance(node, Exists):
            return self.exists(node.field)
        if isinstance(node, Not):
            return self.negate(self.compile(node.child))
        if isinstance(node, (And, Or)):
            if not node.children:
                return "true" if isinstance(node, And) else "false"
            joiner = " and " if isinstance(node, And) else " or "
            return "(" + joiner.join(self.compile(c) for c in node.children) + ")"
        raise self.cannot(node)


class YqlFilter(ConditionCompiler):
    """Compiles filter ASTs of one schema to YQL conditions."""

    def __init__(self, schema: Schema) -> None:
        self.schema = schema

    def _spec(self, field: str):
        return self.schema.fields.get(field)

    def _exists(self, field: str) -> str:
        spec = self._spec(field)
        # a sparse field's {} is no value (API.md section 10): hs_present names non-empty ones only
        if spec is None or (not spec.optional and spec.kind is not Kind.SPARSE):
            return "true"
        return f"{PRESENT_FIELD} contains {string_literal(field)}"

    def _compare(self, node: Compare) -> str:
        spec, v = self._spec(node.field), node.value
        name = ID_FIELD if node.field == "id" else node.field
        if isinstance(v, str):
            if node.op != "$eq":
                raise UnsupportedError(f"storage 'vespa' cannot express {node.op} on the string field "
                                       f"{node.field!r}: YQL has no range comparison for strings")
            return f"{name} contains {string_literal(v)}"
        if isinstance(v, bool):
            if v is False and spec is not None and spec.optional:
                return f"({self._exists(node.field)} and {name} = false)"
            return f"{name} = {number_literal(v)}"
        kind = spec.kind if spec is not None else None
        if kind is Kind.FLOAT and not isinstance(v, float):
            v = _as_double(v)
        if (isinstance(v, float) and math.isinf(v)) or (kind is Kind.INT and not -_INT64 <= v < _INT64):
            # beyond every stored value (long attributes are 64-bit): decided here, as YQL has
            # no infinity literal and Vespa refuses integer literals beyond 64 bits
            holds = {"$eq": False, "$gt": v < 0, "$gte": v < 0, "$lt": v > 0, "$lte": v > 0}[node.op]
            return self._exists(node.field) if holds else "false"
        op, v = node.op, v
        if kind is Kind.INT and isinstance(v, float):
            op, v = _on_integers(op, v)
        elif kind is Kind.FLOAT and isinstance(v, _Inexact):
            op, v = v.rewrite(op)
        if op is None:
            return "false"  # equality with a value no stored number can have
        return f"{name} {_OPS[op]} {number_literal(v)}"

    def compare(self, field: str, op: str, v) -> str:
        return self._compare(Compare(field, op, v))

    def exists(self, field: str) -> str:
        return self._exists(field)

    def negate(self, condition: str) -> str:
        # YQL has no unary not: "true and !(c)" is its negation
        return f"(true and !({condition}))"

    def cannot(self, node: Node) -> Exception:
        return UnsupportedError(f"storage 'vespa' cannot express the filter node {node!r}")


def select(doctype: str, where: str, order_by_seq: bool = False) -> str:
    """A full YQL statement over one document type (the `from <source>` form of the grammar)."""
    yql = f"select * from {doctype} where {where}"
    return yql + (" order by hs_seq asc" if order_by_seq else "")


def nearest_neighbor(field: str, k: int, ef: int, approximate: bool = True, query: str = "q") -> str:
    """The nearestNeighbor term: targetHits = k, ef - k more candidates explored in the graph
    (approximate=False: every matching document is scored, no graph); `query` names the query
    tensor input (the rank profile's query(<query>))."""
    extra = max(0, ef - k)
    exact = "" if approximate else "approximate: false, "
    return f"({{{exact}targetHits: {int(k)}, hnsw.exploreAdditionalHits: {int(extra)}}}nearestNeighbor({field}, {query}))"


def dot_product(field: str, keys) -> str:
    """The dotProduct term matching every document whose weighted set `field` holds one of the
    (int) keys: Vespa evaluates it exhaustively over the keys' posting lists (no pruning, unlike
    wand), so every document sharing a key with a sparse query matches."""
    return f"dotProduct({field}, {{{', '.join(f'{string_literal(str(int(k)))}: 1' for k in keys)}}})"


# ------------------------------------------------------------------ sorting
def sort_spec(schema: Schema, keys: list, text: bool) -> "str | None":
    """The `sorting` parameter of a sorted find (Vespa's sorting language), or None when a key
    cannot be sorted natively as API.md orders it. YQL's `order by` has no missing-value
    policy, the `sorting` parameter has: `missing(f,last)` puts documents without a value
    last in both directions. Keywords sort with `raw` (UTF-8 bytes: Unicode code point
    order; Vespa's default is locale-aware UCA). Ties: BM25 descending with text, then the
    insertion number. None for an optional bool (one bit per document: a missing value
    reads as false) and an optional keyword (Vespa's missing string is "", which a stored
    "" would then share)."""
    parts = []
    for field, direction in keys:
        spec = schema.fields[field]
        name = ID_FIELD if field == "id" else field
        kind = Kind.KEYWORD if field == "id" else spec.kind
        if spec.optional and kind in (Kind.BOOL, Kind.KEYWORD):
            return None
        sign = "+" if direction == "asc" else "-"
        expr = f"raw({name})" if kind is Kind.KEYWORD else name
        # a required keyword's "" sorts first ascending and last descending by Vespa's
        # default policy, which is where code point order puts it
        parts.append(f"{sign}missing({expr},last)" if spec.optional else sign + expr)
    if text:
        parts.append("-[relevance]")
    return " ".join(parts + [f"+{SEQ_FIELD}"])


# ----------------------------------------------------------------- grouping
def value_grouping(field: str, max_groups: int) -> str:
    """The `max_groups` most frequent values of `field` with their counts (one grouping)."""
    return f"all(group({field}) max({int(max_groups)}) order(-count()) each(output(count())))"


def _bound(v, integer: bool, low: bool) -> str:
    """A bucket bound as a grouping literal: None is -inf / inf; on a long attribute the
    bound moves onto the integers (x >= 2.5 is x >= 3, x < 2.5 is x < 3)."""
    if v is None:
        return "-inf" if low else "inf"
    if integer:
        v = math.ceil(v)
        if not -_INT64 <= v < _INT64:
            return ("-inf" if v < 0 else "inf")
        return str(int(v))
    return repr(float(v))


def range_buckets(kind, ranges: list) -> list:
    """(label, bucket text or None: empty) per range; lo inclusive, hi exclusive as Vespa's
    `bucket(lo, hi)`."""
    out = []
    integer = kind is Kind.INT
    for n, (lo, hi) in enumerate(ranges):
        a, b = _bound(lo, integer, True), _bound(hi, integer, False)
        empty = lo is not None and hi is not None and (float(a) >= float(b))
        out.append((f"r{n}", None if empty else f"bucket({a}, {b})"))
    return out


def range_grouping(field: str, buckets: list) -> str:
    """One predefined-bucket grouping per range, side by side and labelled r<n>: the ranges
    may overlap or come in any order, which one `predefined` list may not."""
    parts = [f"all(group(predefined({field}, {bucket})) each(output(count())) as({label}))"
             for label, bucket in buckets if bucket is not None]
    return "all(" + " ".join(parts) + ")"
