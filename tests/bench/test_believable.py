"""A harness a user can believe: the passes' median and spread, interleaved timing, the load
warning (load average injected), the monotonicity check on synthetic curves, QPS interpolated
at a recall target, and the rule for a headline ratio — each against a plain Python model of
what it should say."""
import json
import math
import statistics

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hybridsearch.bench import machine
from hybridsearch.bench import metrics as M
from hybridsearch.bench import report as R
from hybridsearch.bench import stability as S
from hybridsearch.bench import timing as T

finite = st.floats(min_value=1.0, max_value=1e6, allow_nan=False)


# ------------------------------------------------------------------ median and spread
@settings(max_examples=60, deadline=None)
@given(st.lists(finite, min_size=1, max_size=9))
def test_spread_is_the_median_min_max_and_quartiles_of_the_passes(xs):
    s = M.spread(xs)
    q1, _, q3 = statistics.quantiles(xs, n=4, method="inclusive") if len(xs) > 1 else (xs[0], None, xs[0])
    assert s["median"] == pytest.approx(statistics.median(xs))
    assert (s["min"], s["max"], s["n"]) == (min(xs), max(xs), len(xs))
    assert s["q1"] == pytest.approx(q1) and s["q3"] == pytest.approx(q3)
    assert s["min"] <= s["q1"] <= s["median"] <= s["q3"] <= s["max"]


def test_spread_of_nothing_is_nan():
    s = M.spread([])
    assert s["n"] == 0 and all(math.isnan(s[k]) for k in ("median", "min", "max", "q1", "q3"))


# ------------------------------------------------------------------ interleaved passes
def test_sweeps_are_interleaved_engine_by_engine_pass_after_pass():
    """A's whole sweep, B's whole sweep, then A's again...; every timed figure from its own pass."""
    order, loads = [], iter([0.5, 3.0, 0.7, 0.2, 0.1, 0.4, 0.9, 0.3, 1.5, 0.6, 0.1, 0.2])

    def maker(name):
        def make(ef):
            order.append((name, ef))
            return lambda q: (name, ef, q)
        return make

    r = T.interleaved({"A": maker("A"), "B": maker("B")}, [10, 20], [1, 2, 3], warmup=[0], passes=3,
                      loadavg=lambda: next(loads))
    assert order == [(n, ef) for _ in range(3) for n in ("A", "B") for ef in (10, 20)]
    for name in ("A", "B"):
        for i, ef in enumerate((10, 20)):
            p = r[name][i]
            assert len(p["qps_passes"]) == 3 and p["out"] == [(name, ef, q) for q in (1, 2, 3)]
            s = M.spread(p["qps_passes"])
            assert (p["qps"], p["qps_min"], p["qps_max"]) == (s["median"], s["min"], s["max"])
    # load read before every segment: A ef10 saw 0.5, 0.1, 1.5 over its three passes
    assert r["A"][0]["load1"] == 1.5 and r["A"][1]["load1"] == 3.0 and r["B"][1]["load1"] == 0.3


def test_interleaved_segments_last_min_seconds_and_a_broken_point_is_isolated():
    calls = []

    def make(ef):
        if ef == 2:
            return lambda q: 1 / 0
        return lambda q: calls.append(q)

    r = T.interleaved({"A": make}, [1, 2], [7], warmup=[], passes=2, min_seconds=0.02, loadavg=lambda: 0.0)
    assert r["A"][1] == {"error": "ZeroDivisionError: division by zero"}
    assert len(calls) > 10 and r["A"][0]["qps"] > 0  # the one-item list repeated until 20 ms passed
    assert r["A"][0]["out"] == [None]  # the outputs of one round of the items
    # a platform without a load average: no reading, and the timing goes on
    r = T.interleaved({"A": make}, [1], [7], warmup=[], passes=2, loadavg=lambda: None)
    assert r["A"][0]["load1"] is None and len(r["A"][0]["qps_passes"]) == 2
    assert S.machine_load([None, None], 2)["loaded"] is False


