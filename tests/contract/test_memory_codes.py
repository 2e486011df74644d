"""storage="memory" with quantization="rabitq1" / "rabitq4": the exact scan ranks RaBitQ codes
first and reads float32 rows only where they leave a doubt. Public API only.

The answers must be those of the float scan exactly (ids, scores, tie order, short pages): every
test feeds the same writes to a quantization=None collection and compares each find with ==,
and checks the float answers themselves against numpy (float64 brute force over a Python model of
the collection). The writes cover extend (new and rewritten ids), delete (down to a compaction of
the rows), update of a vector, an optional vector set to None and back, update_many, and reopening
from the files (snapshot, log replay, a read-only follower, a schema change)."""
from typing import Optional

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import hybridsearch as hs
from tests.conftest import STORAGES

pytestmark = pytest.mark.skipif(not {"memory", "memory-path", "memory-rq"} & set(STORAGES),
                                reason="HS_TEST_STORAGES leaves out memory")
DIM = 12
QUANTS = (None, "rabitq1", "rabitq4")


class Doc(hs.Document):
    v: hs.Vector[DIM]
    w: Optional[hs.Vector[5]] = None  # a second dense field, optional
    tag: int = 0


def numpy_scores(X: np.ndarray, q: np.ndarray, metric: str) -> np.ndarray:
    X, q = X.astype(np.float64), q.astype(np.float64)
    if metric == "l2":
        return -np.sqrt(((X - q) ** 2).sum(1))
    if metric == "ip":
        return X @ q
    n = np.linalg.norm(X, axis=1)
    return np.where(n > 0, (X @ q) / np.maximum(n, 1e-300), 0.0) / np.linalg.norm(q)


class Model:
    """id -> (v, w or None, tag): what the collections hold."""

    def __init__(self):
        self.docs = {}

    def check(self, res, q, k, metric, field="v", where=None):
        keys = [key for key, d in self.docs.items() if d[1 if field == "w" else 0] is not None
                and (where is None or where(d[2]))]
        assert len(res.ids) == min(k, len(keys))
        if not keys:
            return
        X = np.stack([self.docs[key][1 if field == "w" else 0] for key in keys])
        s = numpy_scores(X, q, metric)
        top = np.sort(s)[::-1][: len(res.ids)]
        got = np.asarray(res.scores, dtype=np.float64)
        assert np.allclose(got, top, rtol=1e-4, atol=1e-4)
        at = {key: i for i, key in enumerate(keys)}
        assert np.allclose(got, s[[at[i] for i in res.ids]], rtol=1e-4, atol=1e-4)


def same(results):
    """Every result equals the first (the float scan's): ids, then scores bit for bit."""
    first = results[0]
    for r in results[1:]:
        assert r.ids == first.ids
        assert np.asarray(r.scores).tobytes() == np.asarray(first.scores).tobytes()


def vectors(rng, n, dim, kind):
    if kind == 0:  # gaussian
        return rng.normal(size=(n, dim)).astype(np.float32)
    if kind == 1:  # small integers: many exact ties
        return rng.integers(-2, 3, size=(n, dim)).astype(np.float32)
    X = rng.normal(size=(3, dim)).astype(np.float32)  # a few vectors, repeated
    return X[rng.integers(0, 3, n)]


def nonzero(rng, q):
    return q if np.any(q) else rng.normal(size=len(q)).astype(np.float32)


op = st.one_of(
    st.tuples(st.just("extend"), st.integers(1, 60), st.integers(0, 2), st.integers(0, 2 ** 31)),
    st.tuples(st.just("delete"), st.integers(1, 40), st.integers(0, 2 ** 31)),
    st.tuples(st.just("update"), st.integers(0, 2), st.integers(0, 2 ** 31)),
    st.tuples(st.just("update_many"), st.integers(0, 4), st.integers(0, 2 ** 31)),
    st.tuples(st.just("reopen"), st.booleans()),
)


