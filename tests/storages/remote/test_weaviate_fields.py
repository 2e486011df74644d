"""API.md section 10 on storage="weaviate" beyond the shared section-10 files
(tests/contract/test_named_vectors.py and test_multi_vectors.py run there too), against a real
Weaviate server on 127.0.0.1: each vector field is a Weaviate named vector of its own distance
(read with the official client, as tests/storages/remote/test_weaviate.py reads the collection);
a multi-vector find above `exact_max` takes Weaviate's multi-vector (MaxSim) candidates and ranks
them by exact MaxSim (the stated recall of docs/storages/weaviate.md), an l2 one is always
exhaustive; every field survives a reopen; a sparse field is refused at open with what to use.
Which requests reach the server is seen by wrapping weaviate-client's public names, never ours."""
from typing import Optional

import numpy as np
import pytest

import hybridsearch as hs
from hybridsearch.bench.multivectors import colbert_like
from tests.models import exact_scores, maxsim_scores
from tests.storages.remote.test_weaviate import client, open_da, server  # noqa: F401 (fixtures)


class Page(hs.Document):
    title: hs.Text = ""
    tag: hs.Keyword = "a"
    text_vec: hs.Vector[4]
    image_vec: Optional[hs.Vector[3]] = None
    colbert: Optional[hs.MultiVector[5]] = None
    second: Optional[hs.MultiVector[3]] = None


METRICS = {"text_vec": "cosine", "image_vec": "ip", "colbert": "ip", "second": "l2"}


class Colbert(hs.Document):
    tag: hs.Keyword = "a"
    colbert: Optional[hs.MultiVector[16]] = None


class Sparse(hs.Document):
    emb: hs.Vector[3]
    splade: hs.SparseVector = {}


def pages(rng, n):
    return [{"id": f"p{i}", "title": "red cable" if i % 2 else "blue phone", "tag": "ab"[i % 2],
             "text_vec": rng.standard_normal(4), "image_vec": rng.standard_normal(3) if i % 3 else None,
             "colbert": rng.standard_normal((int(rng.integers(1, 6)), 5)) if i % 4 else None,
             "second": rng.standard_normal((int(rng.integers(1, 4)), 3)) if i % 5 else None} for i in range(n)]


def model(docs: dict, field: str, q, metric: str) -> dict:
    """id -> numpy score (MaxSim for a block) of every document holding `field`."""
    ids = [i for i, d in docs.items() if getattr(d, field) is not None]
    vals = [getattr(docs[i], field) for i in ids]
    if np.ndim(q) == 2:
        s = maxsim_scores(vals, np.float32(q), metric)
    else:
        s = exact_scores(np.array(vals), np.float32(q), metric)
    return dict(zip(ids, s.tolist()))


def near_vector_calls(monkeypatch, client, da) -> list:
    """The target vectors of every near_vector request weaviate-client sends for `da` from now on."""
    queries = type(client.collections.get(da.stats()["collection"]).query)
    real, seen = queries.near_vector, []

    def spy(self, *args, **kwargs):
        seen.append(kwargs.get("target_vector"))
        return real(self, *args, **kwargs)

    monkeypatch.setattr(queries, "near_vector", spy)
    return seen


def test_each_field_is_a_named_vector_of_its_own_distance(open_da, client):
    da = open_da(Page, metric=dict(METRICS), m=8, ef_construct=64)
    cfg = client.collections.get(da.stats()["collection"]).config.get()
    assert set(cfg.vector_config) == set(METRICS)
    want = {"cosine": "cosine", "ip": "dot", "l2": "l2-squared"}
    for field, metric in METRICS.items():
        index = cfg.vector_config[field].vector_index_config
        assert index.distance_metric.value == want[metric], field
        assert index.max_connections == 8 and index.ef_construction == 64
        multi = index.multi_vector
        assert (multi is not None and multi.aggregation == "maxSim") == (field in ("colbert", "second")), field
    assert cfg.vector_config["text_vec"].vectorizer.vectorizer.value == "none"
    # an object without an optional field holds no vector of it: never a hit of that field's list
    rng = np.random.default_rng(3)
    da.extend(pages(rng, 12))
    obj = client.collections.get(da.stats()["collection"]).query.fetch_objects(
        filters=None, limit=20, include_vector=True).objects
    by_id = {o.properties["hs_id"]: o.vector for o in obj}
    assert "image_vec" not in by_id["p0"] and "colbert" not in by_id["p0"] and "second" not in by_id["p0"]
    assert set(by_id["p7"]) == set(METRICS)
    assert np.array(by_id["p1"]["colbert"]).shape == (len(da["p1"].colbert), 5)


