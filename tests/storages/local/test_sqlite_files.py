"""storage="sqlite" with a database file that is missing, damaged or changed by another program:
the open raises hs.BackendError naming the file, or reads exactly what was
written; never fewer or different documents. Public API only; the file is damaged from outside,
as a disk, a user or another program would.
"""
import os
import random
import sqlite3
from typing import Any, Optional

import numpy as np
import pytest

import hybridsearch as hs


class Item(hs.Document):
    title: hs.Text = ""
    category: Optional[hs.Keyword] = None
    price: int = 0
    rating: float = 0.0
    meta: Any = None
    embedding: Optional[hs.Vector[4]] = None


def item(i: int) -> dict:
    rng = np.random.default_rng(i)
    return dict(id=f"d{i}", title=f"title{i:04d} words", category="abc"[i % 3], price=i, rating=i / 4,
                meta={"note": f"meta{i:04d}"}, embedding=rng.standard_normal(4))


def state(da) -> list:
    return [(d.id, d.model_dump_json()) for d in da]


def open_da(path, **kw):
    return hs.DocumentArray(Item, storage="sqlite", path=path, **kw)


@pytest.fixture
def written(tmp_path):
    """A closed collection of 40 documents (a partial update among them) -> (path, its state)."""
    path = tmp_path / "c.db"
    with open_da(path) as da:
        da.extend([item(i) for i in range(40)])
        da.update_many({"category": "a"}, rating=2.5)
        da.update("d1", meta={"note": "changed"})
        want = state(da)
    assert not os.path.exists(f"{path}-wal") or os.path.getsize(f"{path}-wal") == 0  # all in the file
    return path, want


def test_a_new_path_opens_empty_and_reopens_with_its_documents(written, tmp_path):
    path, want = written
    with open_da(path) as da:
        assert state(da) == want
    with open_da(tmp_path / "new.db") as fresh:  # a path that never held a collection
        assert len(fresh) == 0


def test_a_deleted_database_file_is_an_error_not_an_empty_collection(written):
    path, _ = written
    os.remove(path)
    for _ in range(2):  # and the refused open created nothing in its place
        with pytest.raises(hs.BackendError, match="c.db.*gone.*hslock"):
            open_da(path)
        assert not os.path.exists(path)
    with pytest.raises(hs.BackendError, match="c.db"):
        open_da(path, read_only=True)
    os.remove(f"{path}-documents.hslock")  # what the message says to do for a new collection
    with open_da(path) as da:
        assert len(da) == 0


@pytest.mark.parametrize("how", ["truncated to 0 bytes", "replaced by an empty database", "table dropped"])
def test_a_truncated_or_replaced_database_is_an_error(written, how):
    path, _ = written
    if how == "truncated to 0 bytes":
        os.truncate(path, 0)
    elif how == "replaced by an empty database":
        os.remove(path)
        sqlite3.connect(path).execute("CREATE TABLE other (x)").connection.close()
    else:
        with sqlite3.connect(path) as conn:
            conn.execute("DROP TABLE documents")
        conn.close()
    with pytest.raises(hs.BackendError, match="c.db.*table 'documents' is not in the file"):
        open_da(path)


def _flip(path, offset: int, bit: int) -> None:
    with open(path, "r+b") as f:
        f.seek(offset)
        b = f.read(1)[0]
        f.seek(offset)
        f.write(bytes([b ^ (1 << bit)]))


def _open_state(path):
    """The state a reopen reads, or the BackendError it raises (naming the file)."""
    try:
        with open_da(path) as da:
            return state(da)
    except hs.BackendError as e:
        assert "c.db" in str(e), e
        return None


@pytest.mark.parametrize("needle", [b"title0017", b"meta0023", b"d29"], ids=["text", "unindexed JSON", "id"])
def test_a_flipped_bit_inside_a_stored_value_is_an_error(written, needle):
    """A bit flipped in a text, in the JSON of an unindexed field or in an id passes SQLite's own
    checks (no page checksums): the row's checksum finds it."""
    path, want = written
    data = open(path, "rb").read()
    at = data.find(needle)
    assert at > 0
    _flip(path, at + len(needle) - 1, 0)  # "title0017" -> "title0016": a value another row has
    with pytest.raises(hs.BackendError, match="c.db.*(checksum|damaged)"):
        open_da(path)
    _flip(path, at + len(needle) - 1, 0)
    assert _open_state(path) == want