@pytest.mark.parametrize("metric", ["l2", "ip", "cosine"])
@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(ops=st.lists(op, min_size=1, max_size=8), seed=st.integers(0, 2 ** 31))
def test_codes_answer_as_the_float_scan_through_writes_and_reopens(metric, ops, seed, tmp_path_factory):
    base = tmp_path_factory.mktemp("codes")
    paths = [base / f"q{i}" for i in range(len(QUANTS))]
    das = [hs.DocumentArray(Doc, metric=metric, quantization=q, path=p) for q, p in zip(QUANTS, paths)]
    model = Model()
    rng = np.random.default_rng(seed)
    try:
        for o in ops:
            if o[0] == "extend":
                _, n, kind, s = o
                r = np.random.default_rng(s)
                ids = [f"d{int(i)}" for i in r.integers(0, 150, n)]
                ids = list(dict.fromkeys(ids))
                V, W = vectors(r, len(ids), DIM, kind), vectors(r, len(ids), 5, kind)
                has_w = r.random(len(ids)) < 0.6
                tags = r.integers(0, 4, len(ids)).tolist()
                docs = [{"id": i, "v": V[j], "w": W[j] if has_w[j] else None, "tag": tags[j]}
                        for j, i in enumerate(ids)]
                for da in das:
                    da.extend(docs)
                model.docs.update({d["id"]: (d["v"], d["w"], d["tag"]) for d in docs})
            elif o[0] == "delete":
                r = np.random.default_rng(o[2])
                ids = [f"d{int(i)}" for i in r.integers(0, 150, o[1])]
                counts = [da.delete(ids) for da in das]
                assert counts == [len(set(ids) & set(model.docs))] * len(das)
                for i in ids:
                    model.docs.pop(i, None)
            elif o[0] == "update" and model.docs:
                r = np.random.default_rng(o[2])
                key = sorted(model.docs)[int(r.integers(0, len(model.docs)))]
                v, w, tag = model.docs[key]
                if o[1] == 0:
                    v = vectors(r, 1, DIM, int(r.integers(0, 3)))[0]
                    for da in das:
                        da.update(key, v=v)
                else:  # the optional field set to None, or given a vector
                    w = None if o[1] == 1 else vectors(r, 1, 5, 0)[0]
                    for da in das:
                        da.update(key, w=w)
                model.docs[key] = (v, w, tag)
            elif o[0] == "update_many":
                r = np.random.default_rng(o[2])
                v = vectors(r, 1, DIM, 1)[0]
                counts = [da.update_many({"tag": {"$eq": o[1]}}, v=v) for da in das]
                assert len(set(counts)) == 1
                for key, (_, w, tag) in list(model.docs.items()):
                    if tag == o[1]:
                        model.docs[key] = (v, w, tag)
            elif o[0] == "reopen" and o[1]:  # closed: a snapshot, then the codes built from it
                for da in das:
                    da.close()
                das = [hs.DocumentArray(Doc, metric=metric, quantization=q, path=p) for q, p in zip(QUANTS, paths)]
            # readers beside the writers: the snapshot and the log replayed, the codes built from them
            readers = [hs.DocumentArray(Doc, metric=metric, quantization=q, path=p, read_only=True)
                       for q, p in zip(QUANTS, paths)] if o[0] == "reopen" and not o[1] else []
            keys = sorted(model.docs)
            for _ in range(3):
                if keys and rng.random() < 0.4:
                    q = nonzero(rng, model.docs[keys[int(rng.integers(0, len(keys)))]][0].copy())
                else:
                    q = nonzero(rng, vectors(rng, 1, DIM, int(rng.integers(0, 2)))[0])
                k = int(rng.integers(1, 25))
                t = int(rng.integers(0, 4))
                for flt, where in ((None, None), ({"tag": {"$lte": t}}, lambda tag: tag <= t)):
                    res = [da.find(vector={"v": q}, limit=k, filter=flt) for da in das]
                    same(res)
                    same([da.find(vector={"v": q}, limit=k, filter=flt) for da in readers] + res[:1])
                    model.check(res[0], q, k, metric, where=where)
                qw = nonzero(rng, vectors(rng, 1, 5, 0)[0])
                res = [da.find(vector={"w": qw}, limit=k) for da in das]
                same(res)
                model.check(res[0], qw, k, metric, field="w")
            Q = vectors(rng, 6, DIM, 0)
            batches = [da.find_batched({"v": Q}, limit=7) for da in das]
            for i in range(len(Q)):
                same([b[i] for b in batches])
            for da in readers:
                da.close()
    finally:
        for da in das:
            da.close()


