"""Filter AST -> a Vespa document selection (the language of /document/v1 `selection=`),
for deletes and updates by condition run by Vespa itself (pure text).

Fields are read as `<doctype>.<field>` (the id as `<doctype>.hs_id`). The selection
language compares a missing field with anything but `==` / `!=` as *invalid*, which a
`not` keeps invalid (Vespa's document selector reference): every comparison on an
optional field is therefore written `(f != null and f <op> v)`, false where the field has
no value, so a negation matches documents without it, as on every storage.

Numbers are moved onto values the field can hold, as in yql.py (price > 2.5 on a long is
price >= 3); a bound beyond every stored value (beyond 64 bits, infinite) is decided here.

What the language cannot say exactly raises NotSelectable (the storage then deletes or
updates the ids a query finds): strings outside printable ASCII (the language reads
strings as ASCII) and bool fields (the reference gives no bool value to compare with).
"""
from __future__ import annotations

import math

from hybridsearch.document import Kind, Schema
from hybridsearch.query.filters import Node
from hybridsearch.storages.remote.base import ID_FIELD
from hybridsearch.storages.remote.vespa.yql import ConditionCompiler, _as_double, _Inexact

_OPS = {"$eq": "==", "$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="}
_INT64 = 2 ** 63
_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t", "\f": "\\f"}


class NotSelectable(Exception):
    """The filter has a part a document selection cannot express exactly (the message says which)."""


def string_literal(s: str) -> str:
    """A selection string literal holding exactly s (printable ASCII; escapes for the rest of ASCII)."""
    out = []
    for ch in s:
        if ord(ch) > 0x7e:
            raise NotSelectable(f"the string {s!r} is not ASCII, and the selection language reads strings as ASCII")
        if ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif ord(ch) < 0x20:
            out.append(f"\\x{ord(ch):02x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def number_literal(v) -> str:
    """An integer as written; a float with its decimal point (the examples of the reference:
    `543.34e4`, `-534E-3`)."""
    if isinstance(v, int):
        return str(v)
    text = repr(float(v)).replace("e+", "e")
    mantissa, _, exp = text.partition("e")
    if "." not in mantissa:
        mantissa += ".0"
    return mantissa + ("e" + exp if exp else "")


class Selection(ConditionCompiler):
    """Compiles filter ASTs of one schema to document selections over `doctype`."""

    def __init__(self, schema: Schema, doctype: str) -> None:
        self.schema, self.doctype = schema, doctype

    def _ref(self, field: str) -> str:
        return f"{self.doctype}.{ID_FIELD if field == 'id' else field}"

    def _value(self, field: str, op: str, v) -> tuple:
        """(op, literal) meaning `field op v` exactly; (None, None): no value satisfies it;
        ("exists", None): every value does."""
        spec = self.schema.fields.get(field)
        kind = Kind.KEYWORD if field == "id" else spec.kind
        if kind is Kind.BOOL or isinstance(v, bool):
            raise NotSelectable(f"{field!r} is a bool field, and the selection language has no bool value")
        if isinstance(v, str):
            return op, string_literal(v)  # bytewise order: Unicode code point order for ASCII
        if kind is Kind.FLOAT and not isinstance(v, float):
            v = _as_double(v)
        beyond = (isinstance(v, float) and math.isinf(v)) or (kind is Kind.INT and not -_INT64 <= v < _INT64)
        if beyond:  # no literal for it, and no stored value on its other side
            holds = {"$eq": False, "$gt": v < 0, "$gte": v < 0, "$lt": v > 0, "$lte": v > 0}[op]
            return ("exists" if holds else None), None
        if kind is Kind.INT and isinstance(v, float) and v != math.floor(v):
            if op == "$eq":
                return None, None
            op, v = ("$gte", math.ceil(v)) if op in ("$gt", "$gte") else ("$lte", math.floor(v))
        if isinstance(v, _Inexact):  # no double equals it: the bound moves onto the nearest one
            op, v = v.rewrite(op)
            if op is None:
                return None, None
        return op, number_literal(int(v) if kind is Kind.INT else float(v))

    def _exists(self, field: str) -> str:
        spec = self.schema.fields.get(field)
        if spec is not None and spec.kind is Kind.SPARSE:
            # {} is no value (API.md section 10) yet leaves no null to test: only hs_present
            # tells, an array this compiler does not select on (the query path reads it)
            raise NotSelectable(f"$exists on the sparse field {field!r} reads hs_present")
        return f"{self._ref(field)} != null" if spec is not None and spec.optional else "true"

    def _compare(self, field: str, op: str, v) -> str:
        op, lit = self._value(field, op, v)
        if op is None:
            return "false"
        if op == "exists":
            return self._exists(field)
        cmp = f"{self._ref(field)} {_OPS[op]} {lit}"
        spec = self.schema.fields.get(field)
        if spec is not None and spec.optional:
            return f"({self._ref(field)} != null and {cmp})"
        return cmp

    def compare(self, field: str, op: str, v) -> str:
        return self._compare(field, op, v)

    def exists(self, field: str) -> str:
        return self._exists(field)

    def negate(self, condition: str) -> str:
        return f"(not {condition})"

    def cannot(self, node: Node) -> Exception:
        return NotSelectable(f"the filter node {node!r}")
