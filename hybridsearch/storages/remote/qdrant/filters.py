"""Our filter AST -> Qdrant filters (pure functions, no I/O).

The AST is first compiled to a small neutral tree of tuples, then built with the models of
one of the two clients (qdrant_edge or qdrant_client), whose classes differ in names and
signatures but not in meaning:

    ("all",) ("none",) ("and", [..]) ("or", [..]) ("not", x)
    ("eq", key, value)        MatchValue (str, int, bool)
    ("any", key, [values])    MatchAny (str or int)
    ("range", key, {op: v})   Range with gt / gte / lt / lte as floats
    ("text", key, text)       MatchTextAny: the document holds one of the text's terms
    ("ids", [uuids])          HasId: the points themselves
    ("vector", name)          HasVector: the point holds the named vector

Semantics kept from the other storages: a comparison is false where the field has no value,
and a negation (`$ne`, `$nin`, `$not`) matches documents without one, which is Qdrant's
`must_not`. Bools are matched as the 0 / 1 the storage writes for them. `$exists` is a match
on `hs_present` (the optional fields holding a value) rather than IsEmpty / IsNull: those
also call an empty list "empty", and the unindexed fields live in one JSON string
(`hs_extra`), where no condition reaches them. On a sparse field it is HasVector: Qdrant keeps
no empty sparse vector, and API.md calls `{}` absent.

Qdrant has no range over strings: a range on a hs.Keyword field (or `id`) is compiled to the
stored values in range (`keyword_values`, one exact facet over the field, then a MatchAny).
Its integer ranges are floats: a bound beyond 2**53 cannot be said exactly and raises
UnsupportedError.
"""
from __future__ import annotations

import math
from typing import Callable, Optional

from hybridsearch.document import Kind, Schema
from hybridsearch.errors import FilterError, UnsupportedError
from hybridsearch.query.filters import And, Compare, Exists, In, MatchAll, Node, Not, Or, int_bound
from hybridsearch.storages.remote.base import ID_FIELD, PRESENT_FIELD

ALL, NONE = ("all",), ("none",)
EXACT_FLOAT_INT = 2 ** 53  # integers beyond this are not all floats: a float bound would move
_OPS = {"$gt": "gt", "$gte": "gte", "$lt": "lt", "$lte": "lte"}
_HOLDS = {"$gt": lambda a, b: a > b, "$gte": lambda a, b: a >= b, "$lt": lambda a, b: a < b,
          "$lte": lambda a, b: a <= b}


def conj(children: list) -> tuple:
    """AND of neutral trees, simplified."""
    kids = [c for c in children if c != ALL]
    if NONE in kids:
        return NONE
    return ALL if not kids else kids[0] if len(kids) == 1 else ("and", kids)


def disj(children: list) -> tuple:
    """OR of neutral trees, simplified."""
    kids = [c for c in children if c != NONE]
    if ALL in kids:
        return ALL
    return NONE if not kids else kids[0] if len(kids) == 1 else ("or", kids)


def neg(tree: tuple) -> tuple:
    if tree == ALL:
        return NONE
    if tree == NONE:
        return ALL
    return tree[1] if tree[0] == "not" else ("not", tree)


