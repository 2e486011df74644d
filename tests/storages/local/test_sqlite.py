"""storage="sqlite": a real database file, SQL filters, reopening, kill -9, foreign files."""
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

import hybridsearch as hs

ROOT = Path(__file__).resolve().parents[3]


class Item(hs.Document):
    title: hs.Text
    tag: hs.Keyword = "a"
    n: int = 0
    price: float = 0.0
    ok: bool = True
    v: hs.Vector[4]


def items(a, b, rng=None):
    rng = rng or np.random.default_rng(a)
    return [{"id": f"i{i}", "title": f"red item {i}", "tag": "ab"[i % 2], "n": i, "price": i / 2,
             "ok": bool(i % 3), "v": rng.standard_normal(4)} for i in range(a, b)]


def test_it_is_a_real_sqlite_file_with_a_column_per_field(tmp_path):
    path = tmp_path / "c.db"
    da = hs.DocumentArray(Item, storage="sqlite", path=path)
    da.extend(items(0, 10))
    con = sqlite3.connect(path)
    cols = [r[1] for r in con.execute('PRAGMA table_info("documents")')]
    assert {"id", "title", "tag", "n", "price", "ok", "v"} <= set(cols)
    assert con.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    row = con.execute('SELECT tag, n, price, ok, v FROM documents WHERE id = "i3"').fetchone()
    assert row[:4] == ("b", 3, 1.5, 0)
    np.testing.assert_array_equal(np.frombuffer(row[4], dtype="<f4"), da["i3"].v)
    assert con.execute("SELECT COUNT(*) FROM sqlite_master WHERE type = 'index'").fetchone()[0] >= 4
    da.close()


def test_reopen_keeps_documents_order_and_search(tmp_path):
    path = tmp_path / "c.db"
    da = hs.DocumentArray(Item, storage="sqlite", path=path)
    da.extend(items(0, 50))
    da.delete(["i3", "i4"])
    da.update("i5", n=-5, title="blue thing")
    da.extend([{**items(3, 4)[0], "title": "back again"}])
    q = np.ones(4)
    before = (da.find(vector=q, limit=5).ids, da.find(text="blue", limit=5).ids,
              da.find(filter={"n": {"$lt": 10}}, limit=None).ids)
    da.close()
    again = hs.DocumentArray(Item, storage="sqlite", path=path)
    assert len(again) == 49 and again["i5"].n == -5 and "i4" not in again
    assert [d.id for d in again][-1] == "i3"  # re-added: last in insertion order
    assert (again.find(vector=q, limit=5).ids, again.find(text="blue", limit=5).ids,
            again.find(filter={"n": {"$lt": 10}}, limit=None).ids) == before
    again.close()


def test_sql_filters_agree_with_the_bitset_filters(tmp_path):
    rng = np.random.default_rng(2)
    docs = items(0, 300, rng)
    sq = hs.DocumentArray(Item, storage="sqlite", path=tmp_path / "c.db")
    mem = hs.DocumentArray(Item, storage="memory")
    sq.extend(docs)
    mem.extend(docs)
    filters = [{"n": {"$gt": 7}, "tag": "a"}, {"$or": [{"price": {"$lte": 3.5}}, {"ok": False}]},
               {"tag": {"$nin": ["a"]}}, {"n": {"$ne": 4}}, {"$not": {"n": {"$in": [1, 2, 3]}}},
               {"id": {"$gte": "i5"}}, {"price": {"$gt": 2}}, {"n": {"$lt": 2.5}}, {"tag": {"$gt": "a"}},
               {"title": {"$exists": True}}, {"tag": {"$in": []}}]
    for f in filters:
        assert sq.find(filter=f, limit=None).ids == mem.find(filter=f, limit=None).ids, f


def test_prefilter_by_sql_ids_equals_prefilter_by_columns(tmp_path):
    """prefilter="sql" (ids from the SQL WHERE) and "columns" (the C bitset) give the same
    vector / text / hybrid results, after deletes and updates, and both match a Python check."""
    rng = np.random.default_rng(3)
    docs = items(0, 200, rng)
    by_sql = hs.DocumentArray(Item, storage="sqlite", path=tmp_path / "s.db", prefilter="sql")
    by_cols = hs.DocumentArray(Item, storage="sqlite", path=tmp_path / "c.db")
    for da in (by_sql, by_cols):
        da.extend(docs)
        da.delete(["i10", "i11", "i12"])
        da.update("i13", tag="b", n=1000)
    filters = [{"tag": "a"}, {"n": {"$lt": 20}}, {"$or": [{"ok": False}, {"price": {"$gte": 90}}]},
               {"tag": "x' OR 1=1 --"}, {"$not": {"tag": "a"}}, {"id": {"$in": ["i13", "i10", "i14"]}}]
    q = rng.standard_normal(4)
    asked = by_sql.stats()["sql_filter_queries"]
    for f in filters:
        expected = set(by_cols.find(filter=f, limit=None).ids)
        for kw in ({"vector": q}, {"text": "red item"}, {"text": "red", "vector": q},
                   {"text": "red", "vector": q, "fusion": "rrf"}):
            a, b = by_sql.find(filter=f, limit=7, **kw), by_cols.find(filter=f, limit=7, **kw)
            assert a.ids == b.ids and np.allclose(a.scores, b.scores), (f, kw)
            assert set(a.ids) <= expected and len(a.ids) == min(7, len(expected)), (f, kw)
    # vector 1, text 1, hybrid 2 (its vector and its lexical side): every filtered search asked SQL
    assert by_sql.stats()["sql_filter_queries"] - asked == 6 * len(filters)
    with pytest.raises(hs.ConfigError, match="prefilter"):
        hs.DocumentArray(Item, storage="sqlite", path=tmp_path / "x.db", prefilter="post")


