"""Query options at their limits, and progress bars, on every embedded storage.

Each case is an answer checked against a plain-Python model or a typed refusal that changes
nothing: weights that would overflow float32 scores, options that do not apply to the mode of a
find, facet range bounds beyond 64 bits, numbers beyond float64, and extend(progress=True) with
a bad document after the first progress part.
"""
from typing import Optional

import numpy as np
import pytest

import hybridsearch as hs
from tests.conftest import storage_fixture
from tests.contract.test_reliability import EMBEDDED


storage = storage_fixture(EMBEDDED)  # the remote ones get the same checks: they are DocumentArray's


class Row(hs.Document):
    title: hs.Text = ""
    price: int = 0
    rating: float = 0.0
    embedding: Optional[hs.Vector[2]] = None


def rows(n: int) -> list:
    return [dict(id=f"r{i}", title=f"blue w{i % 5}", price=i * 7 - 40, rating=i / 3 - 2, embedding=[1.0, i])
            for i in range(n)]


@pytest.fixture
def da(make_da):
    da = make_da(Row)
    da.extend(rows(30))
    return da


def _text(da) -> bool:
    return da.storage not in ("annlite", "hnswlib")  # no lexical engine there (test_lexical.py)


# ------------------------------------------------------------------ 6: progress keeps atomicity
def test_progress_does_not_change_atomicity(make_da):
    da = make_da(Row)
    da.extend(rows(3))
    docs = rows(12_001)
    docs[12_000] = dict(id="bad", price="not a number")
    with pytest.raises(hs.SchemaError, match=r"document 12000 \(id 'bad'\).*nothing was written"):
        da.extend(docs, progress=True)
    assert len(da) == 3 and sorted(d.id for d in da) == ["r0", "r1", "r2"]
    da.extend(docs[:12_000], progress=True)
    assert len(da) == 12_000 and da["r11999"].price == 11_999 * 7 - 40


# ------------------------------------------------------------------ 7: weights and options
@pytest.mark.parametrize("weights", [{"text": 1e308, "vector": 1e308}, {"text": 10**400}, {"vector": 1e-300}, {"text": 1e-40, "vector": 0},
                                     {"text": float("inf")}, {"text": -1.0}, {"vector": True}])
def test_weights_that_would_break_float32_scores_are_refused(da, weights):
    with pytest.raises(hs.ConfigError, match="weights"):
        da.find(text="blue", vector=[1, 0], fusion="linear", weights=weights)


def test_large_valid_weights_rank_as_their_ratio(da):
    if not _text(da):  # no lexical engine: refused, saying so
        with pytest.raises(hs.UnsupportedError):
            da.find(text="blue w1", vector=[1, 3], fusion="linear", weights={"text": 1e30, "vector": 1e30})
        return
    even = da.find(text="blue w1", vector=[1, 3], fusion="linear", limit=10)
    big = da.find(text="blue w1", vector=[1, 3], fusion="linear", weights={"text": 1e30, "vector": 1e30}, limit=10)
    assert np.isfinite(big.scores).all()
    assert big.ids == even.ids
    np.testing.assert_allclose(big.scores, even.scores * 2e30, rtol=1e-5)


@pytest.mark.parametrize("weight", [1e308, 10**400, 1e-300, float("nan")])
def test_field_weights_beyond_float32_are_refused(da, weight):
    with pytest.raises(hs.ConfigError, match="text_fields"):
        da.find(text="blue", text_fields={"title": weight})


@pytest.mark.parametrize("mode", ["text", "vector", "filter"])
@pytest.mark.parametrize("weights", [{"text": -1}, {"bogus": 1}, {"vector": float("nan")}, "0.5"])
def test_invalid_weights_are_refused_in_every_mode(da, mode, weights):
    args = {"text": {"text": "blue"}, "vector": {"vector": [1, 0]}, "filter": {"filter": {"price": {"$gt": 0}}}}[mode]
    with pytest.raises(hs.ConfigError, match="weights"):
        da.find(fusion="linear", weights=weights, **args)


