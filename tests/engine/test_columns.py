"""The column store's parts against Python models: StringColumn, IdMap, ColumnStore.hits."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import hybridsearch as hs
from hybridsearch.batch import build_batch
from hybridsearch.engine.columns import ColumnStore
from hybridsearch.engine.idmap import IdMap
from hybridsearch.engine.strings import StringColumn

text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=6)
ops = st.lists(st.tuples(st.integers(0, 30), text | st.none()), max_size=80)


@settings(max_examples=150, deadline=None)
@given(ops)
def test_string_column_matches_a_dict(writes):
    col, model = StringColumn(), {}
    col.grow(31)
    for slot, value in writes:
        if value is None and slot % 3 == 0:
            col.clear(np.array([slot]))
        else:
            col.set(np.array([slot]), [value])
        model[slot] = value
    col.compact()
    assert col.get_many(np.arange(31)) == [model.get(s) for s in range(31)]
    assert [col.get(s) for s in range(31)] == [model.get(s) for s in range(31)]


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.booleans(), text.filter(bool)), max_size=120))
def test_id_map_matches_a_dict(steps):
    ids = StringColumn()
    ids.grow(256)
    m, model, next_slot = IdMap(ids), {}, 0
    for add, key in steps:
        if add and key not in model:
            ids.set(np.array([next_slot]), [key])
            m.add([key], [next_slot])
            model[key] = next_slot
            next_slot += 1
        elif not add:
            got = m.remove([key])
            assert got.tolist() == [model.pop(key, -1)]
    assert len(m) == len(model)
    keys = list(model) + ["absent", "x" * 7]
    assert m.get_many(keys).tolist() == [model.get(k, -1) for k in keys]
    assert [m.get(k) for k in keys] == [model.get(k) for k in keys]


def test_id_map_survives_hash_collisions(monkeypatch):
    ids = StringColumn()
    ids.grow(64)
    m = IdMap(ids)
    keys = [f"k{i}" for i in range(40)]
    ids.set(np.arange(40), keys)
    # every hash equal, on every path that hashes: one id, a batch of ids, the stored column
    monkeypatch.setattr("hybridsearch.engine.idmap._hash", lambda s: 7)
    monkeypatch.setattr("hybridsearch.engine.idmap.hash_ids", lambda xs: np.full(len(xs), 7, dtype=np.int64))
    monkeypatch.setattr(StringColumn, "hashes", lambda self, slots: np.full(len(slots), 7, dtype=np.int64))
    m.add(keys, np.arange(40))  # one bulk merge
    assert m.get_many(keys).tolist() == list(range(40))
    assert m.remove(["k3"]).tolist() == [3] and m.get("k3") is None and m.get("k4") == 4
    assert m.remove(["k9", "nope", "k3", "k10", "k39"]).tolist() == [9, -1, -1, 10, 39]
    assert m.get_many(keys).tolist() == [-1 if i in (3, 9, 10, 39) else i for i in range(40)] and len(m) == 36


class Doc(hs.Document):
    v: hs.Vector[2]


@settings(max_examples=150, deadline=None)
@given(st.lists(st.lists(st.integers(-1, 19), min_size=4, max_size=4), min_size=1, max_size=5))
def test_hits_match_a_python_model(slot_rows):
    schema = hs.document.schema_of(Doc)
    store = ColumnStore(schema, "ip")
    docs = [Doc(id=f"d{i}", v=[1, 0]) for i in range(20)]
    store.upsert(build_batch(schema, docs))
    rows = np.array(slot_rows, dtype=np.int64)
    scores = np.arange(rows.size, dtype=np.float32).reshape(rows.shape)
    got = store.hits(rows, scores)
    for r, sc, (gids, gscores) in zip(slot_rows, scores, got):
        n = r.index(-1) if -1 in r else len(r)  # a row's hits end at its first -1
        assert gids == [f"d{s}" for s in r[:n]]
        assert gscores.tolist() == sc[:n].tolist()


def test_hits_refuse_slots_beyond_the_store():
    schema = hs.document.schema_of(Doc)
    store = ColumnStore(schema, "ip")
    store.upsert(build_batch(schema, [Doc(id="a", v=[1, 0])]))
    with pytest.raises(ValueError, match="beyond the store"):
        store.hits(np.array([[0, 5]]), np.zeros((1, 2), np.float32))
    with pytest.raises(ValueError, match="shape"):
        store.hits(np.zeros((1, 2), np.int64), np.zeros((2, 2), np.float32))
