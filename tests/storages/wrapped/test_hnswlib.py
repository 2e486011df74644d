"""storage="hnswlib": recall against numpy brute force, deletes / re-adds, growth, filters.

Through the public API: the index's side (elements, capacity, current ef) is read from
da.stats(); which hnswlib calls a write makes, and hnswlib failing, are observed and caused
on the hnswlib.Index class itself (the wrapped library's own methods), never on our objects."""
import threading
from typing import Optional

import numpy as np
import pytest

import hybridsearch as hs
from tests.models import check_topk, clustered, exact_scores, top_rows

hnswlib = pytest.importorskip("hnswlib")

OPTS = dict(m=16, ef_construct=200, ef=64)


def _schema(d, optional=False):
    if optional:
        class O(hs.Document):
            group: int = 0
            v: Optional[hs.Vector[d]] = None
        return O

    class V(hs.Document):
        group: int = 0
        v: hs.Vector[d]
    return V


def _clustered(rng, n, d, spread=0.35):
    return clustered(n, d, spread=spread, rng=rng)


def _fill(da, X, group=None, batch=1000, start=0, stop=None):
    """Upserts rows [start, stop) of X as ids v{row}."""
    stop = len(X) if stop is None else stop
    for lo in range(start, stop, batch):
        da.extend([{"id": f"v{i}", "v": X[i], "group": int(group[i]) if group is not None else 0}
                   for i in range(lo, min(lo + batch, stop))])


def _recall(got, ref):
    return len(set(got) & set(ref)) / max(len(ref), 1)


def _top_ids(X, q, metric, k, rows=None):
    return [f"v{r}" for r in top_rows(X, q, metric, k, rows)]


@pytest.fixture
def arrays():
    opened = []

    def make(schema, **options):
        da = hs.DocumentArray(schema, storage="hnswlib", **options)
        opened.append(da)
        return da

    yield make
    for da in opened:
        da.close()


def _record_hnswlib_calls(monkeypatch, fail=None) -> list:
    """From now on in this test, the names of the hnswlib.Index methods that change or search an
    index, as they are called (the test's own collection holds the only index); `fail(queries)`
    makes knn_query raise for chosen queries, as hnswlib does when it finds too few neighbours."""
    calls = []
    for name in ("add_items", "mark_deleted", "knn_query", "resize_index"):
        def call(self, *args, _name=name, _real=getattr(hnswlib.Index, name), **kwargs):
            calls.append(_name)
            if _name == "knn_query" and fail is not None and fail(args[0]):
                raise RuntimeError("Cannot return the results in a contiguous 2D array")
            return _real(self, *args, **kwargs)
        monkeypatch.setattr(hnswlib.Index, name, call)
    return calls


# ------------------------------------------------------------------ recall
@pytest.mark.parametrize("metric", ["cosine", "ip", "l2"])
def test_recall_at_10_against_numpy(arrays, rng, metric):
    X = _clustered(rng, 5000, 32)
    da = arrays(_schema(32), metric=metric, **OPTS)
    _fill(da, X)
    Q = _clustered(np.random.default_rng(7), 200, 32)
    recalls = []
    for q in Q:
        res = da.find(vector=q, limit=10)
        assert len(res) == 10 and len(set(res.ids)) == 10
        recalls.append(_recall(res.ids, _top_ids(X, q, metric, 10)))
        # scores follow the memory convention (cos, dot, -euclid), best first
        rows = [int(i[1:]) for i in res.ids]
        np.testing.assert_allclose(res.scores, exact_scores(X[rows], q, metric), rtol=1e-4, atol=1e-4)
        assert np.all(np.diff(res.scores) <= 1e-5)
    ours = np.mean(recalls)
    # the anchor itself: hnswlib used directly, same data and parameters
    raw = hnswlib.Index(space=metric, dim=32)
    raw.init_index(max_elements=len(X), M=OPTS["m"], ef_construction=OPTS["ef_construct"])
    raw.add_items(X, np.arange(len(X)))
    raw.set_ef(OPTS["ef"])
    labels, _ = raw.knn_query(Q, k=10)
    direct = np.mean([_recall([f"v{i}" for i in lab], _top_ids(X, q, metric, 10)) for lab, q in zip(labels, Q)])
    assert ours >= direct - 0.02, (ours, direct)
    if metric == "ip":
        # inner product is not a metric and hnswlib's graph search is weaker on it
        # (0.86 at ef=64 here, directly as through us); a larger ef recovers it
        assert ours >= 0.85, ours
        hi = np.mean([_recall(da.find(vector=q, limit=10, ef=200).ids, _top_ids(X, q, metric, 10)) for q in Q])
        assert hi >= 0.95, hi
    else:
        assert ours >= 0.95, ours
    # find_batched gives the same answers as find, on all threads
    many = da.find_batched(Q[:40], limit=10)
    assert [r.ids for r in many] == [da.find(vector=q, limit=10).ids for q in Q[:40]]


