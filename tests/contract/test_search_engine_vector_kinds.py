"""API.md section 10 on Elasticsearch and OpenSearch where their engines are lossy: the engines
keep sparse weights with 9 significant bits and refuse weights below the smallest normal float
(docs/storages/elasticsearch.md), yet a sparse list must equal the exact dot-product model.
The suites of test_sparse_vectors.py / test_multi_vectors.py / test_named_vectors.py run on both
storages too; these cases aim at what those draws rarely reach.

Public API only."""
import numpy as np
import pytest

import hybridsearch as hs
from tests.conftest import storage_fixture
from tests.contract.section10 import assert_topk_of

storage = storage_fixture(("elasticsearch", "opensearch"))


class Doc(hs.Document):
    tag: hs.Keyword = "a"
    splade: hs.SparseVector = {}


def dot_model(docs: dict, q: dict, allowed=None) -> dict:
    """id -> exact dot product (float32 weights) of every document sharing a key with q."""
    out = {}
    for i, d in docs.items():
        shared = set(q) & set(d.splade)
        if shared and (allowed is None or i in allowed):
            out[i] = sum(float(np.float32(q[k])) * d.splade[k] for k in shared)
    return out


def test_weights_closer_than_the_engine_keeps_are_ranked_exactly(make_da):
    """300 documents whose weights differ below the engine's precision: the engine sees one tie
    and cuts it in its own order (the earliest first), while the exact best are the last ones
    written. A list taking only the engine's first candidates would miss them."""
    da = make_da(Doc)
    n = 300
    da.extend([{"id": f"d{i}", "tag": "ab"[i % 2], "splade": {1: 1.0 + i * 2.0 ** -18, 2: 0.5}} for i in range(n)])
    docs = {d.id: d for d in da}
    assert len({d.splade[1] for d in docs.values()}) == n  # distinct weights, read back exactly
    for q in ({1: 1.0}, {1: 2.0, 2: 0.25}):
        for k in (1, 5, 150):
            res = da.find(vector={"splade": q}, limit=k)
            assert_topk_of(res, dot_model(docs, q), k)
            assert res.ids[0] == f"d{n - 1}"
        allowed = {i for i, d in docs.items() if d.tag == "a"}
        res = da.find(vector={"splade": q}, limit=5, filter={"tag": "a"})
        assert_topk_of(res, dot_model(docs, q, allowed), 5)
        assert res.ids[0] == f"d{n - 2}"


def test_weights_below_the_engines_floor_are_kept_and_scored_exactly(make_da):
    """A weight below the smallest normal float32 (which the engines refuse to index) is written,
    read back as given and scored exactly, not refused and not rounded to the floor."""
    da = make_da(Doc)
    tiny = float(np.float32(1e-40))  # a float32 subnormal
    assert 0 < tiny < np.finfo(np.float32).tiny
    da.extend([{"id": "tiny", "splade": {1: tiny}}, {"id": "small", "splade": {1: 1e-30}},
               {"id": "big", "splade": {1: 3.0e38}}, {"id": "other", "splade": {2: 1.0}}])
    assert da["tiny"].splade == {1: tiny}
    docs = {d.id: d for d in da}
    res = da.find(vector={"splade": {1: 1.0}}, limit=10)
    assert res.ids == ["big", "small", "tiny"]
    assert_topk_of(res, dot_model(docs, {1: 1.0}), 10)
    assert float(res.scores[2]) == pytest.approx(tiny, rel=1e-6)


def test_a_sparse_update_replaces_the_value_whole(make_da):
    """update / update_many write the new value, not a merge of the old and new keys (the
    engines merge objects in a partial update)."""
    da = make_da(Doc)
    da.extend([{"id": f"d{i}", "tag": "ab"[i % 2], "splade": {1: 1.0, 2: 2.0}} for i in range(6)])
    da.update("d0", splade={3: 1.0})
    assert da["d0"].splade == {3: 1.0}
    assert da.update_many({"tag": "b"}, splade={4: 0.5}) == 3
    assert [da[f"d{i}"].splade for i in range(6)] == [{3: 1.0}, {4: 0.5}, {1: 1.0, 2: 2.0}, {4: 0.5},
                                                      {1: 1.0, 2: 2.0}, {4: 0.5}]
    assert da.find(vector={"splade": {1: 1.0}}, limit=10).ids == ["d2", "d4"]
    assert da.find(vector={"splade": {2: 1.0, 4: 1.0}}, limit=10).ids == ["d2", "d4", "d1", "d3", "d5"]


def test_a_query_with_more_keys_than_the_engine_takes_clauses(make_da):
    """A sparse query of 3,000 keys (the engines refuse more than 1,024 clauses in one query,
    OpenSearch by default) still equals the model, filtered too."""
    da = make_da(Doc)
    rng = np.random.default_rng(5)
    da.extend([{"id": f"d{i}", "tag": "ab"[i % 2],
                "splade": {int(k): float(rng.choice([0.5, 1.0, 2.0])) for k in rng.choice(5000, 20, replace=False)}
                if i % 7 else {}} for i in range(60)])
    da.extend([{"id": "far", "splade": {9000: 1.0}}])  # shares no key with the query: never a hit
    docs = {d.id: d for d in da}
    q = {int(k): float(rng.choice([0.5, 1.0])) for k in rng.choice(5000, 3000, replace=False)}
    for k in (3, 100):
        assert_topk_of(da.find(vector={"splade": q}, limit=k), dot_model(docs, q), k)
    allowed = {i for i, d in docs.items() if d.tag == "b"}
    assert_topk_of(da.find(vector={"splade": q}, limit=10, filter={"tag": "b"}), dot_model(docs, q, allowed), 10)


@pytest.mark.parametrize("ranged", [False, True])
def test_a_query_of_as_many_keys_as_clauses_with_a_filter(make_da, ranged):
    """A sparse query of exactly 1,024 keys (OpenSearch's default clause limit) with a filter:
    the filter's clauses count towards the engine's limit too, yet the list equals the model."""
    da = make_da(Doc2)
    rng = np.random.default_rng(7)
    da.extend([{"id": f"d{i}", "tag": "ab"[i % 3 == 0], "n": i % 5,
                "splade": {int(k): float(rng.choice([0.5, 1.0, 2.0])) for k in rng.choice(3000, 15, replace=False)}}
               for i in range(40)])
    docs = {d.id: d for d in da}
    flt = {"$and": [{"tag": "a"}, {"n": {"$gte": 3}}]} if ranged else {"tag": "a"}
    allowed = {i for i, d in docs.items() if d.tag == "a" and (not ranged or d.n >= 3)}
    q = {int(k): float(rng.choice([0.5, 1.0])) for k in rng.choice(3000, 1024, replace=False)}
    for k in (3, 30):
        assert_topk_of(da.find(vector={"splade": q}, limit=k, filter=flt), dot_model(docs, q, allowed), k)


class Doc2(Doc):
    n: int = 0