# ------------------------------------------------------------------ load warning
@pytest.mark.parametrize("samples, cores, own, loaded", [
    ([0.9, 1.0, 1.1], 2, 1, False),     # the benchmark's own thread and a little more
    ([1.9], 2, 1, False),               # another program on the free core
    ([0.8, 2.6], 2, 1, True),           # others wanted 1.6 cores where 1 was free
    ([4.2], 8, 1, False),
    ([8.5], 8, 1, True),
    ([2.5], 2, 2, True),                # no core free for anybody else
    ([], 2, 1, False),                  # nothing read: nothing claimed
])
def test_the_load_warning_follows_the_load_average(samples, cores, own, loaded):
    r = S.machine_load(samples, cores, own)
    model = bool(samples) and max(samples) - own > cores - own
    assert r["loaded"] is loaded is model
    assert (r["warning"] is not None) is loaded
    if loaded:
        assert f"{max(samples):.2f}" in r["warning"] and f"{cores} cores" in r["warning"]


# ------------------------------------------------------------------ monotonic curves
def _curve(qps_by_ef):
    return [{"ef": ef, "recall": min(1.0, 0.5 + ef / 400), "qps": q} for ef, q in qps_by_ef]


def _model_rises(points, tol):
    pts = sorted(points, key=lambda p: p["ef"])
    return [(a["ef"], b["ef"]) for a, b in zip(pts, pts[1:]) if b["qps"] > a["qps"] * (1 + tol)]


def test_a_falling_curve_is_monotonic_and_a_bump_is_named():
    assert S.non_monotonic(_curve([(10, 9000), (20, 7000), (40, 4000), (80, 2500)])) == []
    bumped = _curve([(10, 9000), (20, 7000), (40, 8000), (80, 2500)])
    assert S.non_monotonic(bumped) == [(20, 40, 7000, 8000)]
    assert S.non_monotonic(list(reversed(bumped))) == [(20, 40, 7000, 8000)]  # ef order, whatever the input's
    # a flat stretch (ef below k costs the same) within the tolerance is not a break
    assert S.non_monotonic(_curve([(10, 9000), (16, 9300), (32, 5000)])) == []
    assert S.non_monotonic(_curve([(10, 9000), (16, 9300), (32, 5000)]), tolerance=0.0) == [(10, 16, 9000, 9300)]


@settings(max_examples=60, deadline=None)
@given(st.lists(finite, min_size=1, max_size=8), st.sampled_from([0.0, 0.05, 0.2]))
def test_non_monotonic_agrees_with_a_plain_model(qps, tol):
    pts = _curve([(10 * (i + 1), q) for i, q in enumerate(qps)])
    assert [(a, b) for a, b, _, _ in S.non_monotonic(pts, tol)] == _model_rises(pts, tol)


# ------------------------------------------------------------------ interpolation at a recall target
@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(0.3, 0.999), min_size=2, max_size=7, unique=True),
       st.floats(1e3, 1e5), st.floats(0.5, 8.0), st.floats(0.0, 1.0))
def test_interpolation_is_exact_on_a_curve_log_linear_in_recall(recalls, c, slope, u):
    """QPS = c·exp(-slope·recall): linear in log QPS, so interpolating anywhere between two
    points of the sweep gives the curve's own value."""
    recalls = sorted(recalls)
    pts = [{"ef": 10 * (i + 1), "recall": r, "qps": c * math.exp(-slope * r)} for i, r in enumerate(recalls)]
    target = recalls[0] + u * (recalls[-1] - recalls[0])
    r = M.at_recall(pts, target)
    assert r["qps"] == pytest.approx(c * math.exp(-slope * target), rel=1e-9)
    assert r["bracketed"] is (target > recalls[0])


