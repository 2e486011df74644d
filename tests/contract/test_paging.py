"""API.md section 7 on every storage: offset pages, res.total and count(), against a Python model
of the collection (insertion order, the filter as a predicate, a text match as a shared word)."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import hybridsearch as hs

WORDS = ["red", "blue", "green", "lamp", "desk", "chair"]  # analysed as themselves (no stemming change)


class Item(hs.Document):
    title: hs.Text = ""
    cat: hs.Keyword = ""
    price: int = 0
    v: hs.Vector[4]


def _docs(n: int, seed: int) -> list:
    rng = np.random.default_rng(seed)
    return [{"id": f"d{i}", "title": " ".join(rng.choice(WORDS, 2)), "cat": f"c{i % 3}",
             "price": int(rng.integers(0, 50)), "v": rng.standard_normal(4) + 0.1} for i in range(n)]


def _has_text(storage) -> bool:
    return storage != "hnswlib"


@pytest.fixture
def filled(make_da):
    def make(n=60, seed=0):
        da = make_da(Item)
        docs = _docs(n, seed)
        da.extend(docs)
        return da, docs
    return make


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cat=st.sampled_from(["c0", "c1", "c2"]), top=st.integers(0, 50), limit=st.integers(0, 30),
       offset=st.integers(0, 70))
def test_filter_pages_are_slices_and_total_counts_every_match(filled, cat, top, limit, offset):
    da, docs = filled()
    flt = {"cat": cat, "price": {"$lt": top}}
    model = [d["id"] for d in docs if d["cat"] == cat and d["price"] < top]
    res = da.find(filter=flt, limit=limit, offset=offset)
    assert res.ids == model[offset:offset + limit]
    assert res.total == len(model) == da.count(filter=flt)
    assert da.find(filter=flt, limit=None, offset=offset).ids == model[offset:]
    assert da.count() == len(docs)


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(words=st.lists(st.sampled_from(WORDS), min_size=1, max_size=3), cat=st.sampled_from([None, "c1"]),
       limit=st.integers(1, 20), offset=st.integers(0, 40))
def test_text_pages_are_slices_and_total_counts_documents_with_a_term(filled, storage, words, cat, limit,
                                                                       offset):
    if not _has_text(storage):
        pytest.skip("hnswlib has no text search (UnsupportedError, tested with the storage)")
    da, docs = filled()
    text = " ".join(words)
    flt = {"cat": cat} if cat else None
    model = [d for d in docs if set(d["title"].split()) & set(words) and (cat is None or d["cat"] == cat)]
    longer = da.find(text=text, filter=flt, limit=offset + limit)
    page = da.find(text=text, filter=flt, limit=limit, offset=offset)
    assert page.ids == longer.ids[offset:]
    assert list(page.scores) == list(longer.scores[offset:])
    assert page.total == longer.total == len(model) == da.count(text=text, filter=flt)


def test_vector_and_hybrid_pages_are_slices_without_a_total(filled, storage):
    da, docs = filled(80, seed=3)
    q = np.array([0.3, -0.2, 0.9, 0.1])
    longer = da.find(vector=q, limit=40)
    for offset in (0, 1, 7, 24, 25, 30):
        page = da.find(vector=q, limit=5, offset=offset)
        assert page.ids == longer.ids[offset:offset + 5] and page.total is None
    if _has_text(storage):
        longer = da.find(text="red lamp", vector=q, limit=20)
        page = da.find(text="red lamp", vector=q, limit=6, offset=9)
        assert page.ids == longer.ids[9:15] and page.total is None


def test_offset_is_checked(filled):
    da, _ = filled(5)
    for bad in (-1, 1.5, "2", True, None):
        with pytest.raises(hs.ConfigError, match="offset"):
            da.find(filter={}, offset=bad)
    assert da.find(filter={}, limit=2, offset=10**30).ids == []  # any size, cut to what exists