@pytest.mark.parametrize("mode", ["text", "vector", "hybrid", "filter", "batched"])
@pytest.mark.parametrize("exact", ["no", None, [], 2, 0.5, np.array([1, 2])], ids=repr)
def test_exact_takes_only_true_or_false(da, mode, exact):
    """A value read by its truth value would run a search the user did not ask for (or raise a
    raw ValueError for an array): refused in every mode."""
    if mode in ("text", "hybrid") and not _text(da):
        return
    args = {"text": {"text": "blue"}, "vector": {"vector": [1, 0]}, "hybrid": {"text": "blue", "vector": [1, 0]},
            "filter": {"filter": {"price": {"$gt": 0}}}}.get(mode)
    with pytest.raises(hs.ConfigError, match="exact must be True or False"):
        if mode == "batched":
            da.find_batched(np.ones((2, 2), np.float32), exact=exact)
        else:
            da.find(exact=exact, **args)
    for fine in (True, False, np.bool_(True), 1, 0):  # each reads as what it says
        if mode == "batched":
            assert len(da.find_batched(np.ones((2, 2), np.float32), exact=fine)) == 2
        else:
            da.find(exact=fine, **args)


@pytest.mark.parametrize("bad", [{"fusion": "max"}, {"candidates": 0}, {"candidates": 2.5}, {"ef": -5},
                                 {"rrf_k": -1}, {"weights": {"text": -1}, "fusion": "linear"}])
def test_sorted_finds_check_every_option(da, bad):
    with pytest.raises(hs.ConfigError):
        da.find(filter={"price": {"$gt": 0}}, sort=[("price", "asc")], **bad)
    if _text(da):
        with pytest.raises(hs.ConfigError):
            da.find(text="blue", sort=[("price", "asc")], **bad)


# ------------------------------------------------------------------ 8: numbers beyond 64 bits
BOUNDS = [2**64, 2**63, 2**63 - 1, -(2**63), -(2**63) - 1, -(2**70), 10**400, -(10**400), 1e300, -1e300, 0, 3, -7.5]


@pytest.mark.parametrize("field", ["price", "rating"])
@pytest.mark.parametrize("lo", [None] + BOUNDS, ids=lambda b: repr(b)[:12])
def test_facet_ranges_beyond_64_bits_count_right(da, field, lo):
    values = [getattr(d, field) for d in da]
    ranges = [(lo, None), (None, lo), (lo, 2**64), (-(2**64), lo)]
    want = [((a, b), sum(1 for v in values if (a is None or v >= a) and (b is None or v < b))) for a, b in ranges]
    try:
        assert da.facets(field, ranges=ranges) == want
    except hs.UnsupportedError as e:  # Qdrant compares int ranges as floats (docs/storages/qdrant.md)
        inside = [b for b in (lo,) if b is not None and -(2**63) < b < 2**63]
        assert da.storage == "qdrant" and field == "price" and "2**53" in str(e)
        assert inside and abs(inside[0]) > 2**53


@pytest.mark.parametrize("bad", [[(float("inf"), None)], [(None, float("nan"))], [("1", None)], [(True, None)],
                                 [(1, 2, 3)]])
def test_facet_ranges_that_are_not_numbers_are_refused(da, bad):
    with pytest.raises(hs.ConfigError, match="range"):
        da.facets("price", ranges=bad)


@pytest.mark.parametrize("value", [10**400, -(10**400), 2**64], ids=["1e400", "-1e400", "2**64"])
def test_min_score_of_any_magnitude(da, value):
    res = da.find(vector=[1, 0], min_score=value, limit=30)
    scores = da.find(vector=[1, 0], limit=30).scores
    assert len(res) == sum(1 for s in scores.tolist() if s >= value)


def test_a_tiny_weight_beside_a_normal_one_counts_little(da):
    if not _text(da):  # no lexical engine: refused, saying so
        with pytest.raises(hs.UnsupportedError):
            da.find(text="blue w1", vector=[1, 3], fusion="linear", weights={"text": 1e-300, "vector": 1.0})
        return
    alone = da.find(text="blue w1", vector=[1, 3], fusion="linear", weights={"vector": 1.0}, limit=10)
    tiny = da.find(text="blue w1", vector=[1, 3], fusion="linear", weights={"text": 1e-300, "vector": 1.0}, limit=10)
    np.testing.assert_allclose(tiny.scores, alone.scores, rtol=1e-6)