def test_interpolation_without_a_bracket():
    pts = [{"ef": 10, "recall": 0.96, "qps": 900.0}, {"ef": 20, "recall": 0.99, "qps": 500.0}]
    assert M.at_recall(pts, 0.9) == {"qps": 900.0, "bracketed": False, "how": "ef=10 (already 0.960)"}
    assert M.at_recall(pts, 0.995)["qps"] is None
    # ef order, not QPS order: on a bumped curve the first ef to reach the target is taken
    bumped = [{"ef": 10, "recall": 0.8, "qps": 1000.0}, {"ef": 20, "recall": 0.9, "qps": 400.0},
              {"ef": 40, "recall": 1.0, "qps": 600.0}]
    assert M.at_recall(bumped, 0.95)["qps"] == pytest.approx(math.sqrt(400 * 600))


# ------------------------------------------------------------------ the headline rule
def _passes(recall_qps_passes):
    """A curve from {ef: (recall, [qps per pass])}, its QPS the median of the passes."""
    return [{"ef": ef, "recall": rec, "qps": statistics.median(qs), "qps_passes": list(qs),
             "qps_min": min(qs), "qps_max": max(qs)} for ef, (rec, qs) in recall_qps_passes.items()]


def _model_ratio(ours, anchor, target):
    """The ratio on the median curves, by the log-linear formula written out once more."""
    def at(curve):
        lo, hi = next((a, b) for a, b in zip(curve, curve[1:]) if a["recall"] < target <= b["recall"])
        t = (target - lo["recall"]) / (hi["recall"] - lo["recall"])
        return lo["qps"] ** (1 - t) * hi["qps"] ** t
    return at(ours) / at(anchor)


ANCHOR = _passes({10: (0.90, [1000, 1100, 950]), 20: (1.00, [500, 520, 480])})


def test_a_clear_lead_in_every_pass_is_a_bold_headline():
    ours = _passes({10: (0.90, [1500, 1600, 1400]), 20: (1.00, [800, 850, 700])})
    c = S.compare_at_recall(ours, ANCHOR, 0.95)
    assert c["ratio"] == pytest.approx(_model_ratio(ours, ANCHOR, 0.95))
    per_pass = [_model_ratio([dict(p, qps=p["qps_passes"][i]) for p in ours],
                             [dict(p, qps=p["qps_passes"][i]) for p in ANCHOR], 0.95) for i in range(3)]
    assert (c["lo"], c["hi"], c["passes"]) == (pytest.approx(min(per_pass)), pytest.approx(max(per_pass)), 3)
    assert c["verdict"] == "faster" and c["bold"] and c["why"] == []
    line = S.headline(c, "find() on hnsw vs hnswlib knn_query")
    assert f"**{c['ratio']:.2f}×**" in line and "find() on hnsw vs hnswlib knn_query" in line


def test_passes_straddling_one_say_within_noise_and_no_bold():
    ours = _passes({10: (0.90, [1300, 800, 900]), 20: (1.00, [700, 430, 520])})
    c = S.compare_at_recall(ours, ANCHOR, 0.95)
    assert c["lo"] < 1.0 < c["hi"] and c["verdict"] == "within noise" and not c["bold"]
    assert "**" not in S.headline(c, "x vs y") and "within noise" in S.headline(c, "x vs y")


def test_one_pass_never_makes_a_headline_however_large_the_ratio():
    ours = _passes({10: (0.90, [4000]), 20: (1.00, [2000])})
    anchor = _passes({10: (0.90, [1000]), 20: (1.00, [500])})
    c = S.compare_at_recall(ours, anchor, 0.95)
    assert c["ratio"] == pytest.approx(4.0) and c["verdict"] == "faster" and not c["bold"]
    assert "1 pass" in c["why"][0] and "**" not in S.headline(c, "x vs y")


