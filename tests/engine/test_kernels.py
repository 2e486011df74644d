"""Native kernels against numpy in float64: every metric, odd dimensions, every SIMD level."""
import platform

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

# internal: the kernels themselves, at every SIMD level (force_simd), with inputs no storage passes
from hybridsearch._native import _kernels as K
from tests.models import check_topk, exact_scores

from tests.engine.conftest import SIMD_LEVELS as LEVELS


def test_simd_levels_and_their_fallback():
    assert K.SIMD_NAMES == LEVELS
    levels = K.simd_levels()
    best = K.simd_level()
    assert levels[0] == "scalar" and levels[-1] == best  # loaded at the best level the CPU has
    machine = platform.machine().lower()
    if machine in ("x86_64", "amd64", "i386", "i686"):
        assert "neon" not in levels
    if machine in ("aarch64", "arm64"):
        assert levels == ("scalar", "neon")
    try:
        for name in LEVELS:  # a level the CPU lacks falls back to the best it has
            assert K.force_simd(name) == (name if name in levels else best)
            assert K.simd_level() == K.force_simd(name)
        with pytest.raises(ValueError, match="unknown SIMD level"):
            K.force_simd("sse9")
    finally:
        K.force_simd(best)
    assert K.simd_level() == best


def aux_for(X, metric):
    if metric == "ip":
        return None
    sq = np.einsum("ij,ij->i", X, X).astype(np.float32)
    if metric == "l2":
        return sq
    n = np.sqrt(sq)
    return np.where(n > 0, 1 / np.maximum(n, 1e-38), 0).astype(np.float32)


@pytest.mark.parametrize("d", [1, 3, 7, 16, 97, 128, 384])
@pytest.mark.parametrize("metric", ["ip", "cosine", "l2"])
@pytest.mark.parametrize("nq", [1, 3, 9])
def test_exact_search_matches_numpy(simd, d, metric, nq, rng):
    n = 777
    X = rng.standard_normal((n, d)).astype(np.float32)
    X[5] = 0  # a zero row: cosine defines its score as 0
    Q = rng.standard_normal((nq, d)).astype(np.float32)
    k = 10
    scores, rows = K.exact_search(X, n, aux_for(X, metric), Q, metric, None, k)
    assert scores.shape == (nq, k) and rows.shape == (nq, k)
    for i in range(nq):
        ref = exact_scores(X, Q[i], metric)
        check_topk(rows[i].tolist(), scores[i], list(range(n)), ref, k)


@pytest.mark.parametrize("metric", ["ip", "cosine", "l2"])
@pytest.mark.parametrize("nq", [1, 8])
def test_exact_search_with_bitset_is_a_prefilter(simd, metric, nq, rng):
    n, d = 1000, 24
    X = rng.standard_normal((n, d)).astype(np.float32)
    Q = rng.standard_normal((nq, d)).astype(np.float32)
    keep = rng.random(n) < 0.03
    bits = np.packbits(np.r_[keep, np.zeros(-n % 64, bool)], bitorder="little").view(np.uint64)
    scores, rows = K.exact_search(X, n, aux_for(X, metric), Q, metric, bits, 50)
    idx = np.flatnonzero(keep)
    for i in range(nq):
        got = rows[i][rows[i] >= 0]
        assert len(got) == min(50, len(idx))
        assert set(got) <= set(idx)
        check_topk(got.tolist(), scores[i][: len(got)], idx.tolist(), exact_scores(X[idx], Q[i], metric), 50)
        assert np.all(rows[i][len(got):] == -1) and np.all(np.isneginf(scores[i][len(got):]))


def test_exact_search_k_larger_than_n_pads(rng):
    X = rng.standard_normal((3, 5)).astype(np.float32)
    s, r = K.exact_search(X, 3, None, X[:1].copy(), "ip", None, 6)
    assert sorted(r[0][:3]) == [0, 1, 2] and list(r[0][3:]) == [-1, -1, -1]


def test_exact_search_empty_and_edge_inputs(rng):
    X = np.zeros((0, 4), dtype=np.float32)
    s, r = K.exact_search(X, 0, None, np.ones((2, 4), np.float32), "ip", None, 3)
    assert (r == -1).all()
    s, r = K.exact_search(np.ones((4, 4), np.float32), 4, None, np.ones((0, 4), np.float32), "ip", None, 3)
    assert s.shape == (0, 3)


def test_ties_go_to_the_lower_row():
    X = np.ones((100, 8), dtype=np.float32)
    for nq in (1, 8):
        _, r = K.exact_search(X, 100, None, np.ones((nq, 8), np.float32), "ip", None, 5)
        assert (r == np.arange(5)).all()


def test_bad_arguments_raise_not_crash(rng):
    X = rng.standard_normal((10, 4)).astype(np.float32)
    with pytest.raises(ValueError):
        K.exact_search(X, 10, None, np.ones((1, 5), np.float32), "ip", None, 3)
    with pytest.raises(ValueError):
        K.exact_search(X[:, ::2], 10, None, np.ones((1, 2), np.float32), "ip", None, 3)
    with pytest.raises(ValueError):
        K.exact_search(X, 11, None, np.ones((1, 4), np.float32), "ip", None, 3)
    with pytest.raises(ValueError):
        K.exact_search(X, 10, None, np.ones((1, 4), np.float32), "cosine", None, 3)
    with pytest.raises(ValueError):  # bitset shorter than the rows
        K.exact_search(X, 10, None, np.ones((1, 4), np.float32), "ip", np.zeros(0, np.uint64), 3)


