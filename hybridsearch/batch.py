"""Documents -> columns: the one shape in which a batch crosses into a storage."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from hybridsearch.document import Kind, Schema

_DTYPES = {Kind.INT: np.int64, Kind.BOOL: np.int64, Kind.FLOAT: np.float64, Kind.KEYWORD: object}
_MISSING = {Kind.INT: 0, Kind.BOOL: 0, Kind.FLOAT: 0.0, Kind.KEYWORD: None}


@dataclass
class Batch:
    """A validated batch of documents as columns.

    columns: name -> values (int64 for int/bool, float64, object array of str for
    keywords; a placeholder where the value is None). present: name -> uint8
    array for every field whose schema allows None. vectors: (n, d) float32,
    zeros where a document has no vector.
    """

    ids: list
    docs: list
    columns: dict = field(default_factory=dict)
    present: dict = field(default_factory=dict)
    vectors: Optional[np.ndarray] = None

    def __len__(self) -> int:
        return len(self.ids)


def build_batch(schema: Schema, docs: list) -> Batch:
    """Turns validated documents (unique ids) into columns."""
    n = len(docs)
    batch = Batch(ids=[d.id for d in docs], docs=docs)
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
            batch.vectors = block
    return batch