def test_a_file_that_is_not_ours_is_a_backend_error(tmp_path):
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"this is not a database" * 100)
    with pytest.raises(hs.BackendError, match="junk.db"):
        hs.DocumentArray(Item, storage="sqlite", path=junk)
    other = tmp_path / "other.db"
    con = sqlite3.connect(other)
    con.execute("CREATE TABLE documents (id TEXT PRIMARY KEY, x INT)")
    con.commit()
    con.close()
    with pytest.raises(hs.BackendError, match="not written by hybridsearch"):
        hs.DocumentArray(Item, storage="sqlite", path=other)

    class Other(hs.Document):
        title: int
        v: hs.Vector[4]

    path = tmp_path / "c.db"
    hs.DocumentArray(Item, storage="sqlite", path=path).close()
    # a schema the table cannot evolve to (a field of another kind): a ConfigError naming the field
    # (the changes that can be applied: tests/contract/test_schema_evolution.py)
    with pytest.raises(hs.ConfigError, match="Other.title is an int field, but the stored collection holds it as text"):
        hs.DocumentArray(Other, storage="sqlite", path=path)
    with pytest.raises(hs.ConfigError):
        hs.DocumentArray(Item, storage="sqlite")


_WRITER = textwrap.dedent("""
    import sys, numpy as np, hybridsearch as hs
    from tests.storages.local.test_sqlite import Item
    da = hs.DocumentArray(Item, storage="sqlite", path=sys.argv[1])
    rng = np.random.default_rng(0)
    for b in range(10**6):
        da.extend([{"id": f"b{b}-{j}", "title": "x", "n": b, "v": rng.standard_normal(4)} for j in range(200)])
        print(b, flush=True)
""")


def test_kill_9_during_extends_keeps_every_acknowledged_batch(tmp_path):
    path = tmp_path / "c.db"
    script = tmp_path / "w.py"
    script.write_text(_WRITER)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, str(script), str(path)], stdout=subprocess.PIPE, text=True, env=env)
    acked, deadline = -1, time.time() + 60
    while acked < 15 and time.time() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        acked = int(line)
    # meanwhile a second process (this one) reads a consistent snapshot
    reader = hs.DocumentArray(Item, storage="sqlite", path=path, read_only=True)
    counts = {}
    for d in reader:
        counts[d.n] = counts.get(d.n, 0) + 1
    assert all(c == 200 for c in counts.values()) and len(counts) >= acked + 1
    reader.close()
    time.sleep(0.03)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    acked = max([acked] + [int(x) for x in proc.stdout.read().split("\n")[:-1] if x])
    da = hs.DocumentArray(Item, storage="sqlite", path=path)
    counts = {}
    for d in da:
        counts[d.n] = counts.get(d.n, 0) + 1
    assert all(counts.get(b) == 200 for b in range(acked + 1)), "an acknowledged batch is missing or partial"
    assert set(counts) <= set(range(acked + 2)) and all(c == 200 for c in counts.values())
    da.close()


def test_a_long_in_list_with_a_nul_character_matches_exactly(tmp_path):
    """A $in of more than 256 values travelled as one JSON array, which SQLite's json_each cuts at
    a NUL character: {"tag": {"$in": ["a\\x00b", ...]}} then matched tag "a"."""
    docs = [{"id": "cut", "title": "x", "tag": "a", "v": [1, 0, 0, 0]},
            {"id": "whole", "title": "y", "tag": "a\x00b", "v": [0, 1, 0, 0]}]
    values = ["a\x00b"] + [f"v{i}" for i in range(300)]
    with hs.DocumentArray(Item, storage="sqlite", path=tmp_path / "c.db") as da, \
            hs.DocumentArray(Item, storage="memory") as model:
        da.extend(docs)
        model.extend(docs)
        for flt in ({"tag": {"$in": values}}, {"tag": {"$nin": values}}, {"tag": {"$in": values[1:] + ["a"]}}):
            assert da.find(filter=flt, limit=None).ids == model.find(filter=flt, limit=None).ids, flt
