"""storage="annlite" beyond the shared suite. Runs only in a child process that has not
loaded hnswlib (tests/test_annlite_backend.py starts it); not collected by default."""
import json
import os
from typing import Optional

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import hybridsearch as hs
from hybridsearch.backends.annlite_filter import AnnliteFilter
from hybridsearch.document import schema_of
from hybridsearch.filters import parse_filter
from tests.models import exact_scores, matches


class Item(hs.Document):
    title: hs.Text = ""
    group: hs.Keyword = "a"          # an SQL keyword as a field name
    order: Optional[int] = None      # another, and optional
    price: float = 0.0
    ok: bool = True
    v: hs.Vector[8]


def items(a, b, rng):
    return [{"id": f"i{i}", "group": "abc"[i % 3], "order": (i if i % 4 else None), "price": i / 4,
             "ok": bool(i % 2), "v": rng.standard_normal(8)} for i in range(a, b)]


def open_da(path, **kw):
    return hs.DocumentArray(Item, storage="annlite", path=path, **kw)


def test_options_reach_annlite(tmp_path):
    da = open_da(tmp_path / "c", m=8, ef_construct=40, ef=33, metric="l2")
    index = da._backend.index.vec_index(0)
    assert (index.max_connection, index.ef_construction, index.ef_search) == (8, 40, 33)
    with pytest.raises(hs.ConfigError, match="ef_construct"):
        open_da(tmp_path / "d", ef_construct=0)
    da.close()


def test_partial_update_changes_the_filter_columns(tmp_path):
    """AnnLite's own update() leaves its filter table stale; ours rewrites the row."""
    rng = np.random.default_rng(0)
    da = open_da(tmp_path / "c")
    da.extend(items(0, 30, rng))
    da.update("i5", group="z", price=100.0)
    assert da.find(filter={"group": "z"}).ids == ["i5"]
    assert da.find(filter={"price": {"$gte": 100}}).ids == ["i5"]
    assert da.find(vector=rng.standard_normal(8), filter={"group": "z"}, limit=3).ids == ["i5"]
    assert [d.id for d in da][5] == "i5"  # still in its insertion place
    da.close()


def test_reopen_keeps_documents_order_and_results(tmp_path):
    rng = np.random.default_rng(1)
    da = open_da(tmp_path / "c")
    da.extend(items(0, 60, rng))
    da.delete(["i3", "i7"])
    da.update("i9", order=-9)
    q = rng.standard_normal(8)
    before = ([d.model_dump_json() for d in da], da.find(vector=q, limit=5, exact=True).ids,
              da.find(filter={"order": {"$lt": 0}}).ids)
    da.close()
    again = open_da(tmp_path / "c")
    assert len(again) == 58 and "i3" not in again
    assert ([d.model_dump_json() for d in again], again.find(vector=q, limit=5, exact=True).ids,
            again.find(filter={"order": {"$lt": 0}}).ids) == before
    again.extend(items(100, 101, rng))
    assert [d.id for d in again][-1] == "i100"
    again.close()


def test_folders_that_are_not_ours_are_backend_errors(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(hs.BackendError, match="not an annlite collection"):
        open_da(tmp_path / "file")
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "notes.txt").write_text("mine")
    with pytest.raises(hs.BackendError, match="not written by hybridsearch"):
        open_da(tmp_path / "busy")
    assert (tmp_path / "busy" / "notes.txt").read_text() == "mine"
    da = open_da(tmp_path / "c")
    da.close()
    with pytest.raises(hs.BackendError, match="another schema or metric"):
        open_da(tmp_path / "c", metric="ip")
    (tmp_path / "c" / "hybridsearch-annlite.json").write_text("{broken")
    with pytest.raises(hs.BackendError, match="damaged"):
        open_da(tmp_path / "c")


def test_schema_without_a_vector_is_unsupported(tmp_path):
    class NoVec(hs.Document):
        title: hs.Text

    with pytest.raises(hs.UnsupportedError, match="needs an hs.Vector"):
        hs.DocumentArray(NoVec, storage="annlite", path=tmp_path / "c")


def test_hnswlib_is_refused_in_this_process():
    import sys
    assert "annlite" in sys.modules and "hnswlib" not in sys.modules
    assert "annlite" in hs.backends() and "hnswlib" not in hs.backends()
    with pytest.raises(hs.UnsupportedError, match="already loaded 'annlite'"):
        hs.DocumentArray(Item, storage="hnswlib")


def test_filter_dicts_are_parameterised():
    flt = AnnliteFilter(schema_of(Item)).compile(
        parse_filter({"$not": {"group": "x' OR 1=1 --"}, "order": {"$in": [1, 2]}}, schema_of(Item)))
    text = json.dumps(flt)
    assert "x' OR 1=1 --" in text  # the value is data inside the dict, never SQL text
    assert flt == {"$and": [{"c_group": {"$neq": "x' OR 1=1 --"}}, {"c_order": {"$in": [1, 2]}}]}


@given(seed=st.integers(0, 2**16), k=st.sampled_from([1, 5, 20]), metric=st.sampled_from(["cosine", "ip", "l2"]),
       flt=st.sampled_from([None, {"group": "a"}, {"order": {"$exists": False}}, {"$not": {"order": {"$gt": 10}}},
                            {"$or": [{"ok": False}, {"price": {"$lt": 2}}]}, {"group": "none"}]))
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_filtered_search_is_min_limit_matches_and_exact_scores(tmp_path_factory, seed, k, metric, flt):
    rng = np.random.default_rng(seed)
    da = open_da(tmp_path_factory.mktemp("c"), metric=metric)
    rows = items(0, 80, rng)
    da.extend(rows)
    alive = [Item(**r).model_dump() for r in rows]
    expected = [r["id"] for r in alive if matches(r, flt or {})]
    q = rng.standard_normal(8).astype(np.float32)
    res = da.find(vector=q, filter=flt, limit=k)
    assert len(res) == min(k, len(expected)) and set(res.ids) <= set(expected)
    X = np.stack([np.asarray(r["v"], dtype=np.float32) for r in alive])
    ref = exact_scores(X, q, metric)
    pos = {r["id"]: i for i, r in enumerate(alive)}
    np.testing.assert_allclose(res.scores, [ref[pos[i]] for i in res.ids], rtol=1e-5, atol=1e-5)
    exact = da.find(vector=q, filter=flt, limit=k, exact=True)
    sub = np.array([ref[pos[i]] for i in expected])
    assert np.allclose(np.sort(exact.scores)[::-1], np.sort(sub)[::-1][:k], atol=1e-5)
    da.close()


def test_text_search_is_unsupported_with_the_reason(tmp_path):
    da = open_da(tmp_path / "c")
    da.extend(items(0, 3, np.random.default_rng(0)))
    with pytest.raises(hs.UnsupportedError, match="no lexical engine"):
        da.find(text="anything")
    with pytest.raises(hs.UnsupportedError, match="no lexical engine"):
        da.find(text="anything", vector=np.ones(8))
    da.close()


def test_temporary_collection_is_removed_on_close():
    da = hs.DocumentArray(Item, storage="annlite")
    path = da._backend.path
    da.extend(items(0, 3, np.random.default_rng(0)))
    assert os.path.isdir(path)
    da.close()
    assert not os.path.exists(path)
