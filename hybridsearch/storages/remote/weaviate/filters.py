"""Our filter AST as a Weaviate filter (weaviate-client v4 `Filter`), pure functions, no I/O.

Semantics kept from the other storages: a comparison is false where the field has no value,
and a negation (`$ne`, `$nin`, `$not`) matches documents without one. Weaviate's `Filter.not_`
is a complement over every object, which is exactly that once intersected with `everything()`
(alone it also returns earlier lives of an id deleted and written again). `$exists` reads
`hs_present` (the optional fields holding a value); a required field always has one. The id
is compared through `hs_id` (the original id; Weaviate's own id is its uuid5). Comparisons
that no stored value can satisfy (an int field against 2**70, a float against inf) are decided
here, never sent: the server would refuse them or overflow.
"""
from __future__ import annotations

import math

from hybridsearch.document import Kind, Schema
from hybridsearch.errors import FilterError
from hybridsearch.query.filters import And, Compare, Exists, In, MatchAll, Node, Not, Or, int_bound
from hybridsearch.storages.remote.base import ID_FIELD, PRESENT_FIELD, SEQ_FIELD

_RANGE = {"$gt": "greater_than", "$gte": "greater_or_equal", "$lt": "less_than", "$lte": "less_or_equal"}


def _F():
    from weaviate.classes.query import Filter
    return Filter


def everything():
    """A filter every stored object matches (each holds an insertion number >= 1)."""
    return _F().by_property(SEQ_FIELD).greater_than(0)


def nothing():
    """A filter no stored object matches."""
    return _F().by_property(SEQ_FIELD).less_than(0)


def exists(field: str, schema: Schema):
    spec = schema.fields.get(field)
    if spec is None or not spec.optional:
        return everything()  # a required field always has a value
    return _F().by_property(PRESENT_FIELD).contains_any([field])


def _value(spec, op: str, v):
    """(op, value) to send, or (None, True / False): the comparison holds for every object with
    a value / for none."""
    if spec is not None and spec.kind is Kind.INT and not isinstance(v, bool):
        return int_bound(op, v)
    if isinstance(v, float) and math.isinf(v):
        if op == "$eq":
            return None, False
        below = v > 0  # every finite value lies below +inf
        return None, below if op in ("$lt", "$lte") else not below
    return op, v


def _compare(node: Compare, schema: Schema):
    spec = schema.fields.get(node.field)
    op, v = _value(spec, node.op, node.value)
    if op is None:
        return exists(node.field, schema) if v else nothing()
    prop = _F().by_property(ID_FIELD if node.field == "id" else node.field)
    if op == "$eq":
        return prop.equal(v)
    return getattr(prop, _RANGE[op])(v)


def _in(node: In, schema: Schema):
    spec = schema.fields.get(node.field)
    values = []
    for v in node.values:
        op, b = _value(spec, "$eq", v)
        if op is not None and b not in values:
            values.append(b)
    if not values:
        return nothing()
    return _F().by_property(ID_FIELD if node.field == "id" else node.field).contains_any(values)


def compile_filter(node: Node, schema: Schema):
    """The node as a Weaviate filter; MatchAll -> None (no filter)."""
    if isinstance(node, MatchAll):
        return None
    return _compile(node, schema)


def _compile(node: Node, schema: Schema):
    F = _F()
    if isinstance(node, MatchAll):
        return everything()
    if isinstance(node, Compare):
        return _compare(node, schema)
    if isinstance(node, In):
        return _in(node, schema)
    if isinstance(node, Exists):
        return exists(node.field, schema)
    if isinstance(node, Not):
        # Weaviate 1.35's complement also holds the slots of objects deleted and written again
        # under the same uuid (one hit per earlier life of the id); intersecting with a property
        # every live object holds keeps the live ones only
        return F.all_of([F.not_(_compile(node.child, schema)), everything()])
    if isinstance(node, (And, Or)):
        parts = [_compile(c, schema) for c in node.children]
        if not parts:
            return everything() if isinstance(node, And) else nothing()
        if len(parts) == 1:
            return parts[0]
        return F.all_of(parts) if isinstance(node, And) else F.any_of(parts)
    raise FilterError(f"cannot compile {node!r} to a Weaviate filter")