def test_exact_flag_is_exact_after_deletes_and_slot_reuse(arrays, rng):
    X = _clustered(rng, 1500, 16)
    for metric in ("cosine", "ip", "l2"):
        da = arrays(_schema(16), metric=metric, **OPTS)
        _fill(da, X, stop=1000)
        da.delete([f"v{i}" for i in range(0, 1000, 3)])
        _fill(da, X, start=1000, stop=1200)  # reuses the freed slots, whose old vectors stay in the block
        live = [i for i in range(1200) if i >= 1000 or i % 3]
        for q in rng.standard_normal((5, 16)).astype(np.float32):
            res = da.find(vector=q, limit=10, exact=True)
            check_topk(res.ids, res.scores, [f"v{i}" for i in live], exact_scores(X[live], q, metric), 10)


def test_per_call_ef_raises_recall_and_is_restored(arrays, rng):
    X = _clustered(rng, 3000, 32, spread=0.6)
    da = arrays(_schema(32), ef=10, m=8, ef_construct=100)
    _fill(da, X)
    Q = rng.standard_normal((60, 32)).astype(np.float32)
    hi = np.mean([_recall(da.find(vector=q, limit=10, ef=400).ids, _top_ids(X, q, "cosine", 10)) for q in Q])
    assert hi >= 0.98, hi
    assert da.stats()["index_ef"] == 10  # the option's ef is back for everyone else


# ---------------------------------------------------- deletes and re-adds
def test_delete_then_readd_the_same_ids_is_findable(arrays, rng):
    X = _clustered(rng, 2000, 32)
    da = arrays(_schema(32), metric="l2", **OPTS)
    _fill(da, X)
    gone = list(range(0, 2000, 4))
    assert da.delete([f"v{i}" for i in gone]) == len(gone)
    for i in gone[:50]:
        assert f"v{i}" not in da.find(vector=X[i], limit=10).ids
    assert da.stats()["index_elements"] == 2000
    da.extend([{"id": f"v{i}", "v": X[i]} for i in gone])
    # the freed slots (hnswlib labels marked deleted) were reused, not appended
    assert da.stats()["index_elements"] == 2000 and len(da) == 2000
    found = [da.find(vector=X[i], limit=1).ids == [f"v{i}"] for i in gone]
    assert np.mean(found) >= 0.99, np.mean(found)
    # and a deleted label can be deleted again: it really was unmarked
    assert da.delete([f"v{i}" for i in gone[:10]]) == 10
    assert all(f"v{i}" not in da.find(vector=X[i], limit=5).ids for i in gone[:10])


def test_new_ids_in_freed_slots_are_findable_and_old_ones_are_not(arrays, rng):
    X = _clustered(rng, 1000, 16)
    Y = _clustered(np.random.default_rng(99), 300, 16) + 3.0
    da = arrays(_schema(16), **OPTS)
    _fill(da, X)
    da.delete([f"v{i}" for i in range(300)])
    da.extend([{"id": f"n{i}", "v": y} for i, y in enumerate(Y)])
    assert da.stats()["index_elements"] == 1000  # labels of the deleted documents reused
    assert np.mean([da.find(vector=y, limit=1).ids == [f"n{i}"] for i, y in enumerate(Y)]) >= 0.99
    for i in range(0, 300, 10):
        assert not any(h.startswith("v") and int(h[1:]) < 300 for h in da.find(vector=X[i], limit=10).ids)
    assert [d.id for d in da][:3] == ["v300", "v301", "v302"] and [d.id for d in da][-1] == "n299"


def test_upsert_and_update_move_the_vector(arrays, rng):
    X = _clustered(rng, 1000, 16)
    da = arrays(_schema(16), metric="l2", **OPTS)
    _fill(da, X)
    far = np.full(16, 40.0, dtype=np.float32)
    da.extend([{"id": "v5", "v": far}])  # upsert of an existing id replaces its vector
    assert da.find(vector=far, limit=1).ids == ["v5"]
    assert "v5" not in da.find(vector=X[5], limit=10).ids
    np.testing.assert_allclose(da.find(vector=far, limit=1).scores, [0.0], atol=1e-5)
    far2 = -far
    da.update("v6", v=far2)
    assert da.find(vector=far2, limit=1).ids == ["v6"]
    assert "v6" not in da.find(vector=X[6], limit=10).ids
    assert len(da) == 1000 and da.stats()["index_elements"] == 1000