@pytest.mark.parametrize("quant", ["rabitq1", "rabitq4"])
@pytest.mark.parametrize("metric", ["l2", "ip", "cosine"])
def test_codes_follow_a_compaction_and_a_schema_change(quant, metric, tmp_path):
    """A delete of most rows compacts the store (rows renumbered): the codes move with them.
    Then a reopen with a new field (a schema change carries the vectors over)."""
    rng = np.random.default_rng(3)
    n = 3000
    X = rng.normal(size=(n, DIM)).astype(np.float32)
    cols = {"id": [f"d{i}" for i in range(n)], "v": X, "tag": [i % 4 for i in range(n)]}
    das = [hs.DocumentArray(Doc, metric=metric, quantization=q, path=tmp_path / str(q)) for q in (None, quant)]
    for da in das:
        da.extend_columns(cols)
    gone = [f"d{i}" for i in range(n) if i % 5]  # 2400 of 3000: past the tombstones' limit
    for da in das:
        assert da.delete(gone) == len(gone)
    for da in das:
        da.extend([{"id": "new", "v": X[0] * 2, "tag": 9}])
    left = [i for i in range(n) if i % 5 == 0]

    def compare(das):
        for _ in range(20):
            q = rng.normal(size=DIM).astype(np.float32)
            res = [da.find(vector={"v": q}, limit=10) for da in das]
            same(res)
            Xl = np.concatenate([X[left], X[:1] * 2])
            top = np.sort(numpy_scores(Xl, q, metric))[::-1][:10]
            assert np.allclose(res[0].scores, top, rtol=1e-4, atol=1e-4)
            same([da.find(vector={"v": q}, limit=5, filter={"tag": {"$eq": 0}}) for da in das])

    compare(das)
    for da in das:
        da.close()

    class Doc2(hs.Document):
        v: hs.Vector[DIM]
        w: Optional[hs.Vector[5]] = None
        tag: int = 0
        note: str = ""  # new in this version of the schema

    das = [hs.DocumentArray(Doc2, metric=metric, quantization=q, path=tmp_path / str(q)) for q in (None, quant)]
    try:
        assert len(das[1].stats()["schema_history"]) == 2
        compare(das)
    finally:
        for da in das:
            da.close()


def test_stats_and_bad_options():
    X = np.random.default_rng(0).normal(size=(200, DIM)).astype(np.float32)
    plain = hs.DocumentArray(Doc)
    one, four = hs.DocumentArray(Doc, quantization="rabitq1"), hs.DocumentArray(Doc, quantization="rabitq4")
    for da in (plain, one, four):
        da.extend_columns({"id": [str(i) for i in range(200)], "v": X})
    assert plain.stats()["quantization"] == "none" and "codes" not in plain.stats()["bytes"]
    assert hs.DocumentArray(Doc, quantization="none").stats()["quantization"] == "none"
    s1, s4 = one.stats(), four.stats()
    assert s1["quantization"] == "rabitq1" and s4["quantization"] == "rabitq4"
    # per row: 64 code bits (12 dims padded to 64) or 64 nibbles, and four float32 factors
    assert s1["bytes"]["codes"] >= 200 * (8 + 16) and s4["bytes"]["codes"] >= 200 * (32 + 16)
    assert s1["bytes"]["codes"] < s4["bytes"]["codes"] < s1["bytes"]["vectors"] + 200 * 64
    for bad in ("rabitq2", "int8", 1, True, "RaBitQ1"):
        with pytest.raises(hs.ConfigError, match="quantization"):
            hs.DocumentArray(Doc, quantization=bad)
    empty = hs.DocumentArray(Doc, quantization="rabitq4")  # no vector yet: nothing to scan
    assert empty.find(vector={"v": X[0]}, limit=3).ids == []
    empty.extend([{"id": "a", "v": X[1]}])
    assert empty.find(vector={"v": X[0]}, limit=3).ids == ["a"]


