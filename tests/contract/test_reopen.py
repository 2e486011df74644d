"""Every file-backed storage reopens with every acknowledged write.

A property test: random programs of bulk writes, deletes that trigger the store's compaction,
partial and conditional updates that rewrite the string buffers until they compact, empty strings
and None beside long ones, with close() and reopen between any two calls. After every reopen and at
the end the collection must equal a plain-dict model of the acknowledged calls, and a text search
must find exactly the documents the model says hold the word.
"""
from typing import Optional

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import hybridsearch as hs
from tests.conftest import STORAGES

FILE_BACKED = [s for s in ("memory-path", "hnsw-path", "sqlite", "annlite", "qdrant-path") if s in STORAGES]


class Note(hs.Document):
    title: hs.Text = ""
    body: hs.Text = ""
    tag: Optional[hs.Keyword] = None
    n: int = 0
    v: hs.Vector[2]  # annlite keeps every document in its graph


# titles: empty strings (no bytes in the buffer) among long ones, so that a compaction of the
# buffer moves every live byte and leaves empty strings behind the new end
TITLES = ["", "", "alpha", "beta " * 40, "gamma delta " * 200]


def _open(storage, path):
    name = {"memory-path": "memory", "hnsw-path": "hnsw", "qdrant-path": "qdrant"}.get(storage, storage)
    return hs.DocumentArray(Note, storage=name, path=path)


def _docs(start: int, count: int, title_at: int) -> list:
    return [dict(id=f"n{i}", title=TITLES[(i + title_at) % len(TITLES)], body="" if i % 3 else f"word{i % 7}",
                 tag=None if i % 4 == 0 else f"t{i % 3}", n=i, v=[1.0, float(i)]) for i in range(start, start + count)]


ops = st.one_of(
    st.tuples(st.just("extend"), st.integers(0, 3000), st.integers(1, 1500), st.integers(0, 4)),
    st.tuples(st.just("delete_range"), st.integers(0, 3000), st.integers(1, 2500)),
    st.tuples(st.just("update_many"), st.sampled_from(["t0", "t1", "t2"]), st.integers(0, 4)),
    st.tuples(st.just("delete_where"), st.sampled_from(["t0", "t1", "t2"])),
    st.tuples(st.just("update"), st.integers(0, 4500), st.integers(0, 4)),
    st.tuples(st.just("append"), st.integers(0, 4500)),
    st.tuples(st.just("reopen"),),
)


def _apply(da, model: dict, op) -> None:
    kind = op[0]
    if kind == "extend":
        docs = _docs(op[1], op[2], op[3])
        da.extend(docs)
        model.update({d["id"]: d for d in docs})
    elif kind == "delete_range":
        ids = [f"n{i}" for i in range(op[1], op[1] + op[2])]
        da.delete(ids)
        for i in ids:
            model.pop(i, None)
    elif kind == "update_many":
        title = TITLES[op[2]]
        got = da.update_many({"tag": op[1]}, title=title)
        hit = [d for d in model.values() if d["tag"] == op[1]]
        assert got == len(hit)
        for d in hit:
            d["title"] = title
    elif kind == "delete_where":
        got = da.delete(filter={"tag": op[1]})
        hit = [k for k, d in model.items() if d["tag"] == op[1]]
        assert got == len(hit)
        for k in hit:
            del model[k]
    elif kind == "update":
        key = f"n{op[1]}"
        if key in model:
            da.update(key, body=TITLES[op[2]])
            model[key]["body"] = TITLES[op[2]]
        else:
            with pytest.raises(KeyError):
                da.update(key, body=TITLES[op[2]])
    elif kind == "append":
        doc = _docs(op[1], 1, 0)[0]
        da.append(doc)
        model[doc["id"]] = doc


def _check(da, model: dict) -> None:
    got = {d.id: {**d.model_dump(), "v": [float(x) for x in d.v]} for d in da}
    assert got == model
    assert len(da) == len(model)
    if da.storage == "annlite":  # no lexical engine (its text options are refused, test_lexical.py)
        return
    want = sorted(k for k, d in model.items() if "word3" in d["body"].split())
    assert sorted(da.find(text="word3", limit=len(model) + 1).ids) == want


@pytest.mark.parametrize("storage", FILE_BACKED)
@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
@given(program=st.lists(ops, min_size=1, max_size=10))
def test_every_acknowledged_write_survives_close_and_reopen(storage, tmp_path_factory, program):
    path = tmp_path_factory.mktemp("reopen") / ("c.db" if storage == "sqlite" else "col")
    model: dict = {}
    da = _open(storage, path)
    try:
        for op in program:
            if op[0] == "reopen":
                da.close()
                da = _open(storage, path)
                _check(da, model)
            else:
                _apply(da, model, op)
        da.close()
        da = _open(storage, path)
        _check(da, model)
    finally:
        da.close()


@pytest.mark.parametrize("storage", FILE_BACKED)
def test_compactions_beside_empty_strings_reopen(storage, tmp_path):
    """Two sequences that compact beside empty strings: a delete that compacts the store beside empty strings, and
    conditional updates that compact a text buffer holding empty strings."""
    path = tmp_path / ("c.db" if storage == "sqlite" else "col")
    model: dict = {}
    da = _open(storage, path)
    for op in [("extend", 0, 3000, 1), ("delete_range", 0, 2000), ("append", 5000)]:
        _apply(da, model, op)
    da.close()
    da = _open(storage, path)
    _check(da, model)
    for i in range(12):
        _apply(da, model, ("update_many", "t1", 4 if i % 2 else 1))
    da.close()
    da = _open(storage, path)
    _check(da, model)
    da.close()


# -------------------------------------------------------------- writes racing close()
@pytest.mark.parametrize("storage", FILE_BACKED)
def test_writes_racing_close_are_there_after_reopen_or_raised(storage, tmp_path):
    """Threads extend while the main thread closes: close() stops the writes that reach the
    collection after it began (each writer gets a typed error before its last call), every
    extend that returned is there after reopening, every one that raised is absent. (memory and
    hnsw with path=: a write that began before close() and reached the storage after it was
    applied to RAM only, returned, and was missing after reopening; and close() kept applying
    the writes that kept arriving, returning only once the writers stopped by themselves.)"""
    import threading
    import time

    size, calls = 1000, 15
    for round_ in range(8):
        path = tmp_path / f"c{round_}"
        da = _open(storage, path)
        acked, refused, untyped = [], [], []

        def writer(w: int) -> None:
            for k in range(calls):
                start = 100_000 * w + size * k
                try:
                    da.extend(_docs(start, size, k))
                except hs.HybridSearchError:
                    refused.append(start)
                    return
                except BaseException as e:  # noqa: BLE001 - reported below
                    untyped.append(repr(e))
                    return
                acked.append(start)

        threads = [threading.Thread(target=writer, args=(w,)) for w in range(3)]
        for t in threads:
            t.start()
        time.sleep(0.02 + 0.02 * round_)
        da.close()
        for t in threads:
            t.join()
        assert not untyped, untyped
        assert len(refused) == 3, f"round {round_}: close() waited for {len(acked)} writes, none refused"
        want = {f"n{s + i}" for s in acked for i in range(size)}
        absent = {f"n{s + i}" for s in refused for i in range(size)}
        again = _open(storage, path)
        got = set(again.to_columns(["id"])["id"])
        again.close()
        assert want <= got, f"round {round_}: {len(want - got)} acknowledged documents lost"
        assert not got & absent, f"round {round_}: a refused extend is present"
        assert got == want
