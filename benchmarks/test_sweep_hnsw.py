"""Recall@10 vs QPS sweep with pytest-benchmark over m, ef_construct and ef for every ANN storage.

    pytest benchmarks/ --benchmark-only --benchmark-json=sweep.json     # HS_SWEEP_N=20000 by default
    hybridsearch bench sweep-report sweep.json --out sweep-out          # -> sweep.md + recall_vs_qps.png
    HS_SWEEP_STORAGES=annlite pytest benchmarks/ --benchmark-only ...   # annlite in its own process

Each benchmark times one pass over the queries (one query per call, one thread); recall@10
against exact ground truth (ties counted as found) is stored in `extra_info`.
"""
import os
import tempfile

import numpy as np
import pytest

import hybridsearch as hs
from hybridsearch.bench import datasets as D
from hybridsearch.bench import metrics as M

N = int(os.environ.get("HS_SWEEP_N", "20000"))
NQ = int(os.environ.get("HS_SWEEP_QUERIES", "200"))
STORAGES = os.environ.get("HS_SWEEP_STORAGES", "hnsw,hnswlib").split(",")
_X, _Q = D.sift_like(N, NQ)
_GT = D.ground_truth(_X, _Q, 10, "l2")
_BUILT: dict = {}
_TMP = tempfile.mkdtemp(prefix="hs-sweep-")


class Item(hs.Document):
    v: hs.Vector[128]


def _index(storage, m, efc):
    key = (storage, m, efc)
    if key not in _BUILT:
        for old in list(_BUILT):  # one index in memory at a time
            _BUILT.pop(old).close()
        opts = {"metric": "l2", "m": m, "ef_construct": efc, "ef": 64}
        if storage == "annlite":
            opts["path"] = os.path.join(_TMP, f"a-{m}-{efc}")
        da = hs.DocumentArray(Item, storage=storage, **opts)
        for a in range(0, N, 10000):
            da.extend([{"id": str(i), "v": _X[i]} for i in range(a, min(N, a + 10000))])
        _BUILT[key] = da
    return _BUILT[key]


@pytest.mark.parametrize("storage", STORAGES)
@pytest.mark.parametrize("m", [16, 32])
@pytest.mark.parametrize("ef_construct", [64, 128, 256])
@pytest.mark.parametrize("ef", [32, 64, 128, 256])
def test_sweep(benchmark, storage, m, ef_construct, ef):
    da = _index(storage, m, ef_construct)
    found = [[int(i) for i in da.find(vector=q, limit=10, ef=ef).ids] for q in _Q]
    scores = [-np.sqrt(((_X[f].astype(np.float64) - q) ** 2).sum(axis=1)) for q, f in zip(_Q, found)]
    recall = float(np.mean([M.recall_at_k(f, gi, gs, 10, s) for f, gi, gs, s in zip(found, *_GT, scores)]))
    benchmark.group = f"{storage} m={m} efc={ef_construct}"
    benchmark.extra_info.update({"storage": storage, "m": m, "ef_construct": ef_construct, "ef": ef,
                                 "recall": recall, "queries": len(_Q), "n": N})

    def one_pass():
        for q in _Q:
            da.find(vector=q, limit=10, ef=ef)

    benchmark.pedantic(one_pass, rounds=3, warmup_rounds=1)
    assert recall > 0.5  # a broken index would not be worth timing
