"""A query given as a flat numpy array (the fast path of find) is checked exactly as the same
query given as a list: the same SchemaError sentence, or the same hits and scores.

The list form takes the full checks (finite, norm inside [1e-15, 1e15]); the numpy form is
accepted after one native pass over its squared norm when that pass proves the full checks
would pass, so any value the pass misjudges shows here as a difference between the two forms.
"""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

import hybridsearch as hs

DIM = 4
specials = st.sampled_from([0.0, -0.0, 1.0, float("nan"), float("inf"), -float("inf"), 1e-15, 1.0001e-15, 9.9e-16,
                            1e15, 1.0001e15, 9.99e14, 3e38, 3.5e38, 1e-45, 1e-40, 1e154, 1e200, 5e-324])
values = st.one_of(st.floats(allow_nan=True, allow_infinity=True), specials)


class Vec(hs.Document):
    embedding: hs.Vector[DIM]


@pytest.fixture(scope="module", params=["memory", "hnsw"])
def da(request):
    rng = np.random.default_rng(3)
    da = hs.DocumentArray(Vec, storage=request.param)
    da.extend([{"id": f"v{i}", "embedding": rng.standard_normal(DIM)} for i in range(50)])
    yield da
    da.close()


def _outcome(da, q):
    try:
        res = da.find(vector=q, limit=5)
        return "hits", res.ids, res.scores.tolist()
    except hs.SchemaError as e:
        return "refused", str(e)


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(q=st.one_of(arrays(np.float64, DIM, elements=values), arrays(np.float32, DIM, elements=values.filter(
    lambda v: not np.isfinite(v) or abs(v) <= 3.4e38))))
def test_a_numpy_query_is_checked_as_its_list(da, q):
    with np.errstate(all="ignore"):
        want = _outcome(da, q.tolist())
    assert _outcome(da, q) == want


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_a_complex_vector_is_refused_not_cut_to_its_real_part(da, dtype):
    """numpy casts complex to float by dropping the imaginary part with only a warning: a query
    or a stored vector of complex numbers is a SchemaError, and nothing is written."""
    v = np.array([1j, 1, 0, 0], dtype=dtype)
    with pytest.raises(hs.SchemaError, match="real numbers"):
        da.find(vector=v)
    with pytest.raises(hs.SchemaError, match="real numbers"):
        da.find_batched(v.reshape(1, -1))
    n = len(da)
    with pytest.raises(hs.SchemaError, match="real numbers"):
        da.extend([{"id": "complex", "embedding": v}])
    assert len(da) == n and "complex" not in da
    assert _outcome(da, v.real.copy())[0] == "hits"  # the real part alone is a query like any other
