"""API.md section 10's vector fields on Elasticsearch / OpenSearch: how each kind is held in an
index and read back (pure functions and the FieldCodec of these engines, no I/O).

- dense (`hs.Vector[d]`, any number): one `dense_vector` / `knn_vector` field per field, each with
  its own metric (the dialects' `_vector_mapping`);
- sparse (`hs.SparseVector`): the exact {key: weight} in the field itself, an object the engine
  keeps in `_source` without indexing it (`enabled: false`; keys are strings in JSON), and the
  same weights in a `rank_features` field `hs_sparse_<name>` that the engine searches. Lucene
  keeps a rank feature with 9 significant bits (relative error below 2**-8) and refuses values
  below the smallest normal float, which are indexed as that smallest normal float: the engine's
  dot products only choose candidates, which are scored exactly here from the stored weights
  (`SPARSE_SLACK` bounds how far the engine's score can be from the exact one);
- multi-vector (`hs.MultiVector[d]`): the token block in `_source` only (`enabled: false`): neither
  engine has a MaxSim index this storage can use on every license (Elasticsearch's rank_vectors
  needs an Enterprise licence, OpenSearch has none), so a multi-vector list scans the matching
  documents and scores MaxSim here (exact).

`hs_present` (remote/base.py PRESENT_FIELD) also names a sparse field whose value is not empty:
`$exists` on a sparse field is false for {} (API.md section 10), as on the other storages.
"""
from __future__ import annotations

import numpy as np

from hybridsearch.document import Schema
from hybridsearch.storages.remote.base import PRESENT_FIELD, FieldCodec

SPARSE_PREFIX = "hs_sparse_"      # the rank_features field searched for sparse field <name>
MIN_FEATURE = float(np.finfo(np.float32).tiny)  # Lucene's smallest rank feature (a normal float)
# how far a sum of rank features x positive query weights can be from the exact dot product,
# relatively: 9 significant bits per feature (2**-8), float32 sums and the clamp above aside
SPARSE_SLACK = 2.0 ** -7

STORED_ONLY = {"type": "object", "enabled": False}  # kept in _source, not indexed


def sparse_index_field(name: str) -> str:
    return SPARSE_PREFIX + name


def kinds(schema: Schema) -> dict:
    """Vector field -> "dense" / "sparse" / "multi"."""
    return {**{n: "dense" for n in schema.vectors}, **{n: "sparse" for n in schema.sparse},
            **{n: "multi" for n in schema.multi}}


def properties(schema: Schema, dense_mapping, sparse_type: str) -> dict:
    """The mapping properties of the vector fields: dense_mapping(name) for each dense field,
    `sparse_type` ("sparse_vector", "rank_features") for the searched copy of a sparse one."""
    props = {}
    for name in schema.vectors:
        props[name] = dense_mapping(name)
    for name in schema.sparse:
        props[name] = dict(STORED_ONLY)
        props[sparse_index_field(name)] = {"type": sparse_type}
    for name in schema.multi:
        props[name] = dict(STORED_ONLY)
    return props


def encode_sparse(value: dict) -> dict:
    return {str(int(k)): float(w) for k, w in value.items()}


def decode_sparse(value) -> dict:
    return {int(k): float(w) for k, w in value.items()}


def sparse_features(value: dict) -> dict:
    """The rank_features of a sparse value (weights below Lucene's floor raised to it)."""
    return {str(int(k)): max(float(w), MIN_FEATURE) for k, w in value.items()}


def rank_feature_query(field: str, query: tuple) -> dict:
    """OpenSearch's dot product of a checked sparse query ((indices, values > 0)) over a
    `rank_features` field: one `rank_feature` `linear` clause per query key, boosted by its
    weight, summed by a bool should (a document sharing no key matches none)."""
    idx, val = query
    return {"bool": {"should": [{"rank_feature": {"field": f"{sparse_index_field(field)}.{int(k)}", "linear": {},
                                                  "boost": float(w)}}
                                for k, w in zip(idx.tolist(), val.tolist())],
                     "minimum_should_match": 1}}


def sparse_vector_query(field: str, query: tuple) -> dict:
    """Elasticsearch's dot product of a checked sparse query over a `sparse_vector` field (the
    `sparse_vector` query with the query's weights; token pruning off: it would drop keys)."""
    idx, val = query
    return {"sparse_vector": {"field": sparse_index_field(field), "prune": False,
                              "query_vector": {str(int(k)): float(w) for k, w in zip(idx.tolist(), val.tolist())}}}


class SearchEngineCodec(FieldCodec):
    """FieldCodec with section 10's fields as these engines hold them (module docstring)."""

    def __init__(self, schema: Schema) -> None:
        super().__init__(schema)
        self.sparse = list(schema.sparse)
        self.multi = list(schema.multi)

    def fields(self, doc, seq: int) -> dict:
        out = super().fields(doc, seq)
        for name in self.sparse:
            v = getattr(doc, name)
            if v is None:
                continue
            out[name] = encode_sparse(v)
            out[sparse_index_field(name)] = sparse_features(v)
            if v and name not in out[PRESENT_FIELD]:
                out[PRESENT_FIELD].append(name)
            elif not v and name in out[PRESENT_FIELD]:
                out[PRESENT_FIELD].remove(name)
        for name in self.multi:
            v = getattr(doc, name)
            if v is not None:
                out[name] = np.asarray(v, dtype=np.float32).tolist()
        return out

    def document(self, fields: dict, id=None):
        if self.sparse:
            fields = dict(fields)
            for name in self.sparse:
                fields.pop(sparse_index_field(name), None)
                if fields.get(name) is not None:
                    fields[name] = decode_sparse(fields[name])
        return super().document(fields, id)

    def whole(self, values: dict) -> bool:
        """Whether a partial update of `values` must rewrite the whole document: the engines merge
        an object of a partial update into the stored one (a sparse value would keep old keys), and
        update_by_query's script takes dense values only."""
        return any(n in values for n in self.sparse) or any(n in values for n in self.multi)


def value_of(record: dict, name: str, kind: str):
    """A vector field's value in an engine record (its `_source`), decoded, or None."""
    v = record.get(name)
    if v is None:
        return None
    if kind == "sparse":
        return decode_sparse(v)
    return v


def holds(kind: str, value) -> bool:
    """Whether a value is one a list of its field can match (an empty sparse vector is none)."""
    return value is not None and (kind != "sparse" or bool(value))
