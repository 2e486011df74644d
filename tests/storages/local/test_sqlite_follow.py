"""storage="sqlite": a read_only=True opener follows the writer through the change table (issue 32
item 1; hybridsearch/storages/local/sqlite/follow.py). Against a plain-dict model of the writes:
refresh applies the changed ids only (stats()["follow"]), a reader behind the writer's pruning
reloads and still equals it, a file written before change tracking follows, and a writer killed
mid-transaction leaves the follower on a committed state.

Public API, plus the file read and written with Python's sqlite3 as another program would: to
take a file back to before change tracking (its change table dropped), to hold a
write transaction open when the writer is killed, and to count the change rows left by pruning.
"""
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Optional

import numpy as np
import pytest

import hybridsearch as hs

ROOT = Path(__file__).resolve().parents[3]


class Item(hs.Document):
    title: hs.Text = ""
    category: Optional[hs.Keyword] = None
    price: int = 0
    embedding: Optional[hs.Vector[4]] = None


def item(i: int, price: Optional[int] = None) -> dict:
    rng = np.random.default_rng(i)
    return dict(id=f"d{i}", title=f"title{i} words", category="abc"[i % 3], price=i if price is None else price,
                embedding=rng.standard_normal(4).astype(np.float32))


def state(da) -> list:
    """The collection in iteration (insertion) order."""
    return [(d.id, d.category, d.price) for d in da]


class Model:
    """The writes as a plain dict: an id keeps its place when replaced or updated, and a deleted
    id written again goes to the end (insertion order)."""

    def __init__(self) -> None:
        self.docs: dict = {}

    def extend(self, docs: list) -> None:
        for d in docs:
            self.docs[d["id"]] = (d["id"], d["category"], d["price"])

    def update(self, id_: str, price: int) -> None:
        if id_ in self.docs:
            self.docs[id_] = self.docs[id_][:2] + (price,)

    def update_many(self, category: str, price: int) -> None:
        for k, v in self.docs.items():
            if v[1] == category:
                self.docs[k] = v[:2] + (price,)

    def delete(self, ids: list) -> None:
        for i in ids:
            self.docs.pop(i, None)

    def state(self) -> list:
        return list(self.docs.values())


def open_da(path, **kw):
    return hs.DocumentArray(Item, storage="sqlite", path=path, **kw)


def follow_stats(da) -> dict:
    """stats()["follow"] without its "follow" flag."""
    out = dict(da.stats()["follow"])
    out.pop("follow")
    return out


@pytest.mark.parametrize("prefilter", ["columns", "sql"])
def test_refresh_applies_exactly_the_changed_ids(tmp_path, prefilter):
    """One write to a 20,000-row table: refresh applies that write's ids, not the table."""
    path, model = tmp_path / "c.db", Model()
    with open_da(path) as w:
        batch = [item(i) for i in range(20_000)]
        w.extend(batch)
        model.extend(batch)
        ro = open_da(path, read_only=True, follow=False, prefilter=prefilter)
        assert ro.refresh() == 0 and follow_stats(ro) == {"refreshes": 0, "changes_applied": 0, "reloads": 0}
        w.update("d7", price=-7)
        model.update("d7", -7)
        assert ro["d7"].price == 7  # follow=False: the view of the open until refresh()
        assert ro.refresh() == 1
        assert follow_stats(ro) == {"refreshes": 1, "changes_applied": 1, "reloads": 0}
        assert state(ro) == model.state()
        # a delete, a new id and an id deleted then written again (it moves to the end)
        w.delete(["d3", "d5"])
        w.extend([item(5, price=55), item(20_000)])
        model.delete(["d3", "d5"])
        model.extend([item(5, price=55), item(20_000)])
        assert ro.refresh() == 3
        assert follow_stats(ro) == {"refreshes": 2, "changes_applied": 4, "reloads": 0}
        assert state(ro) == model.state() == state(w)
        assert ro.find(filter={"price": {"$gte": 55, "$lte": 55}}, limit=None).ids == ["d55", "d5"]
        ro.close()
        # a follower (follow=True) applies the same before its reads
        live = open_da(path, read_only=True, prefilter=prefilter)
        w.update_many({"category": "b"}, price=-1)
        model.update_many("b", -1)
        assert live.count(filter={"price": -1}) == sum(1 for v in model.state() if v[2] == -1)
        assert follow_stats(live)["changes_applied"] == sum(1 for v in model.state() if v[1] == "b")
        assert state(live) == model.state()
        live.close()