def test_non_vector_update_and_unchanged_upsert_leave_the_index_alone(arrays, rng, monkeypatch):
    X = _clustered(rng, 300, 8)
    da = arrays(_schema(8), **OPTS)
    _fill(da, X)
    calls = _record_hnswlib_calls(monkeypatch)
    da.update("v3", group=7)
    da.extend([{"id": "v4", "v": X[4], "group": 9}])  # same vector, other fields
    da.update("v5", v=X[5])
    assert calls == []
    assert da.find(vector=X[3], filter={"group": 7}, limit=1).ids == ["v3"]
    da.update("v5", v=X[6])
    assert calls == ["add_items"]


# ------------------------------------------------------ writes by condition
def test_update_many_moves_the_matching_vectors_with_one_add_items(arrays, rng, monkeypatch):
    X = _clustered(rng, 600, 8)
    da = arrays(_schema(8), metric="l2", **OPTS)
    _fill(da, X, group=np.arange(600) % 4)
    moved = {f"v{i}" for i in range(1, 600, 4)}
    calls = _record_hnswlib_calls(monkeypatch)
    assert da.update_many({"group": 1}, group=5) == 150 and calls == []  # scalars only: no index call
    far = np.full(8, 50.0, dtype=np.float32)
    assert da.update_many({"group": 5}, v=far) == 150
    assert calls == ["add_items"]  # every moved point in one call, not one per document
    assert da.update_many({"group": 5}, v=far) == 150 and calls == ["add_items"]  # already there
    res = da.find(vector=far, limit=10)
    assert set(res.ids) <= moved and np.allclose(res.scores, 0.0, atol=1e-4)
    assert da.find(vector=X[0], limit=1).ids == ["v0"]
    assert {d.id for d in da if np.array_equal(d.v, far)} == moved and da.stats()["indexed"] == 600
    calls.clear()
    assert da.delete(filter={"group": 5}) == 150
    assert calls == ["mark_deleted"] * 150 and da.stats()["indexed"] == 450 and len(da) == 450
    assert not set(da.find(vector=far, limit=50).ids) & moved


def test_readers_see_an_update_many_whole_or_not_at_all(arrays, rng):
    da = arrays(_schema(8), **OPTS)
    _fill(da, _clustered(rng, 3000, 8))  # every group 0
    stop, reads, torn = threading.Event(), [0], []

    def reader():
        while not stop.is_set():
            facets = da.facets("group", limit=10)
            reads[0] += 1
            if len(facets) != 1 or facets[0][1] != 3000:  # documents of two updates at once
                torn.append(facets)

    readers = [threading.Thread(target=reader) for _ in range(2)]
    for t in readers:
        t.start()
    try:
        for g in range(1, 25):
            assert da.update_many({}, group=g) == 3000
    finally:
        stop.set()
        for t in readers:
            t.join()
    assert reads[0] > 10 and torn == [], torn[:3]


def test_optional_vectors_are_kept_out_of_the_index(arrays, rng):
    X = rng.standard_normal((400, 8)).astype(np.float32)
    da = arrays(_schema(8, optional=True), metric="ip", **OPTS)
    has = rng.random(400) < 0.5
    model = {}
    da.extend([{"id": f"v{i}", "v": X[i] if has[i] else None} for i in range(400)])
    model.update({f"v{i}": X[i] for i in range(400) if has[i]})
    # random vector removals / additions (by update and by upsert) / deletes
    for step in range(300):
        i = int(rng.integers(0, 400))
        op = rng.integers(0, 5)
        if f"v{i}" not in da or op >= 3:
            with_vec = f"v{i}" not in da and op % 2 or op == 3
            da.append({"id": f"v{i}", "v": X[i] if with_vec else None})
            if with_vec:
                model[f"v{i}"] = X[i]
            else:
                model.pop(f"v{i}", None)
        elif op == 0:
            da.update(f"v{i}", v=None)
            model.pop(f"v{i}", None)
        elif op == 1:
            da.update(f"v{i}", v=X[i])
            model[f"v{i}"] = X[i]
        else:
            del da[f"v{i}"]
            model.pop(f"v{i}", None)
    assert da.stats()["indexed"] == len(model)
    ids = list(model)
    M = np.array([model[i] for i in ids])
    q = rng.standard_normal(8).astype(np.float32)
    res = da.find(vector=q, limit=1000)
    assert sorted(res.ids) == sorted(ids)
    check_topk(res.ids, res.scores, ids, exact_scores(M, q, "ip"), 1000)


