"""find(vector=q) with every other option at its default (the call storages answer in one native
call) against the same find through the general path and against a numpy brute-force model.

The general path is reached with min_score=-inf, which keeps every hit: the same ranking, so any
difference in hits, scores or refusal is the fast path's. Hostile queries (NaN, inf, wrong
dimension, the zero vector, norms beyond the bounds, lists, float64, non-contiguous, byte-swapped,
unaligned, 2-d) must be refused with the same typed error and sentence, or answered the same;
bad options beside a clean query must still raise.
"""
from typing import Optional

import numpy as np
import pytest

import hybridsearch as hs
from tests.models import check_topk, exact_scores

DIM, N = 6, 120
GENERAL = {"min_score": float("-inf")}


class Vec(hs.Document):
    embedding: hs.Vector[DIM]


@pytest.fixture(scope="module", params=[("memory", "cosine"), ("memory", "l2"), ("sqlite", "ip"), ("hnsw", "cosine"),
                                        ("hnsw", "ip"), ("hnsw", "l2")], ids=lambda p: "-".join(p))
def case(request, tmp_path_factory):
    storage, metric = request.param
    rng = np.random.default_rng(11)
    X = rng.standard_normal((N, DIM)).astype(np.float32)
    ids = [f"v{i}" for i in range(N)]
    # ef above N: the walk reaches every node, so the model's exact top-k is the answer
    extra = {"hnsw": {"ef": 200}, "sqlite": {"path": tmp_path_factory.mktemp("fast") / "db.sqlite"}}
    da = hs.DocumentArray(Vec, storage=storage, metric=metric, **extra.get(storage, {}))
    da.extend_columns({"id": ids, "embedding": X})
    da.delete(["v3", "v77"])  # tombstones: the scan must skip them
    keep = [i for i in range(N) if ids[i] not in ("v3", "v77")]
    yield da, X[keep], [ids[i] for i in keep], metric
    da.close()


def outcome(da, q, **options):
    try:
        res = da.find(vector=q, **options)
        parts = {name: (a.dtype, a.tolist()) for name, a in res.part_scores.items()}
        return "hits", res.ids, res.scores.dtype, res.scores.tolist(), parts
    except hs.HybridSearchError as e:
        return type(e).__name__, str(e)


def unaligned(v: np.ndarray) -> np.ndarray:
    buf = np.zeros(v.nbytes + 1, dtype=np.uint8)
    a = np.frombuffer(buf.data, dtype=v.dtype, count=len(v), offset=1)
    a[:] = v
    assert not a.flags.aligned
    return a


def clean_forms(q: np.ndarray) -> dict:
    """One query in every form find() takes; each must give the answer of the float32 array."""
    return {"float32": q, "float64": q.astype(np.float64), "list": q.tolist(), "tuple": tuple(q.tolist()),
            "2-d (1, d)": q.reshape(1, -1), "non-contiguous": np.repeat(q, 2)[::2],
            "byte-swapped": q.astype(">f4"), "unaligned": unaligned(q), "fortran 2-d": np.asfortranarray(q.reshape(1, -1)),
            "read-only": np.frombuffer(q.tobytes(), dtype=np.float32), "int": np.round(q * 10).astype(np.int64)}


@pytest.mark.parametrize("k", [1, 5, 200])
def test_clean_queries_match_the_model_and_the_general_path(case, k):
    da, X, ids, metric = case
    rng = np.random.default_rng(k)
    for _ in range(5):
        q = rng.standard_normal(DIM).astype(np.float32)
        for form, value in clean_forms(q).items():
            got = outcome(da, value, limit=k)
            assert got == outcome(da, value, limit=k, **GENERAL), form
            assert got[0] == "hits" and got[2] == np.float32, form
            ref = exact_scores(X, np.asarray(value, dtype=np.float32).reshape(-1), metric)
            check_topk(got[1], got[3], ids, ref, k)


BAD = {
    "nan": [1.0, np.nan, 0, 0, 0, 0], "inf": [np.inf, 1, 0, 0, 0, 0], "-inf": [0, 0, 0, 0, 0, -np.inf],
    "short": [1.0] * (DIM - 1), "long": [1.0] * (DIM + 1), "empty": [], "huge": [1e16] + [0] * (DIM - 1),
    "beyond float32": [3.5e38] + [0] * (DIM - 1), "tiny": [1e-16] + [0] * (DIM - 1),
    "float32 max": [3.4e38] * DIM, "subnormal": [1e-45] * DIM, "edge low": [1.0001e-15] + [0] * (DIM - 1),
    "edge high": [9.99e14] + [0] * (DIM - 1), "zero": [0.0] * DIM, "negative zero": [-0.0] * DIM,
}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", list(BAD))
def test_hostile_values_are_refused_or_answered_as_the_general_path_does(case, name, dtype):
    da = case[0]
    with np.errstate(all="ignore"):
        q = np.array(BAD[name], dtype=dtype)
    for value in (q, q.reshape(1, -1), BAD[name]):
        got = outcome(da, value, limit=5)
        assert got == outcome(da, value, limit=5, **GENERAL), (name, value)
        if name not in ("zero", "negative zero", "edge low", "edge high", "float32 max", "subnormal"):
            assert got[0] == "SchemaError", (name, got)


