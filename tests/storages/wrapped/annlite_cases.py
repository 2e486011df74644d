"""storage="annlite" beyond the shared suite. Runs only in a child process that has not
loaded hnswlib (tests/storages/wrapped/test_annlite.py starts it); not collected by default.

Through the public API: what AnnLite was built with is read from da.stats(); AnnLite failing
(or the process dying) in the middle of a write is caused on the annlite.AnnLite class itself
(the wrapped library's own methods), never on our objects. The storage called directly, below
DocumentArray's validation, is tests/engine/annlite_storage_cases.py; its filter compiler is
checked in tests/engine/test_query.py."""
import base64
import json
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
import annlite
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import hybridsearch as hs
from tests.models import AnnliteItem as Item
from tests.models import exact_scores, matches


def items(a, b, rng):
    return [{"id": f"i{i}", "group": "abc"[i % 3], "order": (i if i % 4 else None), "price": i / 4,
             "ok": bool(i % 2), "v": rng.standard_normal(8)} for i in range(a, b)]


def open_da(path, **kw):
    return hs.DocumentArray(Item, storage="annlite", path=path, **kw)


def test_options_reach_annlite(tmp_path):
    da = open_da(tmp_path / "c", m=8, ef_construct=40, ef=33, metric="l2")
    stats = da.stats()
    assert (stats["index_m"], stats["index_ef_construct"], stats["index_ef"]) == (8, 40, 33)
    with pytest.raises(hs.ConfigError, match="ef_construct"):
        open_da(tmp_path / "d", ef_construct=0)
    da.close()


def test_partial_update_changes_the_filter_columns(tmp_path):
    """AnnLite's own update() leaves its filter table stale; ours rewrites the row."""
    rng = np.random.default_rng(0)
    da = open_da(tmp_path / "c")
    da.extend(items(0, 30, rng))
    da.update("i5", group="z", price=100.0)
    assert da.find(filter={"group": "z"}).ids == ["i5"]
    assert da.find(filter={"price": {"$gte": 100}}).ids == ["i5"]
    assert da.find(vector=rng.standard_normal(8), filter={"group": "z"}, limit=3).ids == ["i5"]
    assert [d.id for d in da][5] == "i5"  # still in its insertion place
    da.close()


def test_reopen_keeps_documents_order_and_results(tmp_path):
    rng = np.random.default_rng(1)
    da = open_da(tmp_path / "c")
    da.extend(items(0, 60, rng))
    da.delete(["i3", "i7"])
    da.update("i9", order=-9)
    q = rng.standard_normal(8)
    before = ([d.model_dump_json() for d in da], da.find(vector=q, limit=5, exact=True).ids,
              da.find(filter={"order": {"$lt": 0}}).ids)
    da.close()
    again = open_da(tmp_path / "c")
    assert len(again) == 58 and "i3" not in again
    assert ([d.model_dump_json() for d in again], again.find(vector=q, limit=5, exact=True).ids,
            again.find(filter={"order": {"$lt": 0}}).ids) == before
    again.extend(items(100, 101, rng))
    assert [d.id for d in again][-1] == "i100"
    again.close()


def test_folders_that_are_not_ours_are_backend_errors(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(hs.BackendError, match="not an annlite collection"):
        open_da(tmp_path / "file")
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "notes.txt").write_text("mine")
    with pytest.raises(hs.BackendError, match="not written by hybridsearch"):
        open_da(tmp_path / "busy")
    assert (tmp_path / "busy" / "notes.txt").read_text() == "mine"
    da = open_da(tmp_path / "c")
    da.close()
    with pytest.raises(hs.BackendError, match="another schema or metric"):
        open_da(tmp_path / "c", metric="ip")
    (tmp_path / "c" / "hybridsearch-annlite.json").write_text("{broken")
    with pytest.raises(hs.BackendError, match="damaged"):
        open_da(tmp_path / "c")


def test_schema_without_a_vector_is_unsupported(tmp_path):
    class NoVec(hs.Document):
        title: hs.Text

    with pytest.raises(hs.UnsupportedError, match="needs an hs.Vector"):
        hs.DocumentArray(NoVec, storage="annlite", path=tmp_path / "c")


