"""benchmarks/bench_disk_vectors.py (the growth run to millions of vectors) at a tiny size: the
same code as the full run, checked for its output's shape and sanity, never for speeds; and its
blocked float64 ground truth against numpy over the whole block."""
import json
import subprocess
import sys

import numpy as np
import pytest

from tests.bench.scripts import BENCHMARKS, bench_script

SCRIPT = BENCHMARKS / "bench_disk_vectors.py"


def _script():
    return bench_script("bench_disk_vectors")


def test_blocked_truth_is_numpy_top_k_over_the_whole_block():
    rng = np.random.default_rng(5)
    X, Q = rng.standard_normal((2300, 12)).astype(np.float32), rng.standard_normal((7, 12)).astype(np.float32)
    d = ((Q[:, None, :].astype(np.float64) - X[None].astype(np.float64)) ** 2).sum(-1)
    want = np.argsort(d, axis=1, kind="stable")[:, :10]
    np.testing.assert_array_equal(_script().truth(X, Q, 10, block=500), want)
    np.testing.assert_array_equal(_script().truth(X[:7], Q, 10, block=3)[:, :7], np.argsort(d[:, :7], 1, kind="stable"))


def test_sizes_are_sorted_and_unique():
    assert _script().sizes("2000,1000,2000") == [1000, 2000]


def test_growth_run_at_a_tiny_size(tmp_path):
    pytest.importorskip("matplotlib")
    out = tmp_path / "out"
    run = subprocess.run([sys.executable, str(SCRIPT), "--n", "1500,3000", "--dim", "16", "--queries", "30",
                          "--modes", "disk-rabitq4,ram", "--ef", "10,200", "--batch", "1000", "--out", str(out),
                          "--dir", str(tmp_path / "work")], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    rows = json.loads((out / "disk_vectors.json").read_text())["rows"]
    assert [(r["n"], r["mode"]) for r in rows] == [(1500, "disk-rabitq4"), (1500, "ram"), (3000, "disk-rabitq4"), (3000, "ram")]
    for r in rows:
        assert [p["ef"] for p in r["sweep"]] == [10, 200]
        assert r["sweep"][1]["recall"] >= 0.97, r  # a beam of 200 over 3,000 rows finds (nearly) all
        for p in r["sweep"]:
            assert 0 < p["p50_ms"] <= p["p99_ms"] and p["qps"] > 0
        assert r["float32_bytes"] == r["n"] * 16 * 4 and r["build_s"] > 0
    assert (out / "growth.png").stat().st_size > 10_000
    assert "| 3,000 | ram |" in run.stdout