@given(st.lists(st.floats(-1e6, 1e6, width=32), max_size=300), st.integers(0, 20))
@settings(max_examples=200, deadline=None)
def test_topk_matches_sorting(values, k):
    s = np.array(values, dtype=np.float32)
    got_s, got_i = K.topk(s, k)
    order = sorted(range(len(s)), key=lambda i: (-s[i], i))[:k]
    assert got_i[: len(order)].tolist() == order
    assert (got_i[len(order):] == -1).all()


@given(st.lists(st.booleans(), max_size=300), st.integers(0, 400))
@settings(max_examples=200, deadline=None)
def test_bitset_indices_and_popcount(flags, limit):
    n = len(flags)
    bits = np.packbits(np.r_[np.array(flags, bool), np.zeros(-n % 64, bool)], bitorder="little").view(np.uint64)
    idx = np.flatnonzero(flags)
    assert K.popcount(bits) == len(idx)
    assert K.bitset_to_indices(bits, limit).tolist() == idx[:limit].tolist()


@pytest.mark.parametrize("d", [1, 3, 4, 7, 8, 15, 16, 17, 31, 32, 33, 97, 1000])
def test_scores_rows_and_stream_sum(simd, d, rng):
    X = rng.standard_normal((37, d)).astype(np.float32)  # 37 rows: the 4-row kernels and their tail
    q = rng.standard_normal(d).astype(np.float32)
    tol = 1e-5 * np.sqrt(d) * 8
    np.testing.assert_allclose(K.scores_rows(X, q, "ip"), X.astype(np.float64) @ q, rtol=1e-4, atol=tol)
    np.testing.assert_allclose(K.scores_rows(X, q, "l2"), ((X - q).astype(np.float64) ** 2).sum(1), rtol=1e-4)
    assert abs(K.stream_sum(X.reshape(-1)) - X.astype(np.float64).sum()) < 1e-2 * max(1, d / 97)


@pytest.mark.parametrize("d", [1, 5, 8, 15, 16, 17, 33, 100, 1000])
def test_int8_dot_matches_numpy(simd, d, rng):
    C = rng.integers(-128, 128, (13, d)).astype(np.int8)
    # integer-valued queries: every partial sum is an integer below 2^24, exact in float32,
    # so every SIMD level must return exactly the numpy result, whatever the summation order
    qi = rng.integers(-127, 128, d).astype(np.float32)
    assert np.array_equal(K.scores_rows_i8(C, qi), (C.astype(np.int64) @ qi.astype(np.int64)).astype(np.float32))
    q = rng.standard_normal(d).astype(np.float32)
    np.testing.assert_allclose(K.scores_rows_i8(C, q), C.astype(np.float64) @ q, rtol=1e-4, atol=1e-3 * np.sqrt(d))


def test_int8_scan_top_k_matches_numpy(simd, rng):
    from hybridsearch.engine.exact import Int8Scan
    C = rng.integers(-127, 128, (3001, 70)).astype(np.int8)
    q = rng.integers(-50, 51, 70).astype(np.float32)  # integer query: every score exact
    scores, rows = Int8Scan(C).search(q, 10)
    ref = C.astype(np.int64) @ q.astype(np.int64)
    check_topk(rows.tolist(), scores, list(range(len(C))), ref.astype(np.float64), 10)
    with pytest.raises(ValueError, match="int8"):
        Int8Scan(C.astype(np.int16))


@pytest.mark.parametrize("n", [1, 63, 64, 65, 200, 1000])
def test_filter_compares_match_numpy(simd, n, rng):
    # the int64 / float64 compare leaves have AVX-512 and NEON paths over whole 64-row words
    i64 = rng.integers(-5, 5, n).astype(np.int64)
    f64 = rng.integers(-5, 5, n).astype(np.float64)
    f64[rng.random(n) < 0.1] = np.nan
    ops = [np.equal, np.not_equal, np.less, np.less_equal, np.greater, np.greater_equal]
    for cmp, op in enumerate(ops):
        for col, leaf, v in ((i64, K.F_I64, 1), (f64, K.F_F64, 1.0), (f64, K.F_F64, np.nan)):
            bits = K.filter_eval([(leaf, cmp, 0, col, None, int(v) if leaf == K.F_I64 else 0,
                                   float(v), None, None)], n, None)
            got = np.unpackbits(bits.view(np.uint8), bitorder="little")[:n].astype(bool)
            assert np.array_equal(got, op(col, v)), (cmp, leaf, v)


def test_filter_program_is_validated():
    with pytest.raises(ValueError):  # AND with nothing on the stack
        K.filter_eval([(K.F_AND, 0, 2, None, None, 0, 0.0, None, None)], 10, None)
    with pytest.raises(ValueError):  # column of the wrong dtype
        K.filter_eval([(K.F_I64, 0, 0, np.zeros(10, np.float64), None, 0, 0.0, None, None)], 10, None)
    with pytest.raises(ValueError):  # column shorter than the rows
        K.filter_eval([(K.F_I64, 0, 0, np.zeros(5, np.int64), None, 0, 0.0, None, None)], 10, None)


@given(st.lists(st.floats(width=32, allow_nan=True, allow_infinity=True), max_size=40))
def test_all_finite_matches_numpy(values):
    x = np.array(values, dtype=np.float32)
    assert K.all_finite(x) == bool(np.isfinite(x).all())
