"""Metadata filters of a framework store: pushed down where the storage can answer, exact always.

A filter is hybridsearch's filter language over metadata keys ({"genre": "jazz"},
{"year": {"$gte": 1990}}, $and / $or / $not), plus a few operators LangChain users know from
other stores ($between, $like, $ilike, $contains). The parts that name only declared metadata
columns with operators of our language go down to the storage as they are. Every other part
(an undeclared key, an operator the language lacks) is evaluated here, in Python, over the
stored metadata of the documents the pushed part lets through; its answer goes down as
{"id": {"$in": ids}}. So no filter is ever ignored or approximated, and declaring a key only
makes its filters faster. Framework-neutral: no framework is imported here.
"""
from __future__ import annotations

import re
from typing import Any, Callable, Optional

from hybridsearch.errors import FilterError

OURS = frozenset({"$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$in", "$nin", "$exists"})
PYTHON_ONLY = frozenset({"$between", "$like", "$ilike", "$contains"})
LOGIC = frozenset({"$and", "$or", "$not"})
_EQUALITY = frozenset({"$eq", "$ne", "$in", "$nin"})
_ORDERED = frozenset({"$gt", "$gte", "$lt", "$lte", "$between"})


def check(flt: Any) -> None:
    """Raises FilterError for a filter that is not one: unknown operator, wrong shape."""
    if not isinstance(flt, dict):
        raise FilterError(f"a filter is a dict such as {{'genre': 'jazz'}}, got {flt!r}")
    for key, cond in flt.items():
        if key in ("$and", "$or"):
            if not isinstance(cond, (list, tuple)) or not cond:
                raise FilterError(f"{key} takes a non-empty list of filters, got {cond!r}")
            for f in cond:
                check(f)
        elif key == "$not":
            check(cond)
        elif not isinstance(key, str) or key.startswith("$"):
            raise FilterError(f"unknown filter operator {key!r}; logic operators are $and, $or, $not")
        elif _is_ops(cond):
            for op, arg in cond.items():
                _check_op(key, op, arg)
        else:
            _check_op(key, "$eq", cond)


def _is_ops(cond: Any) -> bool:
    return isinstance(cond, dict) and any(isinstance(k, str) and k.startswith("$") for k in cond)


def _check_op(key: str, op: Any, arg: Any) -> None:
    if op not in OURS and op not in PYTHON_ONLY:
        known = ", ".join(sorted(OURS | PYTHON_ONLY))
        raise FilterError(f"unknown operator {op!r} on metadata {key!r}; known operators: {known}")
    if op in ("$in", "$nin") and not isinstance(arg, (list, tuple, set, frozenset)):
        raise FilterError(f"{op} on metadata {key!r} takes a list, got {arg!r}")
    if op in _EQUALITY or op in _ORDERED:
        for a in (arg if op in ("$in", "$nin", "$between") else [arg]):
            if a is None:
                raise FilterError(f"{op} on metadata {key!r} got None: None is no value to compare with; "
                                  "use {'$exists': False} for a missing key (or one holding None)")
            if op in _ORDERED and _kind(a) not in ("number", "str"):
                raise FilterError(f"{op} on metadata {key!r} orders numbers or strings, got "
                                  f"{type(a).__name__} {a!r}")
    if op == "$exists" and not isinstance(arg, bool):
        raise FilterError(f"$exists on metadata {key!r} takes True or False, got {arg!r}")
    if op == "$between" and not (isinstance(arg, (list, tuple)) and len(arg) == 2):
        raise FilterError(f"$between on metadata {key!r} takes [low, high], got {arg!r}")
    if op in ("$like", "$ilike") and not isinstance(arg, str):
        raise FilterError(f"{op} on metadata {key!r} takes a pattern string, got {arg!r}")


def pushable(flt: dict, declared: dict) -> bool:
    """True when the storage can answer `flt` itself: declared keys, our operators only."""
    for key, cond in flt.items():
        if key in ("$and", "$or"):
            if not all(pushable(f, declared) for f in cond):
                return False
        elif key == "$not":
            if not pushable(cond, declared):
                return False
        elif key not in declared:
            return False
        elif _is_ops(cond):
            if not all(op in OURS and _fits(declared[key], op, arg) for op, arg in cond.items()):
                return False
        elif isinstance(cond, (dict, list, tuple)) or not _fits(declared[key], "$eq", cond):
            return False  # equality with a structure (no column holds one) or with another kind
    return True