def test_hnswlib_is_refused_in_this_process():
    import sys
    assert "annlite" in sys.modules and "hnswlib" not in sys.modules
    assert "annlite" in hs.backends() and "hnswlib" not in hs.backends()
    with pytest.raises(hs.UnsupportedError, match="already loaded 'annlite'"):
        hs.DocumentArray(Item, storage="hnswlib")


@given(seed=st.integers(0, 2**16), k=st.sampled_from([1, 5, 20]), metric=st.sampled_from(["cosine", "ip", "l2"]),
       flt=st.sampled_from([None, {"group": "a"}, {"order": {"$exists": False}}, {"$not": {"order": {"$gt": 10}}},
                            {"$or": [{"ok": False}, {"price": {"$lt": 2}}]}, {"group": "none"}]))
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_filtered_search_is_min_limit_matches_and_exact_scores(tmp_path_factory, seed, k, metric, flt):
    rng = np.random.default_rng(seed)
    da = open_da(tmp_path_factory.mktemp("c"), metric=metric)
    rows = items(0, 80, rng)
    da.extend(rows)
    alive = [Item(**r).model_dump() for r in rows]
    expected = [r["id"] for r in alive if matches(r, flt or {})]
    q = rng.standard_normal(8).astype(np.float32)
    res = da.find(vector=q, filter=flt, limit=k)
    assert len(res) == min(k, len(expected)) and set(res.ids) <= set(expected)
    X = np.stack([np.asarray(r["v"], dtype=np.float32) for r in alive])
    ref = exact_scores(X, q, metric)
    pos = {r["id"]: i for i, r in enumerate(alive)}
    np.testing.assert_allclose(res.scores, [ref[pos[i]] for i in res.ids], rtol=1e-5, atol=1e-5)
    exact = da.find(vector=q, filter=flt, limit=k, exact=True)
    sub = np.array([ref[pos[i]] for i in expected])
    assert np.allclose(np.sort(exact.scores)[::-1], np.sort(sub)[::-1][:k], atol=1e-5)
    da.close()


def test_text_search_is_unsupported_with_the_reason(tmp_path):
    da = open_da(tmp_path / "c")
    da.extend(items(0, 3, np.random.default_rng(0)))
    with pytest.raises(hs.UnsupportedError, match="no lexical engine"):
        da.find(text="anything")
    with pytest.raises(hs.UnsupportedError, match="no lexical engine"):
        da.find(text="anything", vector=np.ones(8))
    da.close()


def test_temporary_collection_is_removed_on_close():
    da = hs.DocumentArray(Item, storage="annlite")
    path = da.stats()["folder"]
    da.extend(items(0, 3, np.random.default_rng(0)))
    assert os.path.isdir(path)
    da.close()
    assert not os.path.exists(path)


# ------------------------------------------------------------ all-or-nothing writes
INTENT = "hybridsearch-annlite.intent.json"
ROOT = Path(__file__).resolve().parents[3]


class Tagged(hs.Document):
    k: hs.Keyword = "x"
    tags: list = []
    v: hs.Vector[4]


def _state(da) -> list:
    return [d.model_dump_json() for d in da]


def tagged_abc(path):
    """A Tagged collection of a, b, c (tags [0], [1], [2])."""
    da = hs.DocumentArray(Tagged, storage="annlite", path=path)
    da.extend([{"id": i, "tags": [n], "v": np.full(4, n + 1.0)} for n, i in enumerate("abc")])
    return da


def refused_and_nothing_changed(da, path, attempts) -> None:
    """Each attempt raises SchemaError or BackendError and leaves a, b, c as tagged_abc wrote them;
    then the handle still writes, and what it wrote is there after reopening."""
    before = _state(da)
    for attempt in attempts:
        with pytest.raises(hs.HybridSearchError) as info:
            attempt()
        assert isinstance(info.value, (hs.SchemaError, hs.BackendError)), repr(info.value)
        assert len(da) == 3 and _state(da) == before and da["a"].tags == [0]
        assert "new" not in da and not (path / INTENT).exists()
        assert da.find(filter={"k": "x"}).ids == ["a", "b", "c"]
    da.update("a", tags=["fine"])  # the handle is still usable
    da.close()
    again = hs.DocumentArray(Tagged, storage="annlite", path=path)
    assert len(again) == 3 and [d.tags for d in again] == [["fine"], [1], [2]]
    again.close()


