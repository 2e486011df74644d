"""Documents <-> columns: the one shape in which a batch crosses into a storage, and back.

A Batch holds every field as a column; documents are built from the columns
only when a storage asks for them (`batch.docs`: the remote storages, the
journal), so `extend_columns` never creates one per row.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from hybridsearch.document import Kind, Schema

_DTYPES = {Kind.INT: np.int64, Kind.BOOL: np.int64, Kind.FLOAT: np.float64, Kind.KEYWORD: object}
_MISSING = {Kind.INT: 0, Kind.BOOL: 0, Kind.FLOAT: 0.0, Kind.KEYWORD: None}


@dataclass
class Batch:
    """A validated batch of documents (ids unique) as columns.

    columns: name -> values: int64 for int/bool, float64, an object array of str for
    keywords (a placeholder where the value is None); a list of str or None for text
    and of values for unindexed fields. present: name -> uint8 array for every field
    whose schema allows None. vecs: dense vector field -> (n, d) float32, zeros where a
    document has no vector; `vectors` is the block of the schema's one dense field.
    """

    schema: Schema
    ids: list
    columns: dict = field(default_factory=dict)
    present: dict = field(default_factory=dict)
    vecs: dict = field(default_factory=dict)
    given_docs: Optional[list] = None  # the validated documents when the batch came from documents
    # what validation measured on the way, so the writes do not compute it again: name (or
    # "id") -> engine.strings.Encoded of exactly that column's values, and vector field ->
    # float64 squared norm per row. Optional: a storage may ignore them.
    encoded: dict = field(default_factory=dict)
    norms2: dict = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def vectors(self) -> Optional[np.ndarray]:
        """The (n, d) block of the schema's one dense vector field (None without exactly one):
        what storages holding a single vector field read."""
        spec = self.schema.vector
        return self.vecs.get(spec.name) if spec is not None else None

    @property
    def docs(self) -> list:
        """The documents of the batch (built from the columns the first time when none were given)."""
        if self.given_docs is None:
            self.given_docs = documents(self.schema, self.field_values(), len(self.ids))
        return self.given_docs

    def field_values(self) -> dict:
        """name -> per-row Python values (None where absent), every field."""
        return {spec.name: self.values_of(spec.name) for spec in self.schema.fields.values()}

    def values_of(self, name: str) -> list:
        """One field's per-row Python values (None where absent)."""
        spec = self.schema.fields[name]
        if spec.kind is Kind.ID:
            return self.ids
        if spec.kind is Kind.VECTOR:
            values = row_vectors(self.vecs[name])
        else:
            values = python_values(spec.kind, self.columns[name])
        return with_missing(values, self.present.get(name))


def with_missing(values: list, present: Optional[np.ndarray]) -> list:
    """values with None where `present` (a uint8 mask, or None: all present) is 0."""
    if present is None or present.all():
        return values
    return [v if p else None for v, p in zip(values, present.tolist())]


def python_values(kind: Kind, column) -> list:
    """A column's values as the Python objects a document holds."""
    if kind is Kind.BOOL:
        return [bool(v) for v in column.tolist()]
    if isinstance(column, np.ndarray):
        return column.tolist()
    return list(column)


def row_vectors(block: np.ndarray) -> list:
    """Read-only float32 rows of a private copy of `block`, as documents hold vectors."""
    block = np.array(block, dtype=np.float32, copy=True)
    block.flags.writeable = False
    return list(block)


def documents(schema: Schema, values: dict, n: int) -> list:
    """n documents from name -> per-row values, without validating again (the columns were)."""
    construct = schema.model.model_construct
    names = list(values)
    cols = [values[k] for k in names]
    return [construct(**dict(zip(names, row))) for row in zip(*cols)] if n else []


def build_batch(schema: Schema, docs: list) -> Batch:
    """Turns validated documents (unique ids) into columns."""
    n = len(docs)
    batch = Batch(schema=schema, ids=[d.id for d in docs], given_docs=docs)
    for spec in schema.fields.values():
        if spec.kind is Kind.ID:
            continue
        values = [getattr(d, spec.name) for d in docs]
        if spec.optional:
            batch.present[spec.name] = np.fromiter((v is not None for v in values), dtype=np.uint8, count=n)
        if spec.kind in _DTYPES:
            if spec.optional:
                fill = _MISSING[spec.kind]
                values = [fill if v is None else v for v in values]
            if spec.kind is Kind.KEYWORD:
                arr = np.empty(n, dtype=object)
                arr[:] = values
            else:
                arr = np.array(values, dtype=_DTYPES[spec.kind]) if n else np.empty(0, _DTYPES[spec.kind])
            batch.columns[spec.name] = arr
        elif spec.kind is Kind.VECTOR:
            block = np.zeros((n, spec.dim), dtype=np.float32)
            for i, v in enumerate(values):
                if v is not None:
                    block[i] = v
            batch.vecs[spec.name] = block
        else:  # text and unindexed fields: the values as they are
            batch.columns[spec.name] = values
    return batch


def build_batch_in_parts(schema: Schema, parts) -> Batch:
    """build_batch of the documents of every part (an iterable of lists of validated documents),
    in order, each part turned into columns before the next is asked for. The caller validates
    a part when asked and keeps no reference to it, so a part's documents are freed before the
    next part allocates: the heap holds one part's garbage, not one per document of the batch
    (freed document copies left ~1x the raw data resident after extend()). The batch keeps no
    documents (storages that want them build them from the columns)."""
    ids: list = []
    columns: dict = {}
    present: dict = {}
    vecs: dict = {}
    for part in parts:
        b = build_batch(schema, part)
        del part
        b.given_docs = None
        ids.extend(b.ids)
        for name, col in b.columns.items():
            columns.setdefault(name, []).append(col)
        for name, p in b.present.items():
            present.setdefault(name, []).append(p)
        for name, block in b.vecs.items():
            vecs.setdefault(name, []).append(block)
        del b
    out = Batch(schema=schema, ids=ids)
    for name, cols in columns.items():
        if isinstance(cols[0], np.ndarray):
            out.columns[name] = np.concatenate(cols)
        else:
            out.columns[name] = [v for col in cols for v in col]
    out.present = {name: np.concatenate(ps) for name, ps in present.items()}
    out.vecs = {name: np.concatenate(blocks) for name, blocks in vecs.items()}
    return out
