"""Vector values <-> Vespa's tensor JSON, per field kind (API.md section 10), and the codec of
a document's engine fields that uses them.

Written in Vespa's short forms (document JSON reference): a dense `tensor<float>(x[d])` as
`{"values": [...]}`, a sparse `tensor<float>(k{})` as `{"cells": {"<key>": w}}` (with its keys
in the weighted set app.keys_field), a multi-vector `tensor<float>(t{}, x[d])` as
`{"blocks": {"0": row, "1": row, ...}}`. Read back from every form Vespa renders: short
(`cells` as a dict, `blocks` as a dict), long (`cells` as a list of address/value pairs, `blocks`
as a list of address/values), and short-value (the bare dict or list).
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from hybridsearch.document import Kind, Schema
from hybridsearch.errors import BackendError
from hybridsearch.storages.remote.base import PRESENT_FIELD, FieldCodec
from hybridsearch.storages.remote.vespa.app import keys_field


def empty_marker(name: str) -> str:
    """The `hs_present` entry of an optional sparse field holding {} (Vespa stores no empty
    tensor, and hs_present names only non-empty sparse values): no field name contains ':'."""
    return f"{name}:empty"


def encode_dense(v) -> dict:
    return {"values": [float(x) for x in v]}


def encode_sparse(v: dict) -> dict:
    return {"cells": {str(int(k)): float(w) for k, w in v.items()}}


def encode_keys(v: dict) -> dict:
    """The weighted set of a sparse value's keys (weight 1: only matching reads it)."""
    return {str(int(k)): 1 for k in v}


def encode_multi(block) -> dict:
    return {"blocks": {str(i): [float(x) for x in row] for i, row in enumerate(np.asarray(block).tolist())}}


def sparse_query(idx: np.ndarray, val: np.ndarray) -> dict:
    """A checked sparse query ((indices, values)) as the mapped query tensor's JSON."""
    return {str(int(k)): float(w) for k, w in zip(idx.tolist(), val.tolist())}


def multi_query(block: np.ndarray) -> dict:
    """A checked (m, d) query block as the `tensor<float>(qt{}, x[d])` query input: one block
    per query row, labelled by its number."""
    return {str(i): [float(x) for x in row] for i, row in enumerate(np.asarray(block, dtype=np.float32).tolist())}


def _bad(what: str, v) -> BackendError:
    return BackendError(f"Vespa returned a {what} tensor in a form not understood: {str(v)[:200]}")


def decode_dense(v, dim: int):
    """A dense tensor as Vespa renders it -> list of floats."""
    if isinstance(v, dict):
        if "values" in v:
            return v["values"]
        if "cells" in v:
            out = [0.0] * dim
            for c in v["cells"]:
                out[int(c["address"]["x"])] = c["value"]
            return out
    return v


def decode_sparse(v) -> dict:
    """A mapped `k{}` tensor -> {int key: weight}."""
    cells = v.get("cells", v) if isinstance(v, dict) else v
    if isinstance(cells, dict):
        return {int(k): float(w) for k, w in cells.items() if k != "type"}
    if isinstance(cells, list):
        return {int(c["address"]["k"]): float(c["value"]) for c in cells}
    raise _bad("sparse", v)


def decode_multi(v, dim: int) -> np.ndarray:
    """A mixed `(t{}, x[d])` tensor -> (n, d) float32 rows ordered by their label."""
    rows: dict = {}
    if isinstance(v, dict) and "blocks" in v:
        blocks = v["blocks"]
        if isinstance(blocks, dict):
            rows = {int(t): vals for t, vals in blocks.items()}
        else:
            rows = {int(b["address"]["t"]): b["values"] for b in blocks}
    elif isinstance(v, dict) and isinstance(v.get("cells"), list):
        for c in v["cells"]:
            rows.setdefault(int(c["address"]["t"]), [0.0] * dim)[int(c["address"]["x"])] = c["value"]
    elif isinstance(v, dict) and "type" not in v:  # short-value: {"0": [...], ...}
        rows = {int(t): vals for t, vals in v.items()}
    else:
        raise _bad("multi-vector", v)
    if not rows:
        raise _bad("multi-vector", v)
    return np.array([rows[t] for t in sorted(rows)], dtype=np.float32).reshape(-1, dim)


class VespaCodec(FieldCodec):
    """FieldCodec with every vector kind in its tensor form, and each sparse field's weighted
    set of keys beside it."""

    def __init__(self, schema: Schema) -> None:
        dim = schema.vector.dim if schema.vector is not None else 0
        super().__init__(schema, encode_vector=encode_dense, decode_vector=lambda v: decode_dense(v, dim))
        self.kinds = {s.name: s for s in schema.fields.values() if s.kind in (Kind.VECTOR, Kind.SPARSE, Kind.MULTI)}

    def engine_values(self, name: str, v) -> dict:
        """The engine fields holding the value `v` (None: removed) of vector field `name`."""
        spec = self.kinds[name]
        if spec.kind is Kind.SPARSE:
            return {name: None if v is None else encode_sparse(v), keys_field(name): None if v is None else
                    encode_keys(v)}
        if spec.kind is Kind.MULTI:
            return {name: None if v is None else encode_multi(v)}
        return {name: None if v is None else encode_dense(v)}

    def fields(self, doc, seq: int) -> dict:
        out = super().fields(doc, seq)
        for name in self.kinds:
            out.pop(name, None)
            v = getattr(doc, name)
            if v is not None:
                out.update(self.engine_values(name, v))
        present = out[PRESENT_FIELD]
        for name, spec in self.kinds.items():
            if spec.kind is not Kind.SPARSE:
                continue
            # {} is no value for $exists (API.md section 10): hs_present names a non-empty one,
            # required or not; an optional field's {} leaves a marker so it reads back as {}
            v = getattr(doc, name)
            if v and name not in present:
                present.append(name)
            elif not v and name in present:
                present.remove(name)
            if v == {} and spec.optional:
                present.append(empty_marker(name))
        return out

    def update(self, old: dict, values: dict) -> dict:
        out = super().update(old, values)
        for name in values:
            if name in self.kinds:
                out.update(self.engine_values(name, values[name]))
        return out

    def value(self, name: str, fields: dict):
        """The stored value of vector field `name` in engine fields (None: the document has none;
        a sparse field Vespa leaves out when empty reads as {} where the document holds it)."""
        spec = self.kinds[name]
        raw = fields.get(name)
        if spec.kind is Kind.SPARSE:
            if raw is None:
                held = not spec.optional or empty_marker(name) in (fields.get(PRESENT_FIELD) or [])
                return {} if held else None
            return decode_sparse(raw)
        if raw is None:
            return None
        if spec.kind is Kind.MULTI:
            return decode_multi(raw, spec.dim)
        return decode_dense(raw, spec.dim)

    def document(self, fields: dict, id: Optional[str] = None):
        converted = dict(fields)
        for name in self.kinds:
            v = self.value(name, fields)
            if v is None:
                converted.pop(name, None)
            else:
                converted[name] = v
        return super().document(converted, id)


def group_value(kind, group: dict):
    """A value group's value as the field's type: Vespa renders it as a string ("12",
    "Books", "true"; a bool may come as 1 / 0)."""
    v = group.get("value")
    if kind is Kind.BOOL:
        return v is True or str(v).lower() in ("true", "1")
    if kind is Kind.INT:
        return int(v)
    return v