def test_an_unserialisable_value_is_a_typed_error_and_changes_nothing(tmp_path):
    path = tmp_path / "c"
    da = tagged_abc(path)
    refused_and_nothing_changed(da, path, [  # DocumentArray refuses most of these itself
        lambda: da.update("a", tags=[object()]),
        lambda: da.update("a", tags=[b"\xff"]),
        lambda: da.extend([{"id": "new", "v": np.ones(4)}, {"id": "a", "tags": [object()], "v": np.ones(4)}]),
        lambda: da.__setitem__("b", {"tags": [b"\xff"], "v": np.ones(4)}),
    ])


def _fail(*a, **kw):
    raise RuntimeError("simulated RocksDB error")


def _annlite_fails_once(monkeypatch, name, first_ids=0):
    """The next call of annlite.AnnLite.<name> (on any AnnLite object) applies itself to its first
    `first_ids` ids only, then raises; later calls (the storage's undo, on the AnnLite it reopens)
    work as usual."""
    real, armed = getattr(annlite.AnnLite, name), [True]

    def once(self, docs, *a, **kw):
        if not armed:
            return real(self, docs, *a, **kw)
        armed.clear()
        if first_ids:
            real(self, docs[:first_ids])
        _fail()
    monkeypatch.setattr(annlite.AnnLite, name, once)


def test_annlite_failing_mid_write_is_undone(tmp_path, monkeypatch):
    rng = np.random.default_rng(3)
    path = tmp_path / "c"
    da = open_da(path)
    da.extend(items(0, 12, rng))
    before = _state(da)
    _annlite_fails_once(monkeypatch, "delete", first_ids=1)
    with pytest.raises(hs.BackendError, match="simulated RocksDB error.*unchanged"):
        da.delete(["i1", "i2", "i3"])
    assert _state(da) == before and len(da) == 12
    _annlite_fails_once(monkeypatch, "delete", first_ids=2)
    with pytest.raises(hs.BackendError, match="unchanged"):
        da.delete(filter={"group": "b"})
    assert _state(da) == before and len(da) == 12
    # the deletes of an upsert or update succeed, its insert fails (the undo reopens AnnLite)
    for write in (lambda: da.update("i4", price=99.0), lambda: da.extend(items(3, 5, rng) + items(50, 52, rng)),
                  lambda: da.update_many({"group": "a"}, price=99.0)):
        _annlite_fails_once(monkeypatch, "index")
        with pytest.raises(hs.BackendError, match="unchanged"):
            write()
    assert _state(da) == before and da.find(filter={"price": {"$gt": 50}}).ids == []
    assert not (path / INTENT).exists()
    da.update("i4", price=99.0)  # AnnLite was reopened: the handle works
    assert [d.id for d in da][4] == "i4" and da["i4"].price == 99.0
    before = _state(da)
    da.close()
    again = open_da(path)
    assert _state(again) == before
    expected = before
    # the restore failing too (AnnLite neither inserts nor opens): the handle refuses every call;
    # reopening completes the undo, recorded before AnnLite was reopened (a call
    # that raised leaves nothing, as on every other storage)
    monkeypatch.setattr(annlite.AnnLite, "index", _fail)
    monkeypatch.setattr(annlite.AnnLite, "__init__", _fail)
    with pytest.raises(hs.BackendError, match="restoring the collection failed too"):
        again.update("i5", order=-5)
    for call in (lambda: len(again), lambda: list(again), lambda: again.extend(items(60, 61, rng))):
        with pytest.raises(hs.BackendError, match="close and reopen"):
            call()
    again.close()
    monkeypatch.undo()
    third = open_da(path)
    assert _state(third) == expected and not (path / INTENT).exists()
    third.close()