def _change_rows(path) -> int:
    conn = sqlite3.connect(path)
    try:
        return conn.execute('SELECT COUNT(*) FROM "documents_hs_changes"').fetchone()[0]
    finally:
        conn.close()


def test_a_reader_behind_the_pruning_reloads_and_equals_the_writer(tmp_path):
    """The writer keeps a bounded number of change rows; a reader whose last change was pruned
    reads the whole table again, a reader that kept up goes on by changes."""
    path, model = tmp_path / "c.db", Model()
    with open_da(path) as w:
        batch = [item(i) for i in range(1_000)]
        w.extend(batch)
        model.extend(batch)
        behind = open_da(path, read_only=True, follow=False)
        live = open_da(path, read_only=True, follow=False)
        for k in range(30):  # 30,000 change rows: beyond twice the 10,000 kept
            w.update_many({"price": {"$gte": -10_000}}, price=k)
            for category in "abc":
                model.update_many(category, k)
            assert live.refresh() == 1_000
        assert _change_rows(path) <= 20_000  # bounded
        w.delete(["d1"])
        model.delete(["d1"])
        assert behind.refresh() == 1  # a reload counts 1
        assert follow_stats(behind) == {"refreshes": 1, "changes_applied": 0, "reloads": 1}
        assert live.refresh() == 1 and follow_stats(live)["reloads"] == 0
        assert state(behind) == state(live) == model.state() == state(w)
        w.extend([item(1)])  # and the reloaded reader follows by changes again
        model.extend([item(1)])
        assert behind.refresh() == 1 and follow_stats(behind)["changes_applied"] == 1
        assert state(behind) == model.state()
        behind.close()
        live.close()


def _untrack(path) -> None:
    """The file as a version before change tracking wrote it: no change table."""
    conn = sqlite3.connect(path)
    try:
        names = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")]
        for n in names:
            conn.execute(f'DROP TRIGGER "{n}"')
        conn.execute('DROP TABLE IF EXISTS "documents_hs_changes"')
        conn.commit()
    finally:
        conn.close()


def test_a_file_written_before_change_tracking_opens_and_follows(tmp_path):
    path, model = tmp_path / "c.db", Model()
    with open_da(path) as w:
        batch = [item(i) for i in range(50)]
        w.extend(batch)
        model.extend(batch)
    _untrack(path)
    ro = open_da(path, read_only=True)
    assert state(ro) == model.state()
    # another program changes a row (its checksum set to NULL, as the storage asks of it)
    conn = sqlite3.connect(path)
    conn.execute("UPDATE documents SET price = -4, _crc = NULL WHERE id = 'd4'")
    conn.commit()
    conn.close()
    model.update("d4", -4)
    assert state(ro) == model.state()  # no change table: the reader read the table again
    assert follow_stats(ro)["reloads"] == 1
    with open_da(path) as w:  # this writer creates the change table
        assert state(w) == model.state()
        w.update("d9", price=-9)
        w.extend([item(60)])
        model.update("d9", -9)
        model.extend([item(60)])
        assert state(ro) == model.state()
        w.delete(["d0"])
        model.delete(["d0"])
        assert state(ro) == model.state()
        assert follow_stats(ro)["reloads"] == 2  # once for the table created, then by changes
        assert follow_stats(ro)["changes_applied"] == 1
    ro.close()