def test_a_flipped_bit_anywhere_is_an_error_or_changes_nothing(written):
    """Bits flipped at random places of the file, one at a time (then flipped back): each open
    raises BackendError naming the file, or reads exactly the documents written."""
    path, want = written
    size = os.path.getsize(path)
    rng = random.Random(28)
    wrong = []
    for _ in range(40):
        offset, bit = rng.randrange(size), rng.randrange(8)
        _flip(path, offset, bit)
        got = _open_state(path)
        if got is not None and got != want:
            wrong.append(offset)
        _flip(path, offset, bit)
    assert not wrong, f"flips at {wrong} read as different data"
    assert _open_state(path) == want


def test_a_lost_row_is_an_error(written):
    """A row gone from the table but not from its indexes (what a damaged page does) is found."""
    path, _ = written
    data = bytearray(open(path, "rb").read())
    page = int.from_bytes(data[16:18], "big") or 65536
    leaf = data.find(b"title0005")
    start = leaf - leaf % page
    assert data[start] == 0x0D  # a leaf page of a table
    cells = int.from_bytes(data[start + 3:start + 5], "big")
    data[start + 3:start + 5] = (cells - 1).to_bytes(2, "big")  # the page now holds one row fewer
    open(path, "wb").write(bytes(data))
    with pytest.raises(hs.BackendError, match="c.db"):
        open_da(path)


def test_rows_written_by_another_program(written):
    """Another program's changes: a row it UPDATEs fails its checksum (hybridsearch cannot tell it
    from damage) until that program sets _crc to NULL; a row it INSERTs with _crc NULL is read."""
    path, want = written
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE documents SET price = 999 WHERE id = 'd3'")
    conn.close()
    with pytest.raises(hs.BackendError, match="c.db.*'d3'.*checksum"):
        open_da(path)
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE documents SET _crc = NULL WHERE id = 'd3'")
        conn.execute("INSERT INTO documents (id, _seq, title, price, rating, _extra) "
                     "VALUES ('x', 1000, 'new', 5, 0.5, '{\"meta\": null}')")
    conn.close()
    with open_da(path) as da:
        assert da["d3"].price == 999 and da["x"].price == 5 and len(da) == 41
        da.update("d3", price=3)  # a write by hybridsearch checksums the row again
        da.delete(["x"])
        assert state(da) == want
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT COUNT(*) FROM documents WHERE _crc IS NULL").fetchone()[0] == 0
    conn.close()


@pytest.mark.parametrize("prefilter", ["columns", "sql"])
def test_a_read_only_opener_reads_its_snapshot_not_the_live_file(tmp_path, prefilter):
    """Item 5: the writer's later writes (new, deleted and changed rows) never reach a follow=False
    read-only opener's filter-only finds, filtered vector finds or counts; a new opener sees them."""
    path = tmp_path / "c.db"
    writer = open_da(path)
    writer.extend([item(i) for i in range(30)])
    ro = open_da(path, read_only=True, follow=False, prefilter=prefilter)
    want = state(ro)
    writer.extend([item(i) for i in range(30, 40)])
    writer.delete(["d0", "d3"])
    writer.update_many({"category": "b"}, category="a")
    model = {i: d for i, d in ((f"d{i}", item(i)) for i in range(30))}
    for cat in "abc":
        ids = [i for i, d in model.items() if d["category"] == cat]
        assert ro.find(filter={"category": cat}, limit=None).ids == ids
        assert ro.count(filter={"category": cat}) == len(ids)
        q = item(5)["embedding"]
        got = ro.find(vector=q, filter={"category": cat}, limit=100)
        assert sorted(got.ids) == sorted(ids) and all(ro[i].category == cat for i in got.ids)
    assert state(ro) == want
    ro.close()
    with open_da(path, read_only=True, prefilter=prefilter) as later:
        assert later.count(filter={"category": "a"}) == len(writer.find(filter={"category": "a"}, limit=None).ids)
        assert "d0" not in later and later.count() == 38
    writer.close()
