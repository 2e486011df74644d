"""Filter AST -> the postfix program of kernels/hs_filter.h, evaluated in C into a bitset."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np

from hybridsearch.document import INT64_MAX, INT64_MIN, Kind
from hybridsearch.query.filters import And, Compare, Exists, In, MatchAll, Node, Not, Or, int_bound

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
                self._keyword(col, string_predicate(op, v))
        elif col.kind is Kind.FLOAT:
            self._emit(o.F_F64, cmp=CMP[op], col=col.values, present=col.present, fval=float(v))
        else:  # INT and BOOL live in int64 columns
            if isinstance(v, bool):
                v = int(v)
            if isinstance(v, float) or not INT64_MIN <= v <= INT64_MAX:
                op, v = int_bound(op, v)
                if op is None:  # v says whether every row with a value matches
                    if not v:
                        self._emit(o.F_NONE)
                    elif col.present is None:
                        self._emit(o.F_ALL)
                    else:
                        self._emit(o.F_PRESENT, present=col.present)
                    return
            self._emit(o.F_I64, cmp=CMP[op], col=col.values, present=col.present, ival=v)


def string_predicate(op: str, v: str) -> Callable[[str], bool]:
    return {
        "$gt": lambda s: s > v,
        "$gte": lambda s: s >= v,
        "$lt": lambda s: s < v,
        "$lte": lambda s: s <= v,
        "$eq": lambda s: s == v,
    }[op]