def test_writes_by_condition_are_one_intent_each_and_match_the_model(tmp_path):
    rng = np.random.default_rng(9)
    path = tmp_path / "c"
    da = open_da(path)
    docs = items(0, 30, rng)
    da.extend(docs)
    model = {d["id"]: Item(**d) for d in docs}
    writes = da.stats()["intent_writes"]
    hit = [i for i, d in model.items() if d.group == "a" and d.ok]
    assert da.update_many({"group": "a", "ok": True}, price=5.5, order=None) == len(hit) > 1
    for i in hit:
        model[i] = model[i].model_copy(update={"price": 5.5, "order": None})
    assert da.stats()["intent_writes"] == writes + 1  # one durable write, not one per document
    gone = [i for i, d in model.items() if d.price == 5.5 or d.order == 9]
    assert da.delete(filter={"$or": [{"price": 5.5}, {"order": 9}]}) == len(gone) > 1
    for i in gone:
        del model[i]
    assert da.stats()["intent_writes"] == writes + 2
    assert da.update_many({"group": "zzz"}, price=1.0) == 0 and da.delete(filter={"group": "zzz"}) == 0
    assert da.stats()["intent_writes"] == writes + 2  # nothing matched: nothing written
    state = [d.model_dump_json() for d in model.values()]  # insertion order kept
    assert _state(da) == state
    da.close()
    again = open_da(path)
    assert _state(again) == state and again.find(filter={"order": {"$exists": False}}, limit=None).ids == [
        i for i, d in model.items() if d.order is None]
    again.close()


def _entry(doc, seq):
    return {"seq": seq, "doc": doc.model_dump_json(exclude={"v"}),
            "vector": base64.b64encode(np.asarray(doc.v, dtype="<f4").tobytes()).decode("ascii")}


def test_an_intent_left_by_a_crash_is_completed_on_open(tmp_path, caplog):
    """The documented format, written by hand: the crash came after the intent and after part of
    AnnLite's work (i1 is already deleted), before the rest. The recovery is logged."""
    rng = np.random.default_rng(4)
    path = tmp_path / "c"
    da = open_da(path)
    da.extend(items(0, 10, rng))  # seqs 1..10
    i3 = da["i3"].model_copy(update={"price": 99.0, "group": "z"})
    new = Item(id="n1", v=rng.standard_normal(8), order=7)
    da.delete(["i1"])
    da.close()
    intent = {"format": "hybridsearch-annlite-intent", "version": 1, "delete": ["i1", "i2", "absent"],
              "insert": [_entry(i3, 4), _entry(new, 11)]}
    (path / INTENT).write_text(json.dumps(intent))
    (path / (INTENT + ".tmp")).write_text("{half a write")  # an intent never renamed: ignored and removed
    for n in range(2):  # and the second open has nothing left to do
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="hybridsearch"):
            da = open_da(path)
        warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
        assert warned == ([f"{path}: completed an interrupted write recorded in {path / INTENT} (3 ids "
                           "deleted, 2 documents inserted)"] if n == 0 else []), warned
        assert f"annlite storage opened {path}: 9 documents" in caplog.text
        assert [d.id for d in da] == ["i0", "i3", "i4", "i5", "i6", "i7", "i8", "i9", "n1"]
        assert da["i3"].price == 99.0 and da.find(filter={"group": "z"}).ids == ["i3"]
        assert np.array_equal(da["n1"].v, new.v.astype(np.float32)) and da["n1"].order == 7
        assert not any(n.endswith(".tmp") for n in os.listdir(path))
        assert not (path / INTENT).exists()
        da.close()


@pytest.mark.parametrize("text", [
    "{broken", "[]", '{"format": "other", "version": 1, "delete": [], "insert": []}',
    '{"format": "hybridsearch-annlite-intent", "version": 1, "delete": "i1", "insert": []}',
    '{"format": "hybridsearch-annlite-intent", "version": 1, "delete": [], "insert": [{"seq": 1}]}',
    '{"format": "hybridsearch-annlite-intent", "version": 1, "delete": [], '
    '"insert": [{"seq": 1, "doc": "{\\"id\\": \\"x\\"}", "vector": "not base64!"}]}',
    '{"format": "hybridsearch-annlite-intent", "version": 1, "delete": [], '
    '"insert": [{"seq": 1, "doc": "{\\"id\\": \\"x\\"}", "vector": "AAAAAA=="}]}',  # 1 float, not 8
    '{"format": "hybridsearch-annlite-intent", "version": 1, "delete": [], '
    '"insert": [{"seq": 1, "doc": "{\\"id\\": \\"x\\", \\"price\\": \\"cheap\\"}", "vector": "' + "A" * 43 + '="}]}',
    b"\xff\xfe",
])
def test_a_damaged_intent_is_a_backend_error_naming_it(tmp_path, text):
    path = tmp_path / "c"
    da = open_da(path)
    da.extend(items(0, 3, np.random.default_rng(5)))
    da.close()
    (path / INTENT).write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(hs.BackendError, match=f"{INTENT} is damaged"):
        open_da(path)
    os.remove(path / INTENT)  # the refused open released the folder
    da = open_da(path)
    assert [d.id for d in da] == ["i0", "i1", "i2"]
    da.close()


