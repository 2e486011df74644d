"""Document validation's fast paths (plain scalars, ordinary vectors) give the same verdict and the
same stored value as the full checks they skip."""
import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import hybridsearch as hs
# internal: the fast path is switched off through the model's __hs_plain__ table to get the
# reference; the public API cannot tell the two paths apart, which is the point
from hybridsearch.document import VECTOR_NORM_MAX, VECTOR_NORM_MIN, vector_norm_problem


class Item(hs.Document):
    title: hs.Text = ""
    tag: hs.Keyword = ""
    n: int = 0
    x: float = 0.0
    flag: bool = False


class Slow(Item):
    pass


Slow.__hs_plain__ = {}  # every value through _check_scalar

values = (st.integers(-2**70, 2**70) | st.floats(allow_nan=True, allow_infinity=True) | st.booleans()
          | st.text(max_size=5) | st.sampled_from(["a\ud800", "é", -0.0, 0.0, 2**63 - 1, 2**63, -2**63, 3.0])
          | st.none())


def outcome(model, data):
    try:
        return ("ok", model.model_validate(data).model_dump())
    except hs.SchemaError as e:
        return ("error", str(e).replace("Slow", "Item"))


@settings(max_examples=500, deadline=None)
@given(st.dictionaries(st.sampled_from(["title", "tag", "n", "x", "flag"]), values, max_size=5))
def test_plain_scalars_get_the_full_checks_verdict(data):
    data = {"id": "x", **data}  # not a random id: the dumps are compared
    fast, slow = outcome(Item, dict(data)), outcome(Slow, dict(data))
    assert fast[0] == slow[0] and repr(fast[1]) == repr(slow[1])  # repr: -0.0 vs 0.0, 1 vs 1.0


class Vec(hs.Document):
    v: hs.Vector[5]


def full_checks(arr):
    return bool(np.isfinite(arr).all()) and vector_norm_problem(arr.reshape(1, -1)) is None


edges = st.sampled_from([0.0, VECTOR_NORM_MIN, 2 * VECTOR_NORM_MIN, VECTOR_NORM_MAX / math.sqrt(5),
                         VECTOR_NORM_MAX / math.sqrt(5) / 2, VECTOR_NORM_MAX, 1e-16, 1.0, -1.0])


@settings(max_examples=500, deadline=None)
@given(st.lists(st.floats(width=32, allow_nan=True, allow_infinity=True) | edges, min_size=5, max_size=5))
def test_vectors_get_the_full_checks_verdict(xs):
    arr = np.array(xs, dtype=np.float32)
    try:
        got = Vec(v=arr).v
    except hs.SchemaError:
        got = None
    assert (got is not None) == full_checks(arr)
    if got is not None:
        assert np.array_equal(got, arr)
