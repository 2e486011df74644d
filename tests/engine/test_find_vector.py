"""Storage.find_vector, the native find path, against the general path of the same storage.

Below the API because the public find() answers the same either way: only the storage says
whether a query took the one native call (a tuple) or was sent down the general path (None).
"""
import os
import tempfile
from typing import Optional

import numpy as np
import pytest

import hybridsearch as hs
from hybridsearch.batch import build_batch
from hybridsearch.document import schema_of
from hybridsearch.storages.local.hnsw import HnswStorage
from hybridsearch.storages.local.memory import MemoryStorage
from hybridsearch.storages.local.sqlite.storage import SqliteStorage

DIM = 5


class Vec(hs.Document):
    embedding: hs.Vector[DIM]


class Opt(hs.Document):
    embedding: Optional[hs.Vector[DIM]] = None


def storage(cls, model=Vec, n=80, metric="cosine", **options):
    if cls is SqliteStorage:  # a real database file, in a fresh temporary folder
        options.setdefault("path", os.path.join(tempfile.mkdtemp(), "db.sqlite"))
    st = cls(schema_of(model), cls.Config.parse(cls.name, {"metric": metric, **options}))
    rng = np.random.default_rng(1)
    docs = [model(id=f"d{i}", embedding=rng.standard_normal(DIM)) for i in range(n)]
    if n:
        st.upsert(build_batch(schema_of(model), docs))
    return st


@pytest.mark.parametrize("cls", [MemoryStorage, SqliteStorage, HnswStorage])
@pytest.mark.parametrize("metric", ["cosine", "ip", "l2"])
def test_a_clean_query_takes_one_call_and_answers_as_the_general_path(cls, metric):
    st = storage(cls, metric=metric)
    st.delete([f"d{i}" for i in range(0, 80, 7)])  # tombstones (and, on hnsw, slots to reuse)
    rng = np.random.default_rng(2)
    for k in (1, 10, 500):
        for exact in (False, True):
            q = rng.standard_normal(DIM)
            for value in (q.astype(np.float32), q, q.astype(np.float32).reshape(1, -1)):
                hits = st.find_vector(value, k, None, exact)
                assert hits is not None
                ids, scores, _ = st.search_vectors(np.asarray(value, dtype=np.float32).reshape(1, -1),
                                                   min(k, st.count()), None, exact, None)[0]
                assert hits[0] == ids and scores.dtype == hits[1].dtype == np.float32
                np.testing.assert_array_equal(hits[1], scores)


def test_the_plan_is_recorded_as_the_general_path_records_it():
    st = storage(HnswStorage, ef=20)
    q = np.ones(DIM, np.float32)
    for k, ef, exact in ((5, None, False), (50, None, False), (5, 7, False), (5, None, True), (500, 3, True)):
        st.find_vector(q, k, ef, exact)
        fast = st.last_plan()
        st.search_vectors(q.reshape(1, -1), min(k, st.count()), None, exact, ef)
        assert fast == st.last_plan(), (k, ef, exact)


@pytest.mark.parametrize("cls", [MemoryStorage, SqliteStorage, HnswStorage])
def test_what_the_native_check_does_not_take_goes_to_the_general_path(cls):
    st = storage(cls)
    q = np.ones(DIM, np.float32)
    for value in (q.tolist(), np.repeat(q, 2)[::2], q.astype(">f4"), q[:-1], np.ones((2, DIM), np.float32),
                  np.zeros(DIM, np.float32), q * np.nan, q * np.inf, q * 1e16, q * 1e-16, q.astype(np.int64),
                  np.ones(DIM, np.float64) * 1e39, q.reshape(DIM, 1)):
        assert st.find_vector(value, 5, None, False) is None, value
    assert storage(cls, Opt).find_vector(q, 5, None, False) is None  # rows without a vector


@pytest.mark.parametrize("cls", [MemoryStorage, SqliteStorage, HnswStorage])
def test_an_empty_storage_gives_no_hits(cls):
    hits = storage(cls, n=0).find_vector(np.ones(DIM, np.float32), 5, None, False)
    assert hits[0] == [] and hits[1].dtype == np.float32 and len(hits[1]) == 0


def test_k_as_large_as_the_graph_returns_every_node():
    """Ten nodes, k=10 and a sparse graph: every node, whether the walk or the scan after a short
    walk found it."""
    st = storage(HnswStorage, n=10, m=2, ef_construct=1)
    for seed in range(20):
        q = np.random.default_rng(seed).standard_normal(DIM).astype(np.float32)
        ids, scores = st.find_vector(q, 10, 1, False)
        assert sorted(ids) == sorted(f"d{i}" for i in range(10))
        assert np.all(np.diff(scores) <= 0)