@pytest.mark.parametrize("quant", ["rabitq1", "rabitq4"])
def test_a_follower_keeps_its_codes_with_the_writer(quant, tmp_path):
    """A read-only opener builds the codes at open and follows the writer's writes (extend,
    update, delete) and a snapshot it takes (close: a new generation), answering as the float
    scan does beside it."""
    rng = np.random.default_rng(5)
    X = rng.normal(size=(400, DIM)).astype(np.float32)
    writers = [hs.DocumentArray(Doc, metric="l2", quantization=q, path=tmp_path / str(q)) for q in (None, quant)]
    for da in writers:
        da.extend_columns({"id": [f"d{i}" for i in range(300)], "v": X[:300]})
    readers = [hs.DocumentArray(Doc, metric="l2", quantization=q, path=tmp_path / str(q), read_only=True)
               for q in (None, quant)]
    model = Model()
    model.docs.update({f"d{i}": (X[i], None, 0) for i in range(300)})
    try:
        for step in range(4):
            if step == 0:
                for da in writers:
                    da.extend_columns({"id": [f"d{i}" for i in range(300, 400)], "v": X[300:]})
                model.docs.update({f"d{i}": (X[i], None, 0) for i in range(300, 400)})
            elif step == 1:
                for da in writers:
                    da.update("d7", v=X[0] * 3)
                    da.delete([f"d{i}" for i in range(0, 400, 4)])
                model.docs["d7"] = (X[0] * 3, None, 0)
                for i in range(0, 400, 4):
                    model.docs.pop(f"d{i}")
            elif step == 2:  # the writer's snapshot: the followers open the new generation
                for i, q in enumerate((None, quant)):
                    writers[i].close()
                    writers[i] = hs.DocumentArray(Doc, metric="l2", quantization=q, path=tmp_path / str(q))
                    writers[i].extend([{"id": "late", "v": X[1] * -1}])
                model.docs["late"] = (X[1] * -1, None, 0)
            for _ in range(10):
                q = rng.normal(size=DIM).astype(np.float32)
                res = [da.find(vector={"v": q}, limit=12) for da in readers + writers]
                same(res)
                model.check(res[0], q, 12, "l2")
    finally:
        for da in readers + writers:
            da.close()


@pytest.mark.parametrize("quant", ["rabitq1", "rabitq4"])
def test_a_large_batch_coded_in_parts(quant, tmp_path):
    """A batch of many rows is coded in parts on several threads, and again at open: the answers
    stay the float scan's."""
    rng = np.random.default_rng(8)
    X = rng.normal(size=(20000, DIM)).astype(np.float32)
    das = [hs.DocumentArray(Doc, metric="cosine", quantization=q, path=tmp_path / f"{q}-{t}", threads=t)
           for q, t in ((None, None), (quant, 1), (quant, 3))]
    try:
        for round in range(2):
            for da in das:
                da.extend_columns({"id": [f"d{i}" for i in range(len(X))], "v": X, "tag": [i % 3 for i in range(len(X))]})
            for _ in range(10):
                q = rng.normal(size=DIM).astype(np.float32)
                same([da.find(vector={"v": q}, limit=10) for da in das])
                same([da.find(vector={"v": q}, limit=10, filter={"tag": 1}) for da in das])
            X = X[::-1].copy()  # the same ids rewritten with other vectors
            if round == 0:
                for da in das:
                    da.close()
                das = [hs.DocumentArray(Doc, metric="cosine", quantization=q, path=tmp_path / f"{q}-{t}", threads=t)
                       for q, t in ((None, None), (quant, 1), (quant, 3))]
    finally:
        for da in das:
            da.close()
