"""Elasticsearch / OpenSearch query DSL from our schema and filter AST (pure functions, no I/O).

Semantics kept from the other storages: a comparison is false where the field has
no value, and a negation (`$ne`, `$nin`, `$not`) matches documents without one,
which is exactly `bool.must_not` in the query DSL. Values are always JSON values
inside the query body, never pasted into a query string or a URL.
"""
from __future__ import annotations

import json
import math
import re

from hybridsearch.document import Kind, Schema
from hybridsearch.errors import ConfigError, FilterError
from hybridsearch.query.filters import And, Compare, Exists, In, MatchAll, Node, Not, Or
from hybridsearch.storages.remote.base import EXTRA_FIELD, ID_FIELD, PRESENT_FIELD, SEQ_FIELD

META_KEY = "hybridsearch"  # the mapping's _meta key holding the fingerprint

_RANGE = {"$gt": "gt", "$gte": "gte", "$lt": "lt", "$lte": "lte"}
_SCALARS = {Kind.KEYWORD: {"type": "keyword"}, Kind.INT: {"type": "long"}, Kind.FLOAT: {"type": "double"},
            Kind.BOOL: {"type": "boolean"}}
_INDEX_NAME_BAD = re.compile(r'[\\/*?"<>| ,#:A-Z]')


def check_index_name(name) -> str:
    """The index name if Elasticsearch/OpenSearch would accept it, else ConfigError (never sent as is)."""
    if not isinstance(name, str) or not name:
        raise ConfigError(f"index must be a non-empty string, got {name!r}")
    if (_INDEX_NAME_BAD.search(name) or name in (".", "..") or name[0] in "-_+."
            or len(name.encode("utf-8")) > 255):
        raise ConfigError(
            f"index name {name!r} is not valid: lowercase, at most 255 bytes, not starting with - _ + or ., "
            'without \\ / * ? " < > | space , # : (and never "." or "..")')
    return name


def fingerprint(schema: Schema, metric: str) -> str:
    """What must match when an existing index is opened again."""
    return json.dumps(schema.fingerprint() + [metric])


def properties(schema: Schema, vectors: dict) -> dict:
    """Mapping properties: text -> text (standard analyzer), keyword, numerics, and `vectors`
    (the properties of the vector fields, fields.py)."""
    props = {ID_FIELD: {"type": "keyword"}, SEQ_FIELD: {"type": "long"}, PRESENT_FIELD: {"type": "keyword"},
             EXTRA_FIELD: {"type": "keyword", "index": False, "doc_values": False}}
    for spec in schema.fields.values():
        if spec.kind is Kind.TEXT:
            props[spec.name] = {"type": "text", "analyzer": "standard"}
        elif spec.kind in _SCALARS:
            props[spec.name] = dict(_SCALARS[spec.kind])
    return {**props, **vectors}


_NOTHING = {"bool": {"must_not": [{"match_all": {}}]}}
_LONG = 2.0 ** 63


def _outside(spec, v) -> bool:
    """Whether v lies beyond every value the field can hold (decided here: the engine would refuse it)."""
    if not isinstance(v, float) or isinstance(v, bool):
        return False
    return math.isinf(v) or (spec is not None and spec.kind is Kind.INT and abs(v) >= _LONG)


def _exists(field: str, schema: Schema) -> dict:
    spec = schema.fields.get(field)
    if spec is not None and spec.kind is Kind.SPARSE:  # {} is no value: hs_present names a non-empty one
        return {"term": {PRESENT_FIELD: field}}
    if spec is None or not spec.optional:
        return {"match_all": {}}  # a required field always has a value
    return {"term": {PRESENT_FIELD: field}}


def _compare(node: Compare, schema: Schema) -> dict:
    field, v = node.field, node.value
    spec = schema.fields.get(field)
    field = ID_FIELD if field == "id" else field
    if _outside(spec, v):
        holds = {"$eq": False, "$gt": v < 0, "$gte": v < 0, "$lt": v > 0, "$lte": v > 0}[node.op]
        return _exists(node.field, schema) if holds else _NOTHING
    if node.op == "$eq":
        return {"term": {field: v}}
    return {"range": {field: {_RANGE[node.op]: v}}}