_KILL_INSIDE = """
import os, signal, sys
import annlite
import numpy as np
sys.path.insert(0, {root!r})
from tests.storages.wrapped.annlite_cases import open_da, items
da = open_da({path!r})
real_delete = annlite.AnnLite.delete
def kill(*a, **kw):
    os.kill(os.getpid(), signal.SIGKILL)
def delete_one_then_die(self, ids, *a, **kw):
    real_delete(self, ids[:1])
    kill()
if {where!r} == "insert":   # the deletes of an upsert are done, its insert is not
    annlite.AnnLite.index = kill
    da.extend(items(2, 6, np.random.default_rng(7)) + items(20, 22, np.random.default_rng(7)))
elif {where!r} == "update_many":  # every matching document deleted, none re-inserted
    annlite.AnnLite.index = kill
    da.update_many({{"group": "a"}}, price=77.0, order=-1)
else:                       # one of three deletes is done
    annlite.AnnLite.delete = delete_one_then_die
    da.delete(["i1", "i4", "i7"])
print("not killed")
"""


@pytest.mark.parametrize("where", ["insert", "delete", "update_many"])
def test_a_kill_inside_annlite_is_completed_on_reopen(tmp_path, where):
    path = tmp_path / "c"
    da = open_da(path)
    da.extend(items(0, 10, np.random.default_rng(6)))
    da.close()
    code = _KILL_INSIDE.format(root=str(ROOT), path=str(path), where=where)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == -signal.SIGKILL, proc.stdout + proc.stderr
    assert (path / INTENT).exists()
    da = open_da(path)
    if where == "insert":
        expected = [f"i{i}" for i in range(10)] + ["i20", "i21"]
        fresh = {r["id"]: Item(**r) for r in items(2, 6, np.random.default_rng(7)) + items(20, 22, np.random.default_rng(7))}
        for i, d in fresh.items():
            assert da[i].model_dump_json() == d.model_dump_json()
    elif where == "update_many":
        expected = [f"i{i}" for i in range(10)]
        assert {d.id: (d.price, d.order) for d in da if d.group == "a"} == {
            f"i{i}": (77.0, -1) for i in range(0, 10, 3)}
        assert [d.price for d in da if d.group != "a"] == [i / 4 for i in range(10) if i % 3]
    else:
        expected = ["i0", "i2", "i3", "i5", "i6", "i8", "i9"]
    assert [d.id for d in da] == expected and len(da) == len(expected)
    assert da.find(filter={"group": {"$in": ["a", "b", "c"]}}, limit=100).ids == expected
    assert not (path / INTENT).exists()
    da.close()


_CRASH_WRITER = """
import json, random, sys
import numpy as np
sys.path.insert(0, {root!r})
from tests.storages.wrapped.annlite_cases import open_da, crash_vector
da = open_da({path!r})
rng = random.Random({seed})
pool = [f"k{{j}}" for j in range(12)]
print("ready", flush=True)
n = 0
while True:
    n += 1
    r = rng.random()
    if r < 0.3:
        op = {{"op": "delete", "ids": rng.sample(pool, rng.randint(2, 5))}}
    elif r < 0.7:
        op = {{"op": "upsert", "ids": rng.sample(pool, rng.randint(1, 4)), "n": n}}
    elif r < 0.8:
        op = {{"op": "update", "id": rng.choice(pool), "n": n}}
    elif r < 0.93:
        op = {{"op": "update_many", "below": rng.randint(1, 4), "n": n}}
    else:
        op = {{"op": "delete_where", "price": float(rng.randint(0, 3))}}
    print("begin " + json.dumps(op), flush=True)
    if op["op"] == "delete":
        da.delete(op["ids"])
    elif op["op"] == "upsert":
        da.extend([{{"id": i, "order": n, "price": float(j), "v": crash_vector(i, n)}} for j, i in enumerate(op["ids"])])
    elif op["op"] == "update_many":
        da.update_many({{"price": {{"$lt": op["below"]}}}}, order=n)
    elif op["op"] == "delete_where":
        da.delete(filter={{"price": op["price"]}})
    elif op["id"] in da:
        da.update(op["id"], order=n, v=crash_vector(op["id"], n))
    print("done", flush=True)
"""


