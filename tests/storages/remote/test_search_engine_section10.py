"""Section-10 paths of storage="elasticsearch" / "opensearch" that a healthy node with default
settings does not take through the public API alone, against real nodes on 127.0.0.1.

Reaches below the API: to make the engine refuse a sparse query for its clause count, the
storage's own estimate (vectors.MAX_CLAUSES) is raised so the query is sent; and to interleave
two clients' writes, the storage's read of a document (`_mget`) is wrapped so another client
writes between one update's read and its write (a private name: no public API interleaves)."""
import numpy as np
import pytest

import hybridsearch as hs
from hybridsearch.storages.remote.elasticsearch import vectors
from tests.contract.section10 import assert_topk_of
from tests.conftest import storage_fixture

storage = storage_fixture(("elasticsearch", "opensearch"))


class Doc(hs.Document):
    tag: hs.Keyword = "a"
    splade: hs.SparseVector = {}


def dot_model(docs: dict, q: dict, allowed) -> dict:
    out = {}
    for i, d in docs.items():
        shared = set(q) & set(d.splade)
        if shared and i in allowed:
            out[i] = sum(float(np.float32(q[k])) * d.splade[k] for k in shared)
    return out


def test_a_sparse_query_the_engine_refuses_for_its_clauses_is_scanned(make_da, monkeypatch):
    """The engine's too-many-clauses refusal (its limit lower than the storage estimates) is not
    the caller's error: the list is the exact scan, equal to the model."""
    da = make_da(Doc)
    rng = np.random.default_rng(11)
    da.extend([{"id": f"d{i}", "tag": "ab"[i % 2],
                "splade": {int(k): float(rng.choice([0.5, 1.0, 2.0])) for k in rng.choice(20000, 12, replace=False)}}
               for i in range(30)])
    docs = {d.id: d for d in da}
    q = {int(k): 1.0 for k in rng.choice(20000, 20000 - 1, replace=False)}  # beyond any node's limit
    monkeypatch.setattr(vectors, "MAX_CLAUSES", 10 ** 6)
    allowed = {i for i, d in docs.items() if d.tag == "a"}
    assert_topk_of(da.find(vector={"splade": q}, limit=5, filter={"tag": "a"}), dot_model(docs, q, allowed), 5)
