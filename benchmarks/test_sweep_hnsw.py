"""Recall@10 vs QPS sweep with pytest-benchmark over m, ef_construct and ef for every ANN storage.

    pytest benchmarks/ --benchmark-only --benchmark-json=sweep.json     # HS_SWEEP_N=20000 by default
    hybridsearch bench sweep-report sweep.json --out sweep-out          # -> sweep.md + recall_vs_qps.png
    HS_SWEEP_STORAGES=annlite pytest benchmarks/ --benchmark-only ...   # annlite in its own process

Each benchmark times one pass over the queries (one query per call, one thread); recall@10
against exact ground truth (ties counted as found) is stored in `extra_info`.
"""
import os

import pytest

from hybridsearch.bench import vectors as V
from hybridsearch.bench.adapters.anchors import cpu_count
from hybridsearch.bench.adapters.base import GraphConfig
from hybridsearch.bench.metrics import mean_recall
from hybridsearch.bench.workloads.ann import adapter

N = int(os.environ.get("HS_SWEEP_N", "20000"))
NQ = int(os.environ.get("HS_SWEEP_QUERIES", "200"))
STORAGES = os.environ.get("HS_SWEEP_STORAGES", "hnsw,hnswlib").split(",")
BUILT: dict = {}  # (storage, m, ef_construct) -> the one index kept built


@pytest.fixture(scope="module")
def data():
    X, Q = V.sift_like(N, NQ)
    return X, Q, V.ground_truth(X, Q, 10, "l2")[0]


def built(storage, m, efc, X, tmp):
    if (storage, m, efc) not in BUILT:
        for old in list(BUILT):  # one index in memory at a time
            BUILT.pop(old).close()
        a = adapter(storage, str(tmp), ef=64)
        a.build_timed(X, None, "l2", GraphConfig(m, efc, cpu_count()))
        BUILT[(storage, m, efc)] = a
    return BUILT[(storage, m, efc)]


@pytest.mark.parametrize("storage", STORAGES)
@pytest.mark.parametrize("m", [16, 32])
@pytest.mark.parametrize("ef_construct", [64, 128, 256])
@pytest.mark.parametrize("ef", [32, 64, 128, 256])
def test_sweep(benchmark, data, tmp_path_factory, storage, m, ef_construct, ef):
    X, Q, gt = data
    a = built(storage, m, ef_construct, X, tmp_path_factory.getbasetemp())
    search, rows = a.searcher(10, ef), a.rows(Q)
    recall = mean_recall(X, Q, [a.ids(search(q)) for q in rows], gt, "l2")[0]
    benchmark.group = f"{storage} m={m} efc={ef_construct}"
    benchmark.extra_info.update({"storage": storage, "m": m, "ef_construct": ef_construct, "ef": ef,
                                 "recall": recall, "queries": len(Q), "n": N})
    benchmark.pedantic(lambda: [search(q) for q in rows], rounds=3, warmup_rounds=1)
    assert recall > 0.5  # a broken index would not be worth timing
