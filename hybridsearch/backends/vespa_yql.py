"""Filter AST -> Vespa YQL, and the YQL of vector, text and hybrid queries (pure text).

Values are always YQL literals written here: strings double-quoted with `\\` and `"`
escaped (and control characters as \\uXXXX), numbers from Python's repr, booleans as
true / false. Query text never enters the YQL: it travels as a request parameter
that `userInput(@userq)` refers to. Field names come from the schema and are checked
identifiers (vespa_app.check_name).

Semantics kept: a comparison is false where the field has no value and a negation
matches documents without one (Vespa's `!` over an attribute search does exactly
that); `$exists` reads the `hs_present` array (required fields always exist).
Vespa has no range comparison on strings: `$gt`/`$lt`... on a keyword field raise
UnsupportedError naming the operator. Every negation is written `true and !(...)`
because Vespa needs a positive term beside a negative one.
"""
from __future__ import annotations

import math

from ..document import Kind, Schema
from ..errors import UnsupportedError
from ..filters import And, Compare, Exists, In, MatchAll, Node, Not, Or
from .vespa_app import ID_FIELD, PRESENT_FIELD

_OPS = {"$eq": "=", "$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="}
_LONG = 2.0 ** 63


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


def _number(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return repr(v)
    return str(int(v))


class YqlFilter:
    """Compiles filter ASTs of one schema to YQL conditions."""

    def __init__(self, schema: Schema) -> None:
        self.schema = schema

    def _spec(self, field: str):
        return self.schema.fields.get(field)

    def _exists(self, field: str) -> str:
        spec = self._spec(field)
        if spec is None or not spec.optional:
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
            return f"{name} = {_number(v)}"
        if isinstance(v, float) and (math.isinf(v) or (spec is not None and spec.kind is Kind.INT and abs(v) >= _LONG)):
            # beyond every stored value: decided here (YQL has no infinity literal)
            holds = {"$eq": False, "$gt": v < 0, "$gte": v < 0, "$lt": v > 0, "$lte": v > 0}[node.op]
            return self._exists(node.field) if holds else "false"
        return f"{name} {_OPS[node.op]} {_number(v)}"

    def compile(self, node: Node) -> str:
        """The YQL condition meaning the same as `node`."""
        if isinstance(node, MatchAll):
            return "true"
        if isinstance(node, Compare):
            return self._compare(node)
        if isinstance(node, In):
            parts = [self._compare(Compare(node.field, "$eq", v)) for v in node.values]
            parts = [p for p in parts if p != "false"]
            if not parts:
                return "false"
            return parts[0] if len(parts) == 1 else "(" + " or ".join(parts) + ")"
        if isinstance(node, Exists):
            return self._exists(node.field)
        if isinstance(node, Not):
            return f"(true and !({self.compile(node.child)}))"
        if isinstance(node, (And, Or)):
            if not node.children:
                return "true" if isinstance(node, And) else "false"
            joiner = " and " if isinstance(node, And) else " or "
            return "(" + joiner.join(self.compile(c) for c in node.children) + ")"
        raise UnsupportedError(f"storage 'vespa' cannot express the filter node {node!r}")


def select(doctype: str, where: str, order_by_seq: bool = False) -> str:
    yql = f"select * from sources {doctype} where {where}"
    return yql + (" order by hs_seq asc" if order_by_seq else "")


def nearest_neighbor(field: str, k: int, ef: int) -> str:
    """The nearestNeighbor term: targetHits = k, ef - k more candidates explored in the graph."""
    extra = max(0, ef - k)
    return f"({{targetHits: {int(k)}, hnsw.exploreAdditionalHits: {int(extra)}}}nearestNeighbor({field}, q))"


def user_input(grammar: str) -> str:
    """The text term; the text itself is the request parameter `userq`."""
    return f'({{grammar: {string_literal(grammar)}, defaultIndex: "default"}}userInput(@userq))'
