"""storage="hnsw" with quantization="rabitq1" / "rabitq4": the walk ranks by RaBitQ codes and
returns float32 scores. Public API only, against numpy.

The whole contract suite runs on a 1-bit walk with vectors on disk too ("hnsw-rq" in
tests/conftest.py, with the kill -9 and follower tests); these tests check what that does not:
answers and scores against numpy over a larger collection with rewrites, deletes and reopens, the
options' errors, and the quantization a reopened collection keeps."""
import numpy as np
import pytest

import hybridsearch as hs
from tests.conftest import STORAGES

pytestmark = pytest.mark.skipif("hnsw" not in STORAGES, reason="HS_TEST_STORAGES leaves out hnsw")
DIM = 24


class Doc(hs.Document):
    v: hs.Vector[DIM]
    tag: int = 0


def rows(n, seed):
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(6, DIM)) * 2
    return (centres[rng.integers(0, 6, n)] + rng.normal(size=(n, DIM))).astype(np.float32)


def numpy_top(model: dict, q: np.ndarray, k: int, metric: str, where=None):
    keys = sorted(key for key in model if where is None or where(model[key][1]))
    X = np.stack([model[key][0] for key in keys]).astype(np.float64)
    qd = q.astype(np.float64)
    if metric == "l2":
        s = -np.sqrt(((X - qd) ** 2).sum(1))
    else:
        s = (X / np.linalg.norm(X, axis=1, keepdims=True)) @ (qd / np.linalg.norm(qd))
    order = np.lexsort((keys, -s))[:k]
    return [keys[i] for i in order], s[order]


@pytest.mark.parametrize("quant", ["rabitq1", "rabitq4"])
@pytest.mark.parametrize("metric", ["l2", "cosine"])
def test_answers_and_scores_against_numpy_through_writes_and_reopens(quant, metric, tmp_path):
    path = tmp_path / "c"
    opts = dict(storage="hnsw", path=path, metric=metric, quantization=quant, ef=400, rescore=float("inf"))
    model = {}
    X = rows(1500, 1)
    da = hs.DocumentArray(Doc, **opts)
    da.extend_columns({"id": [f"d{i}" for i in range(1000)], "v": X[:1000], "tag": [i % 3 for i in range(1000)]})
    model.update({f"d{i}": (X[i], i % 3) for i in range(1000)})
    da.delete([f"d{i}" for i in range(0, 1000, 7)])
    for i in range(0, 1000, 7):
        model.pop(f"d{i}")
    da.close()  # a snapshot holds the codes
    da = hs.DocumentArray(Doc, **opts)
    moved = [f"d{i}" for i in range(1, 1000, 5)]
    M = rows(len(moved), 9)  # new vectors for rewritten ids
    da.extend_columns({"id": moved + [f"d{i}" for i in range(1000, 1500)],
                       "v": np.concatenate([M, X[1000:]]), "tag": [7] * len(moved) + [1] * 500})
    for j, key in enumerate(moved):
        model[key] = (M[j], 7)
    model.update({f"d{i}": (X[i], 1) for i in range(1000, 1500)})
    rng = np.random.default_rng(2)
    for reopen in (False, True):
        if reopen:  # from the log this time (no close: the writes since the snapshot replay)
            da2 = hs.DocumentArray(Doc, storage="hnsw", path=path, metric=metric, read_only=True, ef=400,
                                   rescore=float("inf"))
        else:
            da2 = da
        assert da2.stats()["quantization"] == quant
        for _ in range(5):
            q = rng.normal(size=DIM).astype(np.float32) * 2
            want_ids, want_s = numpy_top(model, q, 10, metric)
            for exact in (False, True):
                res = da2.find(vector=q, limit=10, exact=exact)
                assert np.allclose(res.scores, want_s, rtol=1e-4, atol=1e-4), (exact, reopen)
                assert res.ids == want_ids, (exact, reopen)
            fid, fs = numpy_top(model, q, 5, metric, where=lambda tag: tag == 7)
            res = da2.find(vector=q, limit=5, filter={"tag": {"$eq": 7}})
            assert np.allclose(res.scores, fs, rtol=1e-4, atol=1e-4)
        if reopen:
            da2.close()
    da.close()


def test_a_4bit_walk_keeps_recall_with_the_default_bound(tmp_path):
    X = rows(4000, 3)
    da = hs.DocumentArray(Doc, storage="hnsw", metric="l2", quantization="rabitq4", ef=100)
    da.extend_columns({"id": [f"d{i}" for i in range(len(X))], "v": X})
    model = {f"d{i}": (X[i], 0) for i in range(len(X))}
    rng = np.random.default_rng(4)
    hits = 0
    for _ in range(30):
        q = rng.normal(size=DIM).astype(np.float32) * 2
        want, want_s = numpy_top(model, q, 10, "l2")
        res = da.find(vector=q, limit=10)
        hits += len(set(res.ids) & set(want))
        # every score is the document's own float32 distance, whatever the walk found
        got = np.array([-np.linalg.norm(model[i][0].astype(np.float64) - q) for i in res.ids])
        assert np.allclose(res.scores, got, rtol=1e-4, atol=1e-4)
    assert hits / 300 >= 0.9, hits / 300


def test_quantization_options_and_what_a_reopen_keeps(tmp_path):
    with pytest.raises(hs.ConfigError, match="quantization"):
        hs.DocumentArray(Doc, storage="hnsw", quantization="rabitq2")
    with pytest.raises(hs.ConfigError, match="rescore"):
        hs.DocumentArray(Doc, storage="hnsw", quantization="rabitq4", rescore=-1)
    path = tmp_path / "c"
    X = rows(300, 5)
    with hs.DocumentArray(Doc, storage="hnsw", path=path, metric="l2", quantization="rabitq4") as da:
        da.extend_columns({"id": [f"d{i}" for i in range(300)], "v": X})
    with pytest.raises(hs.BackendError, match="rabitq4"):
        hs.DocumentArray(Doc, storage="hnsw", path=path, metric="l2", quantization="int8")
    with hs.DocumentArray(Doc, storage="hnsw", path=path, metric="l2") as da:  # "auto": what the files hold
        assert da.stats()["quantization"] == "rabitq4"
        assert len(da) == 300
        assert da.find(vector=X[17], limit=1).ids == ["d17"]