@pytest.mark.parametrize("value", [np.ones((2, DIM), np.float32), np.ones((1, 1, DIM), np.float32), np.float32(1.0),
                                   1.0, "abc", np.array(["a"] * DIM), {"a": 1}, [[1.0] * DIM, [1.0] * DIM],
                                   [None] * DIM, np.ones((DIM, 1), np.float32)],
                         ids=lambda v: type(v).__name__ + str(getattr(v, "shape", "")))
def test_queries_of_the_wrong_shape_or_type_are_refused_as_the_general_path_does(case, value):
    da = case[0]
    got = outcome(da, value, limit=5)
    assert got == outcome(da, value, limit=5, **GENERAL)
    # a dict is the named form of API.md section 10: {"a": ...} names no vector field
    assert got[0] == ("ConfigError" if isinstance(value, dict) else "SchemaError"), got


@pytest.mark.parametrize("value", [np.ones(DIM, dtype=object), np.ones(DIM, dtype=np.float16), np.ones(DIM, np.int8),
                                   np.ones(DIM, dtype=bool), np.arange(DIM, dtype=np.uint64), np.ones(DIM, np.longdouble)],
                         ids=lambda v: str(v.dtype))
def test_other_array_types_are_answered_as_the_general_path_does(case, value):
    da = case[0]
    assert outcome(da, value, limit=5) == outcome(da, value, limit=5, **GENERAL)


@pytest.mark.parametrize("bad", [{"limit": -1}, {"limit": 1.5}, {"limit": "3"}, {"limit": None}, {"ef": 0},
                                 {"ef": 2**30}, {"ef": 1.0}, {"fusion": "bogus"}, {"candidates": 0}, {"rrf_k": -1},
                                 {"weights": {"bogus": 1}}, {"text_fields": {"x": 1.0}}, {"operator": "xor"},
                                 {"offset": -1}, {"offset": 0.5}, {"min_score": "x"}, {"sort": [("id", "asc")]},
                                 {"filter": {"bogus": 1}}, {"text": 3}],
                         ids=lambda b: repr(b))
def test_a_bad_option_beside_a_clean_query_still_raises(case, bad):
    """The list form never takes the fast path: the same refusal from both."""
    da = case[0]
    q = np.ones(DIM, np.float32)
    got = outcome(da, q, **bad)
    assert got[0] in ("ConfigError", "SchemaError", "FilterError", "UnsupportedError"), got
    assert got == outcome(da, q.tolist(), **bad)


def test_options_that_keep_the_meaning_give_the_same_hits(case):
    """limit, ef and exact set; offset=0, the default fusion and candidates given explicitly."""
    da, X, ids, metric = case
    q = np.random.default_rng(5).standard_normal(DIM).astype(np.float32)
    ref = exact_scores(X, q, metric)
    for options in ({"limit": 7, "ef": 150}, {"limit": 7, "exact": True}, {"limit": 7, "offset": 0},
                    {"limit": 7, "fusion": "sum", "candidates": 100, "rrf_k": 60, "operator": "or"},
                    {"limit": 7, "exact": 1}, {"limit": np.int64(7)}):
        got = outcome(da, q, **options)
        assert got == outcome(da, q, **options, **GENERAL), options
        check_topk(got[1], got[3], ids, ref, 7)


def test_a_closed_collection_refuses(case, tmp_path):
    storage = case[0].storage
    da = hs.DocumentArray(Vec, storage=storage, **({"path": tmp_path / "db.sqlite"} if storage == "sqlite" else {}))
    da.extend([{"id": "a", "embedding": [1.0] * DIM}])
    da.close()
    with pytest.raises(hs.ConfigError, match="closed"):
        da.find(vector=np.ones(DIM, np.float32))


def test_an_empty_collection_and_one_without_vectors():
    class Opt(hs.Document):
        embedding: Optional[hs.Vector[DIM]] = None  # optional: rows without a vector are no vector hits

    for storage in ("memory", "hnsw"):
        assert outcome(hs.DocumentArray(Vec, storage=storage), np.ones(DIM, np.float32)) == \
            ("hits", [], np.float32, [], {"vector": (np.float32, [])})
        da = hs.DocumentArray(Opt, storage=storage)
        da.extend([{"id": "a", "embedding": [1.0] * DIM}, {"id": "b"}])
        assert outcome(da, np.ones(DIM, np.float32), limit=5)[1] == ["a"]