def test_multi_vector_candidates_come_from_weaviate_and_are_rescored_exactly(open_da, client, monkeypatch):
    """exact_max=0: Weaviate's multi-vector index gives the candidates; the hits' scores are exact
    MaxSim, recall@10 on ColBERT-like data reaches the 0.95 docs/storages/weaviate.md states, a
    filter is a pre-filter; exact=True reads every match instead."""
    docs, queries = colbert_like(400, 6, dim=16, tokens=(6, 16), query_tokens=6, topics=60, seed=4)
    for metric in ("cosine", "ip"):
        da = open_da(Colbert, metric=metric, exact_max=0)
        da.extend([{"id": f"d{i}", "tag": "ab"[i % 2], "colbert": b if i % 10 else None} for i, b in enumerate(docs)])
        held = {f"d{i}": b for i, b in enumerate(docs) if i % 10}
        seen = near_vector_calls(monkeypatch, client, da)
        for flt, allowed in ((None, list(held)), ({"tag": "b"}, [i for i in held if int(i[1:]) % 2 == 1])):
            recall = []
            for Q in queries:
                res = da.find(vector={"colbert": Q}, limit=10, filter=flt)
                ref = maxsim_scores([held[i] for i in allowed], Q, metric)
                got = dict(zip(allowed, ref.tolist()))
                assert set(res.ids) <= set(allowed) and list(res.scores) == sorted(res.scores, reverse=True)
                np.testing.assert_allclose(res.scores, [got[i] for i in res.ids], rtol=1e-5, atol=1e-5)
                top = [allowed[j] for j in np.argsort(-ref, kind="stable")[:10]]
                recall.append(len(set(top) & set(res.ids)) / 10)
            assert np.mean(recall) >= 0.95, (metric, flt, recall)
        assert seen and set(seen) == {"colbert"}  # every find above asked Weaviate's index
        seen.clear()
        res = da.find(vector={"colbert": queries[0]}, limit=10, exact=True)
        assert not seen  # exhaustive: the matches are read, no index query
        ref = maxsim_scores([held[i] for i in held], queries[0], metric)
        assert res.ids == [list(held)[j] for j in np.argsort(-ref, kind="stable")[:10]]


def test_below_exact_max_and_with_l2_a_multi_vector_find_is_exhaustive(open_da, client, monkeypatch):
    """Weaviate's MaxSim sums dot products, not minus the l2 distances: an l2 field is never asked
    to Weaviate's index, even with exact_max=0; below exact_max no field is."""
    rng = np.random.default_rng(5)
    for exact_max in (0, 10000):
        da = open_da(Page, metric=dict(METRICS), exact_max=exact_max)
        da.extend(pages(rng, 80))
        docs = {d.id: d for d in da}
        seen = near_vector_calls(monkeypatch, client, da)
        for field, dim in (("second", 3), ("colbert", 5)):
            if field == "colbert" and exact_max == 0:
                continue
            for _ in range(3):
                Q = rng.standard_normal((3, dim))
                want = model(docs, field, Q, METRICS[field])
                res = da.find(vector={field: Q}, limit=8)
                ids = list(want)
                top = [ids[j] for j in np.argsort(-np.array(list(want.values())), kind="stable")[:8]]
                assert res.ids == top
                np.testing.assert_allclose(res.scores, [want[i] for i in top], rtol=1e-5, atol=1e-5)
        assert not seen


def test_every_field_survives_a_reopen_and_the_metrics_are_checked(open_da):
    rng = np.random.default_rng(6)
    da = open_da(Page, metric=dict(METRICS))
    da.extend(pages(rng, 30))
    da.update("p1", colbert=None, image_vec=[1.0, 2.0, 3.0])
    da.update_many({"tag": "a"}, second=np.ones((2, 3)))
    before = {d.id: d for d in da}
    name = da.stats()["collection"]
    da.close()
    again = open_da(Page, metric=dict(METRICS), collection=name)
    after = {d.id: d for d in again}
    assert list(after) == list(before)
    for i, d in before.items():
        for field in METRICS:
            x, y = getattr(d, field), getattr(after[i], field)
            assert (x is None and y is None) or np.array_equal(x, y), (i, field)
    assert after["p1"].colbert is None and np.array_equal(after["p1"].image_vec, np.float32([1, 2, 3]))
    q = {"text_vec": rng.standard_normal(4), "colbert": rng.standard_normal((2, 5))}
    res = again.find(vector=q, fusion="rrf", limit=10)
    assert set(res.part_scores) == {"text_vec", "colbert"}
    for field in q:  # each part is the field's exact score, NaN for a document without the field
        want = model(after, field, q[field], METRICS[field])
        for i, s in zip(res.ids, res.part_scores[field].tolist()):
            assert np.isnan(s) if i not in want else np.isclose(s, want[i], rtol=1e-5, atol=1e-5), (field, i)
    with pytest.raises(hs.BackendError, match="another schema or metric"):
        open_da(Page, metric={**METRICS, "image_vec": "l2"}, collection=name)


def test_a_sparse_field_is_refused_at_open_saying_what_to_use():
    with pytest.raises(hs.UnsupportedError, match=r"storage 'weaviate' does not hold hs.SparseVector fields "
                                                  r"\(Sparse.splade is one\): Weaviate has no sparse vectors.*qdrant"):
        hs.DocumentArray(Sparse, storage="weaviate", url="http://127.0.0.1:9")
