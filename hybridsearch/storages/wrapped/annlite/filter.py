"""Filter AST -> AnnLite's filter dict (its own Mongo-like language, compiled by AnnLite to SQL).

AnnLite understands `{field: {op: value}}` with `$eq $neq $gt $gte $lt $lte $in $nin`
and `{"$and" | "$or": [...]}`; it has no `$not` and no `$exists`, and its SQL
comparisons are false on NULL. Our semantics are expressed in that language
with two kinds of helper columns the storage keeps next to the field columns:

- `_has_<field>` (0/1) for every optional field, so `$exists` and the negations
  (which must match documents *without* a value) become plain comparisons;
- `_id` (AnnLite's own autoincrement row id, always >= 1) for the constants
  true (`_id >= 0`) and false (`_id < 0`).

Negation is pushed down to the leaves (De Morgan, flipped comparisons), so
every filter of our language is expressible. `id` maps to AnnLite's `_doc_id`,
field `f` to column `c_f`.
"""
from __future__ import annotations

from hybridsearch.document import Schema
from hybridsearch.errors import UnsupportedError
from hybridsearch.query.filters import And, Compare, Exists, In, MatchAll, Node, Not, Or

TRUE = {"_id": {"$gte": 0}}
FALSE = {"_id": {"$lt": 0}}
_FLIP = {"$gt": "$lte", "$gte": "$lt", "$lt": "$gte", "$lte": "$gt"}
# what `x op inf` is for every finite x (stored values are finite); -inf by symmetry
_VS_INF = {"$eq": False, "$neq": True, "$gt": False, "$gte": False, "$lt": True, "$lte": True}
_MIRROR = {"$gt": "$lt", "$gte": "$lte", "$lt": "$gt", "$lte": "$gte", "$eq": "$eq", "$neq": "$neq"}


def _infinite(v) -> bool:
    return isinstance(v, float) and v in (float("inf"), float("-inf"))


def has_column(field: str) -> str:
    """Name of the 0/1 column saying whether an optional field has a value."""
    return f"_has_{field}"


def column(field: str) -> str:
    """AnnLite pastes column names into its SQL unquoted: a prefix keeps names like
    `group` or `order` from being read as SQL keywords."""
    return "_doc_id" if field == "id" else f"c_{field}"


def _grouped(op: str, parts: list) -> dict:
    """{op: parts} as a balanced tree: AnnLite chains the parts into one SQL expression, and a
    1,000-way chain exceeds SQLite's expression depth (1,000); balanced it is ~10 deep."""
    if len(parts) > 8:
        half = len(parts) // 2
        parts = [_grouped(op, parts[:half]), _grouped(op, parts[half:])]
    return {op: parts}


class AnnliteFilter:
    """Compiles filter ASTs of one schema to AnnLite filter dicts."""

    def __init__(self, schema: Schema) -> None:
        self.optional = {name for name, spec in schema.fields.items() if spec.optional}

    def compile(self, node: Node) -> dict:
        """The AnnLite filter dict meaning the same as `node`."""
        return self._pos(node)

    def _has(self, field: str, value: bool) -> dict:
        if field not in self.optional:
            return TRUE if value else FALSE
        return {has_column(field): {"$eq": int(value)}}

    def _compare(self, field: str, op: str, value) -> dict:
        # AnnLite sends every value as str(value); SQLite reads "inf" as text, not a number,
        # so comparisons with an infinity are decided here (true only where a value exists)
        if _infinite(value):
            holds = _VS_INF[op if value > 0 else _MIRROR[op]]
            return self._has(field, True) if holds else FALSE
        return {column(field): {op: value}}

    def _pos(self, node: Node) -> dict:
        if isinstance(node, MatchAll):
            return TRUE
        if isinstance(node, Compare):
            return self._compare(node.field, node.op, node.value)
        if isinstance(node, In):
            values = [v for v in node.values if not _infinite(v)]  # no stored value equals one
            if not values:
                return FALSE
            return {column(node.field): {"$in": values}}
        if isinstance(node, Exists):
            return self._has(node.field, True)
        if isinstance(node, Not):
            return self._neg(node.child)
        if isinstance(node, (And, Or)):
            return self._junction(node, negated=False)
        raise UnsupportedError(f"storage 'annlite' cannot express the filter node {node!r}")

    def _junction(self, node: Node, negated: bool) -> dict:
        """$and / $or of the children, or under a negation their De Morgan dual (our logic is
        two-valued, so NOT (a AND b) = NOT a OR NOT b); no children: everything / nothing."""
        conj = isinstance(node, And) != negated
        if not node.children:
            return TRUE if conj else FALSE
        part = self._neg if negated else self._pos
        return _grouped("$and" if conj else "$or", [part(c) for c in node.children])

    def _neg(self, node: Node) -> dict:
        """NOT node: true also where the field has no value, as in every other storage."""
        if isinstance(node, MatchAll):
            return FALSE
        if isinstance(node, Not):
            return self._pos(node.child)
        if isinstance(node, (And, Or)):
            return self._junction(node, negated=True)
        if isinstance(node, Exists):
            return self._has(node.field, False)
        if isinstance(node, Compare):
            leaf = self._compare(node.field, "$neq" if node.op == "$eq" else _FLIP[node.op], node.value)
        elif isinstance(node, In):
            values = [v for v in node.values if not _infinite(v)]
            if not values:
                return TRUE
            leaf = {column(node.field): {"$nin": values}}
        else:
            raise UnsupportedError(f"storage 'annlite' cannot express $not of {node!r}")
        if node.field in self.optional:
            return {"$or": [leaf, self._has(node.field, False)]}
        return leaf
