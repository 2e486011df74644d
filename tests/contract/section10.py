"""What the section-10 field suites (test_sparse_vectors.py, test_multi_vectors.py) share: the
write sequences they replay across close/reopen (one strategy of operations and one replay loop
against a dict model, fed by each suite with how its field's values are written and read back),
and the refusal of the storages that hold no such field. Public API only."""
import math

import numpy as np
import pytest
from hypothesis import strategies as st

import hybridsearch as hs
from tests.conftest import STORAGES
from tests.models import check_topk

# the storages that hold one dense field and nothing else of section 10 (API.md)
REFUSING = [s for s in ("hnswlib", "annlite") if s in STORAGES]
# the remote storages refusing a section-10 kind at open (weaviate: sparse vectors), from the
# storage's description: no node answers there
REMOTE = (("weaviate", {"url": "http://127.0.0.1:9"}),)


def assert_refused_at_open(schema, kind: str, field: str, storage: str, tmp_path) -> None:
    """`storage` (of REFUSING) refuses `schema` at open, naming the kind (e.g. "hs.SparseVector")
    and one field of it."""
    opts = {"path": tmp_path / "a"} if storage == "annlite" else {}
    with pytest.raises(hs.UnsupportedError, match=f"storage '{storage}' does not hold {kind} fields "
                                                  rf"\({schema.__name__}.{field} is one\)"):
        hs.DocumentArray(schema, storage=storage, **opts)


def assert_remote_storages_refuse(schema, kind: str) -> None:
    """Every remote storage of REMOTE refuses `schema` at open, before connecting (skipped from the
    first whose client is not installed here)."""
    for storage, opts in REMOTE:
        try:
            with pytest.raises(hs.UnsupportedError, match=f"storage '{storage}' does not hold {kind}"):
                hs.DocumentArray(schema, storage=storage, **opts)
        except hs.ConfigError as e:  # its client is not installed here, or it takes other options
            pytest.skip(str(e))

# storage id -> (storage name, file name under the test's folder) of the storages with files
PERSISTENT = {"memory-path": ("memory", "col"), "hnsw-path": ("hnsw", "col"), "sqlite": ("sqlite", "col.db"),
              "qdrant-path": ("qdrant", "col")}


def write_ops(values) -> st.SearchStrategy:
    """Lists of (op, arg, value): add ids, update one id, delete one id, update_many by tag,
    reopen; `values` draws the field's value (or what a suite turns into one)."""
    return st.lists(st.one_of(
        st.tuples(st.just("add"), st.lists(st.integers(0, 15), min_size=1, max_size=6, unique=True), values),
        st.tuples(st.just("update"), st.integers(0, 15), values),
        st.tuples(st.just("delete"), st.integers(0, 15), st.none()),
        st.tuples(st.just("update_many"), st.sampled_from("abc"), values),
        st.tuples(st.just("reopen"), st.none(), st.none()),
    ), min_size=1, max_size=12)


def replay(storage: str, path, ops, open_at, field: str, value_of, scaled, model_of, check) -> None:
    """Runs `ops` on a collection opened by open_at(storage, path, **opts) and checks it against a
    dict model after every step, a read-only opener before every reopen (not on qdrant: one
    opener, its write-ahead log is locked) and a last reopen at the end. value_of(drawn) is the
    field's value, scaled(value, i) document i's value of an added batch (so documents differ),
    model_of(value) what reading it back must give, check(da, model) the comparison."""
    da = open_at(storage, path)
    model: dict = {}
    for op, arg, drawn in ops:
        value = None if drawn is None else value_of(drawn)
        if op == "add":
            docs = [{"id": f"d{i}", "tag": "abc"[i % 3], "emb": [1.0, i, 0, 0], field: scaled(value, i)} for i in arg]
            da.extend(docs)
            model.update({d["id"]: {"tag": d["tag"], field: model_of(d[field])} for d in docs})
        elif op == "update" and f"d{arg}" in model:
            da.update(f"d{arg}", **{field: value})
            model[f"d{arg}"][field] = model_of(value)
        elif op == "delete":
            da.delete([f"d{arg}"])
            model.pop(f"d{arg}", None)
        elif op == "update_many":
            da.update_many({"tag": arg}, **{field: value})
            for m in model.values():
                if m["tag"] == arg:
                    m[field] = model_of(value)
        elif op == "reopen":
            if PERSISTENT[storage][0] != "qdrant":
                with open_at(storage, path, read_only=True) as ro:
                    check(ro, model)
            da.close()
            da = open_at(storage, path)
        check(da, model)
    da.close()
    with open_at(storage, path) as again:
        check(again, model)


def assert_topk_of(res, model: dict, k: int) -> None:
    """The hits are the top-k of `model` (id -> score of every document the list matches): no
    document outside it is a hit (one without the field, or sharing no key)."""
    ids = list(model)
    check_topk(res.ids, res.scores, ids, np.array([model[i] for i in ids]), k)
    assert set(res.ids) <= set(model)


def assert_fused(res, fused, parts, k):
    """The hits are the fusion model's top-k (scores equal, nothing better left out) with its
    parts (NaN where the model has NaN)."""
    assert len(res) == min(k, len(fused))
    for i, s in zip(res.ids, res.scores):
        assert math.isclose(float(s), fused[i], rel_tol=1e-4, abs_tol=1e-5), (i, s, fused[i])
    if len(res):
        kth = float(res.scores[-1])
        assert all(v <= kth + 1e-4 * max(1.0, abs(kth)) for i, v in fused.items() if i not in set(res.ids))
    assert list(res.scores) == sorted(res.scores, reverse=True)
    assert set(res.part_scores) == set(parts)
    for name, want in parts.items():
        got = res.part_scores[name]
        assert len(got) == len(res)
        for i, g in zip(res.ids, got.tolist()):
            if math.isnan(want[i]):
                assert math.isnan(g), (name, i, g)
            else:
                assert math.isclose(g, want[i], rel_tol=1e-4, abs_tol=1e-5), (name, i, g, want[i])
    return fused, parts
