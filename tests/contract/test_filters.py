"""The filter language: validation errors, and random filters on every storage checked
against a plain-Python evaluator (tests/models.py). The parser's AST is checked in
tests/engine/test_query.py."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import hybridsearch as hs
from tests.models import FilterItem as Item
from tests.models import matches

_FUZZ_DOCS = [Item(id=f"f{i}", category=["a", "Books", "c"][i % 3], brand=[None, "a"][i % 2], price=i - 3,
                   in_stock=bool(i % 2), name=["", "x"][i % 2], vec=[1, i]).model_dump() for i in range(8)]
_FUZZ_DA = hs.DocumentArray(Item)
_FUZZ_DA.extend(_FUZZ_DOCS)


@pytest.mark.parametrize(
    "flt, fragment",
    [
        ({"colour": "red"}, "no field 'colour'"),
        ({"price": {"$between": [1, 2]}}, "unknown operator '\\$between'"),
        ({"$xor": []}, "unknown operator '\\$xor'"),
        ({"price": "cheap"}, "needs a number"),
        ({"price": True}, "needs a number"),
        ({"price": {"$lt": float("nan")}}, "NaN"),
        ({"category": 3}, "needs a string"),
        ({"in_stock": 1}, "needs True or False"),
        ({"in_stock": {"$gt": False}}, "bool field"),
        ({"category": {"$in": "Books"}}, "list of values"),
        ({"name": "hello"}, "text field: only \\$exists"),
        ({"tags": ["a"]}, "only \\$exists"),
        ({"vec": {"$eq": [1, 2]}}, "only \\$exists"),
        ({"price": {"$exists": 1}}, "True or False"),
        ({"$and": {}}, "non-empty list"),
        ({"$or": []}, "non-empty list"),
        ({"$not": [1]}, "must be a dict"),
        ({"$in": ["a"]}, "must be applied to a field"),
        ("category = 'x'", "must be a dict"),
    ],
)
def test_bad_filters_raise_filter_error(flt, fragment):
    with pytest.raises(hs.FilterError, match=fragment):
        _FUZZ_DA.find(filter=flt, limit=None)


def test_negations_see_only_the_live_document_of_an_id_deleted_and_written_again(make_da):
    # Weaviate's complement once answered one hit per earlier life of the id
    da = make_da(Item)

    def row(i, price):
        return {"id": i, "category": "a", "price": price, "vec": [1.0, float(price)]}
    for price in (1, 2, 3):
        da.extend([row("d0", price)])
        da.delete(["d0"] if price < 3 else ["d0", "nope"])
    da.extend([row("d0", 5), row("d1", 7)])
    da.delete(filter={"price": 7})
    da.extend([row("d1", 8)])
    alive = [Item(**row("d0", 5)).model_dump(), Item(**row("d1", 8)).model_dump()]
    for flt in ({"price": {"$ne": 7}}, {"price": {"$ne": 5}}, {"price": {"$nin": [5, 6]}}, {"$not": {"price": 8}},
                {"$not": {"price": {"$gt": 100}}}, {"$or": [{"price": {"$ne": 5}}, {"price": 5}]}):
        expected = [r["id"] for r in alive if matches(r, flt)]
        assert da.find(filter=flt, limit=None).ids == expected, flt
        assert da.count(filter=flt) == len(expected), flt


def test_filter_error_comes_before_any_data_is_read(make_da):
    da = make_da(Item)
    da.append(dict(category="a", vec=[0, 1]))
    with pytest.raises(hs.FilterError):
        da.find(filter={"nope": 1})
    with pytest.raises(hs.FilterError):
        da.find(vector=[0, 1], filter={"price": {"$foo": 1}})
    assert len(da) == 1


# ----------------------------------------------------------------- random
CATS = ["a", "b", "c", "Books", "x' OR 1=1 --"]
BRANDS = ["n", "m", None]

doc_strategy = st.fixed_dictionaries({
    "category": st.sampled_from(CATS),
    "brand": st.sampled_from(BRANDS),
    "price": st.integers(-3, 3),
    "discount": st.one_of(st.none(), st.integers(0, 3)),
    "rating": st.sampled_from([0.0, 0.5, 1.5, -2.0, 3.25]),
    "in_stock": st.booleans(),
})

numbers = st.one_of(st.integers(-4, 4), st.sampled_from([-1.5, 0.5, 2.5, 3.0, 1e300, float("inf"), -float("inf")]))


def leaf():
    cmp = st.sampled_from(["$eq", "$ne", "$gt", "$gte", "$lt", "$lte"])
    num_field = st.sampled_from(["price", "discount", "rating"])
    return st.one_of(
        st.builds(lambda f, op, v: {f: {op: v}}, num_field, cmp, numbers),
        st.builds(lambda f, v: {f: v}, num_field, numbers),
        st.builds(lambda f, op, v: {f: {op: v}}, st.sampled_from(["category", "brand"]), cmp,
                  st.sampled_from(CATS + ["n", "m", "zzz", ""])),
        st.builds(lambda f, op, vs: {f: {op: vs}}, st.sampled_from(["category", "brand"]),
                  st.sampled_from(["$in", "$nin"]), st.lists(st.sampled_from(CATS + ["n", "q"]), max_size=3)),
        st.builds(lambda f, op, vs: {f: {op: vs}}, num_field, st.sampled_from(["$in", "$nin"]),
                  st.lists(numbers, max_size=3)),
        st.builds(lambda op, v: {"in_stock": {op: v}}, st.sampled_from(["$eq", "$ne"]), st.booleans()),
        st.builds(lambda f, v: {f: {"$exists": v}},
                  st.sampled_from(["brand", "discount", "price", "name", "tags"]), st.booleans()),
        st.builds(lambda op, vs: {"id": {op: vs}}, st.sampled_from(["$in", "$nin"]),
                  st.lists(st.sampled_from(["d0", "d1", "d5", "nope"]), max_size=3)),
        st.builds(lambda op, v: {"id": {op: v}}, cmp, st.sampled_from(["d0", "d3", "d9", "e"])),
    )


filters = st.recursive(
    leaf(),
    lambda children: st.one_of(
        st.builds(lambda fs: {"$and": fs}, st.lists(children, min_size=1, max_size=3)),
        st.builds(lambda fs: {"$or": fs}, st.lists(children, min_size=1, max_size=3)),
        st.builds(lambda f: {"$not": f}, children),
        st.builds(lambda a, b: {**a, **b}, children, children),
    ),
    max_leaves=6,
)


@given(docs=st.lists(doc_strategy, min_size=0, max_size=25), flts=st.lists(filters, min_size=1, max_size=5),
       deleted=st.sets(st.integers(0, 24), max_size=5))
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_random_filters_match_reference(empty_da, docs, flts, deleted):
    da = empty_da(Item)
    rows = [dict(d, id=f"d{i}", vec=[1.0, float(i)]) for i, d in enumerate(docs)]
    da.extend(rows)
    gone = {f"d{i}" for i in deleted if i < len(rows)}
    assert da.delete(sorted(gone)) == len(gone)
    # the reference sees documents as stored: schema defaults filled in
    alive = [Item(**r).model_dump() for r in rows if r["id"] not in gone]
    for flt in flts:
        expected = [r["id"] for r in alive if matches(r, flt)]
        got = da.find(filter=flt, limit=None)
        assert got.ids == expected, flt
        assert np.all(got.scores == 0)
        # the same filter as a pre-filter of an exact vector search
        if expected:
            res = da.find(vector=[1.0, 0.5], filter=flt, limit=3, exact=True)
            assert len(res) == min(3, len(expected)) and set(res.ids) <= set(expected), flt


json_like = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-5, 5), st.floats(allow_nan=True),
              st.sampled_from(["a", "Books", "$eq", "$in", "$and", "$or", "$not", "price", "category"])),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.sampled_from(["price", "category", "brand", "in_stock", "name", "id", "nope",
                                         "$and", "$or", "$not", "$eq", "$ne", "$gt", "$in", "$nin",
                                         "$exists", "$foo"]), inner, max_size=3),
    ),
    max_leaves=10,
)


@given(json_like)
@settings(max_examples=500, deadline=None)
def test_parser_never_fails_with_anything_but_filter_error(flt):
    """Arbitrary JSON-like input: a FilterError, or an answer with the reference semantics;
    never another exception (that what parses is an AST node: tests/engine/test_query.py)."""
    try:
        got = _FUZZ_DA.find(filter=flt, limit=None).ids
    except hs.FilterError:
        return
    assert flt is None or isinstance(flt, dict)
    assert got == [d["id"] for d in _FUZZ_DOCS if matches(d, flt or {})]