# ---------------------------------------------------------------- filters
@pytest.mark.parametrize("selectivity", [0.01, 0.5])
def test_filtered_search_recall(arrays, rng, selectivity):
    X = _clustered(rng, 5000, 32)
    group = (rng.random(5000) < selectivity).astype(int)
    da = arrays(_schema(32), **OPTS)
    _fill(da, X, group)
    rows = np.flatnonzero(group == 1)
    assert len(rows) > 10
    members = {f"v{i}" for i in rows}
    recalls = []
    for q in _clustered(np.random.default_rng(3), 100, 32):
        res = da.find(vector=q, filter={"group": 1}, limit=10)
        assert len(res) == min(10, len(rows))
        assert set(res.ids) <= members and len(set(res.ids)) == len(res.ids)
        recalls.append(_recall(res.ids, _top_ids(X, q, "cosine", 10, rows)))
    assert np.mean(recalls) >= 0.9, np.mean(recalls)


def test_filtered_search_with_deletes_and_few_matches(arrays, rng):
    X = _clustered(rng, 2000, 16)
    da = arrays(_schema(16), **OPTS)
    _fill(da, X, np.arange(2000) % 100)
    da.delete([f"v{i}" for i in range(0, 2000, 200)])  # half of group 0
    want = [f"v{i}" for i in range(100, 2000, 200)]
    for q in rng.standard_normal((5, 16)).astype(np.float32):
        res = da.find(vector=q, filter={"group": 0}, limit=30)
        assert sorted(res.ids) == sorted(want)
        rows = [int(i[1:]) for i in want]
        check_topk(res.ids, res.scores, want, exact_scores(X[rows], q, "cosine"), 30)


def test_failed_hnswlib_queries_fall_back_to_exact(arrays, rng, monkeypatch):
    X = _clustered(rng, 1000, 16)
    group = np.arange(1000) % 2
    da = arrays(_schema(16), metric="l2", **OPTS)
    _fill(da, X, group)
    Q = rng.standard_normal((20, 16)).astype(np.float32)
    Q[::4, 0] = 100.0  # these rows make the wrapped knn_query raise, as hnswlib does when short
    calls = _record_hnswlib_calls(monkeypatch, fail=lambda q: bool((np.atleast_2d(q)[:, 0] == 100).any()))
    for flt in (None, {"group": 1}):
        many = da.find_batched(Q, limit=10, filter=flt, threads=1)
        rows = np.arange(1000) if flt is None else np.flatnonzero(group == 1)
        ids = [f"v{i}" for i in rows]
        for j, (q, res) in enumerate(zip(Q, many)):
            if j % 4 == 0:  # answered exactly
                check_topk(res.ids, res.scores, ids, exact_scores(X[rows], q, "l2"), 10)
            else:
                assert len(res) == 10 and set(res.ids) <= set(ids)
    assert calls.count("knn_query") == 2 * (1 + 20)  # one batch call, then one per query


# ------------------------------------------------------- growth and config
def test_index_grows_past_its_initial_capacity(arrays, rng):
    X = _clustered(rng, 3000, 16)
    da = arrays(_schema(16), **OPTS)
    start = da.stats()["index_capacity"]
    _fill(da, X, batch=700, stop=2500)
    for i in range(2500, 3000):  # single appends across a boundary too
        da.append({"id": f"v{i}", "v": X[i]})
    stats = da.stats()
    assert start < 3000 <= stats["index_capacity"] and stats["index_elements"] == 3000
    assert len(da) == 3000
    found = np.mean([da.find(vector=X[i], limit=1).ids == [f"v{i}"] for i in range(0, 3000, 7)])
    assert found >= 0.99, found


@pytest.mark.parametrize("bad", [dict(m=0), dict(m=1), dict(m=2.5), dict(ef=0), dict(ef="64"),
                                 dict(ef_construct=-1), dict(ef_construct=True), dict(threads=0)])
def test_bad_options_are_config_errors(bad):
    name = next(iter(bad))
    with pytest.raises(hs.ConfigError, match=name):
        hs.DocumentArray(_schema(4), storage="hnswlib", **bad)


def test_schema_without_vector_and_empty_array(arrays):
    class NoVec(hs.Document):
        group: int = 0

    da = arrays(NoVec)
    da.extend([{"id": "a", "group": 1}, {"id": "b"}])
    assert da.find(filter={"group": 1}).ids == ["a"]
    empty = arrays(_schema(4))
    assert empty.find(vector=np.ones(4), limit=5).ids == []
    assert empty.find(vector=np.ones(4), filter={"group": 0}, limit=5).ids == []
    assert "hnswlib" in hs.backends()
