"""benchmarks/bench_ecommerce.py (the e-commerce workload at 1M products) at a tiny size: the
same code as the full run, checked for its output's shape and sanity, never for speeds; and the
numpy brute-force reference its recall is measured against."""
import json

import numpy as np
import pytest

from hybridsearch.bench import metrics as M
from hybridsearch.bench.adapters import remote
from hybridsearch.bench.adapters.anchors import installed
from tests.bench.scripts import bench_script

QUERIES = ["lexical", "lexical + filter", "vector", "vector + filter", "hybrid", "hybrid + filter"]


def _script():
    return bench_script("bench_ecommerce")


def test_numpy_topk_is_the_exact_top_k():
    from hybridsearch.engine.exact import exact_topk
    rng = np.random.default_rng(3)
    X, Q = rng.standard_normal((2500, 24)).astype(np.float32), rng.standard_normal((6, 24)).astype(np.float32)
    for metric in ("cosine", "ip", "l2"):
        np.testing.assert_array_equal(M.numpy_topk(X, Q, 10, metric, chunk=700), exact_topk(X, Q, 10, metric)[1])
    allowed = np.zeros(len(X), dtype=bool)
    allowed[[5, 900, 2400]] = True
    ids = M.numpy_topk(X, Q, 10, "cosine", allowed, chunk=700)
    assert (np.sort(ids[:, :3], axis=1) == [5, 900, 2400]).all() and (ids[:, 3:] == -1).all()


def test_the_rows_run_in_order():
    plan = _script().plan
    assert plan(["hnsw", "elasticsearch"], 1000, 200, True) == [("hnsw", 1000), ("hnsw", 200), ("elasticsearch", 200)]
    assert plan(["hnsw", "elasticsearch"], 1000, 200, False) == [("hnsw", 1000), ("elasticsearch", 200)]
    assert plan(["hnsw"], 1000, 200, True) == [("hnsw", 1000)]


def test_bench_ecommerce_at_a_tiny_size(tmp_path, monkeypatch):
    """1,500 products, 20 queries, threads 1 and 2, on hnsw (and Elasticsearch when a node answers
    at HS_ES_URL and its client is installed: the benchmark never starts one)."""
    monkeypatch.setenv("HS_CACHE", str(tmp_path / "cache"))
    es = remote.find_node("elasticsearch")[0] is not None and installed("elasticsearch")
    storages = "hnsw,elasticsearch" if es else "hnsw"
    out = tmp_path / "out"
    assert _script().main(["--n", "1500", "--es-n", "1200", "--queries", "20", "--threads", "1,2", "--dim", "384",
                           "--storages", storages, "--updates", "50", "--out", str(out)]) == 0
    data = json.loads((out / "ecommerce.json").read_text())
    rows = data["rows"]
    assert [(r["storage"], r["n"]) for r in rows] == ([("hnsw", 1500), ("hnsw", 1200), ("elasticsearch", 1200)]
                                                      if es else [("hnsw", 1500)])
    for r in rows:
        assert "error" not in r, r
        assert r["dim"] == 384 and r["embedder"] == "projection-384" and r["feed_mode"] == "columns"
        for w in ("feed", "re-feed", "partial update price"):
            assert r["writes"][w]["qps"] > 0 and r["writes"][w]["seconds"] > 0, (w, r["writes"])
        assert r["peak_rss_bytes"] > 0 and len(r["load_before"]) == 3
        assert list(r["queries"]) == QUERIES
        for q, runs in r["queries"].items():
            assert [x["threads"] for x in runs] == [1, 2], q
            for x in runs:
                assert x["qps"] > 0 and x["qps_per_core"] > 0 and x["p99_ms"] >= x["p50_ms"] > 0, (q, x)
        assert set(r["recall"]) == {"vector", "vector + filter"}
        for q, v in r["recall"].items():
            assert 0.0 <= v["recall"] <= 1.0 and v["violations"] == 0, (q, v)
        assert r["recall"]["vector + filter"]["recall"] >= 0.9  # ~90 matches: scanned exactly by the planner
    if es:
        agree = rows[-1]["overlap_with_hnsw"]
        assert set(agree) == set(QUERIES) and all(0.0 <= v <= 1.0 for v in agree.values())
    md = (out / "ecommerce.md").read_text()
    assert "### Writes" in md and "### Queries" in md and "extend_columns, 10,000 per call" in md
    assert (out / "ecommerce.txt").read_text().startswith("machine: ")
