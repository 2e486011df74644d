"""RaBitQ codes (hybridsearch/engine/rabitq.py over kernels/hs_rabitq.c) against numpy in float64:
the bounds hold, the estimator is unbiased, the hard-bound scan is the exact top-k, every SIMD
level computes what scalar does, bad input gets typed errors.

Internal on purpose: the codes are an engine component that no storage uses yet (the hnsw walk
and the storages adopt them in a later step), so there is no public API to test them through;
the SIMD levels are forced with the kernels' own switch (tests/engine/conftest.py), and the C
code is also built alone (NEON under qemu-aarch64)."""
import ast
import math
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hybridsearch._native import _kernels as K
from hybridsearch.engine.rabitq import RabitqCodes
from hybridsearch.errors import ConfigError, SchemaError
from tests.models import check_topk, clustered, exact_scores, top_rows

METRICS = ("l2", "ip", "cosine")


def true_values(X, Q, metric):
    """What estimate() estimates, in float64: squared distance (l2), inner product, cosine."""
    if metric == "l2":
        return np.stack([np.sum((X.astype(np.float64) - q) ** 2, axis=1) for q in Q.astype(np.float64)])
    return np.stack([exact_scores(X, q, metric) for q in Q])


def make_rows(kind, n, d, rng):
    if kind == "clustered":
        return clustered(n, d, centres=5, rng=rng)
    X = (rng.standard_normal((n, d)) * rng.choice([0.01, 1.0, 50.0])).astype(np.float32)
    if kind == "duplicates":
        X[n // 2:] = X[: n - n // 2]
    if kind == "zeros":
        X[::3] = 0
    return X


def built(X, metric, bits, seed=3, train=None):
    rq = RabitqCodes(X.shape[1], metric, bits, seed)
    rq.train(X if train is None else train)
    rq.encode(X, np.arange(len(X)))
    return rq


def bitset(mask):
    return np.packbits(np.r_[mask, np.zeros(-len(mask) % 64, bool)], bitorder="little").view(np.uint64)


# ------------------------------------------------------------------ bounds


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(d=st.integers(1, 300), n=st.integers(1, 40), kind=st.sampled_from(["gaussian", "clustered", "duplicates", "zeros"]),
       metric=st.sampled_from(METRICS), bits=st.sampled_from([1, 4]), seed=st.integers(0, 2 ** 64 - 1),
       data_seed=st.integers(0, 2 ** 32 - 1), centroid_row=st.booleans())
def test_hard_bound_always_holds(d, n, kind, metric, bits, seed, data_seed, centroid_row):
    rng = np.random.default_rng(data_seed)
    X = make_rows(kind, n, d, rng)
    rq = RabitqCodes(d, metric, bits, seed)
    c = rq.train(X)
    if centroid_row and metric != "cosine":
        X[0] = c  # a row at distance 0 from the centroid
    rq.encode(X, np.arange(n))
    Q = np.vstack([rng.standard_normal((3, d)), np.zeros((1, d)), X[-1:] + 0.001]).astype(np.float32)
    est, bp, bh = rq.estimate(Q)
    err = np.abs(est.astype(np.float64) - true_values(X, Q, metric))
    assert np.all(err <= bh), f"hard bound broken: max excess {np.max(err - bh)}"
    assert np.all(bp <= bh)


@pytest.mark.parametrize("bits", [1, 4])
@pytest.mark.parametrize("d", [64, 128, 300])
def test_probabilistic_bound_holds_as_often_as_the_theory_says(bits, d):
    # the error along the rotation's free directions is ~ N(0, 1/(dp-1)) times the bound's unit,
    # so eps0 = 1.9 should hold for P(|z| <= 1.9) = 94.3% of pairs and eps0 = 2.6 for 99.1%;
    # measured here (l2, 40,000 pairs, d 64/128/300): 1 bit 95.9/96.6/97.4% at 1.9 and
    # 99.5/99.6/99.7% at 2.6; 4 bits 99.99-100% (its query-quantisation term dominates)
    rng = np.random.default_rng(d + bits)
    X = rng.standard_normal((2000, d)).astype(np.float32)
    Q = rng.standard_normal((20, d)).astype(np.float32)
    rq = built(X, "l2", bits)
    truth = true_values(X, Q, "l2")
    for eps0, expected in ((1.9, math.erf(1.9 / math.sqrt(2))), (2.6, math.erf(2.6 / math.sqrt(2)))):
        est, bp, bh = rq.estimate(Q, eps0=eps0)
        held = np.mean(np.abs(est - truth) <= bp)
        assert held >= expected - 0.005, f"eps0={eps0}: {held:.4f} < {expected:.4f}"
        assert np.all(np.abs(est - truth) <= bh)


@pytest.mark.parametrize("bits", [1, 4])
def test_estimator_is_unbiased_over_rotations(bits):
    rng = np.random.default_rng(11)
    d = 48
    X = rng.standard_normal((6, d)).astype(np.float32)
    Q = rng.standard_normal((2, d)).astype(np.float32)
    truth = true_values(X, Q, "ip")
    errs, bounds = [], []
    for seed in range(400):
        rq = built(X, "ip", bits, seed=seed, train=np.zeros((1, d), np.float32))
        est, bp, _ = rq.estimate(Q)
        errs.append(est - truth)
        bounds.append(bp)
    errs, bounds = np.array(errs), np.array(bounds)
    mean, spread = errs.mean(axis=0), errs.std(axis=0) / math.sqrt(len(errs))
    # the mean error over 400 rotations is within 4 standard errors of 0 and small beside the bound
    assert np.all(np.abs(mean) <= 4 * spread + 1e-6), (mean, spread)
    assert np.all(np.abs(mean) <= 0.1 * bounds.mean(axis=0))


# ------------------------------------------------------------------ scan


@pytest.mark.parametrize("bits", [1, 4])
@pytest.mark.parametrize("metric", METRICS)
def test_hard_scan_is_the_exact_top_k(bits, metric):
    rng = np.random.default_rng(5)
    n, d = 600, 37
    X = rng.standard_normal((n, d)).astype(np.float32)
    X[100:150] = X[:50]  # exact ties: the lower slot first
    X[7] = 0
    rq = built(X, metric, bits)
    Q = np.vstack([rng.standard_normal((5, d)), X[3:4]]).astype(np.float32)
    keep = rng.random(n) < 0.2
    for allowed, rows in ((None, np.arange(n)), (bitset(keep), np.flatnonzero(keep))):
        for k in (1, 10, len(rows) + 5):
            scores, ids, rescored = rq.scan(X, Q, k, allowed=allowed, bound="hard")
            assert scores.shape == ids.shape == (len(Q), k)
            for i, q in enumerate(Q):
                got = ids[i][ids[i] >= 0]
                assert got.tolist() == top_rows(X, q, metric, k, rows).tolist()
                check_topk(got.tolist(), scores[i][: len(got)], rows.tolist(), exact_scores(X[rows], q, metric), k)
                assert np.all(ids[i][len(got):] == -1) and np.all(np.isneginf(scores[i][len(got):]))
            assert np.all(rescored >= min(k, len(rows))) and np.all(rescored <= len(rows))
            # the selection rule, modelled from estimate(): at least every row whose lower end
            # is under the k-th smallest upper end is rescored (the scan's widths add rounding)
            est, _, bh = rq.estimate(Q, rows)
            key = (est if metric == "l2" else -est).astype(np.float64)
            for i in range(len(Q)):
                upper = np.sort(key[i] + bh[i])
                U = upper[k - 1] if k <= len(rows) else np.inf
                assert rescored[i] >= np.sum(key[i] - bh[i] <= U)


@settings(max_examples=25, deadline=None)
@given(d=st.integers(1, 200), n=st.integers(0, 80), metric=st.sampled_from(METRICS), bits=st.sampled_from([1, 4]),
       k=st.integers(1, 12), data_seed=st.integers(0, 2 ** 32 - 1))
def test_hard_scan_matches_brute_force_on_any_data(d, n, metric, bits, k, data_seed):
    rng = np.random.default_rng(data_seed)
    X = make_rows(["gaussian", "clustered", "duplicates", "zeros"][data_seed % 4], n, d, rng) if n else np.zeros((0, d), np.float32)
    rq = RabitqCodes(d, metric, bits, data_seed)
    rq.train(X if n else np.zeros((1, d), np.float32))
    rq.encode(X, np.arange(n))
    Q = rng.standard_normal((2, d)).astype(np.float32)
    scores, ids, _ = rq.scan(X, Q, k, bound="hard")
    for i, q in enumerate(Q):
        got = ids[i][ids[i] >= 0]
        check_topk(got.tolist(), scores[i][: len(got)], list(range(n)), exact_scores(X, q, metric), k)


@pytest.mark.parametrize("bits", [1, 4])
@pytest.mark.parametrize("metric", METRICS)
def test_prob_scan_recall_on_clustered_data(bits, metric):
    rng = np.random.default_rng(8)
    X = clustered(20000, 96, centres=40, rng=rng)
    Q = clustered(30, 96, centres=40, rng=np.random.default_rng(8))  # same centres, fresh points
    rq = built(X, metric, bits)
    _, ids, rescored = rq.scan(X, Q, 10, bound="prob")
    recall = np.mean([len(set(ids[i]) & set(top_rows(X, q, metric, 10))) / 10 for i, q in enumerate(Q)])
    assert recall >= 0.99, recall
    assert rescored.mean() < len(X)  # the codes spared some float32 reads


def test_scan_of_nothing_and_removed_slots():
    rng = np.random.default_rng(2)
    X = rng.standard_normal((50, 20)).astype(np.float32)
    rq = RabitqCodes(20, "l2", 1)
    rq.train(X)
    s, i, r = rq.scan(np.zeros((0, 20), np.float32), X[:2], 3, bound="hard")  # nothing coded yet
    assert np.all(i == -1) and np.all(np.isneginf(s)) and np.all(r == 0)
    rq.encode(X[10:], np.arange(10, 50))  # slots 0..9 never coded
    rq.remove([12])
    _, i, _ = rq.scan(X, X[:5], 50, bound="hard")
    want = np.r_[10, 11, np.arange(13, 50)]
    for row, q in zip(i, X[:5]):
        assert row[row >= 0].tolist() == top_rows(X, q, "l2", 50, want).tolist()
    _, i, _ = rq.scan(X, X[:1], 5, allowed=np.zeros(1, np.uint64), bound="hard")
    assert np.all(i == -1)


@pytest.mark.parametrize("bits", [1, 4])
@pytest.mark.parametrize("metric", METRICS)
def test_estimates_alone_rank_by_the_estimate(metric, bits):
    rng = np.random.default_rng(4)
    X = rng.standard_normal((300, 40)).astype(np.float32)
    rq = built(X, metric, bits)
    Q = rng.standard_normal((3, 40)).astype(np.float32)
    est, _, _ = rq.estimate(Q)
    s, i = rq.scan_estimates(Q, 7)
    for t in range(3):
        score = -est[t] if metric == "l2" else est[t]  # higher is better
        want = np.lexsort((np.arange(300), -score))[:7]
        assert i[t].tolist() == want.tolist()
        expect = -np.sqrt(np.maximum(est[t][want], 0)) if metric == "l2" else est[t][want]
        np.testing.assert_allclose(s[t], expect, rtol=1e-6, atol=1e-6)


# ------------------------------------------------------------------ SIMD levels


@pytest.mark.parametrize("bits", [1, 4])
@pytest.mark.parametrize("d", [1, 63, 64, 130, 384])
def test_every_simd_level_equals_scalar(simd, bits, d):
    from hybridsearch.engine.exact import force_simd
    rng = np.random.default_rng(d)
    X = rng.standard_normal((300, d)).astype(np.float32)
    Q = rng.standard_normal((4, d)).astype(np.float32)
    rq = built(X, "l2", bits)
    sl = rng.permutation(300)[:77]
    here = rq.estimate(Q), rq.estimate(Q, sl), rq.scan(X, Q, 10, bound="prob")
    force_simd("scalar")
    try:
        ref = rq.estimate(Q), rq.estimate(Q, sl), rq.scan(X, Q, 10, bound="prob")
    finally:
        force_simd(simd)
    for a, b in zip(here[0] + here[1], ref[0] + ref[1]):
        assert np.array_equal(a, b)  # the integer code products are exact: bit-identical
    # the scan picks the same rows to rescore (its counts) and returns the same rows; the
    # rescored float32 distances come from each level's own float kernel (summation order)
    assert np.array_equal(here[2][1], ref[2][1]) and np.array_equal(here[2][2], ref[2][2])
    np.testing.assert_allclose(here[2][0], ref[2][0], rtol=1e-6)


# ------------------------------------------------------------------ rotation, persistence


def test_rotation_is_orthogonal_and_fixed_by_seed_and_dim():
    d = 100
    a, b, c = RabitqCodes(d, "l2", 1, 42), RabitqCodes(d, "l2", 4, 42), RabitqCodes(d, "l2", 1, 43)
    eye = np.eye(d, dtype=np.float32)
    Pa = a.rotate(eye)
    assert Pa.shape == (d, 128)
    np.testing.assert_allclose(Pa @ Pa.T, np.eye(d), atol=1e-12)  # columns of an orthogonal matrix
    assert np.array_equal(Pa, b.rotate(eye))  # bits do not change the rotation
    assert not np.allclose(Pa, c.rotate(eye))
    x = np.random.default_rng(0).standard_normal((3, d)).astype(np.float32)
    np.testing.assert_allclose(a.rotate(x), x.astype(np.float64) @ Pa, atol=1e-12)


@pytest.mark.parametrize("bits", [1, 4])
def test_state_round_trip_gives_identical_estimates(bits):
    rng = np.random.default_rng(9)
    X = rng.standard_normal((120, 33)).astype(np.float32)
    rq = built(X, "cosine", bits, seed=77)
    state = rq.state()
    back = RabitqCodes.from_state({k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in state.items()})
    Q = rng.standard_normal((3, 33)).astype(np.float32)
    for a, b in zip(rq.estimate(Q), back.estimate(Q)):
        assert np.array_equal(a, b)
    assert back.nbytes == rq.nbytes == 120 * (rq.code_bytes + 16) + 4 * 33
    assert rq.code_bytes == (64 // 8 if bits == 1 else 64 // 2)
    fresh = RabitqCodes(33, "cosine", bits, 77)
    fresh.train(X)
    fresh.encode(X, np.arange(120))
    assert np.array_equal(fresh.state()["codes"], state["codes"])  # reproducible from (seed, data)


# ------------------------------------------------------------------ bad input


def test_bad_input_gets_typed_errors_and_changes_nothing():
    rng = np.random.default_rng(1)
    X = rng.standard_normal((20, 8)).astype(np.float32)
    for bits in (0, 2, 8, True, "1"):
        with pytest.raises(ConfigError, match="bits"):
            RabitqCodes(8, "l2", bits)
    with pytest.raises(ConfigError, match="metric"):
        RabitqCodes(8, "hamming")
    with pytest.raises(ConfigError, match="dim"):
        RabitqCodes(0)
    rq = RabitqCodes(8, "l2", 1)
    with pytest.raises(ConfigError, match="train"):
        rq.encode(X, np.arange(20))
    rq.train(X)
    rq.encode(X, np.arange(20))
    before = rq.state()
    bad = X.copy()
    bad[3, 2] = np.nan
    with pytest.raises(SchemaError, match="NaN"):
        rq.encode(bad, np.arange(20, 40))
    with pytest.raises(SchemaError, match="dimension 8"):
        rq.encode(X[:, :5], np.arange(20))
    with pytest.raises(SchemaError, match="slots"):
        rq.encode(X, np.arange(19))
    with pytest.raises(SchemaError, match="dimension 8"):
        rq.estimate(np.ones((1, 9), np.float32))
    with pytest.raises(SchemaError, match="NaN"):
        rq.estimate(np.full((1, 8), np.nan, np.float32))
    with pytest.raises(SchemaError, match="NaN"):
        rq.scan(X, np.array([[np.inf] * 8], np.float32), 3)
    with pytest.raises(SchemaError, match="holds no code"):
        rq.estimate(X[:1], [25])
    with pytest.raises(SchemaError, match="block"):
        rq.scan(X[:10], X[:1], 3)
    with pytest.raises(ConfigError, match="bound"):
        rq.scan(X, X[:1], 3, bound="loose")
    with pytest.raises(ConfigError, match="eps0"):
        rq.scan(X, X[:1], 3, eps0=float("nan"))
    with pytest.raises(ConfigError, match="k must"):
        rq.scan(X, X[:1], -1)
    with pytest.raises(ConfigError, match="after encode"):
        rq.train(X)
    after = rq.state()
    assert all(np.array_equal(before[k], after[k]) for k in ("codes", "factors", "filled", "centroid"))


# ------------------------------------------------------------------ the C code alone (NEON under qemu)

ROOT = Path(__file__).resolve().parents[2]
NATIVE_SRC = ["tests/native/test_rabitq_native.c", "kernels/hs_rabitq.c", "kernels/hs_rabitq_kern.c",
              "kernels/hs_distance.c", "kernels/hs_topk.c"]


def compile_args():
    """setup.py's COMPILE_ARGS (read, not imported: importing setup.py would run setup())."""
    for node in ast.parse((ROOT / "setup.py").read_text()).body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "COMPILE_ARGS":
            return ast.literal_eval(node.value)
    raise AssertionError("no COMPILE_ARGS in setup.py")


@pytest.mark.parametrize("target", ["native", "aarch64"])
def test_c_levels_agree_and_hard_bound_holds(target, tmp_path):
    cc, run = ("gcc", []) if target == "native" else ("aarch64-linux-gnu-gcc", ["qemu-aarch64"])
    missing = [t for t in [cc] + run if shutil.which(t) is None]
    if missing:
        pytest.skip(f"{' and '.join(missing)} not on PATH (Debian: apt-get install gcc-aarch64-linux-gnu qemu-user)")
    exe = tmp_path / f"rq-{target}"
    subprocess.run([cc, *compile_args(), "-Wall", "-Werror=implicit-function-declaration", "-Ikernels",
                    *(["-static"] if run else []), *NATIVE_SRC, "-lm", "-o", str(exe)],
                   cwd=ROOT, check=True, capture_output=True, timeout=300)
    out = subprocess.run(run + [str(exe)], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    # aarch64: scalar and NEON; here: every level this CPU has
    levels = 2 if run else len(K.simd_levels())
    assert f"ok: {levels} levels" in out.stdout, out.stdout