def _fits(type_name: str, op: str, arg: Any) -> bool:
    """Whether the storage answers `op arg` on a column declared `type_name` as Python answers it
    over the metadata: a value of another kind (a str for an int column, a number for a bool one)
    goes to Python, which answers as for an undeclared key (never equal; ordering raises), where
    the storage would refuse what an undeclared key accepts."""
    if op == "$exists":
        return True
    want = {"str": "str", "bool": "bool"}.get(type_name, "number")
    if op in _ORDERED and want == "bool":
        return False
    return all(_kind(a) == want for a in (arg if op in ("$in", "$nin") else [arg]))


def split(flt: Optional[dict], declared: dict) -> tuple:
    """(pushed, residual): the top-level conjuncts the storage answers, ANDed, and the rest
    (each None when empty). pushed AND residual == flt."""
    if flt is None:
        return None, None
    check(flt)
    conjuncts: list = []
    for key, cond in flt.items():
        if key == "$and":
            conjuncts.extend(cond)
        else:
            conjuncts.append({key: cond})
    down = [c for c in conjuncts if pushable(c, declared)]
    rest = [c for c in conjuncts if not pushable(c, declared)]

    def both(parts: list) -> Optional[dict]:
        return None if not parts else parts[0] if len(parts) == 1 else {"$and": parts}
    return both(down), both(rest)


def matches(metadata: dict, flt: dict) -> bool:
    """Whether a document's metadata satisfies the filter, with hybridsearch's semantics: a
    missing key (or None) matches only $ne, $nin and $exists False; values of different kinds
    (a bool and a number, a string and a number) are never equal, and ordering them is a
    FilterError (as a declared column of the stored kind refuses it)."""
    for key, cond in flt.items():
        if key == "$and":
            ok = all(matches(metadata, f) for f in cond)
        elif key == "$or":
            ok = any(matches(metadata, f) for f in cond)
        elif key == "$not":
            ok = not matches(metadata, cond)
        else:
            ops = cond if _is_ops(cond) else {"$eq": cond}
            value = metadata.get(key)
            ok = all(_OPS[op](value, arg) for op, arg in ops.items())
        if not ok:
            return False
    return True


def _kind(v: Any) -> str:
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, (int, float)):
        return "number"
    return type(v).__name__


def _eq(value: Any, arg: Any) -> bool:
    return value is not None and _kind(value) == _kind(arg) and value == arg


def _ordered(test: Callable[[Any, Any], bool], name: str) -> Callable[[Any, Any], bool]:
    def op(value: Any, arg: Any) -> bool:
        if value is None or isinstance(value, (list, tuple, dict)):
            return False
        if _kind(value) != _kind(arg):  # a declared column of the stored kind would refuse it too
            raise FilterError(f"{name} {arg!r} compares a {_kind(arg)} with metadata holding the {_kind(value)} "
                              f"{value!r}: ordering applies between numbers or between strings")
        return test(value, arg)
    return op


def _like(pattern: str, flags: int) -> re.Pattern:
    # SQL LIKE: % any run of characters, _ one character, everything else literal
    body = "".join(".*" if c == "%" else "." if c == "_" else re.escape(c) for c in pattern)
    return re.compile(body, flags | re.DOTALL)


def _contains(value: Any, arg: Any) -> bool:
    if isinstance(value, str):
        return isinstance(arg, str) and arg in value
    if isinstance(value, (list, tuple)):
        return any(_eq(v, arg) for v in value)
    return False


_OPS: dict = {
    "$eq": _eq,
    "$ne": lambda v, a: not _eq(v, a),
    "$in": lambda v, a: any(_eq(v, x) for x in a),
    "$nin": lambda v, a: not any(_eq(v, x) for x in a),
    "$exists": lambda v, a: (v is not None) == a,
    "$gt": _ordered(lambda v, a: v > a, "$gt"),
    "$gte": _ordered(lambda v, a: v >= a, "$gte"),
    "$lt": _ordered(lambda v, a: v < a, "$lt"),
    "$lte": _ordered(lambda v, a: v <= a, "$lte"),
    "$between": lambda v, a: (_ordered(lambda x, lo: x >= lo, "$between")(v, a[0])
                              and _ordered(lambda x, hi: x <= hi, "$between")(v, a[1])),
    "$like": lambda v, a: isinstance(v, str) and _like(a, 0).fullmatch(v) is not None,
    "$ilike": lambda v, a: isinstance(v, str) and _like(a, re.IGNORECASE).fullmatch(v) is not None,
    "$contains": _contains,
}