_HS_WRITER = """
import sys, numpy as np, hybridsearch as hs
from tests.storages.local.test_sqlite_follow import Item, item
with hs.DocumentArray(Item, storage="sqlite", path=sys.argv[1]) as w:
    print("ready", flush=True)
    for k in range(1, 10_000):
        w.extend([item(i, price=k) for i in range(3_000)])
        print(f"ack {k}", flush=True)
"""

_SQL_WRITER = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN IMMEDIATE")
conn.execute("UPDATE documents SET price = -1, _crc = NULL")
conn.execute("DELETE FROM documents WHERE id = 'd2'")
print("in transaction", flush=True)
sys.stdin.read()
"""


def _child(code: str, path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", code, str(path)], cwd=ROOT, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, bufsize=0)


def test_a_writer_killed_mid_transaction_leaves_the_follower_on_a_committed_state(tmp_path):
    """kill -9 of a hybridsearch writer extending 3,000 rows per call, at a moment within a call;
    then of a program holding a write transaction open: the follower shows the last committed
    state each time, and follows the next writer."""
    path = tmp_path / "c.db"
    proc = _child(_HS_WRITER, path)
    try:
        assert proc.stdout.readline().strip() == b"ready", proc.communicate()[1][-3000:]
        ro = None
        while True:
            line = proc.stdout.readline()
            assert line.startswith(b"ack"), proc.communicate()[1][-3000:]
            k = int(line.split()[1])
            if ro is None:
                ro = open_da(path, read_only=True)
                started = time.monotonic()
            if k == 3:  # the kill lands within the next call (a call's time apart, and a bit)
                time.sleep((time.monotonic() - started) / 2 * (0.2 + (os.getpid() % 7) / 10))
                proc.send_signal(signal.SIGKILL)
                break
        out, _ = proc.communicate(timeout=60)
        acked = max(int(ln.split()[1]) for ln in (line + out).splitlines() if ln.startswith(b"ack"))
        seen = state(ro)
        prices = {p for _, _, p in seen}
        assert len(seen) == 3_000 and len(prices) == 1 and prices <= {acked, acked + 1}, (acked, prices)
        price = prices.pop()
        assert seen == [(f"d{i}", "abc"[i % 3], price) for i in range(3_000)]
        # a program holding a write transaction, killed: its changes were never committed
        sql = _child(_SQL_WRITER, path)
        assert sql.stdout.readline().strip() == b"in transaction", sql.communicate()[1][-3000:]
        assert state(ro) == seen
        sql.kill()
        sql.communicate(timeout=60)
        assert state(ro) == seen
        with open_da(path) as w:  # the next writer, followed
            assert state(w) == seen
            w.delete(["d0"])
            assert state(ro) == seen[1:]
        ro.close()
    finally:
        proc.kill()
        proc.communicate(timeout=60)


class ItemWithStock(hs.Document):
    """Item with a field added: a change a writer applies to the table on open (schema evolution)."""
    title: hs.Text = ""
    category: Optional[hs.Keyword] = None
    price: int = 0
    embedding: Optional[hs.Vector[4]] = None
    stock: int = 5


def test_a_follower_of_a_table_whose_fields_a_writer_changed_is_told_to_reopen(tmp_path):
    """A writer with another Document class changes the table's columns and every row's checksum;
    a follower of the old class cannot follow that: a ConfigError saying so, and its view stays
    as it was, instead of rows read without their new fields or refused as damaged."""
    path, model = tmp_path / "c.db", Model()
    with open_da(path) as w:
        batch = [item(i) for i in range(20)]
        w.extend(batch)
        model.extend(batch)
    ro = open_da(path, read_only=True)
    fixed = open_da(path, read_only=True, follow=False)
    assert state(ro) == state(fixed) == model.state()
    with hs.DocumentArray(ItemWithStock, storage="sqlite", path=path) as w:
        w.update("d3", price=-3)
        for _ in range(2):  # and again: nothing was half applied
            with pytest.raises(hs.ConfigError, match="Document class"):
                ro.count()
            with pytest.raises(hs.ConfigError, match="Document class"):
                fixed.refresh()
            assert state(fixed) == model.state()
        # a follower of the new class follows
        new = hs.DocumentArray(ItemWithStock, storage="sqlite", path=path, read_only=True)
        w.update("d4", stock=0)
        model.update("d3", -3)
        assert [(d.id, d.price, d.stock) for d in new] == [(i, p, 0 if i == "d4" else 5)
                                                            for i, _, p in model.state()]
        new.close()
    ro.close()
    fixed.close()


@pytest.mark.parametrize("seed", [1, 2])
def test_followers_equal_the_model_through_random_writes(tmp_path, seed):
    """Random writes (new, replaced, re-inserted after a delete, updated one by one and by filter,
    deleted by id and by filter), with a follower reading between them and a follow=False reader
    refreshed at random moments: both equal the model, in insertion order, after each look."""
    import random
    rng = random.Random(seed)
    path, model = tmp_path / "c.db", Model()
    with open_da(path) as w:
        batch = [item(i) for i in range(200)]
        w.extend(batch)
        model.extend(batch)
        live = open_da(path, read_only=True)
        fixed = open_da(path, read_only=True, follow=False)
        for step in range(60):
            op = rng.choice(["extend", "update", "update_many", "delete", "delete_where"])
            if op == "extend":
                docs = [item(rng.randrange(300), price=rng.randrange(-50, 50)) for _ in range(rng.randrange(1, 20))]
                docs = list({d["id"]: d for d in docs}.values())
                w.extend(docs)
                model.extend(docs)
            elif op == "update":
                i = f"d{rng.randrange(300)}"
                p = rng.randrange(-50, 50)
                if i in model.docs:
                    w.update(i, price=p)
                    model.update(i, p)
            elif op == "update_many":
                c, p = rng.choice("abc"), rng.randrange(-50, 50)
                w.update_many({"category": c}, price=p)
                model.update_many(c, p)
            elif op == "delete":
                ids = [f"d{rng.randrange(300)}" for _ in range(rng.randrange(1, 10))]
                w.delete(ids)
                model.delete(ids)
            else:
                lo = rng.randrange(-50, 300)
                w.delete(filter={"price": {"$gte": lo, "$lt": lo + 5}})
                model.delete([v[0] for v in model.state() if lo <= v[2] < lo + 5])
            assert state(w) == model.state(), step  # the reference is right
            assert state(live) == model.state(), (step, op)
            if rng.random() < 0.3:
                fixed.refresh()
                assert state(fixed) == model.state(), (step, op)
        assert follow_stats(live)["reloads"] == 0
        live.close()
        fixed.close()


def test_ids_of_any_characters_are_followed(tmp_path):
    """Ids are any strings: a NUL, quotes, a backslash, a line separator, non-BMP characters; a
    follower applies the writes to them as to any other id."""
    path, model = tmp_path / "c.db", Model()
    odd = ["a\x00b", "a", 'q"uote', "back\\slash", "line\u2028sep", "smile\U0001F600", "[1]", "'"]
    docs = [dict(item(i), id=key) for i, key in enumerate(odd)]
    with open_da(path) as w:
        w.extend(docs)
        model.extend(docs)
        ro = open_da(path, read_only=True)
        for i, key in enumerate(odd):
            w.update(key, price=-i)
            model.update(key, -i)
            assert state(ro) == model.state(), key
        w.delete(["a\x00b", "'"])
        model.delete(["a\x00b", "'"])
        assert state(ro) == model.state()
        w.extend([docs[0]])
        model.extend([docs[0]])
        assert state(ro) == model.state()
        ro.close()