def crash_vector(id, n):
    return [float(n), float(id[1:]) + 1.0, 1, 2, 3, 4, 5, 6]


def _crash_apply(model: dict, op: dict) -> dict:
    model = dict(model)
    if op["op"] == "delete":
        for i in op["ids"]:
            model.pop(i, None)
    elif op["op"] == "upsert":
        for j, i in enumerate(op["ids"]):
            model[i] = (op["n"], float(j), crash_vector(i, op["n"]))
    elif op["op"] == "update_many":
        for i, (_, price, v) in model.items():
            if price < op["below"]:
                model[i] = (op["n"], price, v)
    elif op["op"] == "delete_where":
        model = {i: m for i, m in model.items() if m[1] != op["price"]}
    elif op["id"] in model:
        model[op["id"]] = (op["n"], model[op["id"]][1], crash_vector(op["id"], op["n"]))
    return model


def test_kill_9_during_writes_leaves_every_write_whole(tmp_path):
    """SIGKILL at random moments of a delete/upsert/update/update_many/delete(filter=) loop: after
    reopening, the collection is
    the acknowledged writes, plus possibly the one in flight applied entirely, never half of it."""
    path = tmp_path / "c"
    open_da(path).close()
    model, in_flight = {}, 0
    delays = np.random.default_rng(8).uniform(0.15, 1.0, size=6)
    for trial, delay in enumerate(delays):
        out, err = tmp_path / f"out{trial}", tmp_path / f"err{trial}"
        code = _CRASH_WRITER.format(root=str(ROOT), path=str(path), seed=trial)
        with open(out, "w") as o, open(err, "w") as e:
            proc = subprocess.Popen([sys.executable, "-c", code], stdout=o, stderr=e)
        deadline = time.monotonic() + 60
        while "ready" not in out.read_text() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(delay)
        alive = proc.poll() is None
        proc.kill()
        proc.wait()
        assert alive, out.read_text()[-2000:] + err.read_text()[-3000:]
        text = out.read_text()
        lines = text.split("\n")[:-1]  # a line cut by the kill has no newline yet
        assert "ready" in lines, text + err.read_text()
        acked, pending = 0, None
        for line in lines[lines.index("ready") + 1:]:  # (AnnLite logs to stdout too)
            if line.startswith("begin "):
                pending = json.loads(line[6:])
            elif line == "done":
                model = _crash_apply(model, pending)
                acked, pending = acked + 1, None
        assert acked > 0, "the writer did not get going"
        da = open_da(path)
        got = {d.id: (d.order, d.price, [float(x) for x in d.v]) for d in da}
        assert len(da) == len(got) == len(da.find(filter={"price": {"$gte": 0}}, limit=100))
        allowed = [model] + ([_crash_apply(model, pending)] if pending else [])
        assert any(list(got.items()) == list(m.items()) for m in allowed), (trial, pending, got, allowed)
        in_flight += pending is not None
        model = got
        assert not (path / INTENT).exists()
        da.close()
    assert in_flight > 0, "no kill landed inside a write"


def test_a_full_disk_leaves_the_batch_that_raised_absent_after_reopening(tmp_path):
    """Writes fail once the files may grow no more (RLIMIT_FSIZE, as on a full
    disk); the batch that raised is absent after reopening, as on hnsw, memory and sqlite (its
    undo is recorded before AnnLite is reopened, so an undo that cannot finish is completed on
    open), and every acknowledged batch is there."""
    from tests.contract.test_reliability import _DISK_FULL
    from tests.contract.test_reliability import Item as ReliabilityItem
    path = tmp_path / "col"
    proc = subprocess.run([sys.executable, "-c", _DISK_FULL, "annlite", str(path)], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert "error:" in proc.stdout and "Traceback" not in proc.stderr, proc.stdout + proc.stderr[-3000:]
    acked = int(proc.stdout.split("acked")[-1])
    assert acked > 0
    with hs.DocumentArray(ReliabilityItem, storage="annlite", path=path) as da:
        assert sorted(d.id for d in da) == sorted(f"d{b * 10 + i}" for b in range(acked) for i in range(10))