def to_query(node: Node, schema: Schema) -> dict:
    """The filter as a query clause for a bool `filter` (no scoring)."""
    if isinstance(node, MatchAll):
        return {"match_all": {}}
    if isinstance(node, Compare):
        return _compare(node, schema)
    if isinstance(node, In):
        spec = schema.fields.get(node.field)
        field = ID_FIELD if node.field == "id" else node.field
        values = [v for v in node.values if not _outside(spec, v)]
        return {"terms": {field: values}}
    if isinstance(node, Exists):
        return _exists(node.field, schema)
    if isinstance(node, Not):
        return {"bool": {"must_not": [to_query(node.child, schema)]}}
    if isinstance(node, And):
        return {"bool": {"filter": [to_query(c, schema) for c in node.children]}}
    if isinstance(node, Or):
        return {"bool": {"should": [to_query(c, schema) for c in node.children], "minimum_should_match": 1}}
    raise FilterError(f"cannot compile {node!r} to a query")


# ------------------------------------------------- API.md section 7: sort, facets, writes by query
def engine_field(name: str) -> str:
    """The engine field holding a schema field (the id lives in `hs_id`: `_id` has no doc values)."""
    return ID_FIELD if name == "id" else name


def sort_clauses(keys: list, scored: bool) -> list:
    """The `sort` of a sorted find: the keys with missing values last in both directions, then
    (text finds) the score descending, then insertion order (`hs_seq`, the id for writers that
    handed out one number twice). The unique last key lets search_after page without gaps.

    Keywords sort by their UTF-8 bytes on the engine, which is Unicode code point order, as API.md
    asks; bools sort as 0 / 1."""
    out = [{engine_field(f): {"order": d, "missing": "_last"}} for f, d in keys]
    if scored:
        out.append({"_score": "desc"})
    return out + [{SEQ_FIELD: "asc"}, {ID_FIELD: "asc"}]


def terms_agg(field: str, size: int) -> dict:
    """A terms aggregation in API.md's facet order: count descending, then value ascending."""
    return {"terms": {"field": field, "size": size, "order": [{"_count": "desc"}, {"_key": "asc"}]}}


def composite_agg(field: str, size: int, after=None) -> dict:
    """One page of every value of `field` with its count (a composite aggregation: exact on any
    number of shards, paged by `after_key`)."""
    agg = {"size": size, "sources": [{"v": {"terms": {"field": field}}}]}
    if after is not None:
        agg["after"] = after
    return {"composite": agg}


def range_agg(field: str, ranges: list) -> dict:
    """A range aggregation with one bucket per (lo, hi): lo inclusive, hi exclusive, None
    unbounded. The engine answers its buckets sorted by bound, so each is keyed by its position."""
    out = []
    for n, (lo, hi) in enumerate(ranges):
        r = {"key": str(n)}
        if lo is not None:
            r["from"] = lo
        if hi is not None:
            r["to"] = hi
        out.append(r)
    return {"range": {"field": field, "ranges": out}}


def bucket_value(kind: Kind, key):
    """A bucket key as the field's Python value (the engine reports a boolean as 0 / 1)."""
    if kind is Kind.BOOL:
        return bool(key)
    if kind is Kind.INT:
        return int(key)
    return key


# Runs once per matching document of update_by_query. The values travel in params so the
# script's source never changes: the engine compiles it once (its compilation rate is limited).
# `hs_present` (PRESENT_FIELD) keeps naming the optional fields that hold a value. The script
# never sets ctx.op = 'noop', even where the document already holds the values: on OpenSearch
# 3.5 with k-NN derived source (the default of a new k-NN index), a noop run over documents an
# earlier update_by_query rewrote leaves them unfetchable (every search that returns one fails
# with search_phase_execution_exception), so a matching document is always rewritten.
UPDATE_SCRIPT = """
for (def e : params['values'].entrySet()) {
  ctx._source[e.getKey()] = e.getValue();
}
for (def k : params['drop']) {
  ctx._source.remove(k);
}
List kept = new ArrayList();
def old = ctx._source['hs_present'];
if (old instanceof List) {
  kept.addAll(old);
} else if (old != null) {
  kept.add(old);
}
kept.removeAll(params['drop']);
for (def k : params['present']) {
  if (!kept.contains(k)) {
    kept.add(k);
  }
}
ctx._source['hs_present'] = kept;
""".strip()


def update_script(values: dict, schema: Schema, encode_vector) -> dict:
    """The painless script of update_by_query setting `values` (validated; None removes a value)
    and keeping `hs_present` (the optional fields holding a value) true."""
    given, drop, present = {}, [], []
    for name, v in values.items():
        spec = schema.fields[name]
        if v is None:
            drop.append(name)
            continue
        given[name] = encode_vector(v) if spec.kind is Kind.VECTOR else v
        if spec.optional:
            present.append(name)
    return {"lang": "painless", "source": UPDATE_SCRIPT,
            "params": {"values": given, "drop": drop, "present": present}}