class Compiler:
    """Compiles filter ASTs of one schema; `keyword_values(key)` gives the distinct values a
    keyword field holds (for string ranges)."""

    def __init__(self, schema: Schema, keyword_values: Callable[[str], list]) -> None:
        self.schema = schema
        self.keyword_values = keyword_values

    def compile(self, node: Optional[Node]) -> tuple:
        """The neutral tree of a filter AST (None: everything)."""
        if node is None or isinstance(node, MatchAll):
            return ALL
        if isinstance(node, Compare):
            return self._compare(node)
        if isinstance(node, In):
            return self._in(node)
        if isinstance(node, Exists):
            return self._exists(node.field)
        if isinstance(node, Not):
            return neg(self.compile(node.child))
        if isinstance(node, And):
            return conj([self.compile(c) for c in node.children])
        if isinstance(node, Or):
            return disj([self.compile(c) for c in node.children])
        raise FilterError(f"cannot compile {node!r} to a Qdrant filter")

    def _kind(self, field: str) -> Kind:
        return Kind.ID if field == "id" else self.schema.fields[field].kind

    def _exists(self, field: str) -> tuple:
        spec = self.schema.fields.get(field)
        if spec is not None and spec.kind is Kind.SPARSE:  # {} is absent, and Qdrant does not store it
            return ("vector", field)
        if spec is None or not spec.optional:
            return ALL  # a required field always has a value
        return ("eq", PRESENT_FIELD, field)

    def _compare(self, node: Compare) -> tuple:
        field, op, v = node.field, node.op, node.value
        kind = self._kind(field)
        key = ID_FIELD if field == "id" else field
        if kind in (Kind.KEYWORD, Kind.ID):
            if op == "$eq":
                return ("eq", key, v)
            values = [s for s in self.keyword_values(key) if _HOLDS[op](s, v)]
            return ("any", key, values) if values else NONE
        if kind is Kind.BOOL:  # stored as 0 / 1 (storage.py)
            return ("eq", key, int(bool(v)))
        if kind is Kind.INT:
            op2, b = int_bound(op, v)
            if op2 is None:
                return self._exists(field) if b else NONE
            if op2 == "$eq":
                return ("eq", key, b)
            if abs(b) > EXACT_FLOAT_INT:
                raise UnsupportedError(
                    f"storage 'qdrant' compares integers in ranges as floats, which cannot hold {b} exactly: "
                    f"a range bound on {field!r} must lie within +-2**53")
            return ("range", key, {_OPS[op2]: float(b)})
        # float field
        v = float(v)
        if math.isinf(v):
            below = {"$eq": False, "$gt": v < 0, "$gte": v < 0, "$lt": v > 0, "$lte": v > 0}[op]
            return self._exists(field) if below else NONE
        if op == "$eq":
            return ("range", key, {"gte": v, "lte": v})
        return ("range", key, {_OPS[op]: v})

    def _in(self, node: In) -> tuple:
        kind = self._kind(node.field)
        key = ID_FIELD if node.field == "id" else node.field
        if kind in (Kind.KEYWORD, Kind.ID):
            values = list(dict.fromkeys(node.values))
            return ("any", key, values) if values else NONE
        if kind is Kind.INT:
            ints = []
            for v in node.values:
                op2, b = int_bound("$eq", v)
                if op2 is not None:
                    ints.append(b)
            ints = list(dict.fromkeys(ints))
            return ("any", key, ints) if ints else NONE
        return disj([self._compare(Compare(node.field, "$eq", v)) for v in node.values])


def text_tree(fields: list, text: str) -> tuple:
    """Documents holding one of the text's terms in one of the fields."""
    return disj([("text", f, text) for f in fields])


# ---------------------------------------------------------------- builders
def build(tree: tuple, m, edge: bool):
    """The tree as a Filter of the client's models `m` (qdrant_edge when `edge`, else
    qdrant_client.models); None for "everything"."""
    if tree == ALL:
        return None
    cond = _condition(tree, m, edge)
    return cond if isinstance(cond, m.Filter) else m.Filter(must=[cond])


def selector(tree: tuple, m, edge: bool):
    """The tree as a Filter naming the points a delete removes: a Filter even for "everything"
    (a delete by filter takes no None)."""
    return build(tree, m, edge) or _condition(ALL, m, edge)


def _condition(tree: tuple, m, edge: bool):
    tag = tree[0]
    if tag == "none":  # hs_id is on every point, so "hs_id is empty" holds for none
        return m.IsEmptyCondition(ID_FIELD) if edge else m.IsEmptyCondition(is_empty=m.PayloadField(key=ID_FIELD))
    if tag == "all":
        return m.Filter(must_not=[_condition(NONE, m, edge)])
    if tag == "and":
        return m.Filter(must=[_condition(c, m, edge) for c in tree[1]])
    if tag == "or":
        return m.Filter(should=[_condition(c, m, edge) for c in tree[1]])
    if tag == "not":
        return m.Filter(must_not=[_condition(tree[1], m, edge)])
    if tag == "ids":  # point ids (uuids)
        return m.HasIdCondition(set(tree[1])) if edge else m.HasIdCondition(has_id=list(tree[1]))
    if tag == "vector":
        return m.HasVectorCondition(tree[1]) if edge else m.HasVectorCondition(has_vector=tree[1])
    key = tree[1]
    if tag == "eq":
        match = m.MatchValue(tree[2]) if edge else m.MatchValue(value=tree[2])
    elif tag == "any":
        match = m.MatchAny(list(tree[2])) if edge else m.MatchAny(any=list(tree[2]))
    elif tag == "text":
        match = m.MatchTextAny(tree[2]) if edge else m.MatchTextAny(text_any=tree[2])
    elif tag == "range":
        rng = m.RangeFloat(**tree[2]) if edge else m.Range(**tree[2])
        return m.FieldCondition(key, range=rng) if edge else m.FieldCondition(key=key, range=rng)
    else:
        raise FilterError(f"unknown filter tree {tree!r}")
    return m.FieldCondition(key, match=match) if edge else m.FieldCondition(key=key, match=match)
