"""Filter AST -> a parameterised SQLite condition (the sqlite storage's compiler)."""
from __future__ import annotations

import json

from hybridsearch.document import INT64_MAX, INT64_MIN
from hybridsearch.errors import FilterError
from hybridsearch.query.filters import And, Compare, Exists, In, MatchAll, Node, Not, Or, int_bound


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
            _, every = int_bound(node.op, value)
            return (f'"{node.field}" IS NOT NULL', []) if every else ("0", [])
        op = {"$eq": "=", "$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="}[node.op]
        return f'"{node.field}" {op} ?', [value]
    if isinstance(node, In):
        values = [int(v) if isinstance(v, bool) else v for v in node.values
                  if not (type(v) is int and not INT64_MIN <= v <= INT64_MAX)]  # such ints equal no value
        if not values:
            return "0", []
        if len(values) <= _SQL_IN_MAX:
            return f'"{node.field}" IN ({", ".join("?" * len(values))})', values
        if not any(type(v) is str and "\x00" in v for v in values):
            # one JSON parameter instead of more than SQLite takes
            return f'"{node.field}" IN (SELECT value FROM json_each(?))', [json.dumps(values)]
        # json_each cuts a string at a NUL character: lists of bound values instead (past SQLite's
        # limit on variables the query fails, and the storage answers from its RAM columns)
        return _balanced([(f'"{node.field}" IN ({", ".join("?" * len(c))})', c)
                          for c in (values[i:i + _SQL_IN_MAX] for i in range(0, len(values), _SQL_IN_MAX))], " OR ")
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