def test_caveats_and_lower_bounds_keep_the_ratio_plain():
    ours = _passes({10: (0.90, [1500, 1600, 1400]), 20: (1.00, [800, 850, 700])})
    assert not S.compare_at_recall(ours, ANCHOR, 0.95, caveats=["the machine was loaded"])["bold"]
    c = S.compare_at_recall(ours, ANCHOR, 0.85)  # both sweeps start above 0.85: lower bounds only
    assert not c["bold"] and any("lower bound" in w for w in c["why"])
    c = S.compare_at_recall(ours, ANCHOR, 1.01)
    assert c["ratio"] is None and c["verdict"] == "not reached" and "not reached" in S.headline(c, "x vs y")


# ------------------------------------------------------------------ a run judged and reported
def _row(storage, kind, pts, label):
    return {"storage": storage, "label": label, "kind": kind, "m": 16, "ef_construct": 100, "build_s": 0.1,
            "points": [dict(p, load1=0.5) for p in pts]}


def _results(ours_pts, anchor_pts, raw_kind="raw"):
    return {"mode": "quick", "machine": machine.machine_facts(), "skipped": [], "ann_data": "synthetic",
            "ann": [_row("hnsw", "api", ours_pts, 'find() on storage="hnsw"'),
                    _row("ours-raw", raw_kind, ours_pts, "raw kernel HnswGraph.search"),
                    _row("hnswlib-raw", "raw", anchor_pts, "hnswlib knn_query (its Python API)")]}


def test_the_report_names_what_is_compared_and_shows_the_spread(tmp_path):
    ours = _passes({10: (0.90, [1500, 1600, 1400]), 20: (1.00, [800, 850, 700])})
    res = S.assess(_results(ours, ANCHOR), loadavg_samples=[0.5, 1.2], cores=2)
    assert res["warnings"] == [] and res["load"]["loaded"] is False
    labels = {c["label"] for c in res["comparisons"]}
    assert labels == {"find() on hnsw vs hnswlib knn_query", "raw kernel HnswGraph.search vs raw hnswlib knn_query"}
    R.write(res, tmp_path)
    md = (tmp_path / "report.md").read_text()
    assert "| hnsw | 16 | 100 | 0.1 | 20 | 1.000 | 800 | 700–850 |" in md
    assert "recall 0.95, find() on hnsw vs hnswlib knn_query:" in md and "**" in md
    data = json.loads((tmp_path / "results.json").read_text())
    assert data["load"]["max_load1"] == 1.2 and data["warnings"] == []
    assert data["ann"][0]["points"][0]["qps_passes"] == [1500, 1600, 1400]


def test_raw_against_raw_only_where_both_are_raw():
    ours = _passes({10: (0.90, [1500, 1600, 1400]), 20: (1.00, [800, 850, 700])})
    res = S.assess(_results(ours, ANCHOR, raw_kind="api"), loadavg_samples=[0.5], cores=2)
    assert {c["label"] for c in res["comparisons"]} == {"find() on hnsw vs hnswlib knn_query"}


def test_a_loaded_machine_and_a_bumped_curve_are_warned_of_and_nothing_is_bold(tmp_path):
    bumped = _passes({10: (0.90, [1500, 1600, 1400]), 20: (0.97, [700, 650, 720]), 40: (1.00, [900, 880, 950])})
    anchor = _passes({10: (0.90, [1000, 1100, 950]), 20: (0.97, [500, 520, 480]), 40: (1.00, [300, 310, 290])})
    res = S.assess(_results(bumped, anchor), loadavg_samples=[0.9, 3.4], cores=2)
    assert res["load"]["loaded"] and len(res["warnings"]) == 3  # the load, hnsw's and ours-raw's curves
    assert "3.40" in res["warnings"][0] and "ef 20→40" in res["warnings"][1]
    assert all(not c["bold"] for c in res["comparisons"])
    R.write(res, tmp_path)
    md = (tmp_path / "report.md").read_text()
    assert "## Warnings" in md and "WARNING: the machine was loaded" in md and "**" not in md
    assert json.loads((tmp_path / "results.json").read_text())["load"]["loaded"] is True
